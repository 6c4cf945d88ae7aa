"""The Evaluations page's views of one evaluation: edit or delete it, run it (progress, resumable, on any
replica), and review it blind (two outputs as 1 and 2, the rater asked once) — drawn from its family's part as
data (what it makes, whether it is rated). The definition form is ui/eval_define.py, the results
ui/eval_results.py; the logic is services/eval's.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from protocol.errors import StudioError
from services.eval.pairing import Pair, next_pair, record_rating
from services.eval.registry import evaluation
from services.eval.runs import EvalRuns
from services.eval.store import EvalStore
from ui.eval_define import load_for_edit
from ui.item_links import linked_id, linked_record, record_link
from ui.media_views import when
from ui.text import plain
from ui.workspace_views import owner_of

VERDICT = {"a": "1 is better", "b": "2 is better", "tie": "Tie"}
SHORTCUT = {"a": "1", "b": "2", "tie": "t"}
# An output drawn by the major type of what its family makes (EvalFamily.makes, a MIME type).
DRAW = {
    "audio": lambda data, mime: st.audio(data, format=mime),
    "image": lambda data, mime: st.image(data, width="stretch"),
    "video": lambda data, mime: st.video(data, format=mime),
    "text": lambda data, mime: st.code(data.decode("utf-8", "replace"), language=None, wrap_lines=True),
}


EVAL_PAGE = "pages/evaluations.py"


def follow_link(evaluations: dict[str, Any], pick: str) -> None:
    """`?item=<evaluation id>`: that evaluation chosen, once, when the link is opened (the picker, key `pick`,
    moves freely after); one this person may not see, or deleted, says so in one line."""
    state = st.session_state
    linked = linked_record("evaluation", evaluations.__getitem__)
    if linked is not None and state.get("ev_link_seen") != linked["id"]:
        state["ev_link_seen"] = state["ev_id"] = linked["id"]
        state.pop(pick, None)  # a picker drawn before kept its choice: drawn afresh, it shows the linked one


def link_line(eval_id: str) -> None:
    """A link to the evaluation, and a line saying it is the one a link opened."""
    if linked_id() == eval_id:
        st.caption("🔗 The linked evaluation")
    record_link(EVAL_PAGE, eval_id)


def _delete(store: EvalStore, eval_id: str) -> None:
    try:
        store.delete(eval_id)
    except StudioError as exc:
        st.session_state["ev_manage_error"] = str(exc)
    else:
        st.session_state.update(ev_id=None, ev_notice=f"Deleted evaluation {eval_id}, its items, ratings and outputs.")


def manage_section(store: EvalStore, eval_id: str, backend_name: str, backend_url: str | None) -> None:
    """Edit (only while nobody has rated it) and Delete, for its owner or an admin (the store checks again)."""
    ev, actor = store.get(eval_id), store.actor
    if not (actor.can("evaluate") and (store.history.owns(ev) or actor.role == "admin")):
        return
    rated = len(store.ratings(eval_id))
    with st.expander("Edit or delete"):
        if evaluation(ev.modality).takes == "audio":
            st.caption("Its recordings stay as they were given: make a new evaluation to change them.")
        elif rated:
            st.caption(f"It has {rated} rating{'' if rated == 1 else 's'}: what was rated stays as it was, so it can "
                       "no longer be edited — make a new evaluation from its SPEC instead.")
        else:
            st.button("Edit", key="ev_edit", on_click=load_for_edit, args=(store, eval_id, backend_name, backend_url),
                      help="change its name, prompts and variants; its items are made afresh")
        st.button("Delete this evaluation", key="ev_delete", type="primary", on_click=_delete, args=(store, eval_id),
                  help="removes it, its items, its ratings and its outputs for good")
    if error := st.session_state.pop("ev_manage_error", None):
        st.error(plain(error))


def evaluation_label(e: dict[str, Any]) -> str:
    """The picker's label: stable (no counts: a label that changes makes the browser send the picker back to its
    first option), with whose it is when not this person's."""
    by = owner_of(e.get("user_id"))
    label = f"{e['name']} · {e['modality']} · {e['items']} items · {when(e['created_at'])}"
    return f"{label} · {by}" if by else label


