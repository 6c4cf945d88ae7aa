"""Converse: talk to a voice agent, and see where each millisecond of the silence after you stop goes. Live, through
the microphone (the agent answers through the same WebRTC connection; talk over it to interrupt), or with recorded
turns sent as a microphone would send them (real time, then the silence window) through the pipeline — listen →
reply → speak — or the server's own speech-to-speech session; the conversation shows turn by turn, with its figures
and downloads, and is kept in the history."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from services.listen import load_audio
from ui import resources, voice_catalog
from ui.converse_live import ECHO_HINT, HEARD_KEY, START_LABEL, STOP_LABEL, end_call, heard_line, in_call, live_call
from ui.converse_compare import compare_section
from ui.converse_views import conversation_view, converse, cut_notice, kept_conversations, linked_conversation, settings_form, setup_of, share_kept
from ui.sidebar import sidebar
from ui.text import plain
from ui.workspace_views import may

REFRESH_S = 0.5
state = st.session_state
sidebar()
st.title("Converse")
st.caption("Talk to a voice agent and measure the silence after you stop: each turn's timeline (your speech ended → "
           "the turn decided → the final transcript → the reply's first token → the agent's first audio) and voice-to-voice p50/p95 "
           "over the conversation.")

backend = resources.require_backend("The conversation's backend")
endpoints = backend.capabilities.deploys_models  # SageMaker: listen, voice, omni and reply are endpoints
try:
    voices, _ = voice_catalog.speech_catalog()
except StudioError as exc:
    if not endpoints:
        st.error(f"The speech backend is not available: {plain(exc)}")
        st.stop()
    voices = []  # no voice endpoint: native mode needs none, and pipeline mode says so below

can_talk = may("generate")  # else one line why; the kept conversations still show
cut_notice()  # a call a studio restart (or a replica that went away) cut off: what was kept, said once
linked_conversation()  # ?item=<conversation id>: that conversation first, whole (or why it cannot be)
settings = settings_form(voices, endpoints=endpoints)
setup = None
try:  # a script's bad line, a reply URL that is not one, an endpoint the mode needs: said once, here
    setup = setup_of(backend, settings).check()
except StudioError as exc:
    st.error(plain(exc))
settings_ok = setup is not None


def _keep(conv, inputs: list[str], echoes: int = 0, call=None) -> None:  # type: ignore[no-untyped-def]
    """Show the conversation just held and keep it in the history (one line why when it cannot be); a live `call`
    kept as it went is closed with the whole of it."""
    timeline, audio = conv.as_json(), conv.stereo_wav()
    state["converse_last"] = (timeline, audio, None, conv.skipped, conv.reply_label, echoes)
    whole = {**settings, **(setup.settings() if setup else {}), "reply": conv.reply_label, "inputs": inputs}
    if conv.turns and all(t.error for t in conv.turns):  # nothing was answered: shown, with why, not kept
        if call is not None:
            call.discard()
        state["converse_error"] = f"Every turn failed, so the conversation is not kept: {conv.turns[0].error}"
        return
    try:
        if call is not None:
            kept = call.close(conv, settings=whole)
        elif conv.turns:
            kept = resources.history().conversations.record(timeline, settings=whole, audio=audio)
        else:
            kept = None
        if kept is None:
            state["converse_error"] = "No words were heard in any turn, so there is no conversation to keep"
            return
        state["converse_last"] = (timeline, audio, kept.id, conv.skipped, conv.reply_label, echoes)
    except StudioError as exc:
        state["converse_kept_error"] = f"The conversation is shown but not kept: {exc}"


live_tab, recorded_tab = st.tabs(["Talk live", "Recorded turns"])
with live_tab:
    mic, playing = None, False
    if can_talk and setup is not None:
        try:
            mic, playing = live_call(setup, settings)
        except StudioError as exc:
            st.error(plain(exc))
        st.caption(f"Press **{START_LABEL}** and allow the microphone; speak, then pause — the agent answers when "
                   f"your turn is over (Turn taking, above). Talk over it to interrupt. **{STOP_LABEL}** keeps the conversation. Use "
                   "headphones: from a loudspeaker the agent hears itself.")
    mic = mic or state.get("converse_microphone")  # a call whose settings just became unusable ends here too
    if mic is not None and not playing and (mic.live is not None or mic.started or mic.error):
        conv, echoes, why, call = end_call(mic)
        state["converse_last_heard"] = state.get(HEARD_KEY)  # what the browser heard of this call
        if conv is not None:
            _keep(conv, ["microphone"], echoes, call)
        else:
            state["converse_error"] = why

with recorded_tab:
    uploads = None
    if resources.uploads_allowed():
        uploads = st.file_uploader(
            f"Your turns, in order (recordings of what you say, each at most {TRANSCRIPTION_FILE_MAX_BYTES // 2**20} "
            "MB): each is sent as the microphone would send it, then the silence window; the next starts when the "
            "agent has finished", accept_multiple_files=True, key="converse_uploads", disabled=not can_talk)
    else:
        st.caption(f"{resources.NO_UPLOADS} Talk live instead.")
    if can_talk and uploads is not None and st.button("Talk", type="primary", disabled=not uploads or not settings_ok):
        state["converse_error"] = None
        try:
            inputs = [load_audio(f.getvalue(), name=f.name) for f in uploads or []]
            with st.spinner("Talking: each turn at real time…"):
                _keep(converse(setup, inputs), [f.name for f in uploads or []])
            state["converse_last_heard"] = None  # recorded turns are not played in the browser
        except StudioError as exc:
            state["converse_error"] = str(exc)
        except TimeoutError:
            state["converse_error"] = f"{backend.target} did not finish the conversation in time: try shorter turns"
    compare_section(setup, uploads, voices, endpoints=endpoints)

if error := state.pop("converse_error", None):
    st.error(plain(error))
if kept_error := state.pop("converse_kept_error", None):
    st.warning(plain(kept_error))


@st.fragment(run_every=REFRESH_S if playing else None)
def conversation_panel() -> None:
    """While the call is on: what it is doing and the turns so far (refreshed here only); else the latest one."""
    if playing and mic is not None:
        in_call(mic)
        return
    last = state.get("converse_last")
    if last is None:
        return
    timeline, audio, kept_id, skipped, label, echoes = last
    st.subheader("This conversation")
    st.caption(plain(f"The reply comes from {label}." + (" Kept in the history." if kept_id else "")))
    for name in skipped:
        st.caption(plain(f"No words heard in {name}: no reply, no turn."))
    if echoes:
        st.warning(ECHO_HINT.format(n=echoes))
    heard_line(state.get("converse_last_heard") or [])
    conversation_view(timeline, audio, key="converse-last")
    share_kept(kept_id)  # its report, link and code, once kept


conversation_panel()
last = state.get("converse_last")
kept_conversations(skip=None if last is None else last[2])
