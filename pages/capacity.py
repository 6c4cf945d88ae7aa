"""Capacity: a load sweep on the chosen target — how many requests at once it holds within an SLO, and what an
audio minute, an image, a video second or an audio hour transcribed costs there; past sweeps reopened, and two overlaid."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from services.load import MODALITIES, LoadPlan, SweepRun, describe_target
from ui import resources
from ui.capacity_views import (
    optional_price,
    progress,
    recording_value,
    reports_section,
    slo_placeholder,
    work_inputs,
    work_values,
)
from ui.sidebar import sidebar
from ui.text import plain
from ui.workspace_views import may

REFRESH_S = 1.0
state = st.session_state

sidebar()
st.title("Capacity")
st.caption("Send the same request at increasing concurrency to the target in the sidebar: each level keeps that "
           "many in flight until its requests are done. The report says how far the target holds your SLO and "
           "what a unit of work costs there. A sweep never starts an endpoint.")

history = resources.require_history()
backend = resources.require_backend()
if not may("load_test"):  # the sweep is for those who may run one; the team's reports are for everyone
    reports_section(history, None, empty="No load reports shared with the team yet.")
    st.stop()

modality = st.segmented_control("What to load", MODALITIES, default="voice", key="cap_modality") or "voice"
c1, c2, c3 = st.columns(3)
c1.text_input("Concurrency levels", value="1,2,4,8", key="cap_levels", help="increasing, each at most 64")
c2.number_input("Requests per level", min_value=1, max_value=2000, value=8, key="cap_requests")
c3.text_input("SLO (p95, with its unit)", key="cap_slo", placeholder=slo_placeholder(modality),
              help='e.g. "ttfa 300ms", "final 1000ms" or "latency 2s"; blank: no SLO (listen: final text 1000 ms)')
work_inputs(modality)
with st.expander("Price, limits and a name"):
    p1, p2, p3 = st.columns(3)
    p1.text_input("Price per hour (USD)", key="cap_price", help="blank: the price table's rate for the endpoint's "
                  "instance type")
    p2.number_input("Stop after (minutes)", min_value=1, max_value=240, value=30, key="cap_minutes")
    p3.text_input("Name of the report", key="cap_title", placeholder="e.g. g6 before the upgrade")


def _prepare() -> None:
    """Run's callback: check the plan and the target before any load; a SageMaker sweep waits for a yes."""
    state["cap_error"] = state["cap_pending"] = None
    m = state.get("cap_modality") or "voice"
    try:
        plan = LoadPlan.build(m, levels=state["cap_levels"], requests=int(state["cap_requests"]), slo=state["cap_slo"],
                              max_wall_s=float(state["cap_minutes"]) * 60, work=work_values(m),
                              recording=recording_value(m))
        name, url, _ = resources.backend_choice()
        settings = resources.settings().with_overrides(backend=name, server_url=url)
        target = describe_target(resources.backend(), settings, m, usd_per_hour=optional_price(state["cap_price"]))
    except StudioError as exc:
        state["cap_error"] = str(exc)
        return
    state["cap_pending"] = (plan, target)
    if not target.needs_confirmation:
        _start()


def _start() -> None:
    plan, target = state.pop("cap_pending")
    state["cap_run"] = SweepRun(resources.loop(), resources.backend(), plan, target, history=resources.history(),
                                title=state["cap_title"].strip() or None)


run = state.get("cap_run")
running = run is not None and not run.done
st.button("Run the sweep", type="primary", on_click=_prepare, disabled=running, key="cap_go")
if state.get("cap_error"):
    st.error(plain(state["cap_error"]))
pending = state.get("cap_pending")
if pending is not None:
    plan, target = pending
    with st.container(border=True):
        st.warning(plain(target.estimate(plan)), icon="💸")
        y, n = st.columns(2)
        y.button("Yes, run it", type="primary", on_click=_start, key="cap_confirm")
        if n.button("Cancel", key="cap_cancel"):
            state["cap_pending"] = None
            st.rerun()


@st.fragment(run_every=REFRESH_S if running else None)
def live() -> None:
    current = state.get("cap_run")
    if current is None:
        return
    if not current.done:
        progress(current)
        return
    if running:  # it just finished: redraw the whole page with its report
        st.rerun()


live()
if run is not None and run.done:
    try:
        report = run.result()
    except StudioError as exc:
        st.error(f"The sweep did not run: {plain(exc)}")
    else:
        state["cap_last"] = report
        if run.saved_id:
            state["cap_pick"] = run.saved_id  # show the new report
        if run.save_error:
            st.warning(f"The report could not be kept in the history: {plain(run.save_error)}")
    state["cap_run"] = None

reports_section(history, state.get("cap_last"))
