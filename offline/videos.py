"""The offline engine's `POST /v1/videos/sync`, answering as vLLM-Omni 0.30 does, with a labelled preview video.

multipart/form-data only → raw `video/mp4` with `X-Request-Id`, `X-Model`, `X-Inference-Time-S`,
`X-Stage-Durations` and `X-Peak-Memory-MB`. As vLLM-Omni's video_api_utils.py and the Wan VACE pipeline do:
`size` wins over width/height, frames round to 4k+1 (Wan: `n // 4 * 4 + 1`), sizes down to multiples of 16.
Defaults when a field is absent: 832×480 (with a reference: the reference's aspect ratio at 480·832 pixels),
81 frames, 24 fps. Deliberate differences: at most 1280² pixels and 257 frames, uploaded reference files up to
16 MB (offline/references.py for the rest). offline/media.py includes this router.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from PIL import Image
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException

from offline.guards import render_unless_disconnected
from offline.media_answers import (
    MAX_FORM_PART_BYTES,
    Refusal,
    body_errors,
    error,
    form_fields,
    model_mismatch,
    random_seed,
    validation_error,
    value_error,
)
from offline.references import BadReference, decode_image, reference_from_field
from offline.video_preview import render_video
from protocol.catalog import family
from protocol.common import HEADER_INFERENCE_TIME, HEADER_REQUEST_ID, HEADER_STAGE_DURATIONS, loads
from protocol.limits import ENGINE_FILE_PART_BYTES
from protocol.videos import VIDEO_SYNC_PATH, VideoSyncForm

VIDEO_MODEL = family("video").default_model  # the engine answers to its name
VIDEO_DEFAULT_WIDTH, VIDEO_DEFAULT_HEIGHT = 832, 480  # Wan VACE pipeline defaults
VIDEO_DEFAULT_FRAMES = 81
VIDEO_DEFAULT_FPS = 24  # vLLM-Omni's DEFAULT_FPS
VACE_MAX_AREA = 480 * 832  # a reference without width/height: its aspect ratio at this many pixels
MAX_VIDEO_PIXELS = 1280 * 1280
MAX_VIDEO_FRAMES = 257

router = APIRouter()


def _round_frames(n: int) -> int:
    """Wan's rule: a frame count that is not 4k+1 becomes n // 4 * 4 + 1."""
    return max(1, n // 4 * 4 + 1 if n % 4 != 1 else n)


def _reference_size(ref: Image.Image) -> tuple[int, int]:
    """The VACE pipeline's size for a reference without width/height: its aspect ratio at 480·832 pixels."""
    aspect = ref.height / ref.width
    return round(math.sqrt(VACE_MAX_AREA / aspect)) // 16 * 16, round(math.sqrt(VACE_MAX_AREA * aspect)) // 16 * 16


@router.post(VIDEO_SYNC_PATH)
async def videos_sync(request: Request) -> Response:
    ctype = request.headers.get("content-type", "")
    if not ctype.lower().startswith("multipart/form-data"):
        return error(f"{VIDEO_SYNC_PATH} accepts multipart/form-data only (got {ctype or 'no Content-Type'}): "
                     "send prompt, width, height, num_frames, ... as form fields and the reference image as "
                     "image_reference (JSON) or an input_reference file part")
    try:
        form = await request.form(max_part_size=MAX_FORM_PART_BYTES)
    except (StarletteHTTPException, MultiPartException) as exc:
        detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc)
        hint = ""
        if "maximum size" in detail:
            hint = (" Each form field (image_reference included) is limited to 1 MB: send a JPEG fitted to the "
                    "video size, or the image as an input_reference file part.")
        return error(f"{detail}{hint}")
    try:
        return await _video_from_form(form, request)
    finally:
        await form.close()


def _video_form(form: Any) -> tuple[VideoSyncForm, Any, Any]:
    """The video request, its uploaded `input_reference` (or None) and its decoded `image_reference` JSON (or
    None), checked in vLLM-Omni's order."""
    fields = form_fields(form)
    upload = form.get("input_reference")
    if isinstance(upload, str):
        fields.pop("input_reference", None)
        if upload:
            raise Refusal(validation_error([value_error(
                "input_reference", "Expected UploadFile, received: <class 'str'>", upload)]))
        upload = None
    try:
        req = VideoSyncForm.model_validate(fields)
    except ValidationError as exc:
        raise Refusal(validation_error(body_errors(exc))) from None
    image_reference = None
    if req.image_reference is not None:
        try:
            image_reference = loads(req.image_reference)
        except ValueError:
            raise Refusal(error("Invalid JSON in form field.", param="image_reference")) from None
    if image_reference is not None and upload is not None:
        raise Refusal(error("Provide either input_reference or image_reference, not both."))
    if req.model is not None and req.model != VIDEO_MODEL:
        raise Refusal(model_mismatch(req.model, VIDEO_MODEL))
    return req, upload, image_reference


