"""A team studio of 2 replicas against 1, side by side in one run: 20 simulated people loading the Image page's
gallery through HAProxy (cookie-less: each page load a new Streamlit session, so the balancer spreads them).

    .venv/bin/python bench/replicas.py [--users 20] [--seconds 30] [--rounds 2] [--items 24]

One PostgreSQL (Debian's server, a throwaway cluster: bench/pg_cluster.py) and one media folder hold `--items`
image jobs with a real PNG each. Replicas are `streamlit run serve.py` on loopback, the studio's own launch, each
warmed with a page load first; HAProxy (Debian's, round robin, its check the storage-aware `/_stcore/health`) is
the front. A simulated person is Streamlit's own browser protocol without a browser: a WebSocket to
`/_stcore/stream` (through the proxy), one `rerun_script` BackMsg naming the page `image`, then every ForwardMsg
until the run's `script_finished` — the studio ran the page whole (sidebar, the gallery's query, its 24 images read
and sent). `--users` of them loop for `--seconds`; rounds alternate 1 and 2 replicas (same database, same items),
so drift hits both alike. Figures per replica count: page loads per second (completed), p50/p95 seconds per load
(nearest rank, over every load), failed loads; then the throughput ratio 2 / 1.

What it says and what not: on this 2-core machine the load generator, HAProxy, PostgreSQL and the replicas share
the two cores, so the ratio says how much one more replica process buys where one process was the bottleneck (a
replica's script runs are Python under one GIL), not what a second host adds. Always exits 0: the figures are
the result.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from offline.launch import free_port, spawn, stop, wait_http_ok  # noqa: E402
from services.stats import percentile  # noqa: E402
from bench.haproxy_front import HAPROXY, haproxy  # noqa: E402

GALLERY_PAGE = 24  # images the gallery's first page shows (ui/gallery_views.PAGE_SIZE)


async def page_load(url: str, page: str = "image", timeout_s: float = 120.0) -> int:
    """One simulated person: a new session runs `page` whole; the images (st.image elements) it was sent."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    async with websockets.connect(url, subprotocols=["streamlit"], max_size=None, open_timeout=timeout_s) as ws:
        msg = BackMsg()
        msg.rerun_script.page_name = page
        msg.rerun_script.query_string = ""
        await ws.send(msg.SerializeToString())
        images = 0
        async with asyncio.timeout(timeout_s):
            async for raw in ws:
                forward = ForwardMsg()
                forward.ParseFromString(raw)
                kind = forward.WhichOneof("type")
                if kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
                    images += forward.delta.new_element.WhichOneof("type") == "imgs"
                elif kind == "script_finished":
                    if forward.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                        raise RuntimeError("the page did not compile")
                    if forward.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                        return images  # (a run that ended early for a rerun is followed by that rerun)
    raise RuntimeError("the connection closed before the page's run finished")


async def users(url: str, count: int, seconds: float, expected: int) -> tuple[list[float], int]:
    """`count` people loading the page in a loop for `seconds`: every completed load's seconds (one with at least
    `expected` images), and the failures."""
    times: list[float] = []
    failed = 0
    stop_at = time.monotonic() + seconds

    async def person() -> None:
        nonlocal failed
        while time.monotonic() < stop_at:
            t0 = time.monotonic()
            try:
                images = await page_load(url)
            except Exception:  # noqa: BLE001 — counted, the run goes on
                failed += 1
                continue
            if images < expected:
                failed += 1  # a gallery without its images is not a load
                continue
            times.append(time.monotonic() - t0)

    await asyncio.gather(*(person() for _ in range(count)))
    return times, failed


