"""The offline engine's image and video routes, answering as vLLM-Omni 0.30 does, with labelled previews.

- `POST /v1/images/generations` (JSON) → `{"created", "data": [{"b64_json", "url", "revised_prompt"}],
  "output_format", "size", ...}` plus `"preview": true`, `"seed"` and `"inference_time_s"`.
- `POST /v1/images/edits` (multipart/form-data: 1–4 `image` (or `image[]`) files or data URLs in `url`/`url[]`,
  `prompt`, `size` (default "auto": the first image's size), `n`, `seed`, ...) → the same answer; the
  references are composed into a collage under the prompt's preview (offline/previews.py `render_edit`).
- `POST /v1/videos/sync` (multipart/form-data only) → raw `video/mp4` with `X-Request-Id`, `X-Model`,
  `X-Inference-Time-S`, `X-Stage-Durations` and `X-Peak-Memory-MB`: offline/videos.py, whose router this one
  includes.

What a client can observe follows vLLM-Omni's own code (api_server.py, protocol/images.py, protocol/videos.py,
image_api_utils.py, video_api_utils.py, the Wan VACE pipeline): error bodies are vLLM's
`{"error": {"message", "type", "param", "code"}}`, request validation failures are **400** with vLLM's
"N validation error(s):" message, form fields cap at starlette's 1 MB (offline/media_answers.py), `size` wins
over width/height, frames round to 4k+1 (Wan: `n // 4 * 4 + 1`), sizes down to multiples of 16.

Defaults when a field is absent (vLLM-Omni's Wan2.1-VACE path): 832×480 (with a reference: the reference's
aspect ratio at 480·832 pixels), 81 frames, 24 fps; images 1024×1024 (FLUX.2-klein). The studio's own
defaults (480×320, 17 frames, 8 fps) live in the clients, which always send every field.

Deliberate differences (an offline engine must stay bounded and cannot use the network): image sizes are
limited to 64–2048 per side, videos to 1280² pixels and 257 frames, uploaded reference files to 16 MB and
16 M pixels; `image_reference.image_url` and an edit's `url` must be data URLs (http(s) URLs are refused, not
downloaded: offline/references.py); an edit takes at most 4 images (FLUX.2-klein's limit, worded as vLLM-Omni
words it) and its `n` and steps keep the generation route's bounds. Prompts are capped at PROMPT_MAX_CHARS,
bodies by offline.guards.BodyLimit, and a render whose client disconnects stops before its next image or frame.
"""

from __future__ import annotations

import asyncio
import base64
import time
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from PIL import Image
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException

from offline import previews, videos
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
from offline.references import BadReference, decode_image, image_from_url
from protocol.catalog import family
from protocol.common import loads
from protocol.images import (
    EDIT_AUTO_SIZE,
    EDIT_IMAGE_ARRAY_FIELD,
    EDIT_IMAGE_FIELD,
    EDIT_URL_ARRAY_FIELD,
    EDIT_URL_FIELD,
    IMAGE_EDITS_PATH,
    IMAGES_PATH,
    ImageData,
    ImageEditForm,
    ImageGenerationRequest,
    ImageGenerationResponse,
)
from protocol.limits import ENGINE_FILE_PART_BYTES, IMAGE_EDIT_REFERENCES, IMAGE_SIZE

IMAGE_MODEL = family("image").default_model  # the model the image endpoint serves on the DLC: the engine answers to it
DEFAULT_IMAGE_SIZE = (1024, 1024)  # FLUX.2-klein's default

router = APIRouter()


