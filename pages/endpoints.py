"""Endpoints: the SageMaker deployment in the state file — status, instances, time to live, uptime, cost, smoke
result — and the actions that stand it up, add an endpoint, upgrade or roll back its image, extend its TTL and tear
it down, each with its progress and the CLI line it runs."""

from __future__ import annotations

import os
from collections.abc import Callable

import streamlit as st

from infra import DeployOptions, WaitSettings, deploy_command
from infra.model import DEFAULT_IMAGE_TAG, DEFAULT_ROLES, PROJECT, ROLES
from protocol.errors import StudioError
from ui import auth, resources
from ui.add_views import add_panel
from ui.endpoints_views import (action_panel, audit_panel, delete_plan, gpu_fit_captions, load_state, scale_up_note,
                                status_panel, model_picks)
from ui.lifecycle_views import lifecycle_options, ttl_panel
from ui.sidebar import sidebar
from ui.text import code, plain
from ui.versions_views import versions_panel

state = st.session_state
REFRESH_S = 2.0

sidebar(banner=False)  # the cost banner is drawn with the status table (status_panel), at its instant
st.title("Endpoints")
state_file = (settings := resources.settings()).state_file
try:
    runner, no_audit = resources.infra_actions(), None
except StudioError as exc:  # its audit log is in the history: the deployment is still shown, without actions
    runner, no_audit = None, str(exc)
st.caption(f"The deployment recorded in {code(state_file)} — what runs, what it costs, and the "
           "actions that change it. Every action is the same call as the `python -m infra` line shown with it.")

busy = runner is not None and runner.busy
moving = busy or bool(state.get("endpoints_creating"))  # refresh while an action runs or an endpoint changes


@st.fragment(run_every=REFRESH_S if moving else None)
def live() -> None:
    action = runner.current() if runner is not None else None  # before the table: "done" comes with what it left
    creating = status_panel(state_file, settings.profile)
    action_panel(action)
    now_busy = runner is not None and runner.busy
    # Leave refresh mode (a full rerun redefines the fragment) once nothing is moving any more.
    if moving and not now_busy and not creating:
        state["endpoints_creating"] = False
        st.rerun()
    if creating and not state.get("endpoints_creating"):
        state["endpoints_creating"] = True
        st.rerun()


live()
if not (me := auth.principal()).can("deploy"):
    st.info(f"You are {plain(me.label)}: only an admin deploys, adds, upgrades, extends, rolls back or "
            "deletes endpoints. Ask one of the studio's admins.", icon="🔒")
    st.stop()
if runner is None:  # every action is audited: none runs while the audit log cannot be written
    st.error("Endpoint actions are unavailable while the audit log cannot be written: it is kept in the studio's "
             "history (below, what is wrong with it).", icon="🗄️")
    audit_panel([], unavailable=no_audit)
    st.stop()
wait = WaitSettings(poll_s=settings.infra_poll_s)


def start(action: Callable[[], object]) -> None:
    """Start an action; a refusal (another command writes the state file, a bad option) is shown, not raised."""
    try:
        action()
    except StudioError as exc:
        st.error(plain(exc))
    else:
        st.rerun()

deployment = load_state(state_file)

st.divider()
if deployment is None:
    st.subheader("Deploy")
    roles = st.multiselect("Endpoints", list(ROLES), default=list(DEFAULT_ROLES), key="deploy_roles")
    picks = model_picks(roles)  # the voice models: what the endpoint can do depends on which
    c1, c2 = st.columns(2)
    region = c1.text_input("Region", value=settings.region, key="deploy_region")
    role_arn = c2.text_input("Execution role ARN", value=os.environ.get("SAGEMAKER_EXECUTION_ROLE_ARN", ""),
                             key="deploy_role_arn", help="the IAM role SageMaker runs the containers as")
    with st.expander("More options"):
        image_tag = st.text_input("DLC image tag", value=DEFAULT_IMAGE_TAG, key="deploy_image_tag")
        types = st.text_area("Instance types (one line each: `ml.g6.xlarge,ml.g5.xlarge` for all, or "
                             "`voice=ml.g6.xlarge` for one endpoint; priority order)", key="deploy_types")
        models = st.text_area("Other models (one line each: `image=<Hugging Face model id>`; a model the studio's "
                              "catalog does not know deploys with a warning, its GPU memory unchecked)",
                              key="deploy_models")
        bucket = st.text_input("S3 bucket for video requests (created if missing)", key="deploy_bucket")
        name_prefix = st.text_input("Name prefix", value=PROJECT, key="deploy_name_prefix")
        smoke = st.checkbox("Run the smoke test once InService", value=True, key="deploy_smoke")
        life = lifecycle_options()  # time to live, max instances, video to zero
    options = DeployOptions(
        roles=tuple(roles), region=region.strip() or None, profile=settings.profile,
        role_arn=role_arn.strip() or None, image_tag=image_tag.strip() or DEFAULT_IMAGE_TAG,
        instance_types=tuple(line.strip() for line in types.splitlines() if line.strip()),
        bucket=bucket.strip() or None, name_prefix=name_prefix.strip() or PROJECT, **life,
        voice_model=picks.get("voice"), models=tuple(line.strip() for line in models.splitlines() if line.strip()),
    )
    gpu_fit_captions(roles, picks, list(options.models))
    st.code(deploy_command(options, str(state_file)) + ("" if smoke else " --no-smoke"), language="bash")
    if st.button("Deploy", type="primary", disabled=busy or not roles, key="deploy_go"):
        start(lambda: runner.deploy(options, actor=me, wait=wait, smoke=smoke))
else:
    st.subheader("Actions")
    c1, c2, c3 = st.columns(3)
    # Each start is refused while another command writes the state file (infra/lock.py): the page says so.
    if c1.button("Resume", disabled=busy, key="resume_go", help="create what is missing, recreate what Failed"):
        start(lambda: runner.resume(actor=me, wait=wait))
    if c2.button("Run smoke test", disabled=busy, key="smoke_go"):
        note = scale_up_note(state_file, settings.profile)
        if note is None:
            start(lambda: runner.smoke(actor=me))
        state["confirm_smoke"] = note  # an endpoint at 0 instances would scale up: ask first
    if state.get("confirm_smoke"):
        with st.container(border=True):
            st.warning(plain(state["confirm_smoke"]), icon="💸")
            y, n = st.columns(2)
            if y.button("Yes, scale up and run the smoke test", type="primary", disabled=busy, key="smoke_confirm"):
                state["confirm_smoke"] = None
                start(lambda: runner.smoke(actor=me))
            if n.button("Cancel", key="smoke_cancel"):
                state["confirm_smoke"] = None
                st.rerun()
    if c3.button("Delete…", disabled=busy, key="delete_ask"):
        state["confirm_delete"] = True
    if state.get("confirm_delete"):
        with st.container(border=True):
            count = delete_plan(deployment, state_file)
            y, n = st.columns(2)
            if y.button(f"Yes, delete these {count}", type="primary", key="delete_go"):
                state["confirm_delete"] = False
                start(lambda: runner.delete(actor=me, wait=wait))
            if n.button("Cancel", key="delete_cancel"):
                state["confirm_delete"] = False
                st.rerun()
    add_panel(deployment, runner, wait, busy, me, start)  # a family of the catalog not deployed yet
    versions_panel(deployment, runner, wait, busy, me)  # the version in use, Upgrade, Roll back
    ttl_panel(deployment, runner, busy, me)  # the time left, Extend
try:
    audit_panel(resources.audit_entries())  # who did what to the endpoints, who cloned which voice
except StudioError as exc:
    audit_panel([], unavailable=str(exc))
