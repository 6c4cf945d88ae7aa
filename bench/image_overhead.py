"""Image client overhead: the studio's full path vs a raw httpx POST of the same request, same engine, one run.

    .venv/bin/python bench/image_overhead.py [--runs 15] [--size 1024x1024] [--url http://127.0.0.1:8091]

Starts the offline engine (`python -m offline`) on a free loopback port unless --url names a running
vLLM-Omni server. Each run sends the identical request (same prompt, seed, size, 4 steps) twice, in
ABBA order so drift hits both alike:
- raw: `httpx.post(json)` + `resp.json()` — the least any client must do;
- studio: `record_image(ImageClient, History, request)` — validation, the POST, base64 decode, Pillow
  verify and size/format checks, then the history (job row, PNG file written atomically, result row).
Overhead = median(studio) − median(raw); the breakdown times the decode/checks and the history writes
separately on the same bytes. Target: ≤ 50 ms at 1024×1024. Always exits 0: the figures are the result.
"""

from __future__ import annotations

import argparse
import base64
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from protocol.images import IMAGES_PATH  # noqa: E402
from services.history import History  # noqa: E402
from services.images import (  # noqa: E402
    ImageClient,
    ImageRequest,
    OmniImageTransport,
    record_image,
)

TARGET_MS = 50.0
PROMPT = "A lighthouse on a cliff at dawn, oil painting, dramatic clouds"


def _median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000.0


def _client_steps(b64: str, history: History, request: ImageRequest, url: str, runs: int) -> tuple[list[float], list[float]]:
    """`runs` timings each of what the client adds once a response carrying `b64` is in hand: decoding and
    verifying the PNG, and writing it to the history."""
    from PIL import Image

    png = base64.b64decode(b64)

    def checks() -> float:
        t0 = time.perf_counter()
        data = base64.b64decode(b64, validate=True)
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
        return time.perf_counter() - t0

    def history_write() -> float:
        t0 = time.perf_counter()
        job = history.jobs.create("image", PROMPT, request.params(), target=url, status="running")
        history.jobs.succeed(job.id, {"image-0.png": png}, timings={"total_s": 0.0}, meta={"seed": 1234})
        return time.perf_counter() - t0

    return [checks() for _ in range(runs)], [history_write() for _ in range(runs)]


def _noise_png(width: int, height: int) -> bytes:
    """An incompressible PNG of the size: random pixels (seeded, the same every run)."""
    import numpy as np
    from PIL import Image

    noisy = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (height, width, 3), dtype=np.uint8)).save(noisy, "PNG")
    return noisy.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--size", default="1024x1024")
    ap.add_argument("--url", help="a running vLLM-Omni server (default: start the offline engine)")
    args = ap.parse_args()

    engine = None
    if args.url:
        url = args.url.rstrip("/")
    else:
        from offline.launch import start_engine

        engine = start_engine()
        url = engine.url
    try:
        request = ImageRequest(PROMPT, size=args.size, steps=4, seed=1234).validated()
        body = request.wire().wire()
        client = ImageClient(OmniImageTransport(url))
        raw_http = httpx.Client(timeout=120)
        with tempfile.TemporaryDirectory(prefix="omni-bench-images-") as tmp:
            history = History(tmp)

            def raw() -> float:
                t0 = time.perf_counter()
                resp = raw_http.post(url + IMAGES_PATH, json=body)
                resp.raise_for_status()
                resp.json()
                return time.perf_counter() - t0

            def studio() -> float:
                t0 = time.perf_counter()
                record_image(client, history, request)
                return time.perf_counter() - t0

            raw(), studio()  # warm both connections and the engine
            raws, studios = [], []
            for i in range(args.runs):
                order = (raw, studio) if i % 2 == 0 else (studio, raw)
                for f in order:
                    (raws if f is raw else studios).append(f())

            # breakdown on the same bytes: what the client adds after the response is in hand
            b64 = raw_http.post(url + IMAGES_PATH, json=body).json()["data"][0]["b64_json"]
            png = base64.b64decode(b64)
            check_s, history_s = _client_steps(b64, history, request, url, args.runs)
            # The previews compress well; a diffusion model's 1024² PNG is megabytes. Time the same client
            # steps on an incompressible image of the requested size as a worst case.
            png_big = _noise_png(request.width, request.height)
            big_check_s, big_history_s = _client_steps(base64.b64encode(png_big).decode(), history, request, url,
                                                       args.runs)
        raw_http.close()
        client.close()
    finally:
        if engine is not None:
            engine.stop()

    raw_ms, studio_ms = _median_ms(raws), _median_ms(studios)
    overhead = studio_ms - raw_ms
    print(f"image overhead at {args.size}, {args.runs} interleaved runs against {url} (PNG {len(png) / 1e6:.2f} MB)")
    print(f"  raw httpx POST + json      median {raw_ms:8.1f} ms   (min {min(raws) * 1000:.1f})")
    print(f"  studio record_image()      median {studio_ms:8.1f} ms   (min {min(studios) * 1000:.1f})")
    print(f"  overhead (studio − raw)           {overhead:8.1f} ms   target ≤ {TARGET_MS:.0f} ms "
          f"→ {'OK' if overhead <= TARGET_MS else 'OVER'}")
    print(f"  of which: decode + verify  median {_median_ms(check_s):8.1f} ms; history write median "
          f"{_median_ms(history_s):.1f} ms")
    print(f"  ratio studio / raw                {studio_ms / raw_ms:8.3f}")
    print(f"  worst case, an incompressible {args.size} PNG ({len(png_big) / 1e6:.1f} MB): decode + verify median "
          f"{_median_ms(big_check_s):.1f} ms, history write median {_median_ms(big_history_s):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