# ---------------------------------------------------------------------------------------------------------
# image sizes
def _parse_size(size: str) -> tuple[int, int]:
    """vLLM-Omni's parse_size (same messages), then the offline engine's 64–2048 bound."""
    parts = size.split("x")
    if len(parts) != 2:
        raise ValueError(f"Invalid size format: '{size}'. Expected format: 'WIDTHxHEIGHT' (e.g., '1024x1024'). "
                         "Did you mean to use 'x' as separator?")
    try:
        width, height = int(parts[0]), int(parts[1])
    except ValueError:
        raise ValueError(f"Invalid size format: '{size}'. Width and height must be integers.") from None
    if width <= 0 or height <= 0:
        raise ValueError(f"Invalid size: {width}x{height}. Width and height must be positive integers.")
    if width not in IMAGE_SIZE or height not in IMAGE_SIZE:
        raise ValueError(f"Invalid size: {width}x{height}. Width and height must be between {IMAGE_SIZE.lo:g} "
                         f"and {IMAGE_SIZE.hi:g} pixels on the offline engine, e.g. '1024x1024'.")
    return width, height


# ---------------------------------------------------------------------------------------------------------
# POST /v1/images/generations
def _output_format(value: str | None) -> str:
    """vLLM-Omni's _choose_output_format: png by default, jpg/jpeg/png/webp as given, anything else jpeg."""
    fmt = (value or "png").lower()
    return fmt if fmt in {"jpg", "png", "webp", "jpeg"} else "jpeg"


@router.post(IMAGES_PATH)
async def images_generations(request: Request) -> Response:
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        return validation_error(["Unsupported Media Type: Only 'application/json' is allowed"])
    raw = await request.body()
    try:
        payload = loads(raw)  # too deep a nesting is invalid JSON too, not a RecursionError
    except ValueError as exc:  # FastAPI's json_invalid error
        pos, msg = getattr(exc, "pos", 0), getattr(exc, "msg", str(exc))
        return validation_error([{"type": "json_invalid", "loc": ("body", pos), "msg": "JSON decode error",
                                  "input": {}, "ctx": {"error": msg}}])
    echo_format = "png"
    if isinstance(payload, dict):
        payload = dict(payload)
        # vLLM-Omni accepts b64_json and file (and still answers JSON); url is refused by its validator.
        rf = payload.get("response_format")
        if rf == "url":
            return validation_error([value_error(
                "response_format", "Only 'b64_json' or 'file' response format is supported, got: url", rf)])
        if rf == "file":
            payload["response_format"] = "b64_json"
        fmt = payload.get("output_format")
        if fmt is None or isinstance(fmt, str):
            echo_format = _output_format(fmt)
            payload["output_format"] = "jpeg" if echo_format == "jpg" else echo_format
        size = payload.get("size")
        if isinstance(size, str) and "x" not in size:
            return validation_error([value_error(
                "size", "size must be in format 'WIDTHxHEIGHT' (e.g., '1024x1024')", size)])
    try:
        req = ImageGenerationRequest.model_validate(payload)
    except ValidationError as exc:
        return validation_error(body_errors(exc))
    if req.model is not None and req.model != IMAGE_MODEL:
        return model_mismatch(req.model, IMAGE_MODEL)
    try:
        width, height = _parse_size(req.size) if req.size else DEFAULT_IMAGE_SIZE
    except ValueError as exc:
        return error(str(exc), param="size")
    seed = random_seed(req.seed)
    started = time.perf_counter()
    try:
        # n distinct pictures from one request seed, as one diffusion call with num_outputs_per_prompt=n gives
        images = await render_unless_disconnected(
            request.receive, f"image generation ({req.n} x {width}x{height})",
            lambda cancel: previews.render_images(req.prompt, seed, width, height, echo_format, req.n, cancel,
                                                 steps=req.num_inference_steps, guidance=req.guidance_scale),
        )
    except Exception as exc:  # noqa: BLE001 - vLLM-Omni turns any generation failure into a 500 with its text
        return error(f"Image generation failed: {exc}", HTTPStatus.INTERNAL_SERVER_ERROR)
    if images is None:
        return Response(status_code=499)  # the client has gone: nobody reads this
    body = ImageGenerationResponse(
        created=int(time.time()),
        data=[ImageData(b64_json=base64.b64encode(b).decode("ascii")) for b in images],
        output_format=echo_format,
        size=f"{width}x{height}" if req.size else None,  # vLLM-Omni reports size only when it was requested
        cot_output=None,
        metrics=None,
        # The offline engine's own fields: what made these pictures.
        preview=True,
        seed=seed,
        inference_time_s=round(time.perf_counter() - started, 4),
    )
    return JSONResponse(body.model_dump())


