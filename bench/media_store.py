"""The media store, a folder vs an S3 bucket (moto's server on loopback), side by side in one run.

    .venv/bin/python bench/media_store.py [--items 24] [--size-kb 200] [--rounds 5]

A gallery page's worth of media — `--items` files of `--size-kb` KB — is put, then got back, one file after another,
through `services.media_store`'s two stores: `FolderMediaStore` on a temporary folder (each put written to a temp
file, flushed to disk with its folder, renamed) and `S3MediaStore` on a local moto server (started in this process,
as the tests start it). Rounds alternate folder and bucket (ABAB…), so drift hits both alike. Figures: p50 and p95
per operation for each store, the ratio bucket/folder, and a page's time (all its gets one after another); for the
bucket also the presigned URL's signing, which makes no request. The bytes got are checked against the bytes put.

What it does not say: moto answers from memory in this process (its Python work shares the GIL with the client),
with no network in between, so the bucket's figures are the client's and the S3 protocol's overhead, not an AWS
region's latency (a same-region S3 GET of this size adds tens of milliseconds of its own). Always exits 0: the
figures are the result.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402

from emulator.launch import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, start_moto  # noqa: E402
from services.media_store import FolderMediaStore, MediaStore  # noqa: E402
from services.media_store.s3 import S3MediaStore  # noqa: E402

REGION = "us-east-1"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[round(p * (len(ordered) - 1))]


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000, out


def one_round(store: MediaStore, items: list[bytes], times: dict[str, list[float]], pages: list[float]) -> int:
    """Put every item of one record, then get each back; returns how many came back different."""
    record = f"bench-{uuid.uuid4().hex[:10]}"
    names = [f"item{i:02d}.png" for i in range(len(items))]
    for name, data in zip(names, items, strict=True):
        ms, _ = timed(lambda n=name, d=data: store.put(record, n, d))
        times["put"].append(ms)
    wrong, page = 0, 0.0
    for name, data in zip(names, items, strict=True):
        ms, got = timed(lambda n=name: store.get(record, n))
        times["get"].append(ms)
        page += ms
        wrong += got != data
    pages.append(page)
    if isinstance(store, S3MediaStore):
        for name in names:
            ms, _ = timed(lambda n=name: store.url(record, n, 300))
            times["url"].append(ms)
    store.delete_record(record)
    return wrong


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=24)
    ap.add_argument("--size-kb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    n, size, rounds = max(1, min(args.items, 200)), max(1, min(args.size_kb, 10_000)) * 1000, max(1, min(args.rounds, 50))
    items = [os.urandom(size) for _ in range(n)]

    os.environ.update({  # fake credentials for moto, and no profile or shared file of this machine's
        "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
        "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_EC2_METADATA_DISABLED": "true"})
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(key, None)
    with start_moto() as moto, tempfile.TemporaryDirectory() as tmp:
        bucket = f"omni-media-bench-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", endpoint_url=moto, region_name=REGION).create_bucket(Bucket=bucket)
        stores: dict[str, MediaStore] = {
            "folder": FolderMediaStore(Path(tmp) / "media"),
            "bucket": S3MediaStore(bucket, "bench", region=REGION, endpoint_url=moto),
        }
        times = {label: {"put": [], "get": [], "url": []} for label in stores}
        pages: dict[str, list[float]] = {label: [] for label in stores}
        wrong = 0
        for label, store in stores.items():  # one warm-up round each (imports, the client's first connection)
            one_round(store, items[:2], {"put": [], "get": [], "url": []}, [])
        for _ in range(rounds):
            for label, store in stores.items():
                wrong += one_round(store, items, times[label], pages[label])
        fs = os.statvfs(tmp)

    print(f"{n} items of {size // 1000} KB, {rounds} rounds (folder and bucket alternating), each item put then got "
          f"back one after another; folder: a temporary folder ({fs.f_bsize}-byte blocks), bucket: moto on 127.0.0.1 "
          "in this process")
    for op in ("put", "get"):
        f, b = times["folder"][op], times["bucket"][op]
        print(f"{op}: folder p50 {pct(f, .5):.2f} ms, p95 {pct(f, .95):.2f} ms | bucket p50 {pct(b, .5):.2f} ms, "
              f"p95 {pct(b, .95):.2f} ms | ratio bucket/folder p50 {pct(b, .5) / pct(f, .5):.1f}x, "
              f"p95 {pct(b, .95) / pct(f, .95):.1f}x")
    fp, bp = statistics.median(pages["folder"]), statistics.median(pages["bucket"])
    print(f"a page's {n} gets one after another: folder {fp:.1f} ms, bucket {bp:.1f} ms (median of {rounds}); "
          f"ratio {bp / fp:.1f}x")
    u = times["bucket"]["url"]
    print(f"bucket presigned URL (signed here, no request): p50 {pct(u, .5):.3f} ms, p95 {pct(u, .95):.3f} ms")
    print(f"items got back different from what was put: {wrong}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
