"""Hand it over as code: what the Code panel costs a page, and how the handed-over script compares with the
studio making the same item — one run, side by side.

    .venv/bin/python bench/code_handover.py [--items 24] [--runs 5]

1. The panel. A history holding `--items` kept images (each 512×512 PNG, made here without a server): one
   gallery draw reads the list and each image (what the Image page does anyway); the Code panel adds
   `services.code.generate_all` for every tile (the record and its reference files read once for the three
   forms). Interleaved (ABBA) over --runs draws; medians, and the panel's cost as a share of the draw.
2. The script. On the offline engine (`offline.launch.shared_engine`), a seeded 256×256 image made by the studio's
   own command (`python -m services image --url … --json`) and by its generated Python (`python code.py`, in a
   folder of its own, without the studio on its path), alternating (ABAB) over --runs; medians, their ratio, and
   whether the bytes were the same every time. The script is expected to be no slower: it is one HTTP call
   without the studio's checks, history and imports.

Prints figures and exits 0: the figures are the result (README, "Figures").
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402

from services.code import generate_all  # noqa: E402
from services.history import History  # noqa: E402


def _png(seed: int, size: int = 512) -> bytes:
    out = io.BytesIO()
    Image.effect_noise((size, size), 40 + seed % 50).convert("RGB").save(out, "PNG")
    return out.getvalue()


def _gallery(history: History, n: int) -> list[str]:
    ids = []
    for i in range(n):
        params = {"prompt": f"a lighthouse at dusk, take {i}", "size": "512x512", "steps": 4, "seed": i}
        job = history.jobs.create("image", params["prompt"], params, target="http://127.0.0.1:8091/v1/images/generations",
                                  status="running")
        history.jobs.succeed(job.id, {"image-0.png": _png(i)})
        ids.append(job.id)
    return ids


def _draw(history: History, n: int) -> float:
    t0 = time.perf_counter()
    for job in history.jobs.list(limit=n):
        for name in job.outputs:
            job.read(name)
    return time.perf_counter() - t0


def _panels(history: History, ids: list[str]) -> float:
    t0 = time.perf_counter()
    for job_id in ids:
        generate_all(history, job_id)
    return time.perf_counter() - t0


def panel_cost(n: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        history = History(Path(tmp) / "data")
        try:
            ids = _gallery(history, n)
            draws, panels = [], []
            for r in range(runs):  # ABBA
                order = (_draw, _panels) if r % 2 == 0 else (_panels, _draw)
                for f in order:
                    (draws if f is _draw else panels).append(f(history, n) if f is _draw else f(history, ids))
        finally:
            history.close()
    d, p = statistics.median(draws), statistics.median(panels)
    print(f"1. gallery of {n} images, {runs} draws each: reading it {d * 1000:.1f} ms, its {n} Code panels "
          f"{p * 1000:.1f} ms ({p / n * 1000:.2f} ms per item) — the panels add {p / d:.2f}× the draw's reading")


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr[-800:]}")
    return took


def script_vs_studio(runs: int) -> None:
    from offline.launch import shared_engine

    url = shared_engine().url
    with tempfile.TemporaryDirectory() as tmp:
        work, data = Path(tmp), Path(tmp) / "data"
        studio_env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": "", "PYTHONPATH": str(ROOT)}
        made = subprocess.run([sys.executable, "-m", "services", "image", "--url", url, "--prompt",
                               "a lighthouse at dusk", "--size", "256x256", "--seed", "11", "--out", "first.png",
                               "--json"], cwd=work, env=studio_env, capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            raise SystemExit(made.stderr)
        job_id = json.loads(made.stdout.strip().splitlines()[-1])["job_id"]
        folder = work / "handed-over"
        folder.mkdir()
        subprocess.run([sys.executable, "-m", "services", "code", job_id, "--out", str(folder / "code.py")],
                       cwd=work, env=studio_env, check=True, capture_output=True, timeout=120)
        plain_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OMNI_STUDIO_DATA_DIR")}
        plain_env["BASE_URL"] = url
        studio_cmd = [sys.executable, "-m", "services", "image", "--url", url, "--prompt", "a lighthouse at dusk",
                      "--size", "256x256", "--seed", "11", "--out", "again.png"]
        studio_s, script_s, same = [], [], True
        first = (work / "first.png").read_bytes()
        for _ in range(runs):  # ABAB
            studio_s.append(_run(studio_cmd, work, studio_env))
            script_s.append(_run([sys.executable, "code.py"], folder, plain_env))
            same &= (work / "again.png").read_bytes() == first == (folder / "image.png").read_bytes()
    s, c = statistics.median(studio_s), statistics.median(script_s)
    print(f"2. a seeded 256×256 image on the offline engine, {runs} runs each: the studio's CLI {s:.2f} s, the "
          f"handed-over Python {c:.2f} s — script / studio {c / s:.2f}×; the same PNG bytes every time: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=24)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print(f"bench/code_handover.py — {time.strftime('%Y-%m-%d %H:%M')}")
    panel_cost(args.items, args.runs)
    script_vs_studio(args.runs)


if __name__ == "__main__":
    main()
