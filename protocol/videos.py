"""The video route: multipart `POST /v1/videos/sync` — docs/protocols.md, "Videos"."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from protocol.limits import (
    VIDEO_FPS,
    VIDEO_FRAMES,
    VIDEO_GUIDANCE,
    VIDEO_FORM_SIZE,
    VIDEO_STEPS,
    PROMPT_MAX_CHARS,
)

VIDEO_SYNC_PATH = "/v1/videos/sync"


class VideoSyncForm(BaseModel):
    """The form fields of `POST /v1/videos/sync` (multipart/form-data only). Values travel as strings."""

    model_config = ConfigDict(extra="ignore")

    prompt: str = Field(min_length=1, max_length=PROMPT_MAX_CHARS)
    model: str | None = None
    width: int | None = Field(default=None, ge=VIDEO_FORM_SIZE.lo, le=VIDEO_FORM_SIZE.hi)
    height: int | None = Field(default=None, ge=VIDEO_FORM_SIZE.lo, le=VIDEO_FORM_SIZE.hi)
    size: str | None = Field(default=None, pattern=r"^\d+x\d+$")  # "WxH"; wins over width/height (vLLM-Omni)
    seconds: str | None = Field(default=None, pattern=r"^[1-9]\d*$")  # num_frames = seconds × fps when absent
    num_frames: int | None = Field(default=None, ge=VIDEO_FRAMES.lo, le=VIDEO_FRAMES.hi)
    fps: int | None = Field(default=None, ge=VIDEO_FPS.lo, le=VIDEO_FPS.hi)
    num_inference_steps: int | None = Field(default=None, ge=VIDEO_STEPS.lo, le=VIDEO_STEPS.hi)
    guidance_scale: float | None = Field(default=None, ge=VIDEO_GUIDANCE.lo, le=VIDEO_GUIDANCE.hi)
    seed: int | None = None
    negative_prompt: str | None = Field(default=None, max_length=PROMPT_MAX_CHARS)
    image_reference: str | None = None  # JSON string {"image_url": "data:image/jpeg;base64,..."}

    def form_fields(self) -> dict[str, str]:
        """The text parts of the multipart body, in a stable order."""
        return {k: str(v) for k, v in self.model_dump(exclude_none=True).items()}


class ImageReference(BaseModel):
    """The JSON value of the `image_reference` form field."""

    image_url: str




# ---------------------------------------------------------------------------------------------------------
