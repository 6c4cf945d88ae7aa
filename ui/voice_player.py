"""The voice page's WebRTC player: a receive-only audio stream fed by the studio's PCM source track."""

from __future__ import annotations

from typing import Any

import streamlit as st

from protocol.limits import PCM_SAMPLE_RATE
from services.ice import bind_to_loopback, is_loopback_host
from services.playback import Playback

PLAYER_KEY = "voice-player"
SOURCE_KEY = "voice-pcm"
CONNECT_LABEL = "▶ Connect player"


def voice_player(playback: Playback, ice_servers: list[dict[str, Any]]) -> bool:
    """Draw the player and route `playback` to its track; True while the browser is connected.

    The PCM source belongs to this browser session (streamlit-webrtc caches it by key and replaces it
    after a disconnect), so it is attached to `playback` on every run. The player's UDP sockets bind where
    `ice_scope` says.
    """
    ice_scope(st.get_option("server.address"), ice_servers)
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


def ice_scope(server_address: str | None, ice_servers: list[dict[str, Any]]) -> bool:
    """Bind the player's ICE sockets to loopback when the studio is local-only: its web server listens on a
    loopback address and no STUN/TURN servers are configured (those are for browsers on other machines,
    which loopback cannot reach). True when bound to loopback. See services/ice.py."""
    local_only = is_loopback_host(server_address) and not ice_servers
    bind_to_loopback(local_only)
    return local_only
