"""Converse: talk to a voice agent, and see where each millisecond of the silence after you stop goes. Recorded turns
are sent as a microphone would send them (real time, then the silence window) through the pipeline — listen →
reply → speak — or the server's own speech-to-speech session; the conversation shows turn by turn, with its
figures and downloads, and is kept in the history."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from services.listen import load_audio
from ui import resources
from ui.converse_compare import compare_section
from ui.converse_views import conversation_view, converse, kept_conversations, settings_form
from ui.workspace_views import may

state = st.session_state
resources.sidebar()
st.title("Converse")
st.caption("Talk to a voice agent and measure the silence after you stop: each turn's timeline (your speech ended → "
           "the final transcript → the reply's first token → the agent's first audio) and voice-to-voice p50/p95 "
           "over the conversation.")

backend = resources.require_backend("The conversation's backend")
if backend.name not in ("offline", "omni"):
    st.error(f"{backend.label}: a conversation needs a server that listens and speaks over its URL — choose the "
             "offline engine or a vLLM-Omni server in the sidebar")
    st.stop()
try:
    voices, _ = resources.speech_catalog()
except StudioError as exc:
    st.error(f"The speech backend is not available: {resources.plain(exc)}")
    st.stop()

can_talk = may("generate")  # else one line why; the kept conversations still show
settings = settings_form(voices)
uploads = st.file_uploader(
    f"Your turns, in order (recordings of what you say, each at most {TRANSCRIPTION_FILE_MAX_BYTES // 2**20} MB): "
    "each is sent as the microphone would send it, then the silence window; the next starts when the agent has "
    "finished", accept_multiple_files=True, key="converse_uploads", disabled=not can_talk)
st.caption("The live microphone is not on this page yet: record your turns and upload them.")


def _talk() -> None:
    state["converse_error"] = None
    try:
        inputs = [load_audio(f.getvalue(), name=f.name) for f in uploads or []]
        with st.spinner("Talking: each turn at real time…"):
            conv = converse(backend.target, settings, inputs)
    except StudioError as exc:
        state["converse_error"] = str(exc)
        return
    except TimeoutError:
        state["converse_error"] = f"{backend.target} did not finish the conversation in time: try shorter turns"
        return
    timeline, audio = conv.as_json(), conv.stereo_wav()
    state["converse_last"] = (timeline, audio, None, conv.skipped, conv.reply_label)
    if not conv.turns:
        state["converse_error"] = "No words were heard in any turn, so there is no conversation to keep"
        return
    try:
        kept = resources.history().conversations.record(
            timeline, settings={**settings, "listen": backend.target, "speak": backend.target,
                                "reply": conv.reply_label, "inputs": [f.name for f in uploads or []]}, audio=audio)
        state["converse_last"] = (timeline, audio, kept.id, conv.skipped, conv.reply_label)
    except StudioError as exc:
        state["converse_kept_error"] = f"The conversation is shown but not kept: {exc}"


if can_talk and st.button("Talk", type="primary", disabled=not uploads):
    _talk()
compare_section(backend.target, settings, uploads, voices)

if error := state.pop("converse_error", None):
    st.error(resources.plain(error))
if kept_error := state.pop("converse_kept_error", None):
    st.warning(resources.plain(kept_error))

last = state.get("converse_last")
if last is not None:
    timeline, audio, kept_id, skipped, label = last
    st.subheader("This conversation")
    st.caption(resources.plain(f"The reply comes from {label}." + (" Kept in the history." if kept_id else "")))
    for name in skipped:
        st.caption(resources.plain(f"No words heard in {name}: no reply, no turn."))
    conversation_view(timeline, audio, key="converse-last")
kept_conversations(skip=None if last is None else last[2])
