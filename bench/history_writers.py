"""Many writers on one history database: time per write with 8 writer processes at once vs 1 alone, one run.

    .venv/bin/python bench/history_writers.py [--writers 8] [--writes 150] [--rounds 2]

The team studio has several people (and so several sessions, background runners and command-line tools)
writing to one SQLite file. Each writer is its own process (spawn), opens the history as its own signed-in
creator, waits for a common start, then makes `--writes` writes, alternating a job row (`history.jobs.create`) and
a rating of a shared evaluation (`EvalStore.add_ratings`): each one BEGIN IMMEDIATE transaction through the
history's one writer path (WAL, busy_timeout). Figures: the median time per write a writer sees, alone and with
the others at once (rounds alternate 1 and N, ABAB, so drift hits both alike), the ratio, the total writes per
second, and how many writes failed (a "database is locked" would count here). Every record is counted
afterwards. Always exits 0: the figures are the result.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.access import LOCAL, Principal  # noqa: E402
from services.eval.spec import parse_spec  # noqa: E402
from services.eval.store import EvalStore  # noqa: E402
from services.history import History  # noqa: E402

SPEC = {"name": "bench", "modality": "voice", "prompts": ["one"], "repeats": 1,
        "variants": [{"label": "a"}, {"label": "b"}]}


def writer(data_dir: str, who: str, eval_id: str, pair: tuple[str, str], writes: int, start_at: float,
           results) -> None:
    """One writer process: open as `who`, wait for the common start, write, report (times, failures)."""
    actor = Principal(id=who, name=who, role="creator", signed_in=True)
    history = History(data_dir, actor=actor)
    store = EvalStore(history)
    times, failed = [], 0
    time.sleep(max(0.0, start_at - time.time()))
    began = time.time()
    for i in range(writes):
        t0 = time.perf_counter()
        try:
            if i % 2:
                store.add_ratings(eval_id, [(pair[0], pair[1], "a", who)])
            else:
                history.jobs.create("image", f"{who} {i}", {"i": i}, target="bench")
        except Exception:  # noqa: BLE001 — counted, never fatal: the count is the figure
            failed += 1
        times.append(time.perf_counter() - t0)
    history.close()
    results.put((who, times, failed, began, time.time()))


def round_of(n: int, data_dir: str, eval_id: str, pair: tuple[str, str], writes: int, tag: str) -> dict:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    start_at = time.time() + 3.0  # every process imported and opened before the first write
    procs = [ctx.Process(target=writer, args=(data_dir, f"{tag}-{k}@bench", eval_id, pair, writes, start_at, results))
             for k in range(n)]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
    times = [t for _, ts, *_ in got for t in ts]
    wall = max(g[4] for g in got) - min(g[3] for g in got)  # first write to last, over every writer
    return {"median_ms": statistics.median(times) * 1000, "mean_ms": statistics.fmean(times) * 1000,
            "p95_ms": sorted(times)[int(0.95 * (len(times) - 1))] * 1000,
            "writes": len(times), "failed": sum(g[2] for g in got), "per_s": len(times) / wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--writes", type=int, default=400, help="writes per writer per round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (1 alone, N at once)")
    args = ap.parse_args()
    writers, writes, rounds = max(2, min(args.writers, 32)), max(2, min(args.writes, 2000)), max(1, min(args.rounds, 5))

    with tempfile.TemporaryDirectory() as tmp:
        history = History(tmp, actor=LOCAL)
        store = EvalStore(history)
        ev = store.create(parse_spec(SPEC))
        store.set_shared(ev.id, True)
        a, b = store.items(ev.id)[:2]
        alone, together = [], []
        for r in range(rounds):
            alone.append(round_of(1, tmp, ev.id, (a.id, b.id), writes, f"r{r}-alone"))
            together.append(round_of(writers, tmp, ev.id, (a.id, b.id), writes, f"r{r}-many"))
        expected = rounds * (1 + writers) * writes
        recorded = len(History(tmp).jobs.list(limit=None)) + len(store.ratings(ev.id))

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    for label, rows in (("1 writer alone", alone), (f"{writers} writer processes at once", together)):
        print(f"time per write, {label}: {med(rows, 'median_ms'):.2f} ms median, {med(rows, 'mean_ms'):.2f} ms mean, "
              f"p95 {med(rows, 'p95_ms'):.2f} ms; {med(rows, 'per_s'):.0f} writes/s in all")
    print(f"ratio {writers} at once / alone, per write: {med(together, 'median_ms') / med(alone, 'median_ms'):.2f}x "
          f"median, {med(together, 'mean_ms') / med(alone, 'mean_ms'):.2f}x mean; writes/s in all "
          f"{med(together, 'per_s') / med(alone, 'per_s'):.2f}x ({rounds} rounds of {writes} writes per writer, "
          "job rows and ratings alternating)")
    failed = sum(r["failed"] for r in alone + together)
    print(f"failed writes: {failed}; records afterwards: {recorded} of {expected}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
