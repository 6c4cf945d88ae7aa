"""The image family's smoke check: a 4-step image; passes with a decodable PNG; saves `smoke-image.png` (the
video check is conditioned on it)."""

from __future__ import annotations

import io
from typing import Any

from services.smoke import SMOKE_STEPS, SmokeCheck, SmokeContext

IMAGE_FILE = "smoke-image.png"
IMAGE_PROMPT = "a red lighthouse on a rocky coast at dawn, smoke test"


def smoke_image(backend: Any, ctx: SmokeContext) -> SmokeCheck:
    """A 4-step 512×512 image; passes with a decodable PNG."""
    from PIL import Image

    from services.images import ImageRequest

    result = backend.client("image").generate(ImageRequest(IMAGE_PROMPT, size="512x512", steps=SMOKE_STEPS, seed=7,
                                                  output_format="png"))
    data = result.image
    try:
        with Image.open(io.BytesIO(data)) as im:
            fmt, size = im.format, im.size
            im.load()
    except Exception as exc:  # Pillow raises many types for bad data
        return SmokeCheck("image", False, f"the image endpoint returned bytes that are not an image ({exc})")
    if fmt != "PNG":
        return SmokeCheck("image", False, f"asked for a PNG, got {fmt}")
    path = ctx.out_dir / IMAGE_FILE
    path.write_bytes(data)
    figures = {"width": size[0], "height": size[1], **result.timings(), "preview": result.preview}
    return SmokeCheck("image", True, f"{size[0]}x{size[1]} PNG, {len(data)} bytes; saved {path.name}", path, len(data),
                      figures=figures)
