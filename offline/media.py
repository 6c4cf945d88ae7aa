"""The offline engine's image and video routes (vLLM-Omni 0.30 shapes), serving labelled previews.

- `POST /v1/images/generations` (JSON) → `{"created", "data": [{"b64_json"}], "output_format", "size"}`.
- `POST /v1/videos/sync` (multipart/form-data only) → raw `video/mp4` with `X-Request-Id`,
  `X-Inference-Time-S` and `X-Stage-Durations`. Wan rounds `num_frames` to 4k+1 and sizes down to
  multiples of 16; the preview does the same so clients see what the real model would return.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import random
import time
import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from PIL import Image
from pydantic import ValidationError

from offline import previews
from services.protocol import (
    VIDEO_HEADER_INFERENCE_TIME,
    VIDEO_HEADER_REQUEST_ID,
    VIDEO_HEADER_STAGE_DURATIONS,
    VIDEO_SYNC_PATH,
    ErrorInfo,
    ErrorResponse,
    ImageData,
    ImageGenerationRequest,
    ImageGenerationResponse,
    ImageReference,
    VideoSyncForm,
    parse_size,
)

IMAGE_MODEL = "black-forest-labs/FLUX.2-klein-4B"
VIDEO_MODEL = "Wan-AI/Wan2.1-VACE-1.3B-diffusers"
DEFAULT_IMAGE_SIZE = (1024, 1024)
DEFAULT_VIDEO = {"width": 480, "height": 320, "num_frames": 17, "fps": 8}  # the studio's published defaults
MAX_PART_BYTES = 1024 * 1024  # the server caps each multipart part at about 1 MB
MAX_REFERENCE_PIXELS = 4096 * 4096  # larger references are refused as decompression bombs
MAX_VIDEO_PIXELS = 1280 * 1280

router = APIRouter()


def _error(message: str, status: int = 400, error_type: str = "BadRequestError") -> JSONResponse:
    body = ErrorResponse(error=ErrorInfo(message=message, type=error_type, code=status))
    return JSONResponse(body.model_dump(), status_code=status)


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())


def _seed(seed: int | None) -> int:
    return seed if seed is not None else random.SystemRandom().randrange(2**31)


@router.post("/v1/images/generations")
async def images_generations(request: Request) -> Response:
    try:
        payload = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error("Request body must be a JSON object")
    if not isinstance(payload, dict):
        return _error("Request body must be a JSON object")
    try:
        req = ImageGenerationRequest.model_validate(payload)
    except ValidationError as exc:
        return _error(_validation_message(exc), 422, "ValidationError")
    if req.model and req.model != IMAGE_MODEL:
        return _error(f"The model `{req.model}` does not exist.", 404, "NotFoundError")
    try:
        width, height = parse_size(req.size) if req.size else DEFAULT_IMAGE_SIZE
    except ValueError as exc:
        return _error(str(exc))
    seed = _seed(req.seed)
    started = time.perf_counter()
    images = await asyncio.to_thread(
        lambda: [previews.render_image(req.prompt, seed + i, width, height, req.output_format) for i in range(req.n)]
    )
    body = ImageGenerationResponse(
        created=int(time.time()),
        data=[ImageData(b64_json=base64.b64encode(b).decode("ascii")) for b in images],
        output_format=req.output_format,
        size=f"{width}x{height}",
        preview=True,
        seed=seed,
        inference_time_s=round(time.perf_counter() - started, 4),
    )
    return JSONResponse(body.model_dump())


def _load_reference(data: bytes, origin: str) -> Image.Image:
    """Decode a reference image; ValueError with a message a person can act on."""
    if len(data) > MAX_PART_BYTES:
        raise ValueError(f"{origin} is {len(data)} bytes; each part is limited to {MAX_PART_BYTES} bytes")
    try:
        with Image.open(io.BytesIO(data)) as probe:
            if probe.width * probe.height > MAX_REFERENCE_PIXELS:
                raise ValueError(f"{origin} is {probe.width}x{probe.height}; at most {MAX_REFERENCE_PIXELS} pixels")
            probe.load()
            return probe.convert("RGB")
    except (Image.DecompressionBombError, Image.UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"{origin} is not a readable image ({exc})") from None


def _reference_from_json(value: str) -> Image.Image:
    try:
        ref = ImageReference.model_validate_json(value)
    except ValidationError:
        raise ValueError('image_reference must be a JSON object like {"image_url": "data:image/jpeg;base64,..."}') from None
    url = ref.image_url
    if not url.startswith("data:image/") or ";base64," not in url:
        raise ValueError("image_reference.image_url must be a base64 data URL (data:image/<type>;base64,...)")
    try:
        data = base64.b64decode(url.split(";base64,", 1)[1], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("image_reference.image_url does not hold valid base64") from None
    return _load_reference(data, "image_reference")


@router.post(VIDEO_SYNC_PATH)
async def videos_sync(request: Request) -> Response:
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith("multipart/form-data"):
        return _error(f"{VIDEO_SYNC_PATH} accepts multipart/form-data only (got {ctype or 'no content type'})")
    try:
        form = await request.form(max_part_size=MAX_PART_BYTES)
    except Exception as exc:  # python-multipart / starlette parse errors
        return _error(f"Invalid multipart body: {exc}", 413 if "size" in str(exc).lower() else 400)
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    try:
        req = VideoSyncForm.model_validate(fields)
    except ValidationError as exc:
        return _error(_validation_message(exc), 422, "ValidationError")
    if req.model and req.model != VIDEO_MODEL:
        return _error(f"The model `{req.model}` does not exist.", 404, "NotFoundError")
    try:
        if req.size and req.width is None and req.height is None:
            width, height = parse_size(req.size, lo=16, hi=2048)
        else:
            width, height = req.width or DEFAULT_VIDEO["width"], req.height or DEFAULT_VIDEO["height"]
        reference = None
        if req.image_reference:
            reference = _reference_from_json(req.image_reference)
        elif (upload := form.get("input_reference")) is not None and not isinstance(upload, str):
            reference = _load_reference(await upload.read(), f"input_reference {upload.filename!r}")
    except ValueError as exc:
        return _error(str(exc))
    # Wan's rounding: sizes down to multiples of 16, frames to 4k+1.
    width, height = max(16, width - width % 16), max(16, height - height % 16)
    if width * height > MAX_VIDEO_PIXELS:
        return _error(f"Video size {width}x{height} is too large; at most {MAX_VIDEO_PIXELS} pixels")
    frames = req.num_frames or DEFAULT_VIDEO["num_frames"]
    frames = 4 * ((frames - 1) // 4) + 1
    fps = req.fps or DEFAULT_VIDEO["fps"]
    seed = _seed(req.seed)
    started = time.perf_counter()
    mp4 = await asyncio.to_thread(previews.render_video, req.prompt, seed, width, height, frames, fps, reference)
    elapsed = time.perf_counter() - started
    return Response(
        mp4,
        media_type="video/mp4",
        headers={
            VIDEO_HEADER_REQUEST_ID: f"video-{uuid.uuid4().hex}",
            VIDEO_HEADER_INFERENCE_TIME: f"{elapsed:.4f}",
            VIDEO_HEADER_STAGE_DURATIONS: json.dumps({"preview_render": round(elapsed, 4)}),
        },
    )
