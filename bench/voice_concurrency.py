"""8 speech sessions at once through the services layer: p95 time to first audio vs one session alone.

Each session is what the voice page starts: a `SpeechRun` on the process's background loop, its own
connection, the same text. Rounds alternate between one session alone and N sessions started together,
so both see the same machine state. Reported: p50/p95 of `stats.ttfa_ms` in each mode, their ratio, and
how long the whole batch took against one utterance. For attribution, the same N-at-once batch is also
run with minimal raw `websockets` clients (bench/voice_ttfa.py's): if their p95 matches the studio's, the
time goes to the speech server (on the offline engine: one Piper voice on 2 cores), not to the studio.

    python bench/voice_concurrency.py [--backend offline|omni] [--url URL] [--sessions 8] [--rounds 5]

Target: p95 concurrent / p95 single ≤ 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TEXT = ("Eight people press Speak at the same moment. Each of them should hear the first words quickly, "
        "while the rest of the sentence is still being made.")
TARGET = 2.0


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["offline", "omni"], default="offline")
    ap.add_argument("--url")
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from services.runtime import background_loop
    from services.speech import SpeechRun, omni_client, speech_config

    engine = None
    if args.backend == "omni":
        if not args.url:
            sys.exit("--backend omni needs --url")
        url = args.url.rstrip("/")
    else:
        from offline.launch import start_engine

        engine = start_engine()
        url = engine.url
    loop = background_loop()
    client = omni_client(url)
    config = speech_config(voice=client.voices()[0])

    from bench.voice_ttfa import raw_ttfa
    from protocol.common import dumps

    ws_url = "ws://" + url.removeprefix("http://") + "/v1/audio/speech/stream"
    wire = dumps(config)

    def raw_batch(n: int) -> list[float]:
        async def all_at_once() -> list[float]:
            import asyncio

            return list(await asyncio.gather(*(raw_ttfa(ws_url, wire, TEXT) for _ in range(n))))

        return loop.run(all_at_once(), timeout=120)

    def batch(n: int) -> tuple[list[float], float]:
        t0 = time.perf_counter()
        runs = [SpeechRun(loop, client, config, TEXT) for _ in range(n)]
        results = [r.result(timeout=120) for r in runs]
        wall = time.perf_counter() - t0
        for u in results:
            u.raise_for_error()
        return [u.stats.ttfa_ms for u in results], wall

    try:
        batch(1)
        batch(args.sessions)  # warm-up
        single, many, raw_many, single_wall, many_wall = [], [], [], [], []
        for _ in range(args.rounds):
            for _ in range(3):
                t, w = batch(1)
                single += t
                single_wall.append(w)
            t, w = batch(args.sessions)
            many += t
            many_wall.append(w)
            raw_many += raw_batch(args.sessions)
    finally:
        if engine is not None:
            engine.stop()

    res = {
        "backend": args.backend, "target": url, "sessions": args.sessions, "rounds": args.rounds,
        "single_p50_ms": round(statistics.median(single), 1), "single_p95_ms": round(p95(single), 1),
        "concurrent_p50_ms": round(statistics.median(many), 1), "concurrent_p95_ms": round(p95(many), 1),
        "p95_ratio": round(p95(many) / p95(single), 3),
        "raw_concurrent_p50_ms": round(statistics.median(raw_many), 1), "raw_concurrent_p95_ms": round(p95(raw_many), 1),
        "single_utterance_wall_s": round(statistics.median(single_wall), 3),
        "batch_wall_s": round(statistics.median(many_wall), 3),
    }
    if args.json:
        print(json.dumps(res))
        return
    print(f"voice concurrency: {args.sessions} sessions at once vs one alone, {args.rounds} rounds, {args.backend} at {url}")
    print(f"  single      ttfa p50 {res['single_p50_ms']:7.1f} ms   p95 {res['single_p95_ms']:7.1f} ms   "
          f"(whole utterance {res['single_utterance_wall_s']:.2f} s)")
    print(f"  {args.sessions} at once   ttfa p50 {res['concurrent_p50_ms']:7.1f} ms   p95 {res['concurrent_p95_ms']:7.1f} ms   "
          f"(all {args.sessions} utterances {res['batch_wall_s']:.2f} s)")
    print(f"  {args.sessions} raw websockets clients at once: ttfa p50 {res['raw_concurrent_p50_ms']:7.1f} ms   "
          f"p95 {res['raw_concurrent_p95_ms']:7.1f} ms   (same server, no studio code)")
    print(f"  p95 ratio {res['p95_ratio']:.2f} (target ≤ {TARGET}) → {'OK' if res['p95_ratio'] <= TARGET else 'MISSED'}")


if __name__ == "__main__":
    main()