# ---------------------------------------------------------------------------------------------------------
# POST /v1/images/edits
MAX_EDIT_IMAGES = int(IMAGE_EDIT_REFERENCES.hi)  # FLUX.2-klein takes up to 4 reference images


def _edit_output_format(value: str | None, background: str | None) -> str:
    """vLLM-Omni's edit-route choice: jpg/jpeg/png/webp as given; png when the background is transparent;
    jpeg otherwise (the form's own default is png)."""
    fmt = (value or "").lower()
    if fmt in {"jpg", "png", "webp", "jpeg"}:
        return fmt
    return "png" if (background or "auto").lower() == "transparent" else "jpeg"


def _too_many_images(count: int, limit: int) -> str:
    """vLLM-Omni's wording (entrypoints/openai/utils.py too_many_input_images_message)."""
    if limit == 1:
        return "Received multiple input images. Only a single image is supported by this model."
    return f"Received {count} input images. At most {limit} images are supported by this model."


@router.post(IMAGE_EDITS_PATH)
async def images_edits(request: Request) -> Response:
    ctype = request.headers.get("content-type", "")
    # A form, as FastAPI reads one (url-encoded carries no files, only `url` fields); anything else is refused.
    if not ctype.lower().startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        return error(f"{IMAGE_EDITS_PATH} accepts multipart/form-data only (got {ctype or 'no Content-Type'}): "
                     "send prompt, size, n, ... as form fields and 1 to 4 reference images as 'image' file parts")
    try:
        form = await request.form(max_part_size=MAX_FORM_PART_BYTES)
    except (StarletteHTTPException, MultiPartException) as exc:
        detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc)
        return error(str(detail))
    try:
        return await _edit_from_form(form, request)
    finally:
        await form.close()


def _edit_form(form: Any) -> tuple[ImageEditForm, list[Any], list[str], str]:
    """The edit request, its reference files and URLs and its output format, checked in vLLM-Omni's order."""
    fields = form_fields(form, skip=(EDIT_URL_FIELD, EDIT_URL_ARRAY_FIELD))
    # vLLM-Omni: `image` files, else `image[]`; then `url`, else `url[]` — in that order.
    files = form.getlist(EDIT_IMAGE_FIELD) or form.getlist(EDIT_IMAGE_ARRAY_FIELD)
    for name in (EDIT_IMAGE_FIELD, EDIT_IMAGE_ARRAY_FIELD):
        fields.pop(name, None)
    for i, item in enumerate(files):
        if isinstance(item, str):  # a text part where FastAPI expects an UploadFile
            raise Refusal(validation_error([{"type": "value_error", "loc": ("body", EDIT_IMAGE_FIELD, i),
                                             "msg": "Value error, Expected UploadFile, received: <class 'str'>",
                                             "input": item[:80]}]))
    urls = [u for u in (form.getlist(EDIT_URL_FIELD) or form.getlist(EDIT_URL_ARRAY_FIELD)) if isinstance(u, str) and u]
    try:
        req = ImageEditForm.model_validate(fields)
    except ValidationError as exc:
        raise Refusal(validation_error(body_errors(exc))) from None
    if req.model is not None and req.model != IMAGE_MODEL:
        raise Refusal(model_mismatch(req.model, IMAGE_MODEL))
    fmt = _edit_output_format(req.output_format, req.background)
    if req.response_format != "b64_json":
        raise Refusal(error("Only response_format 'b64_json' is supported now."))
    count = len(files) + len(urls)
    if count == 0:
        raise Refusal(error("Field 'image' or 'url' is required", HTTPStatus.UNPROCESSABLE_ENTITY))
    if count > MAX_EDIT_IMAGES:
        raise Refusal(error(_too_many_images(count, MAX_EDIT_IMAGES)))
    return req, files, urls, fmt


