"""Video retrieval overhead: client wall time minus the server's own X-Inference-Time-S, one run.

    .venv/bin/python bench/video_overhead.py [--backend offline|server|sagemaker] [--url URL] [--runs 9]

The published SageMaker run lost 2.9 s between the model finishing (8.9 s) and the CLI having the MP4
(11.8 s). This measures the same gap for the studio's VideoClient — the job path: build the multipart
body (reference fitted, JPEG data URL), submit, poll, fetch, decode-check the MP4 with PyAV — and, on a
vLLM-Omni URL (offline or server backends), side by side with a raw httpx POST of the identical body in
interleaved (ABBA) runs against the same engine. A third column runs the same job through VideoJobs,
which also records it in the history (files written, rows updated), as the pages do.

Overhead = wall − X-Inference-Time-S per run; medians are printed. The raw POST's overhead is what
the server and HTTP cost anyway (multipart parsing, decoding the reference, encoding, transfer); the
studio's extra over raw is what the client adds. Target: studio overhead ≤ 0.3 s. Always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from emulator.stack import sagemaker_stack  # noqa: E402
from infra.model import ROLE_PROFILES  # noqa: E402
from protocol.common import HEADER_INFERENCE_TIME
from protocol.limits import ASYNC_INLINE_LIMIT  # noqa: E402
from protocol.videos import VIDEO_SYNC_PATH  # noqa: E402
from services.backend import create_backend  # noqa: E402
from services.history import History  # noqa: E402
from services.kinds import backend_name  # noqa: E402
from services.settings import load_settings  # noqa: E402
from services.videos import VideoJobs, VideoRequest, encode_request  # noqa: E402

TARGET_S = 0.3
PROMPT = "The camera slowly pushes in while the waves roll onto the beach"


def _reference(size: int = 1024) -> bytes:
    """A photo-like reference: smooth colour fields plus noise (a flat picture would flatter the JPEG step)."""
    rng = np.random.default_rng(1)
    y, x = np.mgrid[0:size, 0:size]
    base = np.stack([x * 255 / size, y * 255 / size, (x + y) * 127 / size], axis=-1)
    img = np.clip(base + rng.normal(0, 18, base.shape), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(img).save(out, "PNG")
    return out.getvalue()


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", type=backend_name, choices=["offline", "server", "sagemaker"], default="offline",
                    help="omni, the server's former name, is taken as server")
    ap.add_argument("--url", help="vLLM-Omni server URL for --backend server")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--model-s", type=float, default=0.0,
                    help="sagemaker: seconds each async request spends on the emulated endpoint before the engine "
                         "runs it, standing in for GPU time (the published run: 8.9), so polling is measured at "
                         "realistic job lengths")
    args = ap.parse_args()

    with contextlib.ExitStack() as stack:
        overrides: dict = {"backend": args.backend, "server_url": args.url}
        url = None
        if args.backend == "sagemaker":  # through the local emulator, with the engine it forwards to
            sm = stack.enter_context(sagemaker_stack({"video": ROLE_PROFILES["video"].model_id}))
            sm.emulator.configure(delays={"async_s": args.model_s})
            overrides |= sm.settings
            url = sm.engine_url  # the direct path: same body, same engine, for the model's own time
        return run(args, load_settings().with_overrides(**overrides), url)


def run(args: argparse.Namespace, settings, direct_url: str | None) -> int:
    backend = create_backend(settings)
    client = backend.client("video")
    request = VideoRequest(PROMPT, reference=_reference(), seed=77).validated()  # published defaults otherwise
    body = encode_request(request)
    url = backend.target if backend.name in ("offline", "server") else direct_url
    raw_http = httpx.Client(timeout=600) if url else None

    def raw() -> tuple[float, float]:
        t0 = time.perf_counter()
        resp = raw_http.post(url + VIDEO_SYNC_PATH, content=body.body, headers={"Content-Type": body.content_type})
        resp.raise_for_status()
        _ = resp.content
        return time.perf_counter() - t0, float(resp.headers[HEADER_INFERENCE_TIME])

    def studio() -> tuple[float, float]:
        r = client.generate(request)
        return r.wall_s, r.model_s if r.model_s is not None else float("nan")

    results: dict[str, list[tuple[float, float]]] = {"raw": [], "studio": [], "jobs": []}
    try:
        with tempfile.TemporaryDirectory(prefix="omni-bench-video-") as tmp:
            jobs = VideoJobs(client, History(tmp), recover=False)

            def job() -> tuple[float, float]:
                done = jobs.wait(jobs.start(request).id)
                if done.status != "succeeded":
                    raise SystemExit(f"the video job failed: {done.error}")
                return done.timings["wall_s"], done.timings.get("model_s", float("nan"))

            paths = {"studio": studio, "jobs": job} | ({"raw": raw} if url else {})
            for f in paths.values():  # warm: connections, the engine, PyAV
                f()
            names = list(paths)
            for i in range(args.runs):
                for name in (names if i % 2 == 0 else names[::-1]):
                    results[name].append(paths[name]())
    finally:
        if raw_http is not None:
            raw_http.close()
        backend.close()

    print(f"video overhead (wall − X-Inference-Time-S), {args.runs} interleaved runs, backend {backend.name} "
          f"({backend.target}); {request.width}x{request.height}, {request.frames} frames @ {request.fps} fps, "
          f"{request.steps} steps, 1024² reference → {len(body.reference_jpeg or b'') / 1e3:.0f} kB JPEG, "
          f"body {len(body) / 1e3:.0f} kB")
    rows = [("raw httpx POST, same body", "raw"), ("studio VideoClient.generate", "studio"),
            ("studio VideoJobs + history", "jobs")]
    if backend.name == "sagemaker":
        # SageMaker's output object carries no X-Inference-Time-S: the model time is the direct runs' (same
        # body, same engine, interleaved), and the direct row is the engine itself, not SageMaker.
        model_ref = _med([m for _, m in results["raw"]]) + args.model_s
        for key in ("studio", "jobs"):
            results[key] = [(w, model_ref) for w, _ in results[key]]
        rows = [("direct to the engine (no SageMaker)", "raw"), ("SageMaker async VideoClient", "studio"),
                ("SageMaker async VideoJobs+history", "jobs")]
        print(f"  SageMaker path: body {'inline' if len(body) <= ASYNC_INLINE_LIMIT else 'through S3'}, "
              f"model time = the direct runs' median X-Inference-Time-S"
              f"{f' + {args.model_s:.1f} s emulated GPU time' if args.model_s else ''} ({model_ref:.3f} s)")
    medians = {}
    for label, key in rows:
        if not results[key]:
            continue
        walls = [w for w, _ in results[key]]
        models = [m for _, m in results[key]]
        over = [w - m for w, m in results[key]]
        medians[key] = _med(over)
        print(f"  {label:30s} wall {_med(walls):6.3f} s  model {_med(models):6.3f} s  overhead median "
              f"{_med(over):6.3f} s (min {min(over):.3f}, max {max(over):.3f})")
    worst = max(medians.get("studio", 0.0), medians.get("jobs", 0.0))
    print(f"  studio overhead target ≤ {TARGET_S:.1f} s → {'OK' if worst <= TARGET_S else 'OVER'} ({worst:.3f} s)")
    if "raw" in medians and backend.name != "sagemaker":
        print(f"  the client adds {medians['studio'] - medians['raw']:+.3f} s over the raw POST "
              f"({medians['jobs'] - medians['raw']:+.3f} s with the history)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