def run_section(store: EvalStore, eval_id: str, runs: EvalRuns) -> bool:
    """Counts by status; while a run goes on (on this replica or another) its progress and Stop, else Run (or
    Continue / Retry the failed) and how the last run ended; the failed items. Only the evaluation's owner runs
    it (the service checks again: EvalStore.check_runner). Returns whether a run goes on (the page then
    refreshes this part)."""
    state = st.session_state
    run = runs.state(store, eval_id)  # first: a run that has ended has written all its items before its note
    items = store.items(eval_id)
    done = sum(i.status == "succeeded" for i in items)
    failed = [i for i in items if i.status == "failed"]
    ev = store.get(eval_id)
    may_run = store.history.owns(ev) and store.actor.can("evaluate")
    st.caption(f"{done} of {len(items)} items made · {len(failed)} failed · {len(items) - done - len(failed)} to do")
    if run.running:
        moved = (run.note or {}).get("taken_over_from")
        where = "" if run.replica == runs.replica else f" on {run.replica}"  # another replica of a team studio
        if moved:
            where = f" on {run.replica}, carried on after {moved} stopped answering"
        st.progress(done / max(1, len(items)), text=plain(f"Generating{where} · {done} of {len(items)} made"))
        if run.stop_asked:
            st.caption("Stopping after the item being made…")
        elif may_run:
            st.button("Stop (Continue picks up the rest)", key="ev_stop", on_click=_stop_run, args=(runs, store, eval_id))
        else:
            st.caption(plain(f"{ev.user_id} runs it; this page follows it."))
    else:
        if run.note and run.note.get("ended_at"):
            st.caption(plain(_last_run(run.note)))
        if done < len(items) and not may_run:
            st.caption(plain(f"Only {ev.user_id}, who made it, runs its items."))
        elif done < len(items):
            st.button("Run" if done == 0 and not failed else "Continue (only what is missing)", type="primary",
                      key="ev_run", on_click=_start_run, args=(runs, store, eval_id),
                      help="it runs on the studio, not in this tab: close the page, or come back later")
    if error := state.pop("ev_run_error", None):
        st.error(plain(error))
    for item in failed:
        st.error(plain(f"{item.variant} · {item.prompt[:60]}: {item.error}"))
    return run.running


def _last_run(note: dict[str, Any]) -> str:
    """One line on how the last run ended (and, when its replica stopped answering, where it was carried on)."""
    parts = [f"{note.get('generated', 0)} made", f"{note.get('failed', 0)} failed"]
    if note.get("stopped"):
        parts.append("stopped")
    line = f"Last run, ended {when(note['ended_at'])}: {', '.join(parts)}."
    if note.get("error"):
        line += f" It ended with an error: {note['error']}"
    if note.get("taken_over_from"):
        line += (f" It was carried on by {note.get('replica')} after {note['taken_over_from']} stopped answering; "
                 "what was made before was kept.")
    return line


def _start_run(runs: EvalRuns, store: EvalStore, eval_id: str) -> None:
    try:
        runs.start(store, eval_id)
    except StudioError as exc:
        st.session_state["ev_run_error"] = str(exc)


def _stop_run(runs: EvalRuns, store: EvalStore, eval_id: str) -> None:
    try:
        runs.stop(store, eval_id)
    except StudioError as exc:
        st.session_state["ev_run_error"] = str(exc)


def _media(store: EvalStore, makes: str, item_id: str) -> None:
    data = store.media(store.item(item_id))
    draw = DRAW.get(makes.partition("/")[0])
    if data is None:
        st.warning("the output file is missing")
    elif draw is None:
        st.download_button("Download the output", data, mime=makes, key=f"ev_out_{item_id}")
    else:
        draw(data, makes)


def _rate(store: EvalStore, eval_id: str, pair: Pair, winner: str, rater: str) -> None:
    if winner == "skip":
        st.session_state.setdefault("ev_skipped", set()).add(pair.key)
        return
    record_rating(store, eval_id, pair.item_a, pair.item_b, winner, rater)


def review_section(store: EvalStore, eval_id: str, modality: str) -> None:
    """The rater's name (asked once; a signed-in person's own name), then the next unrated pair as 1 and 2 with
    the four buttons. Rating needs a role that may evaluate."""
    state = st.session_state
    actor = store.actor
    part = evaluation(modality)
    if not part.rated:
        st.info(part.unrated_note)
        return
    if not actor.can("evaluate"):
        st.caption(f"Rating is for creators and admins; you are a {actor.role}. The results below are open to you.")
        return
    if not state.get("ev_rater") and actor.signed_in:
        state["ev_rater"] = actor.name
    if not state.get("ev_rater"):
        name = st.text_input("Your name (asked once; your ratings are kept under it)", key="ev_rater_input")
        if st.button("Start rating", key="ev_rater_go") and name.strip():
            state["ev_rater"] = name.strip()
            st.rerun()
        return
    rater = state["ev_rater"]
    pair = next_pair(store, eval_id, rater, skipped=state.get("ev_skipped"))
    if pair is None:
        st.success(f"{plain(rater)}: every pair is rated (or skipped). Reveal the results below.")
        return
    st.caption(f"Rating as **{plain(rater)}** · outputs in random order; which variant made which stays hidden.")
    st.markdown(f"**Prompt:** {plain(pair.prompt)}")
    for n, (col, item_id) in enumerate(zip(st.columns(2), (pair.item_a, pair.item_b)), 1):
        with col.container(border=True):
            st.markdown(f"### {n}")
            _media(store, part.makes, item_id)
    c = st.columns(4)
    for col, winner in zip(c, ("a", "b", "tie", "skip")):
        col.button(VERDICT.get(winner, "Skip"), key=f"ev_rate_{winner}", width="stretch", shortcut=SHORTCUT.get(winner, "s"),
                   on_click=_rate, args=(store, eval_id, pair, winner, rater))


