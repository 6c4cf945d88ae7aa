"""The Listen page's microphone: the browser's audio sent to the studio over WebRTC (streamlit-webrtc, send-only,
echo cancellation and noise suppression on), each frame resampled to 16 kHz mono and fed live into the target's
realtime session (services.listen.LiveListening) — the partial text shows while the person speaks, Stop ends the
utterance."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import streamlit as st

from protocol.errors import StudioError
from ui.voice_player import ice_scope
from ui.webrtc_runs import drawn_last_run

MIC_KEY = "listen-mic"
SINK_KEY = "listen-mic-sink"
START_LABEL = "🎙 Start listening"
STOP_LABEL = "■ Stop"
CONSTRAINTS = {"video": False, "audio": {"echoCancellation": True, "noiseSuppression": True, "autoGainControl": False}}
NO_SOUND = ("No sound came from the microphone: allow this page to use it when the browser asks (or in the site's "
            "settings), check one is connected, and press Start again")


class Microphone:
    """This browser session's microphone: what hears it (an utterance, a conversation: anything with
    `feed(frame)`), begun at its first frame (`factory`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: Any = None
        self.factory: Callable[[], Any] | None = None
        self.error: str | None = None  # why the utterance could not begin (the target, say)
        self.started = False  # the browser sent at least one frame since the last take()

    def on_frame(self, frame: Any) -> None:
        """streamlit-webrtc's sink callback (its media thread): the first frame opens the session."""
        with self._lock:
            self.started = True
            if self._live is None and self.error is None:
                if self.factory is None:
                    return
                try:
                    self._live = self.factory()
                except StudioError as exc:  # said on the page, once, in one line
                    self.error = str(exc)
                    return
            live = self._live
        if live is not None:
            live.feed(frame)

    @property
    def live(self) -> Any:
        with self._lock:
            return self._live

    def take(self) -> tuple[Any, bool, str | None]:
        """(the utterance, whether any frame came, the error) — and the microphone is ready for the next one."""
        with self._lock:
            out = (self._live, self.started, self.error)
            self._live, self.started, self.error = None, False, None
            return out


def microphone(mic: Microphone, ice_servers: list[dict[str, Any]], *, key: str = MIC_KEY, sink_key: str = SINK_KEY,
               labels: tuple[str, str] = (START_LABEL, STOP_LABEL), source: Any = None) -> bool:
    """Draw the microphone's Start/Stop and route its frames to `mic`; True while the browser sends. With `source`
    (a streamlit-webrtc PCM source) the same connection plays it back to the browser (a conversation)."""
    ice_scope(st.get_option("server.address"), ice_servers)
    from streamlit_webrtc import WebRtcMode, create_audio_sink_track, webrtc_streamer

    sink = create_audio_sink_track(mic.on_frame, key=sink_key)
    drawn_last_run(key)  # a late-reported rerun must not drop it (ui/webrtc_runs.py)
    ctx = webrtc_streamer(
        key=key,
        mode=WebRtcMode.SENDONLY if source is None else WebRtcMode.SENDRECV,
        media_stream_constraints=CONSTRAINTS,
        sink_audio_track=sink,
        source_audio_track=None if source is None else source.track,
        audio_html_attrs=None if source is None else {"autoPlay": True, "controls": False},
        # An explicit list, even empty: otherwise streamlit-webrtc injects a public STUN server.
        rtc_configuration={"iceServers": ice_servers},
        translations={"start": labels[0], "stop": labels[1]},
    )
    return bool(ctx.state.playing)


def hearing(mic: Microphone) -> None:
    """While the person speaks: the partial text so far and the seconds heard (a fragment refreshes it)."""
    live = mic.live
    if mic.error:
        st.error(mic.error)
    elif live is None:
        st.caption("Listening: speak now…")
    elif live.idle_ended:
        st.warning(f"No sound came from the browser for {live.idle_s:.0f} s, so listening ended; what was heard "
                   f"is kept: press **{STOP_LABEL}** for the result")
    elif live.done and live.partial == "":
        st.caption(f"Heard {live.captured_s:.1f} s — press **{STOP_LABEL}** for the result")
    else:
        st.markdown("**Hearing…**")
        st.text(live.partial or "…")
        st.caption(f"{live.captured_s:.1f} s of audio sent so far; press **{STOP_LABEL}** to end the utterance")
