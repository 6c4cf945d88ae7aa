"""Evaluations: define variants and a prompt set, run them (resumable), review the outputs blind in pairs, then
reveal the results — win rates with 95 % Wilson intervals, the pairwise matrix, latency, cost — and export."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from services.eval.store import EvalStore
from ui import resources
from ui.eval_views import create_from_form, define_form, init_define_state, results_section, review_section, \
    run_section
from ui.media_views import when

NEW = "➕ New evaluation"
state = st.session_state

resources.sidebar()
st.title("Evaluations")
st.caption("Decide with evidence: the same prompts on 2–4 variants (settings and a target each), rated blind in "
           "pairs — which output came from which variant stays hidden until you reveal the results.")

try:
    store = EvalStore(resources.history())
except StudioError as exc:
    st.error(f"The history is not available: {resources.plain(exc)}")
    st.stop()

evaluations = {e["id"]: e for e in store.list()}
options = [NEW, *evaluations]
if state.get("ev_id") not in evaluations:
    state["ev_id"] = NEW
# keyed by the number of evaluations: a new one makes a new picker, showing it (an old picker kept its choice)
pick = f"ev_pick_{len(options)}"
st.selectbox("Evaluation", options, index=options.index(state["ev_id"]), key=pick,
             on_change=lambda: state.update(ev_id=state[pick]),
             # stable labels (no counts): a label that changes makes the browser send the picker back to its first
             format_func=lambda k: k if k == NEW else f"{evaluations[k]['name']} · {evaluations[k]['modality']} · "
             f"{evaluations[k]['items']} items · {when(evaluations[k]['created_at'])}")

if state["ev_id"] == NEW:
    init_define_state()
    name, url, _ = resources.backend_choice()
    define_form(on_create=lambda: create_from_form(store, name, url))
    st.stop()

eval_id = state["ev_id"]
ev = store.get(eval_id)
st.caption(resources.plain(f"{ev.modality} · {len(ev.spec.prompts)} prompts × {ev.spec.repeats} repeats × "
                           f"{len(ev.spec.labels)} variants · id {eval_id}"))

st.subheader("1 · Run")
run_section(store, eval_id, resources.settings())

st.subheader("2 · Review blind")
review_section(store, eval_id, ev.modality)

st.subheader("3 · Results")
revealed = state.setdefault("ev_revealed", set())
if eval_id not in revealed:
    st.caption("The labels stay hidden until you reveal them: rate first.")
    if st.button("Reveal the results", key="ev_reveal"):
        revealed.add(eval_id)
        st.rerun()
    st.stop()
results_section(store, eval_id)