async def _video_reference(upload: Any, image_reference: Any) -> Image.Image | None:
    """The reference image, from the uploaded file or the `image_reference` data URL; None without one."""
    try:
        if upload is not None:
            assert isinstance(upload, UploadFile)
            if upload.size is not None and upload.size > ENGINE_FILE_PART_BYTES:
                raise Refusal(error(f"input_reference {upload.filename!r} is {upload.size:,} bytes; the offline "
                                    f"engine accepts files up to {ENGINE_FILE_PART_BYTES // (1024 * 1024)} MB",
                                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "input_reference"))
            data = await upload.read()
            return await asyncio.to_thread(decode_image, data, "input_reference")
        if image_reference is not None:
            return await asyncio.to_thread(reference_from_field, image_reference)
    except BadReference as exc:
        raise Refusal(error(str(exc))) from None
    return None


def _video_shape(req: VideoSyncForm, reference: Image.Image | None) -> tuple[int, int, int, int]:
    """(width, height, frames, fps) as Wan's pipeline would make them, within the offline engine's limits."""
    # vLLM-Omni: `size` wins over width/height; fps defaults to 24; seconds × fps gives the frame count.
    width, height = req.width, req.height
    if req.size:
        width, height = (int(p) for p in req.size.split("x"))
        if width <= 0 or height <= 0:
            raise Refusal(error(f"Invalid size: {width}x{height}. Width and height must be positive integers.",
                                param="size"))
    fps = req.fps or VIDEO_DEFAULT_FPS
    frames = req.num_frames or (int(req.seconds) * fps if req.seconds else VIDEO_DEFAULT_FRAMES)
    if width is None or height is None:
        ref_w, ref_h = _reference_size(reference) if reference is not None else (VIDEO_DEFAULT_WIDTH,
                                                                                   VIDEO_DEFAULT_HEIGHT)
        width, height = width or ref_w, height or ref_h
    # Wan's rounding: sizes down to multiples of 16, frames to 4k+1.
    width, height, frames = width // 16 * 16, height // 16 * 16, _round_frames(frames)
    if width < 16 or height < 16:
        raise Refusal(error(f"Video size {width}x{height} after rounding down to multiples of 16 is too small: "
                            "width and height must be at least 16 pixels.", param="size"))
    if width * height > MAX_VIDEO_PIXELS:
        raise Refusal(error(f"Video size {width}x{height} is too large for the offline engine: at most "
                            f"{MAX_VIDEO_PIXELS:,} pixels per frame (e.g. 1280x720).", param="size"))
    if frames > MAX_VIDEO_FRAMES:
        raise Refusal(error(f"{frames} frames is too many for the offline engine: at most {MAX_VIDEO_FRAMES} "
                            "(lower num_frames, seconds or fps).", param="num_frames"))
    return width, height, frames, fps


async def _video_from_form(form: Any, request: Request) -> Response:
    try:
        req, upload, image_reference = _video_form(form)
        reference = await _video_reference(upload, image_reference)
        width, height, frames, fps = _video_shape(req, reference)
    except Refusal as refusal:
        return refusal.response
    request_id = f"video_sync-{uuid.uuid4().hex}"
    seed = random_seed(req.seed)
    stages: dict[str, float] = {}
    started = time.perf_counter()
    try:
        mp4 = await render_unless_disconnected(
            request.receive, f"video render ({width}x{height}, {frames} frames)",
            lambda cancel: render_video(req.prompt, seed, width, height, frames, fps, reference, stages, cancel,
                                        steps=req.num_inference_steps, guidance=req.guidance_scale),
        )
    except Exception as exc:  # noqa: BLE001 - vLLM-Omni answers any generation failure with a 500 and its text
        return error(f"Video generation failed: {exc}", HTTPStatus.INTERNAL_SERVER_ERROR)
    if mp4 is None:
        return Response(status_code=499)  # the client has gone: nobody reads this
    elapsed = time.perf_counter() - started
    return Response(
        mp4,
        media_type="video/mp4",
        headers={
            HEADER_REQUEST_ID: request_id,
            "X-Model": VIDEO_MODEL,
            HEADER_INFERENCE_TIME: f"{elapsed:.3f}",
            HEADER_STAGE_DURATIONS: json.dumps(
                {"preview_draw": round(stages.get("draw_s", 0.0), 4),
                 "h264_encode": round(stages.get("encode_s", 0.0), 4)},
                separators=(",", ":"),
            ),
            "X-Peak-Memory-MB": "0.000",  # no accelerator: nothing to report
        },
    )
