"""Listen: the microphone path against the file path on the same recording — where words are lost between them.

One recording, heard three ways in one run, each scored against the same transcript (services/listen/wer.py's
stated normalisation, pooled over the words):
- **file**: the WAV uploaded (`/v1/audio/transcriptions` through the studio's client);
- **stream**: the same audio streamed at real time by the studio's client (`/v1/realtime`), no browser;
- **microphone**: Debian Chromium plays it as a fake microphone into the Listen page (getUserMedia with the page's
  constraints — echo cancellation and noise suppression on —, WebRTC to the studio, 48 kHz stereo frames resampled
  to 16 kHz), Start, then Stop once the studio has received it all, the final transcript read off the page.

The recording: read human speech — the five LibriVox lines of Debian's `pocketsphinx-testdata` (71 words) — each
followed by a 1.2 s pause, with a quiet room under all of it (`--noise-dbfs`, default −55 dBFS RMS of low-passed
noise; `--noise-dbfs off` for none), after 3 s of that room while the call connects. The offline engine's
recognizer (Whisper tiny.en) hears all three. Needs root (a network namespace), Chromium and the testdata package.

    python bench/listen_mic.py [--noise-dbfs -55] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import wave
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MIC_RATE = 48_000
LEAD_S, PAUSE_S, TAIL_S = 3.0, 1.2, 12.0
WAV_ENV, SPEECH_ENV = "OMNI_BENCH_MIC_WAV", "OMNI_BENCH_MIC_SPEECH_S"


def _fake_microphone(tmp: Path) -> list[str]:
    return ["--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={os.environ[WAV_ENV]}"]


def _captured_s(caption: str) -> float:
    """The seconds of microphone audio the studio has received, from "4.2 s of audio sent so far; …" (the Listen
    page's caption, read as tests/test_browser_listen.py reads it)."""
    match = re.match(r"([0-9.]+) s of audio sent so far", caption)
    return float(match.group(1)) if match else -1.0


def scenario(studio) -> dict:  # type: ignore[no-untyped-def]
    """Runs inside the namespace (bench/browser.py): Start, wait for the whole recording, Stop, read."""
    from playwright.sync_api import expect

    from bench.page_waits import poll

    page = studio.page
    ends_by_s = LEAD_S + float(os.environ[SPEECH_ENV])
    studio.goto("listen")
    page.get_by_role("tab", name="From the microphone").click()
    mic = studio.frame("webrtc", timeout_s=60)
    mic.get_by_role("button", name="Start listening").click()
    expect(page.get_by_text("Hearing…")).to_be_visible(timeout=60_000)
    sent = page.get_by_text("s of audio sent so far").first
    poll(lambda: _captured_s(sent.inner_text()), lambda s: s >= ends_by_s + 1.0, 300, step=0.5,
         what="the whole recording received by the studio")
    mic.get_by_role("button", name="Stop").click()
    final_heading = page.get_by_text("Transcript — microphone")
    expect(final_heading).to_be_visible(timeout=120_000)
    return {"text": page.locator('[data-testid="stText"]').first.inner_text().strip()}


scenario.chromium_args = _fake_microphone
scenario.permissions = ["microphone"]


def recording(noise_dbfs: float | None) -> tuple[str, Any, float]:
    """(transcript, 48 kHz float samples, seconds from the first line's start to the last one's end)."""
    import numpy as np
    import soxr

    from bench.listen_accuracy import read_speech
    from services.listen import load_audio

    lines = read_speech()
    if not lines:
        raise SystemExit("listen_mic: needs Debian's pocketsphinx-testdata (apt-get install pocketsphinx-testdata)")
    pause = np.zeros(int(PAUSE_S * MIC_RATE), dtype=np.float32)
    parts = []
    for _, wav in lines:
        pcm = np.frombuffer(load_audio(wav, "line").pcm, dtype="<i2").astype(np.float32)
        parts += [soxr.resample(pcm, 16_000, MIC_RATE), pause]
    speech = np.concatenate(parts[:-1])
    audio = np.concatenate([np.zeros(int(LEAD_S * MIC_RATE), np.float32), speech,
                            np.zeros(int(TAIL_S * MIC_RATE), np.float32)])
    if noise_dbfs is not None:  # a quiet room: seeded white noise low-passed (a 0.5 ms moving average), at that RMS
        white = np.random.default_rng(7).standard_normal(audio.size).astype(np.float32)
        room = np.convolve(white, np.ones(24, dtype=np.float32) / 24, mode="same")
        room *= 32768 * 10 ** (noise_dbfs / 20) / max(float(np.sqrt(np.mean(room ** 2))), 1e-9)
        audio = audio + room
    text = " ".join(t for t, _ in lines)
    return text, np.clip(audio, -32768, 32767), speech.size / MIC_RATE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise-dbfs", default="-55", help="the room's level in dBFS RMS, or 'off'")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("unshare") or not os.access("/usr/bin/chromium", os.X_OK):
        print("listen_mic: skipped (needs root for a network namespace and Debian's /usr/bin/chromium)")
        return
    import tempfile

    from bench.browser import run_browser_scenario
    from offline.launch import start_engine
    from services.listen import OmniListen, load_audio, wer_counts

    noise = None if args.noise_dbfs == "off" else float(args.noise_dbfs)
    reference, audio, speech_s = recording(noise)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "microphone.wav"
        with wave.open(str(path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(MIC_RATE)
            w.writeframes(audio.astype("<i2").tobytes())
        clip = load_audio(path.read_bytes(), "microphone.wav")
        engine = start_engine()
        try:
            listener = OmniListen(engine.url)
            file_t = asyncio.run(listener.transcribe_file(clip))
            stream_t = asyncio.run(listener.stream(clip))
        finally:
            engine.stop()
        browser = run_browser_scenario("bench.listen_mic:scenario", timeout=600, env={
            "OMNI_STUDIO_DATA_DIR": str(Path(tmp) / "data"), WAV_ENV: str(path), SPEECH_ENV: f"{speech_s:.3f}"})
    rows = {}
    for name, text in (("file", file_t.text), ("stream", stream_t.text), ("microphone", browser.get("text", ""))):
        c = wer_counts(reference, text)
        rows[name] = {"wer": round(c.errors / c.reference_words, 4), "errors": c.errors, "words": c.reference_words,
                      "text": text}
    if args.json:
        print(json.dumps({"noise_dbfs": noise, "rows": rows}))
        return
    room = "no room noise" if noise is None else f"a room at {noise:g} dBFS"
    print(f"LibriVox, {rows['file']['words']} words, {speech_s:.1f} s of speech with {PAUSE_S} s pauses, {room}:")
    for name, r in rows.items():
        print(f"  {name:10} WER {100 * r['wer']:5.1f} % ({r['errors']} errors)  {r['text'][:100]}")
    if rows["file"]["wer"]:
        print(f"microphone / file WER: {rows['microphone']['wer'] / rows['file']['wer']:.2f}x")


if __name__ == "__main__":
    main()
