"""Listen: final text after the end of audio, the studio's client against a minimal raw `websockets` client.

Both stream the same recordings to the same offline engine over `/v1/realtime` with vLLM's messages
(session.update, commit, 100 ms `input_audio_buffer.append` chunks paced at real time, the final commit), over a
fresh connection per run, in interleaved runs (ABBA order, so drift hits both alike). The figure is measured the
same way on both sides: from the last audio sent to `transcription.done` in the caller's hands (for the studio,
`Transcript.final_ms` from `OmniListen.stream`). The recordings are bench/listen_accuracy.py's 12 sentences in
the engine's own seeded voice, so the same run also gives the word error rate (services/listen/wer.py's
normalisation, pooled over all words) of both clients' stream transcripts and of the studio's file route.

    python bench/listen_latency.py [--url URL] [--runs 12] [--json]

Target: studio median / raw median ≤ 1.1. "Adds" is the median of the paired differences (each studio run minus
the raw run next to it, on the same sentence).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from listen_accuracy import SENTENCES, synthesize  # noqa: E402  (the fixed set, one definition)
from listen_accuracy import measure as file_figures  # noqa: E402

TARGET_RATIO = 1.1
CHUNK_S = 0.1
BYTES_PER_S = 32_000  # 16 kHz mono PCM16


async def raw_final_ms(ws_url: str, model: str, pcm: bytes) -> tuple[float, str]:
    """A minimal client: the session, the audio at real time, the final commit; (final ms, text)."""
    import websockets

    async with websockets.connect(ws_url, compression=None, max_size=None) as ws:
        json.loads(await ws.recv())  # session.created
        await ws.send(json.dumps({"type": "session.update", "model": model}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        done: asyncio.Future[tuple[float, str]] = asyncio.get_running_loop().create_future()

        async def read() -> None:
            while True:
                event = json.loads(await ws.recv())
                if event["type"] == "transcription.done":
                    done.set_result((time.perf_counter(), event["text"]))
                    return
                if event["type"] == "error":
                    raise RuntimeError(event)

        reader = asyncio.create_task(read())
        step = int(CHUNK_S * BYTES_PER_S)
        start = time.perf_counter()
        last = start
        for i, at in enumerate(range(0, len(pcm), step)):
            await asyncio.sleep(max(0.0, start + i * CHUNK_S - time.perf_counter()))
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "audio": base64.b64encode(pcm[at:at + step]).decode("ascii")}))
            last = time.perf_counter()
        await ws.send(json.dumps({"type": "input_audio_buffer.commit", "final": True}))
        await reader
        t, text = done.result()
        return (t - last) * 1000.0, text


async def measure(url: str, runs: int) -> dict:
    import jiwer

    from services.listen import OmniListen, load_audio, normalise

    wavs = synthesize(url)
    audios = [load_audio(w, f"sentence {i}") for i, w in enumerate(wavs)]
    listener = OmniListen(url)
    model = "mistralai/Voxtral-Mini-4B-Realtime-2602"
    ws_url = "ws://" + url.removeprefix("http://") + "/v1/realtime"
    await raw_final_ms(ws_url, model, audios[0].pcm)  # warm-up: first connections, decoders
    await listener.stream(audios[0])
    raw, studio = [], []
    raw_text, studio_text = [""] * len(audios), [""] * len(audios)
    for i in range(runs):
        k = i % len(audios)
        for which in (("raw", "studio") if i % 2 == 0 else ("studio", "raw")):
            if which == "raw":
                ms, text = await raw_final_ms(ws_url, model, audios[k].pcm)
                raw.append(ms)
                raw_text[k] = text
            else:
                t = await listener.stream(audios[k])
                studio.append(t.final_ms or 0.0)
                studio_text[k] = t.text
    seen = min(runs, len(audios))
    refs = [normalise(s) for s in SENTENCES[:seen]]
    r, s = statistics.median(raw), statistics.median(studio)
    files = await file_figures(url, wavs, stream=False)
    return {
        "target": url, "runs": runs, "sentences": seen, "words": sum(len(x.split()) for x in refs),
        "raw_final_median_ms": round(r, 1), "studio_final_median_ms": round(s, 1), "ratio": round(s / r, 3),
        "added_ms": round(statistics.median(b - a for a, b in zip(raw, studio, strict=True)), 1),
        "raw_stream_wer": round(jiwer.wer(refs, [normalise(x) for x in raw_text[:seen]]), 4),
        "studio_stream_wer": round(jiwer.wer(refs, [normalise(x) for x in studio_text[:seen]]), 4),
        "studio_file_wer": files["file_wer"], "file_rtf": files["file_rtf"], "audio_s": files["audio_s"],
        "raw_ms": [round(x, 1) for x in raw], "studio_ms": [round(x, 1) for x in studio],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="a running offline engine (default: start one)")
    p.add_argument("--runs", type=int, default=12, help="interleaved runs of each client (default 12: each sentence once)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = p.parse_args()
    engine = None
    if args.url is None:
        from offline.launch import start_engine

        engine = start_engine()
    try:
        res = asyncio.run(measure(args.url or engine.url, args.runs))  # type: ignore[union-attr]
    finally:
        if engine is not None:
            engine.stop()
    if args.json:
        print(json.dumps(res))
        return
    ok = res["ratio"] <= TARGET_RATIO
    print(f"listen final text after the last audio, {res['runs']} interleaved runs each, offline engine at {res['target']}")
    print(f"  raw websockets client  median {res['raw_final_median_ms']:7.1f} ms")
    print(f"  studio OmniListen      median {res['studio_final_median_ms']:7.1f} ms")
    print(f"  ratio {res['ratio']:.3f} (target ≤ {TARGET_RATIO}); studio adds {res['added_ms']:+.1f} ms paired median  "
          f"→ {'OK' if ok else 'MISSED'}")
    print(f"  WER on {res['sentences']} sentences ({res['words']} words, {res['audio_s']} s): stream studio "
          f"{res['studio_stream_wer']:.1%}, stream raw {res['raw_stream_wer']:.1%}, file studio "
          f"{res['studio_file_wer']:.1%} (file RTF {res['file_rtf']:.3f})")


if __name__ == "__main__":
    main()
