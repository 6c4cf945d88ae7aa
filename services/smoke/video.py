"""The video family's smoke check: a 4-step job — a smoke test only (too few steps to keep a composition) —
conditioned on the smoke image when there is one; passes with a decodable MP4; saves `smoke-only-video.mp4`."""

from __future__ import annotations

from typing import Any

from services.smoke import SMOKE_STEPS, VIDEO_TIMEOUT_S, SmokeCheck, SmokeContext

VIDEO_FILE = "smoke-only-video.mp4"
VIDEO_PROMPT = "waves roll against the lighthouse, smoke test"


def smoke_video(backend: Any, ctx: SmokeContext) -> SmokeCheck:
    """A smoke-only job, conditioned on the image check's PNG when it passed in this run."""
    from services.videos import VideoRequest

    reference, timeout_s = ctx.made("image"), ctx.timeout("video", VIDEO_TIMEOUT_S)
    request = VideoRequest(VIDEO_PROMPT, steps=SMOKE_STEPS, seed=7, reference=reference,
                           reference_name="smoke image" if reference else None)
    result = backend.client("video").generate(request, timeout_s=timeout_s)  # checks the MP4 (decodes every frame)
    path = ctx.out_dir / VIDEO_FILE
    path.write_bytes(result.mp4)
    info = result.info
    figures = {"frames": info.frames, "width": info.width, "height": info.height, "fps": info.fps,
               "codec": info.codec, "steps": SMOKE_STEPS, "smoke_only": True, "body_bytes": result.body_bytes,
               **result.timings()}
    return SmokeCheck("video", True, f"smoke-only ({SMOKE_STEPS} steps): {info.frames} frames {info.width}x{info.height} "
                      f"{info.codec}, {len(result.mp4)} bytes; saved {path.name}", path, len(result.mp4), figures=figures)