@contextmanager
def team(n: int, env: dict[str, str], folder: Path):
    """`n` replicas behind HAProxy; yields the proxy's WebSocket URL."""
    with ExitStack() as stack:
        ports = [free_port() for _ in range(n)]
        procs = []
        for i, p in enumerate(ports):
            log = stack.enter_context(open(folder / f"replica-{n}-{i}.log", "wb"))
            proc = spawn("streamlit", ["run", "serve.py", "--server.address", "127.0.0.1", "--server.port", str(p),
                                       "--server.headless", "true", "--browser.gatherUsageStats", "false",
                                       "--server.fileWatcherType", "none"], name=f"replica {i}",
                         env={**env, "OMNI_STUDIO_REPLICA": f"r{i}"}, stdout=log)
            procs.append(proc)
            stack.callback(stop, proc, 15)
        for p, proc in zip(ports, procs):
            wait_http_ok(f"http://127.0.0.1:{p}/_stcore/health", proc, timeout=120, what="a replica")
            shown = asyncio.run(page_load(f"ws://127.0.0.1:{p}/_stcore/stream"))  # warm: engine, caches, imports
            print(f"replica on {p}: the Image page sends {shown} images", file=sys.stderr)
        port = free_port()
        stack.enter_context(haproxy(port, {f"r{i}": p for i, p in enumerate(ports)}, folder, sticky=False))
        yield f"ws://127.0.0.1:{port}/_stcore/stream"


def fill(data_dir: Path, url: str, items: int) -> None:
    """`items` image jobs with a PNG each, as the Image page keeps them."""
    import io

    from PIL import Image

    from services.history import History

    history = History(data_dir, database_url=url)
    for i in range(items):
        job = history.jobs.create("image", f"bench image {i}", {"seed": i}, target="bench", status="running")
        png = io.BytesIO()
        Image.new("RGB", (512, 512), (i * 9 % 256, 80, 160)).save(png, "PNG")
        history.jobs.succeed(job.id, {"image-0.png": png.getvalue()}, timings={},
                             meta={"seed": i, "width": 512, "height": 512, "format": "png", "preview": True})
    history.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--items", type=int, default=24)
    args = ap.parse_args()
    if not Path(HAPROXY).exists():
        print(f"HAProxy is not installed (apt-get install -y haproxy): {HAPROXY}", file=sys.stderr)
        return 0
    from bench.pg_cluster import Cluster

    cluster = Cluster()
    results: dict[int, tuple[list[float], int, float]] = {1: ([], 0, 0.0), 2: ([], 0, 0.0)}
    try:
        url = cluster.url(cluster.database())
        with tempfile.TemporaryDirectory(prefix="omni-bench-replicas-") as tmp:
            folder = Path(tmp)
            fill(folder / "data", url, args.items)
            env = {**os.environ, "OMNI_STUDIO_DATABASE_URL": url, "OMNI_STUDIO_DATA_DIR": str(folder / "data"),
                   "OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_STATE_FILE": str(folder / "state.json")}
            for r in range(args.rounds):
                for n in (1, 2):
                    with team(n, env, folder) as ws:
                        times, failed = asyncio.run(users(ws, args.users, args.seconds, min(args.items, GALLERY_PAGE)))
                    before = results[n]
                    results[n] = (before[0] + times, before[1] + failed, before[2] + args.seconds)
                    print(f"round {r + 1}, {n} replica(s): {len(times)} loads, {failed} failed", file=sys.stderr)
    finally:
        cluster.stop()
    print(f"\n{args.users} simulated people loading the Image page's gallery ({args.items} images) through HAProxy, "
          f"{args.rounds} x {args.seconds:g} s per replica count:\n")
    print("| replicas | loads | loads/s | p50 s | p95 s | failed |")
    print("|---|---|---|---|---|---|")
    rate = {}
    for n, (times, failed, seconds) in results.items():
        rate[n] = len(times) / seconds if seconds else 0.0
        p50 = percentile(times, 50) if times else float("nan")
        p95 = percentile(times, 95) if times else float("nan")
        print(f"| {n} | {len(times)} | {rate[n]:.2f} | {p50:.2f} | {p95:.2f} | {failed} |")
    if rate[1]:
        print(f"\nthroughput, 2 replicas / 1: {rate[2] / rate[1]:.2f}x (goal >= 1.6x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
