"""The image routes: `POST /v1/images/generations` (JSON) — docs/protocols.md, "Images"."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from protocol.limits import IMAGE_GUIDANCE, IMAGE_N, IMAGE_SIZE, IMAGE_STEPS

IMAGES_PATH = "/v1/images/generations"
ImageOutputFormat = Literal["png", "jpeg", "webp"]


def parse_size(size: str, *, lo: int = int(IMAGE_SIZE.lo), hi: int = int(IMAGE_SIZE.hi)) -> tuple[int, int]:
    """`"WxH"` -> (W, H), both within [lo, hi]; a ValueError names what to fix."""
    parts = size.lower().split("x") if isinstance(size, str) else []
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"Invalid size format: {size!r}; expected 'WIDTHxHEIGHT', e.g. '1024x1024'")
    w, h = (int(p) for p in parts)
    if not (lo <= w <= hi and lo <= h <= hi):
        raise ValueError(f"Invalid size {size!r}: width and height must be between {lo} and {hi}")
    return w, h


class ImageGenerationRequest(BaseModel):
    """`POST /v1/images/generations` (JSON)."""

    model_config = ConfigDict(extra="ignore")

    prompt: str = Field(min_length=1)
    model: str | None = None
    n: int = Field(default=1, ge=IMAGE_N.lo, le=IMAGE_N.hi)
    size: str | None = None
    num_inference_steps: int | None = Field(default=None, ge=IMAGE_STEPS.lo, le=IMAGE_STEPS.hi)
    guidance_scale: float | None = Field(default=None, ge=IMAGE_GUIDANCE.lo, le=IMAGE_GUIDANCE.hi)
    negative_prompt: str | None = None
    seed: int | None = None
    output_format: ImageOutputFormat = "png"
    response_format: Literal["b64_json"] = "b64_json"

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class ImageData(BaseModel):
    b64_json: str | None = None
    url: str | None = None
    revised_prompt: str | None = None


class ImageGenerationResponse(BaseModel):
    model_config = ConfigDict(extra="allow")  # servers may add fields (the offline engine adds `preview`)

    created: int
    data: list[ImageData]
    output_format: str = "png"
    size: str | None = None


# ---------------------------------------------------------------------------------------------------------
