"""The team studio's storage against the one-machine default, side by side in one run: the history on SQLite vs on
PostgreSQL with 8 processes writing and reading at once, and a gallery page's media from a folder vs from an S3
bucket (moto's server on loopback).

    .venv/bin/python bench/history_backends.py [--clients 8] [--ops 200] [--rounds 2] [--items 24] [--size-kb 200]
        [--part both|database|media]

Part 1 — **the database.** `--clients` processes (spawn) open the same history as signed-in creators, wait for a
common start, then each makes `--ops` operations alternating a write (`history.jobs.create`: one transaction
through the history's one writer path) and a read (a gallery page's query: `jobs.list("image", limit=24)` and
`jobs.count("image")`). Rounds alternate SQLite (a file in a temp folder: WAL, synchronous=NORMAL, the studio's own
settings), PostgreSQL (Debian's server, a throwaway cluster on loopback with PostgreSQL's own durability defaults:
every commit waits for its WAL flush, which SQLite's NORMAL does not do) and PostgreSQL* (the same server, the
clients' sessions with synchronous_commit off: a commit does not wait for the flush — SQLite NORMAL's trade: a
server crash may lose the last commits, never corrupt), each in turn per round, so drift hits all alike. Figures
per backend and operation: p50 and p95 (nearest rank, over every operation of every client), operations per second
in all, failed operations; then each PostgreSQL / SQLite per write and per read.

Part 2 — **the media.** `--items` image jobs with a `--size-kb` output each are kept in a history whose media is a
folder, and in one whose media is a bucket on moto (same SQLite database kind). A gallery page load is what the
Image page does: list the 24 jobs, then read every output's bytes. Loads alternate folder and bucket; figures are
p50/p95 per page and the ratio bucket/folder, every byte checked.

What it does not say: a replica count's throughput (two studios behind a load balancer serving 20 users) —
bench/replicas.py measures that. moto answers from memory in this
process, so the bucket's figures are the client's and S3 protocol's overhead, not an AWS region's latency. Always
exits 0: the figures are the result.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.access import Principal  # noqa: E402
from services.history import History  # noqa: E402
from services.stats import percentile  # noqa: E402


def client(data_dir: str, url: str | None, who: str, ops: int, start_at: float, results) -> None:
    """One client process: open the history as `who`, wait for the common start, write and read in turn."""
    history = History(data_dir, database_url=url,
                      actor=Principal(id=who, name=who, role="creator", signed_in=True))
    times: dict[str, list[float]] = {"write": [], "read": []}
    failed = 0
    time.sleep(max(0.0, start_at - time.time()))
    began = time.time()
    for i in range(ops):
        t0 = time.perf_counter()
        try:
            if i % 2 == 0:
                history.jobs.create("image", f"{who} {i}", {"i": i}, target="bench")
                kind = "write"
            else:
                history.jobs.list("image", limit=24)
                history.jobs.count("image")
                kind = "read"
        except Exception:  # noqa: BLE001 — counted, never fatal: the count is a figure
            failed += 1
            continue
        times[kind].append((time.perf_counter() - t0) * 1000)
    history.close()
    results.put((times, failed, began, time.time()))


def db_round(clients: int, ops: int, data_dir: str, url: str | None, tag: str) -> dict:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    start_at = time.time() + 4.0  # every process imported and its history open before the first operation
    procs = [ctx.Process(target=client, args=(data_dir, url, f"{tag}-{k}@bench", ops, start_at, results))
             for k in range(clients)]
    for p in procs:
        p.start()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    wall = max(g[3] for g in got) - min(g[2] for g in got)
    return {"write": [t for g in got for t in g[0]["write"]], "read": [t for g in got for t in g[0]["read"]],
            "failed": sum(g[1] for g in got), "per_s": sum(len(g[0]["write"]) + len(g[0]["read"]) for g in got) / wall}


def part_database(clients: int, ops: int, rounds: int) -> None:
    from bench.pg_cluster import Cluster

    cluster = Cluster(durable=True)
    try:
        name = cluster.database()
        url = cluster.url(name)
        lazy_name = cluster.database()
        lazy = cluster.url(lazy_name) + "&options=-csynchronous_commit%3Doff"
        backends = {"SQLite": None, "PostgreSQL": url, "PostgreSQL*": lazy}
        runs: dict[str, list[dict]] = {name: [] for name in backends}
        kept: dict[str, int] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, where in backends.items():
                History(Path(tmp) / name, database_url=where).close()  # made and migrated before the clients start
            for r in range(rounds):
                for name, where in backends.items():
                    runs[name].append(db_round(clients, ops, str(Path(tmp) / name), where, f"r{r}-{name}"))
            for name, where in backends.items():
                kept[name] = History(Path(tmp) / name, database_url=where).jobs.count()
    finally:
        cluster.stop()
    print(f"== the database: {clients} client processes at once, {ops} operations each (writes and gallery reads "
          f"alternating), {rounds} rounds per backend, in turn; PostgreSQL* = synchronous_commit off (a commit not "
          "waiting for its WAL flush: SQLite's WAL with synchronous=NORMAL does not wait either)")
    p50: dict[tuple[str, str], float] = {}
    for backend, rows in runs.items():
        for op in ("write", "read"):
            values = [t for row in rows for t in row[op]]
            p50[backend, op] = percentile(values, 50) or 0.0
            print(f"{backend:10} {op:5}: p50 {p50[backend, op]:7.2f} ms, p95 {percentile(values, 95):7.2f} ms "
                  f"(n = {len(values)})")
        failed = sum(row["failed"] for row in rows)
        per_s = sorted(row["per_s"] for row in rows)[len(rows) // 2]
        print(f"{backend:10} {per_s:.0f} operations/s in all (median round); failed {failed}; "
              f"job rows kept {kept[backend]} of {rounds * clients * ((ops + 1) // 2)}")
    for op in ("write", "read"):
        print(f"PostgreSQL / SQLite per {op}, p50: {p50['PostgreSQL', op] / p50['SQLite', op]:.2f}x; "
              f"PostgreSQL* / SQLite {p50['PostgreSQL*', op] / p50['SQLite', op]:.2f}x")


def part_media(items: int, size_kb: int, loads: int) -> None:
    from emulator.launch import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, start_moto
    from services.media_store import FolderMediaStore
    from services.media_store.s3 import S3MediaStore

    size = size_kb * 1024
    outputs = [os.urandom(16) + bytes((i * 7 + k) % 251 for k in range(size - 16)) for i in range(items)]
    with start_moto() as endpoint:
        os.environ.update({"AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
                           "AWS_ENDPOINT_URL_S3": endpoint, "AWS_CONFIG_FILE": os.devnull,
                           "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true"})
        import boto3
        import httpx

        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="bench-gallery")
        with tempfile.TemporaryDirectory() as folder_dir, tempfile.TemporaryDirectory() as bucket_dir:
            stores = {"folder": History(folder_dir, media=FolderMediaStore(Path(folder_dir) / "media")),
                      "bucket": History(bucket_dir, media=S3MediaStore("bench-gallery", "team", region="us-east-1"))}
            for history in stores.values():
                for i, data in enumerate(outputs):
                    job = history.jobs.create("image", f"picture {i}", {}, target="bench")
                    history.jobs.succeed(job.id, {"image-0.png": data})
            pages: dict[str, list[float]] = {name: [] for name in (*stores, "bucket, URLs", "bucket, signed")}
            wrong = 0
            for _ in range(loads):
                for name, history in stores.items():
                    t0 = time.perf_counter()
                    jobs = history.jobs.list("image", limit=items)
                    got = [data for job in jobs for _, data in job.output_files()]
                    pages[name].append((time.perf_counter() - t0) * 1000)
                    wrong += sorted(got) != sorted(outputs)
                for way in ("bucket, URLs", "bucket, signed"):  # what the Image page does with a bucket
                    if way == "bucket, signed":
                        stores["bucket"].media._signed.clear()  # the first draw in a minute: every URL signed anew
                    t0 = time.perf_counter()
                    jobs = stores["bucket"].jobs.list("image", limit=items)
                    urls = [job.url(name) for job in jobs for name in job.outputs]
                    pages[way].append((time.perf_counter() - t0) * 1000)
                    wrong += sorted(httpx.get(u).content for u in urls) != sorted(outputs)  # the browser's, untimed
    print(f"== a gallery page: {items} images of {size_kb} KB, {loads} loads per way, in turn: the studio lists the jobs "
          "and reads every image (folder, bucket), or lists them and signs a URL per image for the browser (bucket, "
          "URLs: what the Image page does with a bucket; the bytes fetched once per load, outside the time)")
    for name, values in pages.items():
        print(f"{name:12}: p50 {percentile(values, 50):7.2f} ms, p95 {percentile(values, 95):7.2f} ms "
              f"per page (n = {len(values)})")
    folder = percentile(pages["folder"], 50) or 1.0
    print(f"per page, p50: bucket / folder {(percentile(pages['bucket'], 50) or 0.0) / folder:.2f}x, bucket with URLs / "
          f"folder {(percentile(pages['bucket, URLs'], 50) or 0.0) / folder:.2f}x (a redraw within a minute: the "
          f"URLs handed out again), {(percentile(pages['bucket, signed'], 50) or 0.0) / folder:.2f}x with every URL "
          f"signed anew; pages with wrong bytes: {wrong}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--ops", type=int, default=200, help="operations per client per round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per database")
    ap.add_argument("--items", type=int, default=24)
    ap.add_argument("--size-kb", type=int, default=200)
    ap.add_argument("--loads", type=int, default=20, help="gallery page loads per media store")
    ap.add_argument("--part", choices=("both", "database", "media"), default="both")
    args = ap.parse_args()
    if args.part in ("both", "database"):
        part_database(max(1, min(args.clients, 32)), max(2, min(args.ops, 5000)), max(1, min(args.rounds, 5)))
    if args.part in ("both", "media"):
            part_media(max(1, min(args.items, 100)), max(1, min(args.size_kb, 10_000)), max(2, min(args.loads, 500)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
