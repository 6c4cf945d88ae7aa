"""Endpoints: the SageMaker deployment in the state file — status, instance, uptime, cost, smoke result —
and the actions that stand it up and tear it down, each with its progress and the CLI line it runs."""

from __future__ import annotations

import os

import streamlit as st

from infra import (
    DeploymentState,
    DeployOptions,
    WaitSettings,
    deletion_plan,
    deploy_command,
    deployment_status,
)
from infra.deploy import format_duration
from infra.model import DEFAULT_IMAGE_TAG, PROJECT, ROLES
from protocol.errors import StudioError
from ui import resources

state = st.session_state
REFRESH_S = 2.0

resources.sidebar()
st.title("Endpoints")
settings = resources.settings()
state_file = settings.state_file
runner = resources.infra_actions()
st.caption(f"The deployment recorded in {resources.code(state_file)} — what runs, what it costs, and the "
           "actions that change it. Every action is the same call as the `python -m infra` line shown with it.")


def _money(value: float | None) -> str:
    return "—" if value is None else f"${value:,.2f}"


def _smoke(result: dict | None) -> str:
    if not result:
        return "—"
    return "ok" if result.get("ok") else "FAILED"


def _load_state() -> DeploymentState | None:
    if not state_file.is_file():
        return None
    try:
        return DeploymentState.load(state_file)
    except StudioError as exc:
        st.error(f"The state file cannot be used: {resources.plain(exc)}")
        st.stop()


def _status_panel() -> bool:
    """The table; True while something is still Creating (so the page keeps refreshing)."""
    if not state_file.is_file():
        st.info("No deployment yet. Deploy the endpoints below (or run `python -m infra deploy`).")
        return False
    try:
        report = deployment_status(state_file, profile=settings.profile)
    except StudioError as exc:
        st.error(f"Cannot read the endpoints' status: {resources.plain(exc)}")
        return False
    rows = [{"endpoint": e.role or "—", "name": e.endpoint_name, "status": e.status,
             "instance": e.instance_type or "—", "uptime": format_duration(e.uptime_s),
             "$/hour": _money(e.usd_per_hour), "cost so far": _money(e.cost_so_far_usd), "smoke test": _smoke(e.smoke)}
            for e in report.endpoints]
    st.dataframe(rows, hide_index=True, width="stretch")
    a, b, c = st.columns(3)
    a.metric("Per hour", _money(report.usd_per_hour))
    b.metric("Per day", _money(report.usd_per_day))
    c.metric("Cost so far", _money(report.cost_so_far_usd))
    st.caption(f"Deployment {resources.plain(report.deployment_id or '—')} in {resources.plain(report.region)}; "
               "on-demand prices from the shipped table (`python -m infra cost` shows its date and source).")
    for e in report.endpoints:
        if e.failure_reason:
            st.error(f"{resources.plain(e.role or e.endpoint_name)} failed: {resources.plain(e.failure_reason)}")
    return report.creating


def _action_panel() -> None:
    action = runner.current()
    if action is None:
        return
    title = f"{action.kind} — {'running' if not action.done else ('done' if action.ok else 'failed')} " \
            f"({format_duration(action.elapsed_s)})"
    with st.container(border=True):
        st.markdown(f"**{resources.plain(title)}**")
        st.code(action.command, language="bash")
        if action.lines:
            st.code("\n".join(action.lines[-40:]), language=None)
        if action.done:
            (st.success if action.ok else st.error)(resources.plain(action.error or action.summary or action.kind))


busy = runner.busy
moving = busy or bool(state.get("endpoints_creating"))  # refresh while an action runs or an endpoint changes


@st.fragment(run_every=REFRESH_S if moving else None)
def live() -> None:
    creating = _status_panel()
    _action_panel()
    now_busy = runner.busy
    # Leave refresh mode (a full rerun redefines the fragment) once nothing is moving any more.
    if moving and not now_busy and not creating:
        state["endpoints_creating"] = False
        st.rerun()
    if creating and not state.get("endpoints_creating"):
        state["endpoints_creating"] = True
        st.rerun()


live()
wait = WaitSettings(poll_s=settings.infra_poll_s)
deployment = _load_state()

st.divider()
if deployment is None:
    st.subheader("Deploy")
    roles = st.multiselect("Endpoints", list(ROLES), default=list(ROLES), key="deploy_roles")
    c1, c2 = st.columns(2)
    region = c1.text_input("Region", value=settings.region, key="deploy_region")
    role_arn = c2.text_input("Execution role ARN", value=os.environ.get("SAGEMAKER_EXECUTION_ROLE_ARN", ""),
                             key="deploy_role_arn", help="the IAM role SageMaker runs the containers as")
    with st.expander("More options"):
        image_tag = st.text_input("DLC image tag", value=DEFAULT_IMAGE_TAG, key="deploy_image_tag")
        types = st.text_area("Instance types (one line each: `ml.g6.xlarge,ml.g5.xlarge` for all, or "
                             "`voice=ml.g6.xlarge` for one endpoint; priority order)", key="deploy_types")
        bucket = st.text_input("S3 bucket for video requests (created if missing)", key="deploy_bucket")
        name_prefix = st.text_input("Name prefix", value=PROJECT, key="deploy_name_prefix")
        smoke = st.checkbox("Run the smoke test once InService", value=True, key="deploy_smoke")
    options = DeployOptions(
        roles=tuple(roles), region=region.strip() or None, profile=settings.profile,
        role_arn=role_arn.strip() or None, image_tag=image_tag.strip() or DEFAULT_IMAGE_TAG,
        instance_types=tuple(line.strip() for line in types.splitlines() if line.strip()),
        bucket=bucket.strip() or None, name_prefix=name_prefix.strip() or PROJECT,
    )
    st.code(deploy_command(options, str(state_file)) + ("" if smoke else " --no-smoke"), language="bash")
    if st.button("Deploy", type="primary", disabled=busy or not roles, key="deploy_go"):
        try:
            runner.deploy(options, wait=wait, smoke=smoke)
        except StudioError as exc:
            st.error(resources.plain(exc))
        else:
            st.rerun()
else:
    st.subheader("Actions")
    c1, c2, c3 = st.columns(3)
    if c1.button("Resume", disabled=busy, key="resume_go",
                 help="create what is missing, wait for what is Creating, recreate what Failed"):
        runner.resume(wait=wait)
        st.rerun()
    if c2.button("Run smoke test", disabled=busy, key="smoke_go"):
        runner.smoke()
        st.rerun()
    if c3.button("Delete…", disabled=busy, key="delete_ask"):
        state["confirm_delete"] = True
    if state.get("confirm_delete"):
        plan = deletion_plan(deployment)
        with st.container(border=True):
            st.warning(f"This deletes {len(plan)} resources in {resources.plain(deployment.region)} — the instances "
                       "stop billing once the endpoints are gone. S3 outputs are kept.")
            st.markdown("\n".join(f"- {resources.plain(role)}: {kind} {resources.code(name)}"
                                  for role, kind, name in plan))
            st.code(f"python -m infra delete --state-file {state_file}", language="bash")
            y, n = st.columns(2)
            if y.button(f"Yes, delete these {len(plan)}", type="primary", key="delete_go"):
                state["confirm_delete"] = False
                runner.delete(wait=wait)
                st.rerun()
            if n.button("Cancel", key="delete_cancel"):
                state["confirm_delete"] = False
                st.rerun()
