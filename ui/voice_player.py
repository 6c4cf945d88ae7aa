"""The voice page's WebRTC player: a receive-only audio stream fed by the studio's PCM source track."""

from __future__ import annotations

from typing import Any

from protocol.limits import PCM_SAMPLE_RATE
from services.playback import Playback

PLAYER_KEY = "voice-player"
SOURCE_KEY = "voice-pcm"
CONNECT_LABEL = "▶ Connect player"


def voice_player(playback: Playback, ice_servers: list[dict[str, Any]]) -> bool:
    """Draw the player and route `playback` to its track; True while the browser is connected.

    The PCM source belongs to this browser session (streamlit-webrtc caches it by key and replaces it
    after a disconnect), so it is attached to `playback` on every run.
    """
    from streamlit_webrtc import (
        WebRtcMode,
        create_pcm_audio_source_track,
        webrtc_streamer,
    )

    source = create_pcm_audio_source_track(key=SOURCE_KEY, sample_rate=PCM_SAMPLE_RATE)
    playback.attach(source)
    ctx = webrtc_streamer(
        key=PLAYER_KEY,
        mode=WebRtcMode.RECVONLY,
        media_stream_constraints={"video": False, "audio": True},
        source_audio_track=source.track,
        # An explicit list, even empty: otherwise streamlit-webrtc injects a public STUN server.
        rtc_configuration={"iceServers": ice_servers},
        audio_html_attrs={"autoPlay": True, "controls": True, "style": {"width": "100%"}},
        translations={"start": CONNECT_LABEL, "stop": "Disconnect player"},
    )
    return bool(ctx.state.playing)
