"""The Converse page's ear: voice-to-voice as the person hears it, measured in the browser during a live call.

The studio's own voice-to-voice ends when the agent's first audio goes into the WebRTC track; the person hears it
later, after the network and the browser's jitter buffer. This ear listens where the person does: it taps the
microphone's stream (caught as the call's iframe asks for it: `getUserMedia` is wrapped there, same origin) and the
agent's stream (the call's <audio> element) with AnalyserNodes, every 10 ms, and for each answer reports the time
from the person's last sound (the microphone's output above the threshold, then quiet for QUIET_MS) to the
agent's first sound. A sound that starts while the person still speaks, or before they were quiet that long, is no
answer. With a loudspeaker the microphone also hears the agent; the page asks for headphones.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from ui.voice_player import EAR_THRESHOLD

CALL_EAR_KEY = "converse-call-ear"
QUIET_MS = 200  # the microphone quiet this long after speech: the person stopped

_CALL_EAR_JS = """
export default function (component) {
  const { setStateValue, data } = component;
  const ear = (window.__omniCallEar ||= { heard: [] });
  ear.send = setStateValue;
  ear.data = data;
  if (ear.running) return;
  ear.running = true;
  const rms = (an, buf) => { an.getFloatTimeDomainData(buf); let s = 0; for (const v of buf) s += v * v;
                             return Math.sqrt(s / buf.length); };
  const tap = (stream) => {
    const an = ear.ctx.createAnalyser(); an.fftSize = 512;
    ear.ctx.createMediaStreamSource(stream).connect(an);
    return { stream, an, buf: new Float32Array(an.fftSize) };
  };
  setInterval(() => {
    const frame = document.querySelector('iframe[title*="webrtc"]');
    const w = frame && frame.contentWindow;
    if (!w || !w.navigator || !w.navigator.mediaDevices) return;
    if (!w.__omniCallEar) {  // catch the microphone's stream when the call asks for it
      const devices = w.navigator.mediaDevices, ask = devices.getUserMedia.bind(devices);
      devices.getUserMedia = async (c) => { const s = await ask(c); ear.micStream = s; ear.heard = []; return s; };
      w.__omniCallEar = true;
    }
    const audio = frame.contentDocument && frame.contentDocument.querySelector("audio");
    const out = audio && audio.srcObject;
    if (!ear.micStream || !out || !out.getAudioTracks().length) return;
    ear.ctx ||= new AudioContext();
    if (ear.ctx.state === "suspended") { ear.ctx.resume(); return; }
    if (!ear.mic || ear.mic.stream !== ear.micStream) ear.mic = tap(ear.micStream);
    if (!ear.out || ear.out.stream !== out) ear.out = tap(out);
    const now = performance.now(), t = ear.data.threshold;
    const speaking = rms(ear.mic.an, ear.mic.buf) > t, playing = rms(ear.out.an, ear.out.buf) > t;
    if (speaking) { ear.lastSpoke = now; ear.waiting = false; return; }
    if (ear.lastSpoke && !ear.waiting && now - ear.lastSpoke >= ear.data.quiet_ms) {
      ear.waiting = !playing;  // the agent already talking (its last answer) is not this answer
    }
    if (ear.waiting && playing) {
      ear.waiting = false;
      ear.heard.push(Math.round(now - ear.lastSpoke));
      ear.lastSpoke = 0;
      ear.send("heard", ear.heard.slice());
    }
  }, 10);
}
"""


def heard_voice_to_voice() -> list[int]:
    """The ear (nothing visible): the voice-to-voice milliseconds the browser heard in this call, one per answer."""
    ear = _call_ear_component()
    result = ear(key=CALL_EAR_KEY, data={"threshold": EAR_THRESHOLD, "quiet_ms": QUIET_MS}, height=0,
                 on_heard_change=lambda: None)
    heard = getattr(result, "heard", None)
    return [int(x) for x in heard if isinstance(x, int | float)] if isinstance(heard, list) else []


@st.cache_resource(show_spinner=False)
def _call_ear_component() -> Any:  # registered once per process (re-registering logs a warning)
    return st.components.v2.component("omni_call_ear", js=_CALL_EAR_JS)
