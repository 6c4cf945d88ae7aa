"""Speech runs belong to the browser session that started them and end with it.

Streamlit gives every browser tab a session, and a reload is a new one: the old session's Stop button is
gone with it. The process-wide `services.speech.client.SpeechRuns` registry keeps each session's run and
asks `session_alive` on the background loop; a run whose session Streamlit no longer counts as active
(for `GRACE_S`, so a dropped connection that reconnects keeps its run) is cancelled, its stream closed.
"""

from __future__ import annotations

import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from services.speech import SpeechRuns
from ui import resources

SWEEP_S = 1.0
GRACE_S = 5.0


def session_id() -> str:
    """This browser session's id (Streamlit's, one per tab; a reload gets a new one)."""
    ctx = get_script_run_ctx()
    if ctx is None:
        raise RuntimeError("session_id() is only available while a Streamlit script runs")
    return ctx.session_id


def session_alive(session_id: str) -> bool:
    """Whether Streamlit still has this session connected. Safe on any thread. Without a Streamlit server
    (bare mode, AppTest) there is no session to lose."""
    if not runtime.exists():
        return True
    return runtime.get_instance().is_active_session(session_id)


@st.cache_resource(show_spinner=False)
def speech_runs() -> SpeechRuns:
    """The process's registry of running utterances by session."""
    return SpeechRuns(resources.loop(), session_alive, sweep_s=SWEEP_S, grace_s=GRACE_S)
