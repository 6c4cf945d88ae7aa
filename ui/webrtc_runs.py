"""Keeping a WebRTC player connected across the page's own reruns, however late the server reports them.

streamlit-webrtc (0.79, pinned) resets a player's context, stopping its connection, when it believes the page
ran without drawing it (the person left the page, so the iframe came back with fresh state). It tells by
Streamlit's `session_info.script_run_count`, which the server's event loop raises when it *sends* a run's end.
Under load that send can come after the next run has begun: that run reads a stale count, and the run after it
sees a jump of two and stops a player that never left the page. (Reproduced: with a run's end sent 0.3 s late,
the voice page's player dropped at the first rerun after connecting, every time — tests/late_run_ends.py.)

The studio counts its own full runs in the script thread (app.py calls `count_full_run` first thing; fragment
runs do not run app.py), so its count cannot lag. When the previous full run of this session, or this one (a
fragment), drew the player, the player's library is told it was drawn last run; otherwise its own check decides
(the person did leave the page, or a run was cut short before reaching the player).
"""

from __future__ import annotations

import streamlit as st

RUNS_KEY = "_omni_full_runs"


def count_full_run() -> None:
    """A full run of the app began (app.py, before anything else)."""
    st.session_state[RUNS_KEY] = st.session_state.get(RUNS_KEY, 0) + 1


def drawn_last_run(key: str) -> bool:
    """Call just before `webrtc_streamer(key=key, …)`. True when the session's previous full run (or this one)
    drew that player: then streamlit-webrtc's stale-count check is skipped for this run."""
    state = st.session_state
    runs, mark = state.get(RUNS_KEY), f"_omni_webrtc_drawn_{key}"
    if runs is None:
        return False  # a page run outside app.py (a test's AppTest of one page): the library decides
    kept = state.get(mark) in (runs - 1, runs)
    context = state.get(key)  # streamlit-webrtc keeps its context under the player's own key
    if kept and context is not None and hasattr(context, "_last_rendered_run_count"):
        context._last_rendered_run_count = None  # its private mark of the last run that drew it: "none yet"
    state[mark] = runs
    return kept
