"""Voice studio: type, pick a voice — a preset one with a style, one designed from a description, or a clone of a
recording (with the speaker's consent) — press Speak, and hear the speech while it is still being generated."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from services.playback import Playback
from services.speech import SpeechRun
from ui import auth, resources, voice_catalog
from ui.sidebar import sidebar
from ui.speech_runs import session_id, speech_runs
from ui.text import plain
from ui.voice_modes import PREVIEW, build_config, current_reference, describe, first_chunk_slider, mode_fields, mode_picker
from ui.voice_compare_views import init_voice_compare_state, run_voice_compare, voice_compare
from ui.voice_player import CONNECT_LABEL, heard_first_audio, voice_player
from ui.voice_views import Take, intelligibility_toggle, keep_take, kept_takes, now_speaking, take_view
from ui.workspace_views import may

HISTORY_SIZE = 5
REFRESH_S = 0.25
SAMPLE_TEXT = (
    "Welcome to Omni Studio. The voice you hear is generated while you listen, "
    "clause by clause, and streamed to your browser as it is made."
)
SPLITS = {"clause": "clauses (fastest first audio)", "sentence": "sentences", "none": "the whole text at once"}

state = st.session_state
playback: Playback = state.setdefault("voice_playback", Playback())
history: list[Take] = state.setdefault("voice_history", [])

sidebar()
st.title("Voice")
st.caption("Type some text, choose the voice and press **Speak**: the speech starts playing while the model is still "
           "generating it.")

try:
    backend = resources.backend()
    (voices, languages), task_types = voice_catalog.speech_catalog(), voice_catalog.speech_task_types()
except StudioError as exc:
    st.error(f"The speech backend is not available: {plain(exc)}")
    st.stop()


def _start_speaking() -> None:
    """Speak's callback: runs before the script, so the page below already shows the run as going. The run
    belongs to this browser session: if the session goes (the tab closes or reloads), the run is cancelled."""
    state["voice_error"], state["voice_heard_ms"] = None, None  # the ear measures this click's first sound
    # The click is the gesture a browser needs to start the player; a connected one is left alone (see voice_player).
    state["voice_connect"] = not state.get("voice_player_on", False)
    playback = state["voice_playback"]
    try:
        speech = resources.backend().client("voice")
        config = speech.check(build_config(state, current_reference(state)))  # what the model can do, first
        playback.start_utterance()  # a new utterance: drop what the previous one still had queued
        state["voice_run_label"] = describe(state)
        state["voice_run_where"] = (resources.backend().target, config)  # kept with the take
        state["voice_run"] = speech_runs().start(
            session_id(),
            speech,
            config,
            state["voice_text"],
            actor=auth.principal(),  # a viewer is refused here, before anything is sent
            on_audio=lambda c: playback.push(c.data, c.sample_rate, c.channels),  # on arrival, loop thread
        )
    except StudioError as exc:
        state["voice_error"] = str(exc)


def _stop_speaking() -> None:
    run = state.get("voice_run")
    if run is not None:
        run.cancel()
    state["voice_playback"].stop()  # silence now, not after the queued audio drains (also once generation ended)


# A run that finished since the last script run becomes the newest take, kept in the history for its person.
run: SpeechRun | None = state.setdefault("voice_run", None)
if run is not None and run.done:
    history.insert(0, keep_take(run.result(), state.get("voice_run_label"), *state.get("voice_run_where", ("?", None))))
    del history[HISTORY_SIZE:]
    state["voice_run"] = run = None
running = run is not None

left, right = st.columns([3, 2], gap="large")
with right:  # first: whether the player is connected decides whether queued speech is still playing
    st.markdown("**Player**")
    playing = voice_player(playback, resources.ice_servers(), connect=state.pop("voice_connect", False))
    state["voice_player_on"] = playing
    # Generation ends seconds before the listener hears the end: Stop stays live while the track plays it.
    draining = playing and not running and playback.queued_seconds() > 0
    state["voice_draining"] = draining
    if playing:
        st.caption("🟢 Connected: speech plays here as it arrives.")
    else:
        st.caption(f"Press **{CONNECT_LABEL}** once, or **Speak**, to hear speech live in this browser.")
        if running:
            st.info(f"Not hearing it? Press **{CONNECT_LABEL}**: the speech so far is queued and plays from "
                    "the start. The WAV is below either way.", icon="🔈")

with left:
    st.text_area("Text", value=SAMPLE_TEXT, height=150, key="voice_text", persist_state="session")
    mode = mode_picker(task_types, backend.capabilities.deploys_models, demo=resources.settings().demo is not None, note=backend.client("voice").note())
    if backend.capabilities.previews:
        st.caption(PREVIEW)
    mode_fields(mode, backend, voices, languages)
    with st.expander("Streaming options"):
        st.radio("The server speaks in units of", list(SPLITS), format_func=SPLITS.__getitem__,
                 horizontal=True, key="voice_split")
        first_chunk_slider()
    can_speak = may("generate")  # else one line why, and Speak and Compare are not offered
    b1, b2, b3 = st.columns([1, 1, 3])
    b1.button("Speak", type="primary", disabled=running or not can_speak, width="stretch", on_click=_start_speaking)
    b2.button("Stop", disabled=not (running or draining), width="stretch", on_click=_stop_speaking)
    intelligibility_toggle(b3, can_speak)
    if error := state.pop("voice_error", None):  # shown once: the next change on the page clears it
        st.error(plain(error))
    if can_speak:
        init_voice_compare_state()
        with st.expander("Compare 2–4 variants side by side", expanded=bool(state.get("vocmp_outcomes"))):
            voice_compare(voices, task_types,
                          lambda: run_voice_compare(resources.settings(), backend, state["voice_text"]),
                          model_default=not (resources.settings().demo and resources.settings().demo.voices))


@st.fragment(run_every=REFRESH_S if running or draining else None)
def utterance_panel() -> None:
    """The utterance being spoken (refreshed while it streams and while it still plays), else the last one.
    Everything here lives in the fragment, so its refreshes never touch the rest of the page."""
    # The first sound this browser played after the latest click on Speak, measured by the browser
    # (ui/voice_player). Mounted here, so its figure reruns only this fragment: a full rerun at the same moment
    # as another (the take filed) could lose the player's component value, and with it the connection.
    if (measured := heard_first_audio("Speak")) is not None and measured["seq"] != state.get("voice_heard_seq"):
        state["voice_heard_seq"], state["voice_heard_ms"] = measured["seq"], measured["ms"]
    run: SpeechRun | None = st.session_state.get("voice_run")
    if run is not None and run.done:
        st.rerun(scope="app")  # the full run files the take, re-enables Speak and stops the refresh
    if run is None and state.get("voice_draining") and playback.queued_seconds() == 0:
        st.rerun(scope="app")  # played to the end: the full run greys Stop out and stops the refresh
    heard = state.get("voice_heard_ms")
    if run is not None:
        now_speaking(run.stats(), run.pcm(), heard)
    elif history:
        take_view(history[0], heard)


utterance_panel()

kept_takes(skip=None if run is not None or not history else history[0].record_id)  # the rest, from the history
