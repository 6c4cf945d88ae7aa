"""Evaluations: define variants and a prompt set, run them (resumable), review the outputs blind in pairs, then
reveal the results — win rates with 95 % Wilson intervals, the pairwise matrix, latency, cost — and export."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from services.eval.registry import evaluation
from services.eval.store import EvalStore
from ui import resources
from ui.eval_define import create_from_form, define_form, init_define_state
from ui.eval_results import results_section
from ui.eval_views import evaluation_label, follow_link, link_line, manage_section, review_section, run_section
from ui.sidebar import sidebar
from ui.text import plain
from ui.workspace_views import by_line, may, share_toggle

NEW = "➕ New evaluation"
REFRESH_S = 1.0
state = st.session_state

sidebar()
st.title("Evaluations")
st.caption("Decide with evidence: the same prompts on 2–4 variants (settings and a target each), rated blind in "
           "pairs — which output came from which variant stays hidden until you reveal the results.")

try:
    store = EvalStore(resources.history())
except StudioError as exc:
    st.error(f"The history is not available: {plain(exc)}")
    st.stop()

can_evaluate = may("evaluate")  # else one line why: the team's shared evaluations stay to look at
evaluations = {e["id"]: e for e in store.list()}  # this person's and the shared ones
options = [NEW, *evaluations] if can_evaluate else list(evaluations)
pick = f"ev_pick_{len(options)}"  # keyed by the number of evaluations: a new one makes a new picker, showing it
follow_link(evaluations, pick)  # ?item=<evaluation id>: that one chosen (or why the link shows nothing)
if not options:
    st.info("No evaluations shared with the team yet.")
    st.stop()
if state.get("ev_id") not in options:
    state["ev_id"] = options[0]
st.selectbox("Evaluation", options, index=options.index(state["ev_id"]), key=pick,
             on_change=lambda: state.update(ev_id=state[pick]),
             format_func=lambda k: k if k == NEW else evaluation_label(evaluations[k]))

if notice := state.pop("ev_notice", None):
    st.success(plain(notice))
name, url, _ = resources.backend_choice()
runs = resources.eval_runs()
if state["ev_id"] == NEW or (state.get("ev_editing") and state["ev_editing"] == state["ev_id"]):
    editing = state["ev_id"] != NEW
    if editing:
        st.info("Editing: saving makes its items afresh (all to run again).", icon="✏️")
    else:
        state["ev_editing"] = None  # a new evaluation, not the one being edited
    init_define_state()
    define_form(on_create=lambda run: create_from_form(store, name, url, runs if run else None), backend_name=name,
                backend_url=url, editing=editing)
    st.stop()

eval_id = state["ev_id"]
ev = store.get(eval_id)
st.caption(plain(f"{ev.modality} · {len(ev.spec.prompts)} prompts × {ev.spec.repeats} repeats × "
                           f"{len(ev.spec.labels)} variants · id {eval_id}"))
by_line(ev.user_id)
share_toggle(store.history, "evaluation", ev.id, ev.user_id, ev.shared)
link_line(ev.id)
manage_section(store, eval_id, name, url)

st.subheader("1 · Run")
running_at_start = runs.state(store, eval_id).running


@st.fragment(run_every=REFRESH_S if running_at_start else None)
def run_part() -> None:
    """The run's progress, refreshed while it goes on (on any replica); the page redraws when it starts or ends."""
    if run_section(store, eval_id, runs) != running_at_start:
        st.rerun(scope="app")


run_part()

st.subheader("2 · Review blind")
review_section(store, eval_id, ev.modality)

st.subheader("3 · Results")
revealed = state.setdefault("ev_revealed", set())
if eval_id not in revealed and evaluation(ev.modality).rated:  # a measured family's results hide nothing
    st.caption("The labels stay hidden until you reveal them: rate first.")
    if st.button("Reveal the results", key="ev_reveal"):
        revealed.add(eval_id)
        st.rerun()
    st.stop()
results_section(store, eval_id)
