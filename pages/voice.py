"""Voice studio: type, press Speak, and hear the speech while it is still being generated."""

from __future__ import annotations

import time
from dataclasses import dataclass

import streamlit as st

from protocol.errors import StudioError
from services.playback import Playback
from services.speech import SpeechRun, Utterance, speech_config, waveform_png
from ui import resources
from ui.voice_player import CONNECT_LABEL, voice_player

HISTORY_SIZE = 5
REFRESH_S = 0.25
SAMPLE_TEXT = (
    "Welcome to Omni Studio. The voice you hear is generated while you listen, "
    "clause by clause, and streamed to your browser as it is made."
)
SPLITS = {"clause": "clauses (fastest first audio)", "sentence": "sentences", "none": "the whole text at once"}


@dataclass
class Take:
    """One finished utterance of this browser session, ready to show again."""

    utterance: Utterance
    wav: bytes
    picture: bytes | None

    @classmethod
    def of(cls, u: Utterance) -> Take:
        return cls(u, u.wav(), waveform_png(u.pcm) if u.pcm else None)


state = st.session_state
playback: Playback = state.setdefault("voice_playback", Playback())
history: list[Take] = state.setdefault("voice_history", [])

resources.sidebar()
st.title("Voice")
st.caption("Type some text and press **Speak**: the speech starts playing while the model is still generating it.")

try:
    backend = resources.backend()
    voices, languages = resources.speech_catalog()
except StudioError as exc:
    st.error(f"The speech backend is not available: {resources.plain(exc)}")
    st.stop()

def _start_speaking() -> None:
    """Speak's callback: runs before the script, so the page below already shows the run as going."""
    state["voice_error"] = None
    playback = state["voice_playback"]
    try:
        playback.start_utterance()  # a new utterance: drop what the previous one still had queued
        state["voice_run"] = SpeechRun(
            resources.loop(),
            resources.backend().speech,
            speech_config(state["voice_voice"], state["voice_language"], split_granularity=state["voice_split"]),
            state["voice_text"],
            on_audio=lambda c: playback.push(c.data, c.sample_rate, c.channels),  # on arrival, loop thread
        )
    except StudioError as exc:
        state["voice_error"] = str(exc)


def _stop_speaking() -> None:
    run = state.get("voice_run")
    if run is not None:
        run.cancel()
        state["voice_playback"].start_utterance()  # silence now, not after the queued audio drains


# A run that finished since the last script run becomes the newest take.
run: SpeechRun | None = state.setdefault("voice_run", None)
if run is not None and run.done:
    history.insert(0, Take.of(run.result()))
    del history[HISTORY_SIZE:]
    state["voice_run"] = run = None
running = run is not None

left, right = st.columns([3, 2], gap="large")
with left:
    st.text_area("Text", value=SAMPLE_TEXT, height=150, key="voice_text")
    c1, c2 = st.columns(2)
    c1.selectbox("Voice", voices, key="voice_voice")
    c2.selectbox("Language", languages, key="voice_language")
    with st.expander("Streaming options"):
        st.radio("The server speaks in units of", list(SPLITS), format_func=SPLITS.__getitem__,
                 horizontal=True, key="voice_split")
    b1, b2, _ = st.columns([1, 1, 3])
    b1.button("Speak", type="primary", disabled=running, width="stretch", on_click=_start_speaking)
    b2.button("Stop", disabled=not running, width="stretch", on_click=_stop_speaking)
    if state.get("voice_error"):
        st.error(resources.plain(state["voice_error"]))

with right:
    st.markdown("**Player**")
    playing = voice_player(playback, resources.ice_servers())
    if playing:
        st.caption("🟢 Connected: speech plays here as it arrives.")
    else:
        st.caption(f"Press **{CONNECT_LABEL}** once to hear speech live in this browser.")
        if running:
            st.info(f"Not hearing it? Press **{CONNECT_LABEL}**: the speech so far is queued and plays from "
                    "the start. The WAV is below either way.", icon="🔈")


def _figures(stats) -> None:
    c = st.columns(5)
    c[0].metric("Chunks", f"{stats.chunks}")
    c[1].metric("Audio bytes", f"{stats.bytes:,}")
    c[2].metric("First audio", "—" if stats.ttfa_ms is None else f"{stats.ttfa_ms:.0f} ms",
                help=f"time to first audio, measured from {stats.ttfa_from}")
    c[3].metric("RTF", "—" if stats.rtf is None else f"{stats.rtf:.3f}",
                help="real-time factor: generation time / audio duration (below 1 is faster than real time)")
    c[4].metric("Audio", f"{stats.audio_seconds:.2f} s")


def _take_view(take: Take) -> None:
    u = take.utterance
    st.markdown("**Last utterance**")
    st.text(u.text if len(u.text) <= 400 else u.text[:400] + "…")
    if u.error is not None:
        kept = " The audio received before it is kept below." if u.pcm else ""
        st.error(f"{resources.plain(u.error)}{kept}")
    _figures(u.stats)
    if take.picture:
        st.image(take.picture, caption="Waveform of what was spoken", width="stretch")
        st.audio(take.wav, format="audio/wav")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(u.created_at))
        st.download_button("Download WAV", take.wav, file_name=f"speech-{stamp}.wav", mime="audio/wav",
                           key="voice_download_latest", on_click="ignore")


@st.fragment(run_every=REFRESH_S if running else None)
def utterance_panel() -> None:
    """The utterance being spoken (refreshed while it streams), else the last one. Everything here lives
    in the fragment, so its refreshes never touch the rest of the page."""
    run: SpeechRun | None = st.session_state.get("voice_run")
    if run is not None and run.done:
        st.rerun(scope="app")  # the full run files the take, re-enables Speak and stops the refresh
    if run is not None:
        stats = run.stats()
        st.markdown("**Now speaking** — " + {"idle": "connecting…", "streaming": "streaming…", "done": "done",
                                              "failed": "stopped by an error", "cancelled": "stopped"}[stats.state])
        _figures(stats)
        pcm = run.pcm()
        if pcm:
            st.image(waveform_png(pcm), width="stretch")
    elif history:
        _take_view(history[0])


utterance_panel()

if len(history) > (0 if run is not None else 1):
    st.divider()
    st.subheader("This session")
    for i, take in enumerate(history if run is not None else history[1:]):
        u = take.utterance
        with st.container(border=True):
            st.text(u.text if len(u.text) <= 400 else u.text[:400] + "…")
            ttfa = "—" if u.stats.ttfa_ms is None else f"{u.stats.ttfa_ms:.0f} ms"
            outcome = "ok" if u.ok else "error"
            st.caption(resources.plain(f"{time.strftime('%H:%M:%S', time.localtime(u.created_at))} · voice {u.voice or 'default'} · "
                                       f"{u.language or 'Auto'} · {u.stats.audio_seconds:.1f} s · first audio {ttfa} · "
                                       f"{u.stats.chunks} chunks · {outcome}"))
            if take.picture:
                st.download_button("Download WAV", take.wav, file_name=f"speech-{i + 1}.wav", mime="audio/wav",
                                   key=f"voice_download_{u.created_at}", on_click="ignore")
