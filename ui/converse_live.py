"""The Converse page's live conversation: one WebRTC connection (streamlit-webrtc, send and receive, the browser's
echo cancellation on) carries the person's microphone to the studio and the agent's voice back; the conversation
itself is services.converse.live (turn taking, the pipeline, barge-in), and this module draws it while it goes
on: what the agent is doing, the words being heard, the turns with their timelines."""

from __future__ import annotations

import logging
from typing import Any

import streamlit as st

from protocol.errors import StudioError
from protocol.limits import PCM_SAMPLE_RATE
from services.converse.setup import Setup
from services.converse.kept import KeptCall
from services.converse.live import LiveConversation
from services.playback import Playback
from services.stats import percentile
from ui import resources
from ui.call_ear import heard_voice_to_voice
from ui.converse_views import figures, transcript_view
from ui.listen_mic import Microphone, microphone
from ui.text import plain

log = logging.getLogger(__name__)
LIVE_KEY = "converse-live"
HEARD_KEY = "converse_heard_ms"  # the call ear's figures (ui/call_ear.py), one per answer
SINK_KEY = "converse-live-sink"
SOURCE_KEY = "converse-live-pcm"
START_LABEL = "🎙 Start the conversation"
STOP_LABEL = "■ End the conversation"
STATUS = {"listening": "🟢 Listening — speak when you are ready",
          "hearing": "🗣 Hearing you…",
          "answering": "💭 The agent is answering…",
          "agent": "🔊 The agent is speaking — talk over it to interrupt"}
ECHO_HINT = ("The agent stopped {n} time(s) when nobody spoke: its own voice is most likely reaching your microphone. "
             "Use headphones (or turn the loudspeaker down) so it does not interrupt itself.")


def live_call(setup: Setup, settings: dict[str, Any]) -> tuple[Microphone, bool]:
    """Draw the call's Start/End and connect it: (the session's microphone, whether the call is on). The
    conversation begins at the first frame the browser sends, held as `setup` (the page's setup_of, checked) says
    on this run — the settings as they are then — and is kept in the history turn by turn as it goes
    (services/converse/kept.py), so a studio replica that dies mid-call leaves what was said."""
    state = st.session_state
    mic: Microphone = state.setdefault("converse_microphone", Microphone())
    playback: Playback = state.setdefault("converse_playback", Playback())
    store = resources.history().conversations  # this person's, taken here: the call begins on the media thread
    kept_settings = {**settings, **setup.settings(), "inputs": ["microphone"]}

    def begin() -> LiveConversation:
        live = LiveConversation(setup.live_runner(playback), resources.loop())
        try:
            live.kept = KeptCall(store, live, settings=kept_settings)
        except StudioError as exc:  # the call goes on; it is kept when it ends, as a recorded one is
            log.warning("the call is not kept as it goes: %s", exc)
        return live

    mic.factory = begin
    from streamlit_webrtc import create_pcm_audio_source_track

    source = create_pcm_audio_source_track(key=SOURCE_KEY, sample_rate=PCM_SAMPLE_RATE)
    playback.attach(source)
    state[HEARD_KEY] = heard_voice_to_voice()  # drawn before Start: it catches the microphone as the call opens
    playing = microphone(mic, resources.ice_servers(), key=LIVE_KEY, sink_key=SINK_KEY,
                         labels=(START_LABEL, STOP_LABEL), source=source)
    return mic, playing


def in_call(mic: Microphone) -> None:
    """While the call is on (a fragment refreshes it): the status, the words being heard, the turns so far."""
    live: LiveConversation | None = mic.live
    if mic.error:
        st.error(plain(mic.error))
        return
    if live is None:
        st.caption("Connecting the microphone…")
        return
    view = live.view()
    st.markdown(f"**{STATUS[view['status']]}** · {view['seconds']:.0f} s")
    if view["partial"]:
        st.text(view["partial"])
    if view["echo_suspects"]:
        st.warning(ECHO_HINT.format(n=view["echo_suspects"]))
    if view["timeline"]["turns"]:
        figures(view["timeline"])
        heard_line(st.session_state.get(HEARD_KEY) or [])
        transcript_view(view["timeline"])


def heard_line(heard: list[int]) -> None:
    """The browser's own voice-to-voice (ui/call_ear.py): what the person heard, past the network and the jitter
    buffer — p50 by the studio's one percentile method, with n."""
    if heard:
        st.caption(f"Heard in this browser: voice-to-voice p50 {percentile(heard, 50):.0f} ms (n {len(heard)}) — "
                   "from your last sound to the agent's first, as your microphone and speaker had them")


def end_call(mic: Microphone) -> tuple[Any, int, str | None, KeptCall | None]:
    """The call ended (End, or the browser went away): (the conversation or None, suspected echoes, why not, the
    call's row kept as it went — for the page to close with the whole conversation). A call that ended without a
    conversation keeps the turns written as it went."""
    live, started, error = mic.take()
    kept: KeptCall | None = getattr(live, "kept", None)
    if error or live is None:
        _abandon(kept)
        return None, 0, error or "No sound came from the microphone: allow this page to use it and start again", None
    live.stop()
    try:
        with st.spinner("Ending: the agent's last reply…"):
            conv = live.result(timeout=120)
    except TimeoutError:
        live.cancel()
        _abandon(kept)
        return None, 0, "The conversation did not end in time (a target stopped answering): start again", None
    except StudioError as exc:  # a target's error on opening, said in one line
        _abandon(kept)
        return None, 0, str(exc), None
    return conv, live.runner.echo_suspects, None, kept


def _abandon(kept: KeptCall | None) -> None:
    if kept is None:
        return
    try:
        kept.abandon()
    except StudioError as exc:  # its row stays held by this process until it ends; said in the log
        log.warning("could not close the conversation kept as it went: %s", exc)
