"""8 speech sessions at once through the services layer: p95 time to first audio vs one session alone.

Each studio session is what the voice page starts: a `SpeechRun` on the process's background loop, its
own connection, the same text. Rounds alternate between one session alone and N sessions started
together, so both see the same machine state; each round also runs minimal raw `websockets` clients
(bench/voice_ttfa.py's), one alone and N at once, which see the speech server with no studio code.
Reported: p50/p95 of first audio in each mode and their ratios, and how long the whole batch took
against one utterance.

Continuity: every raw client plays what it receives at real time from the moment its first audio
arrives. Its buffer runs dry when a chunk arrives later than the audio before it has played out; the
bench prints, per session, the smallest buffer left at any chunk's arrival (negative = a gap was heard)
and how many sessions ran dry.

    python bench/voice_concurrency.py [--backend offline|server] [--url URL] [--sessions 8] [--rounds 5]

Target: raw p95 with N at once / raw p95 alone ≤ 2, and no session's playback runs dry.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.kinds import backend_name  # noqa: E402  (--backend omni, the server's former name, is taken too)

TEXT = ("Eight people press Speak at the same moment. Each of them should hear the first words quickly, "
        "while the rest of the sentence is still being made.")
TARGET = 2.0


PCM_BYTES_PER_S = 24_000 * 2  # the stream's s16le mono at 24 kHz


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


async def raw_session(ws_url: str, config: str, text: str) -> dict:
    """One raw client: config, text, input.done; first audio (ms from sending the text) and the arrival time
    and size of every audio frame, to play back at real time."""
    import asyncio

    import websockets

    async with websockets.connect(ws_url, compression=None, max_size=None) as ws:
        await ws.send(config)
        t0 = time.perf_counter()
        await ws.send(json.dumps({"type": "input.text", "text": text}))
        await ws.send(json.dumps({"type": "input.done"}))
        arrivals: list[tuple[float, int]] = []
        while True:
            msg = await asyncio.wait_for(ws.recv(), 60)
            if isinstance(msg, bytes):
                arrivals.append((time.perf_counter(), len(msg)))
            elif json.loads(msg).get("type") == "session.done":
                break
    return {"ttfa_ms": (arrivals[0][0] - t0) * 1000.0, **playback(arrivals)}


def playback(arrivals: list[tuple[float, int]]) -> dict:
    """Real-time playback from the first frame's arrival: the least audio left buffered when a frame arrives
    (ms; below zero the player had nothing to play for that long) and the audio's length."""
    start = arrivals[0][0]
    received = 0
    least = float("inf")
    for t, size in arrivals:
        if received:
            least = min(least, (received / PCM_BYTES_PER_S - (t - start)) * 1000.0)
        received += size
    return {"min_buffer_ms": least if least != float("inf") else 0.0, "audio_s": received / PCM_BYTES_PER_S,
            "dry": least < 0}


def _figures(args: argparse.Namespace, url: str, single: list[float], many: list[float], single_wall: list[float],
             many_wall: list[float], raw_single: list[dict], raw_rounds: list[list[dict]]) -> dict:
    """The measured times as the figures --json prints (and the report below reads)."""
    raw_many = [r["ttfa_ms"] for batch_ in raw_rounds for r in batch_]
    raw_alone = [r["ttfa_ms"] for r in raw_single]
    sessions = [r for batch_ in raw_rounds for r in batch_]

    return {
        "backend": args.backend, "target": url, "sessions": args.sessions, "rounds": args.rounds,
        "single_p50_ms": round(statistics.median(single), 1), "single_p95_ms": round(p95(single), 1),
        "concurrent_p50_ms": round(statistics.median(many), 1), "concurrent_p95_ms": round(p95(many), 1),
        "p95_ratio": round(p95(many) / p95(single), 3),
        "raw_single_p50_ms": round(statistics.median(raw_alone), 1), "raw_single_p95_ms": round(p95(raw_alone), 1),
        "raw_concurrent_p50_ms": round(statistics.median(raw_many), 1), "raw_concurrent_p95_ms": round(p95(raw_many), 1),
        "raw_p95_ratio": round(p95(raw_many) / p95(raw_alone), 3),
        "single_utterance_wall_s": round(statistics.median(single_wall), 3),
        "batch_wall_s": round(statistics.median(many_wall), 3),
        "sessions_dry": sum(r["dry"] for r in sessions), "sessions_checked": len(sessions),
        "min_buffer_ms": round(min(r["min_buffer_ms"] for r in sessions), 1),
        "raw_rounds": [[{"ttfa_ms": round(r["ttfa_ms"], 1), "min_buffer_ms": round(r["min_buffer_ms"], 1),
                         "audio_s": round(r["audio_s"], 3), "dry": r["dry"]} for r in batch_] for batch_ in raw_rounds],
    }


