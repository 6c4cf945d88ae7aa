"""Listen studio: a recording — uploaded, or spoken into the microphone — turned into text, with its figures, its
word error rate against a reference, the files it can be written as, and every transcript kept in the history."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from services.listen import MICROPHONE, LiveListening
from ui import resources
from ui.listen_mic import NO_SOUND, START_LABEL, Microphone, hearing, microphone
from ui.listen_views import Heard, heard_of, keep, kept_transcripts, result_view, transcribe
from ui.sidebar import sidebar
from ui.text import plain
from ui.workspace_views import may

REFRESH_S = 0.25
MAX_MB = TRANSCRIPTION_FILE_MAX_BYTES // 2**20

state = st.session_state
sidebar()
st.title("Listen")
st.caption("Upload a recording or speak into the microphone: the text comes back with its timing figures and, "
           "given the text that is spoken, its word error rate. Every transcript is kept below.")

backend = resources.require_backend("The listen backend", family="listen")  # SageMaker without one: said here
listener = backend.client("listen")
if listener is None:
    st.error(f"{backend.label} has no listen route: choose the offline engine, a vLLM server or SageMaker in the "
             "sidebar")
    st.stop()
mic: Microphone = state.setdefault("listen_microphone", Microphone())
can_listen = may("generate")  # else one line why; the kept transcripts still show


def _finish(heard_source: str, transcript, audio: bytes | None, audio_name: str, reference: str) -> None:  # type: ignore[no-untyped-def]
    heard, problem = heard_of(transcript, backend.name, heard_source, reference)
    state["listen_last"] = heard
    state["listen_error"] = problem  # a reference that cannot be compared: the transcript still shows and is kept
    state["listen_kept_error"] = keep(heard, audio, audio_name)


def _stop_microphone() -> None:
    """Stop was pressed: the final commit, then the final text (or one line why there is none)."""
    live, started, error = mic.take()
    if error or live is None:
        state["listen_error"] = error or NO_SOUND
        return
    live.stop()
    if not started or live.captured_s == 0:
        live.cancel()
        state["listen_error"] = NO_SOUND
        return
    try:
        with st.spinner("The final text…"):
            transcript = live.result(timeout=getattr(listener, "timeout", 120.0) + 10)
        _finish(MICROPHONE, transcript, live.wav(), "microphone.wav", state.get("listen_reference", ""))
    except StudioError as exc:
        state["listen_error"] = str(exc)
    except TimeoutError:
        state["listen_error"] = f"{listener.target} sent no final text: try again, or use a file"


st.text_area("Reference text (optional): what is spoken, for the word error rate", key="listen_reference",
             height=80)
file_tab, mic_tab = st.tabs(["From a file", "From the microphone"])
with file_tab:
    upload = None
    if resources.uploads_allowed():
        upload = st.file_uploader(f"Recording (any audio or video file, at most {MAX_MB} MB)", key="listen_upload",
                                  disabled=not can_listen)
        st.toggle("Stream it at real time (as a microphone would: the partial text grows while it is sent)",
                  key="listen_stream")
        # the file's own button, in its tab (the microphone's tab has Start/Stop)
        if can_listen and st.button("Transcribe", type="primary", disabled=upload is None):
            state["listen_error"] = None
            try:
                data = upload.getvalue()
                _, transcript = transcribe(backend, upload.name, data, stream=bool(state.get("listen_stream")))
                _finish(upload.name, transcript, data, upload.name, state.get("listen_reference", ""))
            except StudioError as exc:
                state["listen_error"] = str(exc)
    else:
        st.caption(f"{resources.NO_UPLOADS} Speak into the microphone instead.")
with mic_tab:
    if can_listen:
        mic.factory = lambda: LiveListening(listener, resources.loop(), name=MICROPHONE)
        playing = microphone(mic, resources.ice_servers())
        st.caption(f"Press **{START_LABEL}** and allow the microphone when the browser asks; the words appear while "
                   "you speak. Stop ends the utterance and gives the final text and figures. If the browser refused "
                   "the microphone (the player above says so), allow it in the address bar's site settings, or use "
                   "a file.")
    else:
        playing = False

if not playing and (mic.live is not None or mic.started or mic.error):
    _stop_microphone()

if error := state.pop("listen_error", None):
    st.error(plain(error))
if kept_error := state.pop("listen_kept_error", None):
    st.warning(plain(kept_error))


@st.fragment(run_every=REFRESH_S if playing else None)
def utterance_panel() -> None:
    """While the microphone sends: the partial text (refreshed here only); else the latest transcript."""
    if playing:
        hearing(mic)
    elif (last := state.get("listen_last")) is not None:
        result_view(last, listener)


utterance_panel()
last: Heard | None = state.get("listen_last")
kept_transcripts(skip=None if last is None else last.record_id, listener=listener)
