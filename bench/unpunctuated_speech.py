"""Unpunctuated text (issue #31, M2): 200 words with no punctuation vs the same words with a full stop every
twelve, spoken by the offline engine over its WebSocket, interleaved in one run.

    .venv/bin/python bench/unpunctuated_speech.py [--runs 3] [--url http://127.0.0.1:8091]

Before the unit caps (protocol/limits.py: 20 words, 200 characters a unit) the unpunctuated text was one unit —
one model run over all 200 words before any audio (measured then: ~15 s to first audio, 2 GB kept by the engine).
With the caps it is cut at word boundaries and starts like punctuated text. Printed: medians of first audio and of
time to last audio per text, and the ratio unpunctuated / punctuated (about 1 is the goal). Always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from offline.launch import start_engine  # noqa: E402
from offline_voice import load_average, websocket_run  # noqa: E402

WORDS = ("the studio speaks this long line of text that never stops for breath because nobody typed a full stop "
         "anywhere in it so the engine has to find its own places to pause and carry on").split()
UNPUNCTUATED = " ".join(WORDS[i % len(WORDS)] for i in range(200))
PUNCTUATED = " ".join(w + ("." if i % 12 == 11 else "") for i, w in enumerate(UNPUNCTUATED.split()))


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="measured runs per text (after one warm-up)")
    parser.add_argument("--url", help="benchmark a running engine instead of starting one")
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 20:
        parser.error("--runs must be between 1 and 20")
    load_before = load_average()
    engine = None if args.url else start_engine()
    url = args.url or engine.url
    try:
        await websocket_run(url, "Warming up.")
        runs: dict[str, list[tuple[float, float, float]]] = {"unpunctuated": [], "punctuated": []}
        for _ in range(args.runs):  # interleaved: drifts in the machine's load hit both texts alike
            runs["unpunctuated"].append(await websocket_run(url, UNPUNCTUATED))
            runs["punctuated"].append(await websocket_run(url, PUNCTUATED))
    finally:
        if engine is not None:
            engine.stop()
    print(f"200 words, {args.runs} runs each, interleaved; load average before {load_before}, after {load_average()}")
    medians = {}
    for name, rows in runs.items():
        first, last, audio = (statistics.median(r[i] for r in rows) for i in range(3))
        medians[name] = (first, last)
        print(f"{name:>13}: first audio {first * 1000:7.0f} ms   last audio {last:6.2f} s   audio {audio:6.2f} s")
    (uf, ul), (pf, pl) = medians["unpunctuated"], medians["punctuated"]
    print(f"ratio unpunctuated / punctuated: first audio {uf / pf:.2f}x, last audio {ul / pl:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