def _report(res: dict, args: argparse.Namespace, url: str) -> None:
    """The figures for a reader, with the verdict against TARGET and dry playback."""
    print(f"voice concurrency: {args.sessions} sessions at once vs one alone, {args.rounds} rounds, {args.backend} at {url}")
    print(f"  single      ttfa p50 {res['single_p50_ms']:7.1f} ms   p95 {res['single_p95_ms']:7.1f} ms   "
          f"(whole utterance {res['single_utterance_wall_s']:.2f} s)")
    print(f"  {args.sessions} at once   ttfa p50 {res['concurrent_p50_ms']:7.1f} ms   p95 {res['concurrent_p95_ms']:7.1f} ms   "
          f"(all {args.sessions} utterances {res['batch_wall_s']:.2f} s)")
    print(f"  raw websockets client alone: ttfa p50 {res['raw_single_p50_ms']:7.1f} ms   p95 {res['raw_single_p95_ms']:7.1f} ms")
    print(f"  {args.sessions} raw websockets clients at once: ttfa p50 {res['raw_concurrent_p50_ms']:7.1f} ms   "
          f"p95 {res['raw_concurrent_p95_ms']:7.1f} ms   (same server, no studio code)")
    print("  playback of each raw session at real time from its first audio (ttfa ms / least buffered ms):")
    for i, batch_ in enumerate(res["raw_rounds"]):
        cells = "  ".join(f"{r['ttfa_ms']:5.0f}/{r['min_buffer_ms']:+5.0f}{' DRY' if r['dry'] else ''}" for r in batch_)
        print(f"    round {i + 1}: {cells}")
    dry_ok = res["sessions_dry"] == 0
    print(f"  sessions whose playback ran dry: {res['sessions_dry']} of {res['sessions_checked']} "
          f"(least buffer {res['min_buffer_ms']:+.0f} ms) → {'OK' if dry_ok else 'MISSED'}")
    print(f"  studio p95 ratio {res['p95_ratio']:.2f}; raw p95 ratio {res['raw_p95_ratio']:.2f} (target ≤ {TARGET}) → "
          f"{'OK' if res['raw_p95_ratio'] <= TARGET and dry_ok else 'MISSED'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", type=backend_name, choices=["offline", "server"], default="offline")
    ap.add_argument("--url")
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from services.runtime import background_loop
    from services.speech import SpeechRun, omni_client, speech_config

    engine = None
    if args.backend == "server":
        if not args.url:
            sys.exit("--backend server needs --url")
        url = args.url.rstrip("/")
    else:
        from offline.launch import start_engine

        engine = start_engine()
        url = engine.url
    loop = background_loop()
    client = omni_client(url)
    config = speech_config(voice=client.voices()[0])

    from protocol.common import dumps

    ws_url = "ws://" + url.removeprefix("http://") + "/v1/audio/speech/stream"
    wire = dumps(config)

    def raw_batch(n: int) -> list[dict]:
        async def all_at_once() -> list[dict]:
            import asyncio

            return list(await asyncio.gather(*(raw_session(ws_url, wire, TEXT) for _ in range(n))))

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
        raw_batch(args.sessions)
        single, many, single_wall, many_wall = [], [], [], []
        raw_single: list[dict] = []
        raw_rounds: list[list[dict]] = []
        for _ in range(args.rounds):
            for _ in range(3):
                t, w = batch(1)
                single += t
                single_wall.append(w)
                raw_single += raw_batch(1)
            t, w = batch(args.sessions)
            many += t
            many_wall.append(w)
            raw_rounds.append(raw_batch(args.sessions))
    finally:
        if engine is not None:
            engine.stop()
    res = _figures(args, url, single, many, single_wall, many_wall, raw_single, raw_rounds)
    if args.json:
        print(json.dumps(res))
        return
    _report(res, args, url)


if __name__ == "__main__":
    main()
