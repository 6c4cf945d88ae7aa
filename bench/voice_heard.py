"""First audio heard in a real browser vs the studio's own figure: where the time between them goes.

The studio (`app.py` on the offline engine) and Debian Chromium run in a loopback-only network namespace
(bench/browser.py; needs root, `unshare`, `ip` and /usr/bin/chromium). One run, side by side:

- **speak first**: a fresh visit, Speak pressed without connecting the player (Speak connects it);
- **connected**: the player already connected, `--runs` utterances, each after the last one has played out;
- **Stop**: a long utterance, Stop clicked while it is loud, and the time from that click until the player's
  output is quiet (RMS under the ear's threshold for three 5 ms polls in a row), `--runs` times.

For each utterance: the studio's "First audio" (text sent → first chunk received from the engine, on the
server) and the browser's "First audio heard" (click on Speak → first sound the player played, measured by the
page's ear in ui/voice_player.py), their ratio, and the parts of the difference the browser can name: the
jitter buffer's mean delay over the utterance (inbound-rtp `jitterBufferDelay / jitterBufferEmittedCount`) and
its target. The rest of the difference is the page's round trip (the click reaching Streamlit, Speak's callback,
opening the stream to the engine) and the player's track. The track's share is measured here too, in-process
and without a browser: a chunk pushed through `services.playback.Playback` into streamlit-webrtc's PCM source,
through the two MediaRelay proxies streamlit-webrtc puts in front of the sender, to aiortc's Opus encoder
(which resamples 24 → 48 kHz per 20 ms frame), as the sender takes frames. The studio's log is counted for
streamlit-webrtc's "Audio frame callback is too slow" warnings.

    python bench/voice_heard.py [--runs 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SENTENCE = "Measured in the browser, this sentence is heard a moment after the studio receives it."
LONG = ("Stop me while I am speaking. This sentence goes on for a good while, so that the button is pressed in "
        "the middle of it, and then the player should go quiet at once, not a second later.")
FIRST = "A fresh visit. Speak connects the player by itself, and this is the first thing it plays."

_JITTER = """
async () => {
  const out = {delay: 0, emitted: 0, target: 0, packets: 0};
  for (const pc of (window.__pcs || [])) {
    (await pc.getStats()).forEach((r) => {
      if (r.type === 'inbound-rtp' && r.kind === 'audio') {
        out.delay += r.jitterBufferDelay || 0; out.emitted += r.jitterBufferEmittedCount || 0;
        out.target += r.jitterBufferTargetDelay || 0; out.packets += r.packetsReceived || 0;
      }
    });
  }
  return out;
}
"""


def track_latency_ms(rounds: int = 5) -> list[float]:
    """Push → the first frame holding that audio leaves aiortc's Opus encoder, as the WebRTC sender takes it."""
    import asyncio

    import numpy as np
    from aiortc.codecs import get_encoder
    from aiortc.contrib.media import MediaRelay
    from aiortc.rtcrtpparameters import RTCRtpCodecParameters
    from streamlit_webrtc.pcm_source import PcmAudioSource

    from services.playback import Playback

    async def run() -> list[float]:
        source, playback, relay = PcmAudioSource(sample_rate=24_000), Playback(), MediaRelay()
        playback.attach(source)
        track = relay.subscribe(relay.subscribe(source.track))  # as streamlit-webrtc's RECVONLY worker does
        encoder = get_encoder(RTCRtpCodecParameters(mimeType="audio/opus", clockRate=48_000, channels=2))
        loop = asyncio.get_running_loop()
        out: list[tuple[float, bool]] = []

        async def sender() -> None:
            while True:
                frame = await track.recv()
                await loop.run_in_executor(None, encoder.encode, frame, False)
                out.append((time.perf_counter(), bool(np.abs(frame.to_ndarray()).max())))

        task = asyncio.ensure_future(sender())
        await asyncio.sleep(1.0)  # the track is running, padding silence
        tone = (np.sin(np.arange(4800) / 24_000 * 2 * np.pi * 440) * 9000).astype("<i2").tobytes()
        found = []
        for _ in range(rounds):
            n = len(out)
            t0 = time.perf_counter()
            playback.push(tone)  # 200 ms
            await asyncio.sleep(0.6)
            found.append(1000 * (next(t for t, loud in out[n:] if loud) - t0))
        task.cancel()
        source.track.stop()
        return found

    return asyncio.run(run())


def _ms(text: str) -> float | None:
    return float(text.removesuffix(" ms")) if text.endswith(" ms") else None


def _speak_and_measure(studio, player, text: str) -> dict:
    from bench.page_waits import poll

    page = studio.page
    box = page.get_by_role("textbox", name="Text")
    box.fill(text)
    box.press("Control+Enter")
    page.wait_for_timeout(300)
    j0 = player.evaluate(_JITTER)
    seq = page.evaluate("() => (window.__omniEar || {seq: 0}).seq") + 1
    page.get_by_role("button", name="Speak").click()
    last = poll(lambda: page.evaluate("() => (window.__omniEar || {}).last || null"),
                lambda v: v and v["seq"] == seq, 90)  # this click's sound was heard
    heard = page.locator('[data-testid="stMetric"]').filter(has_text="First audio heard").locator(
        '[data-testid="stMetricValue"]')
    poll(lambda: heard.inner_text() if heard.count() else "", lambda v: _ms(v) == last["ms"], 30)  # on the page
    studio_ms = _ms(page.locator('[data-testid="stMetric"]').filter(has_text="First audio").first.locator(
        '[data-testid="stMetricValue"]').inner_text())
    heard_ms = float(last["ms"])
    poll(page.get_by_role("button", name="Stop").is_disabled, bool, 120)  # played out
    j1 = player.evaluate(_JITTER)
    emitted = j1["emitted"] - j0["emitted"]
    return {"studio_ms": studio_ms, "heard_ms": heard_ms,
            "jitter_buffer_ms": 1000 * (j1["delay"] - j0["delay"]) / emitted if emitted else None,
            "jitter_target_ms": 1000 * (j1["target"] - j0["target"]) / emitted if emitted else None}


