"""Offline voice benchmark: time to first audio and real-time factor, WebSocket vs in-process, one run.

    .venv/bin/python bench/offline_voice.py [--runs 7] [--url http://127.0.0.1:8091]

Starts the offline engine (`python -m offline`) on a free loopback port unless --url names a running one,
then speaks a fixed three-sentence paragraph, interleaving:
- the WebSocket path: session.config (pcm, stream_audio), input.text, input.done -> first binary frame;
- the same pipeline in-process (offline.voice's VoiceEngine.stream_pcm: first-clause split, 24 kHz resampling);
- plain Piper in-process (PiperVoice.synthesize on the whole paragraph, 22 050 Hz, no clause split).
First audio counts from sending the text (or calling the function) to the first audio bytes; RTF is the
time to the last audio bytes over the audio's duration. Medians are printed side by side with the ratio
of the WebSocket path to the in-process pipeline. Always exits 0: the figures are the result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from websockets.asyncio.client import connect  # noqa: E402

from offline.voice import VoiceEngine  # noqa: E402
from offline.launch import start_engine  # noqa: E402
from protocol.limits import PCM_SAMPLE_RATE, PCM_SAMPLE_WIDTH
from protocol.speech import SPEECH_STREAM_PATH  # noqa: E402

PARAGRAPH = (
    "Hello, and welcome to Omni Studio. This voice runs entirely on your own computer, with no network "
    "and no graphics card. Type a few sentences, press play, and the audio streams back while it is still "
    "being generated."
)
TARGET_FIRST_AUDIO_MS = 100.0
TARGET_RTF = 0.1
TARGET_RATIO = 1.1
PAUSE_S = 0.3  # lets onnxruntime's spinning threads settle between runs


async def websocket_run(url: str, text: str = PARAGRAPH) -> tuple[float, float, float]:
    """(first audio s, time to last audio s, audio s) of `text` through the engine's WebSocket."""
    async with connect(url.replace("http://", "ws://", 1) + SPEECH_STREAM_PATH, max_size=None) as ws:
        await ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True}))
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "input.text", "text": text}))
        await ws.send(json.dumps({"type": "input.done"}))
        first = last = None
        audio_bytes = 0
        while True:
            frame = await asyncio.wait_for(ws.recv(), 60)
            if isinstance(frame, bytes):
                last = time.perf_counter()
                first = first or last
                audio_bytes += len(frame)
                continue
            message = json.loads(frame)
            if message["type"] == "error":
                raise SystemExit(f"engine error: {message['message']}")
            if message["type"] == "session.done":
                break
    if first is None or last is None:
        raise SystemExit("the engine sent no audio")
    return first - t0, last - t0, audio_bytes / (PCM_SAMPLE_RATE * PCM_SAMPLE_WIDTH)


async def pipeline_run(voice: VoiceEngine) -> tuple[float, float, float]:
    """The same pipeline called in-process."""
    t0 = time.perf_counter()
    first = last = None
    audio_bytes = 0
    async for chunk in voice.stream_pcm(PARAGRAPH, fast_start=True):
        last = time.perf_counter()
        first = first or last
        audio_bytes += len(chunk)
    assert first is not None and last is not None
    return first - t0, last - t0, audio_bytes / (PCM_SAMPLE_RATE * PCM_SAMPLE_WIDTH)


def piper_run(piper_voice, synthesis_config) -> tuple[float, float, float]:
    """Plain Piper: one synthesize() call on the whole paragraph."""
    t0 = time.perf_counter()
    first = last = None
    samples = 0
    for chunk in piper_voice.synthesize(PARAGRAPH, syn_config=synthesis_config):
        last = time.perf_counter()
        first = first or last
        samples += len(chunk.audio_float_array)
    assert first is not None and last is not None
    return first - t0, last - t0, samples / piper_voice.config.sample_rate


def summarize(runs: list[tuple[float, float, float]]) -> tuple[float, float, float, float, float]:
    """(median first audio ms, median RTF, median audio s, best first audio ms, best RTF)."""
    firsts = [r[0] * 1000 for r in runs]
    rtfs = [r[1] / r[2] for r in runs]
    return statistics.median(firsts), statistics.median(rtfs), statistics.median(r[2] for r in runs), min(firsts), min(rtfs)


def load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "n/a"


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="measured runs per path (after one warm-up each)")
    parser.add_argument("--url", help="benchmark a running engine instead of starting one")
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 50:
        parser.error("--runs must be between 1 and 50")

    load_before = load_average()
    engine = None
    url = args.url
    if url is None:
        engine = start_engine()  # its own subprocess on a free loopback port
        url = engine.url
    try:
        from piper.config import SynthesisConfig

        voice = VoiceEngine()  # the engine's voice, in this process
        speaker = await asyncio.get_running_loop().run_in_executor(None, voice.speaker)
        piper_voice = speaker.piper_voice  # the same loaded model, called the plain way
        plain_config = SynthesisConfig(normalize_audio=False)

        await websocket_run(url)  # warm-up: the engine may still be loading its voice
        await pipeline_run(voice)
        piper_run(piper_voice, plain_config)

        results: dict[str, list[tuple[float, float, float]]] = {"ws": [], "pipeline": [], "piper": []}
        for _ in range(args.runs):  # interleaved, so drifts in machine load hit every path alike
            results["ws"].append(await websocket_run(url))
            await asyncio.sleep(PAUSE_S)
            results["pipeline"].append(await pipeline_run(voice))
            await asyncio.sleep(PAUSE_S)
            results["piper"].append(piper_run(piper_voice, plain_config))
            await asyncio.sleep(PAUSE_S)
    finally:
        if engine is not None:
            engine.stop()

    rows = [
        ("WebSocket, engine subprocess", summarize(results["ws"])),
        ("in-process, same pipeline", summarize(results["pipeline"])),
        ("in-process, plain Piper (no clause split)", summarize(results["piper"])),
    ]
    print(f"Offline voice, {args.runs} interleaved runs per path; {os.cpu_count()} CPUs; "
          f"1-min load average {load_before} before, {load_average()} after (other work skews the figures)")
    print(f"Paragraph: {PARAGRAPH!r}")
    print()
    print(f"{'path':44} {'first audio':>12} {'RTF':>7} {'audio':>8}   {'best first':>10} {'best RTF':>8}")
    for name, (first, rtf, audio, best_first, best_rtf) in rows:
        print(f"{name:44} {first:9.1f} ms {rtf:7.3f} {audio:6.2f} s   {best_first:7.1f} ms {best_rtf:8.3f}")
    print("(first audio, RTF, audio: medians)")
    ws_first, ws_rtf = rows[0][1][:2]
    ratio = ws_first / rows[1][1][0]
    print()
    print(f"first audio, WebSocket / in-process pipeline: {ratio:.2f}x (target <= {TARGET_RATIO:.1f}x)")
    verdict = {True: "met", False: "NOT met"}
    print(f"target first audio <= {TARGET_FIRST_AUDIO_MS:.0f} ms: {verdict[ws_first <= TARGET_FIRST_AUDIO_MS]}; "
          f"RTF <= {TARGET_RTF}: {verdict[ws_rtf <= TARGET_RTF]}; ratio: {verdict[ratio <= TARGET_RATIO]}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
