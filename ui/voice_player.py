"""The voice page's WebRTC player: a receive-only audio stream fed by the studio's PCM source track, and the ear
that measures, in the browser, when the first sound of an utterance is actually played."""

from __future__ import annotations

from typing import Any

import streamlit as st

from protocol.limits import PCM_SAMPLE_RATE
from services.ice import bind_to_loopback, is_loopback_host
from services.playback import Playback
from ui.webrtc_runs import drawn_last_run

PLAYER_KEY = "voice-player"
SOURCE_KEY = "voice-pcm"
CONNECT_LABEL = "▶ Connect player"
EAR_KEY = "voice-ear"
EAR_TIMEOUT_S = 60  # longer than any first audio; then the ear stops listening for that click
EAR_THRESHOLD = 0.002  # RMS of the player's output (full scale 1.0), ≈ -54 dBFS: the track pads with zeros


def voice_player(playback: Playback, ice_servers: list[dict[str, Any]], *, connect: bool = False) -> bool:
    """Draw the player and route `playback` to its track; True while the browser is connected.

    The PCM source belongs to this browser session (streamlit-webrtc caches it by key and replaces it
    after a disconnect), so it is attached to `playback` on every run. The player's UDP sockets bind where
    `ice_scope` says. `connect` starts the player as its own START button would (Speak asks for it: the
    click is the user gesture browsers want before they play sound) — only when it is not connected yet: a
    connected player's component arguments changing under it once dropped its connection; on other runs the
    buttons rule.
    """
    ice_scope(st.get_option("server.address"), ice_servers)
    from streamlit_webrtc import (
        WebRtcMode,
        create_pcm_audio_source_track,
        webrtc_streamer,
    )

    source = create_pcm_audio_source_track(key=SOURCE_KEY, sample_rate=PCM_SAMPLE_RATE)
    playback.attach(source)
    drawn_last_run(PLAYER_KEY)  # a late-reported rerun must not drop it (ui/webrtc_runs.py)
    ctx = webrtc_streamer(
        key=PLAYER_KEY,
        mode=WebRtcMode.RECVONLY,
        media_stream_constraints={"video": False, "audio": True},
        source_audio_track=source.track,
        # An explicit list, even empty: otherwise streamlit-webrtc injects a public STUN server.
        rtc_configuration={"iceServers": ice_servers},
        audio_html_attrs={"autoPlay": True, "controls": True, "style": {"width": "100%"}},
        translations={"start": CONNECT_LABEL, "stop": "Disconnect player"},
        desired_playing_state=True if connect else None,  # None: START/STOP stay the person's
    )
    return bool(ctx.state.playing)


# Runs in the studio's page (a components.v2 component is not sandboxed). Installed once per page: a click on
# Speak starts a watch that taps the player's <audio> stream (in streamlit-webrtc's iframe, same origin) with
# an AnalyserNode and reports the time from the click to the first output above the threshold. On a stream that
# played before, it first waits for a moment of quiet, so the tail of the previous utterance (Speak clears it) is not
# taken for the new one; a stream this click connected has no tail (waiting for quiet there missed a first sound
# that began before the ear's first look, and the page showed no figure).
_EAR_JS = """
export default function (component) {
  const { setStateValue, data } = component;
  const ear = (window.__omniEar ||= { seq: 0 });
  ear.send = setStateValue;
  ear.data = data;
  if (ear.listening) return;
  ear.listening = true;
  const rms = (a) => { let s = 0; for (const v of a) s += v * v; return Math.sqrt(s / a.length); };
  const tap = (stream) => {
    if (ear.stream !== stream) {
      const analyser = ear.ctx.createAnalyser();
      analyser.fftSize = 1024;
      const source = ear.ctx.createMediaStreamSource(stream);
      source.connect(analyser);
      Object.assign(ear, { stream, source, analyser, buf: new Float32Array(analyser.fftSize) });
    }
    ear.analyser.getFloatTimeDomainData(ear.buf);
    return rms(ear.buf);
  };
  document.addEventListener("click", (ev) => {
    const button = ev.target instanceof Element ? ev.target.closest("button") : null;
    if (!button || button.innerText.trim() !== ear.data.label) return;
    const t0 = performance.now(), seq = ++ear.seq;
    ear.ctx ||= new AudioContext();  // made in the click: browsers let a user gesture start audio
    ear.ctx.resume();
    let quiet = 0;
    clearInterval(ear.timer);
    ear.timer = setInterval(() => {
      const now = performance.now();
      if (now - t0 > ear.data.timeout_ms) return clearInterval(ear.timer);
      const frame = document.querySelector('iframe[title*="webrtc"]');
      const audio = frame && frame.contentDocument && frame.contentDocument.querySelector("audio");
      const stream = audio && audio.srcObject;
      if (!stream || !stream.getAudioTracks().length) return;
      if (tap(stream) < ear.data.threshold) { quiet += 1; return; }
      // a stream that played nothing yet (this click connected the player) has no tail to wait out
      if (quiet < 3 && stream === ear.played) { quiet = 0; return; }
      clearInterval(ear.timer);
      ear.source.disconnect();  // heard: stop tapping the stream until the next click
      ear.played = stream;
      ear.stream = null;
      ear.last = { ms: Math.round(now - t0), seq };  // also readable by a benchmark (bench/voice_heard.py)
      ear.send("heard", ear.last);
    }, 10);
  }, true);
}
"""


def heard_first_audio(speak_label: str) -> dict[str, int] | None:
    """The ear (nothing visible): the latest `{"ms", "seq"}` it measured in the browser — from a click on the
    `speak_label` button to the first sound the player played (after the connection, the network and the
    browser's jitter buffer) — or None before any. `seq` counts the clicks of this page."""
    ear = _ear_component()
    result = ear(key=EAR_KEY, data={"label": speak_label, "timeout_ms": EAR_TIMEOUT_S * 1000,
                                    "threshold": EAR_THRESHOLD}, height=0, on_heard_change=lambda: None)
    heard = getattr(result, "heard", None)
    return heard if isinstance(heard, dict) and isinstance(heard.get("ms"), int | float) else None


@st.cache_resource(show_spinner=False)
def _ear_component():  # registered once per process (re-registering logs a warning)
    return st.components.v2.component("omni_voice_ear", js=_EAR_JS)


def ice_scope(server_address: str | None, ice_servers: list[dict[str, Any]]) -> bool:
    """Bind the player's ICE sockets to loopback when the studio is local-only: its web server listens on a
    loopback address and no STUN/TURN servers are configured (those are for browsers on other machines,
    which loopback cannot reach). True when bound to loopback. See services/ice.py."""
    local_only = is_loopback_host(server_address) and not ice_servers
    bind_to_loopback(local_only)
    return local_only
