"""The endpoints page's lifecycle (infra/ttl.py, infra/scaling.py): each endpoint's instances and time left in the
status table, the deploy form's TTL and scaling options, and the TTL panel with Extend — the `python -m infra
extend` line shown with it, run in the background by the page's infra runner (infra/actions.py)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from infra import shell_command
from infra.lifecycle import LifecycleStatus, ttl_line
from infra.model import DEFAULT_TTL
from infra.scaling import MAX_INSTANCES
from infra.state import DeploymentState
from infra.ttl_choice import parse_ttl
from protocol.errors import StudioError
from ui.text import plain

EXTEND_KEY, EXTEND_YES_KEY = "extend_ttl", "extend_yes"


def lifecycle_cells(state_file: Path, report, profile: str | None) -> dict[str, dict[str, str]]:  # noqa: ANN001
    """Role -> the status table's "instances" (now, →wanted, [min–max]) and "time to live" cells."""
    try:
        life = LifecycleStatus.read(state_file, report, profile=profile)
    except StudioError:
        return {}
    return {e.role: {"instances": life.instances(e), "time to live": life.ttl_label(e.role)}
            for e in report.endpoints if e.role}


def lifecycle_options() -> dict:
    """The deploy form's TTL and scaling choices, as DeployOptions fields."""
    a, b, c = st.columns(3)
    ttl = a.text_input("Time to live", value=DEFAULT_TTL, key="deploy_ttl",
                       help="The endpoints delete themselves after this long (90m, 8h, 2d, or a time such as "
                            "2026-05-01T18:00Z) — EventBridge Scheduler in the account does it, nothing here runs.")
    no_ttl = a.checkbox("No TTL (they bill until deleted)", key="deploy_no_ttl")
    most = b.number_input("Max instances per endpoint", min_value=1, max_value=MAX_INSTANCES, value=1, step=1,
                          key="deploy_max_instances", help="voice and image scale between 1 and this")
    zero = c.checkbox("Video scales to zero when idle", value=True, key="deploy_scale_to_zero",
                      help="no instance (no cost) while no video job waits; a job then waits minutes for one")
    return {"ttl": None if no_ttl else (ttl.strip() or DEFAULT_TTL), "max_instances": int(most), "scale_to_zero": zero}


def ttl_panel(deployment: DeploymentState, runner, busy: bool, actor) -> None:  # noqa: ANN001
    """The deployment's TTL (loud when there is none) and Extend."""
    st.subheader("Time to live")
    enabled = bool((deployment.ttl or {}).get("enabled"))
    (st.info if enabled else st.error)(ttl_line(deployment), icon="⏳" if enabled else "⚠️")
    left, right = st.columns([1, 2])
    value = left.text_input("Extend to (from now)", value="4h", key=EXTEND_KEY,
                            help="every endpoint still there deletes itself this long from now (90m, 4h, 2d, a time)")
    yes = left.checkbox("More than 7 days: yes", key=EXTEND_YES_KEY)
    right.code(shell_command("extend", ["--ttl", value.strip() or "4h", "--state-file", str(runner.state_file)]
                             + (["--yes"] if yes else [])), language="bash")
    if left.button("Extend", disabled=busy, key="extend_go"):
        try:
            parse_ttl(value, yes=yes)  # named here, before the runner starts
            runner.extend(value.strip(), actor=actor, yes=yes)
        except StudioError as exc:
            st.error(plain(exc))
        else:
            st.rerun()