_STOP = """
async ([threshold, timeoutMs]) => {
  const frame = document.querySelector('iframe[title*="webrtc"]');
  const stream = frame.contentDocument.querySelector("audio").srcObject;
  const ctx = new AudioContext(); await ctx.resume();
  const analyser = ctx.createAnalyser(); analyser.fftSize = 256;
  ctx.createMediaStreamSource(stream).connect(analyser);
  const buf = new Float32Array(analyser.fftSize);
  const rms = () => { analyser.getFloatTimeDomainData(buf); let s = 0; for (const v of buf) s += v * v;
                      return Math.sqrt(s / buf.length); };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const begin = performance.now();
  while (rms() < threshold * 5) { if (performance.now() - begin > timeoutMs) return null; await sleep(5); }
  const stop = [...document.querySelectorAll("button")].find((b) => b.innerText.trim() === "Stop");
  const t0 = performance.now(); stop.click();
  let quiet = 0, first = null;
  while (performance.now() - t0 < timeoutMs) {
    if (rms() < threshold) { quiet += 1; first ??= performance.now(); if (quiet >= 3) break; }
    else { quiet = 0; first = null; }
    await sleep(5);
  }
  ctx.close();
  return quiet >= 3 ? first - t0 : null;
}
"""


def _stop_to_silence(studio, text: str) -> float | None:
    """ms from a click on Stop, while the player is loud, to a quiet output."""
    from bench.page_waits import poll
    from ui.voice_player import EAR_THRESHOLD

    page = studio.page
    box = page.get_by_role("textbox", name="Text")
    box.fill(text)
    box.press("Control+Enter")
    page.wait_for_timeout(300)
    page.get_by_role("button", name="Speak").click()
    page.wait_for_timeout(1500)  # into the sentence
    ms = page.evaluate(_STOP, [EAR_THRESHOLD, 20_000])
    poll(page.get_by_role("button", name="Stop").is_disabled, bool, 60)
    return ms


def scenario(studio) -> dict:
    """Runs inside the namespace (bench/browser.py)."""
    import os

    runs = int(os.environ.get("VOICE_HEARD_RUNS", "4"))
    page = studio.page
    studio.goto("voice")
    page.get_by_role("button", name="Speak").wait_for(timeout=60_000)
    player = studio.frame("webrtc")
    first = _speak_and_measure(studio, player, FIRST)
    connected = [_speak_and_measure(studio, player, SENTENCE) for _ in range(runs)]
    stops = [_stop_to_silence(studio, LONG) for _ in range(runs)]
    log = studio.log.read_text(errors="replace")
    return {"speak_first": first, "connected": connected, "stop_ms": stops,
            "too_slow_warnings": log.count("callback is too slow")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import os
    import shutil

    if os.geteuid() != 0 or not shutil.which("unshare") or not os.access("/usr/bin/chromium", os.X_OK):
        print("voice_heard: skipped (needs root for a network namespace and Debian's /usr/bin/chromium)")
        return
    from bench.browser import run_browser_scenario

    track = track_latency_ms()
    t0 = time.monotonic()
    r = run_browser_scenario("bench.voice_heard:scenario", timeout=180 + 90 * args.runs,
                             env={"VOICE_HEARD_RUNS": str(args.runs)})
    r["wall_s"] = round(time.monotonic() - t0, 1)
    r["track_ms"] = [round(x, 1) for x in track]
    if args.json:
        print(json.dumps(r))
        return
    conn = [c for c in r["connected"] if c["heard_ms"] and c["studio_ms"]]
    med = lambda k: statistics.median(c[k] for c in conn if c[k] is not None)  # noqa: E731
    stops = [s for s in r["stop_ms"] if s is not None]
    f = r["speak_first"]
    print(f"speak first (connects the player): heard {f['heard_ms']:.0f} ms vs studio {f['studio_ms']:.0f} ms "
          f"({f['heard_ms'] / f['studio_ms']:.2f}x)")
    print(f"connected, {len(conn)} utterances, medians: heard {med('heard_ms'):.0f} ms vs studio "
          f"{med('studio_ms'):.0f} ms ({med('heard_ms') / med('studio_ms'):.2f}x); heard − studio "
          f"{statistics.median(c['heard_ms'] - c['studio_ms'] for c in conn):.0f} ms (goal ≤ 150), of which the "
          f"jitter buffer {med('jitter_buffer_ms'):.0f} ms (target {med('jitter_target_ms'):.0f} ms)")
    print("per utterance (heard/studio ms, jitter buffer ms): " + ", ".join(
        f"{c['heard_ms']:.0f}/{c['studio_ms']:.0f} ({c['jitter_buffer_ms'] or 0:.0f})" for c in conn))
    print(f"Stop → silence: median {statistics.median(stops) if stops else float('nan'):.0f} ms (goal ≤ 300; n = "
          f"{len(stops)}: " + ", ".join("—" if s is None else f"{s:.0f}" for s in r["stop_ms"]) + ")")
    print(f"the track's share, in-process: push → frame out of the Opus encoder, median "
          f"{statistics.median(track):.0f} ms ({', '.join(f'{x:.0f}' for x in track)})")
    print(f"'Audio frame callback is too slow' warnings in the studio's log: {r['too_slow_warnings']}; "
          f"{r['wall_s']} s in all")

if __name__ == "__main__":
    main()