async def _edit_references(files: list[Any], urls: list[str]) -> list[Image.Image]:
    """The reference images, files first, then URLs (numbered in that order in any message)."""
    references: list[Image.Image] = []
    try:
        for i, upload in enumerate(files, 1):
            assert isinstance(upload, UploadFile)
            label = f"image {i} ({upload.filename!r})"
            if upload.size is not None and upload.size > ENGINE_FILE_PART_BYTES:
                raise Refusal(error(f"{label} is {upload.size:,} bytes; the offline engine accepts files up to "
                                    f"{ENGINE_FILE_PART_BYTES // (1024 * 1024)} MB",
                                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE, EDIT_IMAGE_FIELD))
            data = await upload.read()
            references.append(await asyncio.to_thread(decode_image, data, label))
        for i, url in enumerate(urls, len(files) + 1):
            references.append(await asyncio.to_thread(image_from_url, url, f"image {i} (url)"))
    except BadReference as exc:
        raise Refusal(error(str(exc))) from None
    return references


def _edit_size(size: str, first: Image.Image) -> tuple[int, int]:
    """The edit's size: as asked, or with 'auto' the first image's (vLLM-Omni), within the engine's range."""
    try:
        if size.lower() != EDIT_AUTO_SIZE:
            return _parse_size(size)
        width, height = first.size
        if width not in IMAGE_SIZE or height not in IMAGE_SIZE:
            raise ValueError(f"Invalid size: {width}x{height} (size='auto' takes the first image's size). "
                             f"Width and height must be between {IMAGE_SIZE.lo:g} and {IMAGE_SIZE.hi:g} pixels "
                             "on the offline engine: send a size, e.g. '1024x1024'.")
        return width, height
    except ValueError as exc:
        raise Refusal(error(str(exc), param="size")) from None


async def _edit_from_form(form: Any, request: Request) -> Response:
    try:
        req, files, urls, fmt = _edit_form(form)
        references = await _edit_references(files, urls)
        width, height = _edit_size(req.size, references[0])
    except Refusal as refusal:
        return refusal.response
    seed = random_seed(req.seed)
    quality = max(1, req.output_compression)
    started = time.perf_counter()
    try:
        images = await render_unless_disconnected(
            request.receive, f"image edit ({req.n} x {width}x{height})",
            lambda cancel: previews.render_edits(req.prompt, seed, width, height, references, fmt, quality, req.n,
                                                 cancel, steps=req.num_inference_steps,
                                                 guidance=req.guidance_scale),
        )
    except Exception as exc:  # noqa: BLE001 - vLLM-Omni turns any failure into a 500 with its text
        return error(f"Image edit failed: {exc}", HTTPStatus.INTERNAL_SERVER_ERROR)
    if images is None:
        return Response(status_code=499)  # the client has gone: nobody reads this
    elapsed = time.perf_counter() - started
    body = ImageGenerationResponse(
        created=int(time.time()),
        data=[ImageData(b64_json=base64.b64encode(b).decode("ascii")) for b in images],
        output_format=fmt,
        size=f"{width}x{height}",  # an edit always reports its size
        cot_output=None,
        metrics={"stage_durations": {"preview_compose": round(elapsed, 4)}, "peak_memory_mb": None},
        preview=True,
        seed=seed,
        inference_time_s=round(elapsed, 4),
    )
    return JSONResponse(body.model_dump())


router.include_router(videos.router)  # POST /v1/videos/sync, after the image routes
