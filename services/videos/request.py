"""What the user asks of the video model, and the exact bytes every transport sends.

`VideoRequest` carries the published defaults and checks each field (limits from protocol.limits).
`encode_request` builds the multipart/form-data body field by field with urllib3's encoder: the reference
image fitted to the video size and sent as a JPEG data URL in `image_reference`, under the ~1 MB part
limit — so every transport sends the same, checkable bytes (docs/protocols.md, "Videos").
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from urllib3.fields import RequestField
from urllib3.filepost import encode_multipart_formdata

from protocol.errors import InvalidInput
from protocol.limits import (
    REFERENCE_PART_LIMIT,
    SEED,
    VIDEO_FPS,
    VIDEO_FRAMES,
    VIDEO_GUIDANCE,
    VIDEO_SIZE,
    VIDEO_STEPS,
    check_length,
)
from protocol.videos import ImageReference, VideoSyncForm
from services import imaging

if TYPE_CHECKING:
    pass


# The published defaults (Wan2.1-VACE-1.3B on the DLC).
DEFAULT_WIDTH, DEFAULT_HEIGHT = 480, 320


DEFAULT_FRAMES = 17


DEFAULT_FPS = 8


DEFAULT_STEPS = 30


DEFAULT_GUIDANCE = 5.0


SMOKE_TEST_STEPS = 4  # this few steps is a smoke test only: the video loses the reference's composition


@dataclass(frozen=True)
class VideoRequest:
    """What the user asks for, with the published defaults. `reference` is image bytes (any size/format
    Pillow reads); it is fitted to width×height before sending."""

    prompt: str
    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT
    frames: int = DEFAULT_FRAMES
    fps: int = DEFAULT_FPS
    steps: int = DEFAULT_STEPS
    guidance: float = DEFAULT_GUIDANCE
    seed: int | None = None
    negative_prompt: str | None = None
    reference: bytes | None = field(default=None, repr=False)
    reference_name: str | None = None  # where the reference came from, for the record ("gallery: …", a file)
    model: str | None = None

    def validated(self, *, check_reference: bool = True) -> VideoRequest:
        """Every field checked (InvalidInput naming what to fix). `check_reference=False` leaves decoding the
        reference to encode_request, which checks it just the same — one decode instead of two."""
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInput("the motion prompt is empty: describe how the scene should move")
        check_length("the motion prompt", self.prompt)
        check_length("the negative prompt", self.negative_prompt)
        VIDEO_SIZE.check("width", self.width)
        VIDEO_SIZE.check("height", self.height)
        VIDEO_FRAMES.check("frames", self.frames, hint="Wan rounds to 4k+1, e.g. 17, 33, 49")
        VIDEO_FPS.check("fps", self.fps)
        VIDEO_STEPS.check("steps", self.steps, hint=f"{DEFAULT_STEPS} keeps the composition")
        VIDEO_GUIDANCE.check("guidance", self.guidance, integer=False)
        if self.seed is not None:
            SEED.check("seed", self.seed)
        if self.reference is not None and check_reference:
            imaging.check_image(self.reference, self.reference_name or "the reference image")
        neg = self.negative_prompt.strip() if isinstance(self.negative_prompt, str) else None
        return replace(self, prompt=self.prompt.strip(), negative_prompt=neg or None)

    @property
    def smoke_test(self) -> bool:
        return self.steps <= SMOKE_TEST_STEPS

    @property
    def size(self) -> str:
        return f"{self.width}x{self.height}"

    def with_seed(self) -> VideoRequest:
        return self if self.seed is not None else replace(self, seed=random.randint(0, int(SEED.hi)))

    def params(self) -> dict[str, Any]:
        """Plain values for the history and --json (the reference by name, not bytes)."""
        d = asdict(self)
        d.pop("reference")
        d["has_reference"] = self.reference is not None
        return d


@dataclass(frozen=True)
class MultipartBody:
    """The request body every transport sends as is."""

    body: bytes
    content_type: str  # multipart/form-data; boundary=…
    fields: dict[str, str]  # the text value of each part, in order (checkable)
    reference_jpeg: bytes | None  # the fitted JPEG inside image_reference

    def __len__(self) -> int:
        return len(self.body)


def encode_request(request: VideoRequest, *, boundary: str | None = None) -> MultipartBody:
    """The multipart body of `POST /v1/videos/sync` for `request` (validated; its seed must be set to be
    reproducible). Each part is built with urllib3's RequestField, so each can be checked on its own."""
    jpeg = None
    reference_field = None
    if request.reference is not None:
        fitted = imaging.fit_to(imaging.open_image(request.reference, request.reference_name or "the reference image"),
                                request.width, request.height)
        wrapper = len(ImageReference(image_url="").model_dump_json())
        url = imaging.jpeg_data_url(fitted, limit=REFERENCE_PART_LIMIT, overhead=wrapper)
        jpeg = _data_url_bytes(url)
        reference_field = ImageReference(image_url=url).model_dump_json()
    form = VideoSyncForm(
        prompt=request.prompt, model=request.model, width=request.width, height=request.height,
        num_frames=request.frames, fps=request.fps, num_inference_steps=request.steps,
        guidance_scale=request.guidance, seed=request.seed, negative_prompt=request.negative_prompt,
        image_reference=reference_field,
    )
    fields = form.form_fields()
    parts = []
    for name, value in fields.items():
        if len(value.encode()) > REFERENCE_PART_LIMIT:
            raise InvalidInput(f"the {name} field is {len(value.encode()):,} bytes; the server accepts parts of at "
                               f"most about {REFERENCE_PART_LIMIT:,} bytes — shorten it")
        part = RequestField(name=name, data=value)
        part.make_multipart()  # Content-Disposition: form-data; name="…" — a plain text part
        parts.append(part)
    body, content_type = encode_multipart_formdata(parts, boundary=boundary)
    return MultipartBody(body=body, content_type=content_type, fields=fields, reference_jpeg=jpeg)


def _data_url_bytes(url: str) -> bytes:
    import base64

    return base64.b64decode(url.split(",", 1)[1])
