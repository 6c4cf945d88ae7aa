"""The image routes: `POST /v1/images/generations` (JSON) and `POST /v1/images/edits` (multipart/form-data),
both answered with `ImageGenerationResponse` — docs/protocols.md, "Images" and "Image edits"."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from protocol.limits import IMAGE_GUIDANCE, IMAGE_N, IMAGE_SIZE, IMAGE_STEPS, PROMPT_MAX_CHARS

IMAGES_PATH = "/v1/images/generations"
IMAGE_EDITS_PATH = "/v1/images/edits"
# The reference images of an edit are file parts named `image` (repeated), or `image[]`; vLLM-Omni reads
# `image` and looks at `image[]` only when there is no `image` part, so a client sends one of the two names.
EDIT_IMAGE_FIELD = "image"
EDIT_IMAGE_ARRAY_FIELD = "image[]"
# Or URLs (`url` / `url[]`, same rule): http(s) is downloaded by vLLM-Omni, data URLs are decoded.
EDIT_URL_FIELD = "url"
EDIT_URL_ARRAY_FIELD = "url[]"
EDIT_AUTO_SIZE = "auto"  # vLLM-Omni's default size of an edit: the first reference image's own size
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

    prompt: str = Field(min_length=1, max_length=PROMPT_MAX_CHARS)
    model: str | None = None
    n: int = Field(default=1, ge=IMAGE_N.lo, le=IMAGE_N.hi)
    size: str | None = None
    num_inference_steps: int | None = Field(default=None, ge=IMAGE_STEPS.lo, le=IMAGE_STEPS.hi)
    guidance_scale: float | None = Field(default=None, ge=IMAGE_GUIDANCE.lo, le=IMAGE_GUIDANCE.hi)
    negative_prompt: str | None = Field(default=None, max_length=PROMPT_MAX_CHARS)
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


class ImageEditForm(BaseModel):
    """The text fields of `POST /v1/images/edits` (multipart/form-data only; the references are file parts,
    see EDIT_IMAGE_FIELD). Values travel as strings. Names and defaults are vLLM-Omni's (api_server.py
    `edit_images`); the bounds on n, steps and guidance are the studio's limits (vLLM-Omni's edit form states
    none; its generation request uses the same ones)."""

    model_config = ConfigDict(extra="ignore")

    prompt: str = Field(min_length=1, max_length=PROMPT_MAX_CHARS)
    model: str | None = None
    n: int = Field(default=1, ge=IMAGE_N.lo, le=IMAGE_N.hi)
    size: str = EDIT_AUTO_SIZE  # "WxH", or "auto": the first reference's size
    response_format: str = "b64_json"  # the only one vLLM-Omni answers for edits
    output_format: str | None = "png"  # png | jpeg | jpg | webp; anything else: jpeg (png if background=transparent)
    background: str | None = "auto"
    output_compression: int = Field(default=100, ge=0, le=100)  # JPEG/WebP quality of the answer
    negative_prompt: str | None = Field(default=None, max_length=PROMPT_MAX_CHARS)
    num_inference_steps: int | None = Field(default=None, ge=IMAGE_STEPS.lo, le=IMAGE_STEPS.hi)
    guidance_scale: float | None = Field(default=None, ge=IMAGE_GUIDANCE.lo, le=IMAGE_GUIDANCE.hi)
    true_cfg_scale: float | None = None
    seed: int | None = None

    def form_fields(self) -> dict[str, str]:
        """The text parts a client sends: what it set (None left out), in a stable order."""
        return {k: str(v) for k, v in self.model_dump(exclude_none=True, exclude_unset=True).items()}
