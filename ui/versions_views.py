"""The endpoints page's versions: per endpoint the version in use (image tag, how it got there, what a rollback
returns to), and Upgrade / Roll back — each the `python -m infra upgrade|rollback` line shown with it, run in
the background by the page's infra runner (infra/actions.py)."""

from __future__ import annotations

import streamlit as st

from infra import WaitSettings, shell_command
from infra import versions as vs
from infra.state import DeploymentState
from infra.upgrade import DEFAULT_BAKE_S, MAX_BAKE_S, check_image_tag
from protocol.errors import StudioError
from ui.text import code, plain

TAG_KEY, ROLES_KEY, BAKE_KEY, SMOKE_KEY = "upgrade_tag", "upgrade_roles", "upgrade_bake", "upgrade_smoke"


def versions_panel(deployment: DeploymentState, runner, wait: WaitSettings, busy: bool, actor) -> None:  # noqa: ANN001
    """The versions in use, the upgrade form and the rollback button (each with its CLI line)."""
    roles = list(deployment.endpoints)
    st.subheader("Versions")
    st.markdown("\n".join(f"- {plain(r)}: {plain(vs.label(deployment, r))}" for r in roles))
    can_roll_back = [r for r in roles if vs.previous(deployment, r) is not None]
    up, back = st.columns(2)
    with up.container(border=True):
        tag = st.text_input("New image tag", key=TAG_KEY, placeholder="omni-sagemaker-cuda-v1.7",
                            help="A vllm DLC tag. A new model and endpoint config per endpoint, then a blue/green "
                                 "update that SageMaker rolls back if the endpoint's error alarm trips during the bake.")
        chosen = st.multiselect("Endpoints to upgrade", roles, default=roles, key=ROLES_KEY)
        bake = st.number_input("Bake (seconds)", min_value=0, max_value=MAX_BAKE_S, value=DEFAULT_BAKE_S, step=60,
                               key=BAKE_KEY)
        smoke = st.checkbox("Smoke test on the new version (rolled back if it fails)", value=True, key=SMOKE_KEY)
        args = [*([] if chosen == roles else chosen), "--image-tag", tag.strip() or "TAG",
                "--state-file", str(runner.state_file)]
        args += ([] if bake == DEFAULT_BAKE_S else ["--bake-seconds", str(int(bake))]) + ([] if smoke else ["--no-smoke"])
        st.code(shell_command("upgrade", args), language="bash")
        if st.button("Upgrade", type="primary", disabled=busy or not chosen or not tag.strip(), key="upgrade_go"):
            try:
                runner.upgrade(check_image_tag(tag), [] if chosen == roles else chosen, bake_s=float(bake),
                               actor=actor, wait=wait, smoke=smoke)
            except StudioError as exc:
                st.error(plain(exc))
            else:
                st.rerun()
    with back.container(border=True):
        if can_roll_back:
            st.markdown("Back to " + ", ".join(
                f"{plain(r)} v{vs.previous(deployment, r)['number']} {code(vs.previous(deployment, r)['image_tag'])}"
                for r in can_roll_back))
        else:
            st.caption("No previous version to return to (an upgrade keeps the one it replaces).")
        st.code(shell_command("rollback", [*([] if can_roll_back == roles else can_roll_back),
                                           "--state-file", str(runner.state_file)]), language="bash")
        if st.button("Roll back", disabled=busy or not can_roll_back, key="rollback_go"):
            try:  # refused while another command writes the state file (infra/lock.py): said, not raised
                runner.rollback([] if can_roll_back == roles else can_roll_back, actor=actor, wait=wait)
            except StudioError as exc:
                st.error(plain(exc))
            else:
                st.rerun()
