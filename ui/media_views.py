"""Small shared views of image and video jobs: one-line summaries (plain text) and status labels."""

from __future__ import annotations

import time

from services.history import Job

STATUS_ICON = {"queued": "⏳", "running": "🔄", "succeeded": "✅", "failed": "❌", "interrupted": "⚠️"}


def when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def seconds(value: float | None) -> str:
    return "—" if value is None else (f"{value:.2f} s" if value < 60 else f"{int(value // 60)} min {value % 60:.0f} s")


def image_summary(job: Job) -> str:
    """`1024x1024 · 4 steps · seed 42 · guidance 3.5 · 0.21 s` — the parameters that made the image."""
    p = job.params
    bits = [p.get("size", "?"), f"{p.get('steps')} steps", f"seed {p.get('seed')}"]
    if p.get("guidance") is not None:
        bits.append(f"guidance {p['guidance']:g}")
    if p.get("negative_prompt"):
        bits.append(f"avoid: {p['negative_prompt']}")
    if job.timings.get("total_s") is not None:
        bits.append(seconds(job.timings["total_s"]))
    return " · ".join(str(b) for b in bits)


def video_summary(job: Job) -> str:
    """`480x320 · 17 frames @ 8 fps · 30 steps · guidance 5 · seed 7 · reference: gallery …`."""
    p = job.params
    bits = [f"{p.get('width')}x{p.get('height')}", f"{p.get('frames')} frames @ {p.get('fps')} fps",
            f"{p.get('steps')} steps" + (" (smoke test)" if job.meta.get("smoke_test") else ""),
            f"guidance {p.get('guidance'):g}" if isinstance(p.get("guidance"), int | float) else None,
            f"seed {p.get('seed')}"]
    if p.get("has_reference"):
        bits.append(f"reference: {p.get('reference_name') or 'image'}")
    return " · ".join(b for b in bits if b)


def video_timings(job: Job) -> str:
    t = job.timings
    if job.status in ("queued", "running"):
        return f"{job.status} for {seconds(job.elapsed_s())}"
    bits = [f"{job.status} after {seconds(t.get('wall_s', job.elapsed_s()))}"]
    if "model_s" in t:
        bits.append(f"model {seconds(t['model_s'])}")
    if "overhead_s" in t:
        bits.append(f"overhead {seconds(t['overhead_s'])}")
    if job.meta.get("frames"):
        bits.append(f"{job.meta['frames']} frames, {job.meta.get('duration_s', 0):.2f} s of video")
    return " · ".join(bits)


def label(job: Job) -> str:
    return f"{STATUS_ICON.get(job.status, '')} {job.status}"
