"""The endpoints page's "Add an endpoint": every family of the catalog the deployment has no endpoint for (the opt-in
ones too), its model and GPU fit, the `python -m infra add` line, and a confirmation naming what it creates before
the page's infra runner adds it (infra/add.py, infra/actions.py) — the same start, audit and progress as the other
actions."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from infra import WaitSettings
from infra.add import add_command, addable
from infra.lifecycle import ttl_line
from infra.state import DeploymentState
from protocol.catalog import BY_NAME
from ui.endpoints_views import gpu_fit_captions
from ui.text import code, plain

FAMILIES_KEY, TYPES_KEY, MODELS_KEY, SMOKE_KEY, CONFIRM_KEY = (
    "add_families", "add_types", "add_models", "add_smoke", "confirm_add")


def _label(name: str) -> str:
    family = BY_NAME[name]
    return f"{family.icon} {family.title}" + (" (opt-in)" if family.opt_in else "")


def _lines(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def add_panel(deployment: DeploymentState, runner, wait: WaitSettings, busy: bool, actor,  # noqa: ANN001
              start: Callable[[Callable[[], object]], None]) -> None:
    """The form, its CLI line and the confirmation; `start` runs the action as the page starts the others."""
    st.subheader("Add an endpoint")
    free = list(addable(deployment))
    if not free:
        st.caption("This deployment has an endpoint for every family of the studio's catalog.")
        return
    families = st.multiselect("Families", free, key=FAMILIES_KEY, format_func=_label,
                              help="The catalog's families this deployment has no endpoint for. The new endpoints "
                                   "get the deployment's region, image, role, names, S3 prefix, KMS key, TTL and "
                                   "scaling; the ones already there are not touched.")
    with st.expander("More options"):
        types = st.text_area("Instance types (one line each: `ml.g6.xlarge,ml.g5.xlarge` for all new endpoints, or "
                             "`sound=ml.g6.xlarge` for one; priority order; default: the family's own pool)",
                             key=TYPES_KEY)
        models = st.text_area("Other models (one line each: `sound=<Hugging Face model id>`)", key=MODELS_KEY)
        smoke = st.checkbox("Run the smoke test of the new endpoints once InService", value=True, key=SMOKE_KEY)
    for name in families:
        st.caption(plain(f"{name}: {BY_NAME[name].blurb}"))
    gpu_fit_captions(families, None, list(_lines(models)))
    st.code(add_command(families or ["FAMILY"], state_file=str(runner.state_file), models=_lines(models),
                        instance_types=_lines(types), smoke=smoke), language="bash")
    if st.button("Add…", disabled=busy or not families, key="add_ask"):
        st.session_state[CONFIRM_KEY] = True
    if not st.session_state.get(CONFIRM_KEY) or not families:
        return
    with st.container(border=True):
        names = ", ".join(f"{code(f'{deployment.spec.name_prefix}-{f}-{deployment.deployment_id}')}" for f in families)
        st.warning(f"This creates {plain(', '.join(families))} in {plain(deployment.region)} ({names}): each bills "
                   "its instance's hourly price from when it is InService, until it is deleted. "
                   f"{plain(ttl_line(deployment))}", icon="💸")
        yes, no = st.columns(2)
        if yes.button(f"Yes, add {', '.join(families)}", type="primary", disabled=busy, key="add_go"):
            st.session_state[CONFIRM_KEY] = False
            start(lambda: runner.add(families, actor=actor, wait=wait, smoke=smoke, models=_lines(models),
                                     instance_types=_lines(types)))
        if no.button("Cancel", key="add_cancel"):
            st.session_state[CONFIRM_KEY] = False
            st.rerun()
