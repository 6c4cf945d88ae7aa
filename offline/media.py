"""The offline engine's image and video routes, answering as vLLM-Omni 0.30 does, with labelled previews.

- `POST /v1/images/generations` (JSON) → `{"created", "data": [{"b64_json", "url", "revised_prompt"}],
  "output_format", "size", ...}` plus `"preview": true`, `"seed"` and `"inference_time_s"`.
- `POST /v1/images/edits` (multipart/form-data: 1–4 `image` (or `image[]`) files or data URLs in `url`/`url[]`,
  `prompt`, `size` (default "auto": the first image's size), `n`, `seed`, ...) → the same answer; the
  references are composed into a collage under the prompt's preview (offline/previews.py `render_edit`).
- `POST /v1/videos/sync` (multipart/form-data only) → raw `video/mp4` with `X-Request-Id`, `X-Model`,
  `X-Inference-Time-S`, `X-Stage-Durations` and `X-Peak-Memory-MB`.

What a client can observe follows vLLM-Omni's own code (api_server.py, protocol/images.py, protocol/videos.py,
image_api_utils.py, video_api_utils.py, the Wan VACE pipeline): error bodies are vLLM's
`{"error": {"message", "type", "param", "code"}}`, request validation failures are **400** with vLLM's
"N validation error(s):" message, form fields cap at starlette's 1 MB, `size` wins over width/height,
frames round to 4k+1 (Wan: `n // 4 * 4 + 1`), sizes down to multiples of 16.

Defaults when a field is absent (vLLM-Omni's Wan2.1-VACE path): 832×480 (with a reference: the reference's
aspect ratio at 480·832 pixels), 81 frames, 24 fps; images 1024×1024 (FLUX.2-klein). The studio's own
defaults (480×320, 17 frames, 8 fps) live in the clients, which always send every field.

Deliberate differences (an offline engine must stay bounded and cannot use the network): image sizes are
limited to 64–2048 per side, videos to 1280² pixels and 257 frames, uploaded reference files to 16 MB and
16 M pixels; `image_reference.image_url` and an edit's `url` must be data URLs (http(s) URLs are refused, not
downloaded); an edit takes at most 4 images (FLUX.2-klein's limit, worded as vLLM-Omni words it) and its
`n` and steps keep the generation route's bounds. Prompts are capped at PROMPT_MAX_CHARS, bodies by
offline.guards.BodyLimit, and a render whose client disconnects stops before its next image or frame.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import math
import random
import time
import uuid
import warnings
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from PIL import Image
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException

from offline import previews, video_preview
from offline.guards import render_unless_disconnected
from protocol.catalog import family
from protocol.common import ErrorInfo, ErrorResponse, loads
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
from protocol.common import HEADER_INFERENCE_TIME, HEADER_REQUEST_ID, HEADER_STAGE_DURATIONS
from protocol.limits import ENGINE_FILE_PART_BYTES, IMAGE_EDIT_REFERENCES, IMAGE_SIZE
from protocol.videos import VIDEO_SYNC_PATH, VideoSyncForm

# The models the image and video endpoints serve on the DLC; the engine answers to their names.
IMAGE_MODEL = family("image").default_model
VIDEO_MODEL = family("video").default_model
DEFAULT_IMAGE_SIZE = (1024, 1024)  # FLUX.2-klein's default
VIDEO_DEFAULT_WIDTH, VIDEO_DEFAULT_HEIGHT = 832, 480  # Wan VACE pipeline defaults
VIDEO_DEFAULT_FRAMES = 81
VIDEO_DEFAULT_FPS = 24  # vLLM-Omni's DEFAULT_FPS
VACE_MAX_AREA = 480 * 832  # a reference without width/height: its aspect ratio at this many pixels
MAX_SEED = 2**32 - 1  # vLLM-Omni draws random seeds in [0, 2³²−1]
MAX_FORM_PART_BYTES = 1024 * 1024  # starlette's per-field cap, which vLLM-Omni keeps (FastAPI Form defaults)
MAX_REFERENCE_PIXELS = 4096 * 4096  # larger references are refused as decompression bombs
MAX_VIDEO_PIXELS = 1280 * 1280
MAX_VIDEO_FRAMES = 257
ECHO_MAX_CHARS = 80  # how much of a refused value an error message repeats
DATA_URL_HINT = 'a data URL such as "data:image/jpeg;base64,..."'

router = APIRouter()


# ---------------------------------------------------------------------------------------------------------
# vLLM-shaped error bodies
def _error(message: str, status: int = HTTPStatus.BAD_REQUEST, param: str | None = None) -> JSONResponse:
    """What vLLM's HTTPException handler returns: the status phrase as `type`, the status as `code`."""
    info = ErrorInfo(message=message, type=HTTPStatus(status).phrase, param=param, code=int(status))
    return JSONResponse(ErrorResponse(error=info).model_dump(), status_code=int(status))


def _model_mismatch(asked: str, serving: str) -> JSONResponse:
    return _error(f"Model mismatch: request specifies '{asked}' but server is running '{serving}'.")


def _validation_error(errors: list[Any]) -> JSONResponse:
    """What vLLM's RequestValidationError handler returns: 400, "N validation error(s):" then each error."""
    label = "error" if len(errors) == 1 else "errors"
    message = (f"{len(errors)} validation {label}:\n" + "".join(f"  {e}\n" for e in errors)).rstrip()
    first = errors[0] if errors else None
    param = ".".join(str(p) for p in first["loc"]) if isinstance(first, dict) and first.get("loc") else None
    return _error(message, HTTPStatus.BAD_REQUEST, param)


def _body_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic errors located the way FastAPI reports request bodies: ("body", field, ...)."""
    errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
    for e in errors:
        if e["type"] == "missing":
            e["input"] = None  # FastAPI validates each field on its own: a missing one has no input
        elif isinstance(e.get("input"), str) and len(e["input"]) > ECHO_MAX_CHARS:
            # an oversized prompt is not echoed back whole: its start says which one it was
            e["input"] = e["input"][:ECHO_MAX_CHARS] + f"… ({len(e['input']):,} characters)"
    return errors


def _value_error(field: str, message: str, value: Any) -> dict[str, Any]:
    """A field-validator failure, as pydantic (and so vLLM) reports it."""
    return {"type": "value_error", "loc": ("body", field), "msg": f"Value error, {message}", "input": value,
            "ctx": {"error": ValueError(message)}}


def _random_seed(seed: int | None) -> int:
    return seed if seed is not None else random.randint(0, MAX_SEED)


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
        return _validation_error(["Unsupported Media Type: Only 'application/json' is allowed"])
    raw = await request.body()
    try:
        payload = loads(raw)  # too deep a nesting is invalid JSON too, not a RecursionError
    except ValueError as exc:  # FastAPI's json_invalid error
        pos, msg = getattr(exc, "pos", 0), getattr(exc, "msg", str(exc))
        return _validation_error([{"type": "json_invalid", "loc": ("body", pos), "msg": "JSON decode error",
                                   "input": {}, "ctx": {"error": msg}}])
    echo_format = "png"
    if isinstance(payload, dict):
        payload = dict(payload)
        # vLLM-Omni accepts b64_json and file (and still answers JSON); url is refused by its validator.
        rf = payload.get("response_format")
        if rf == "url":
            return _validation_error([_value_error(
                "response_format", "Only 'b64_json' or 'file' response format is supported, got: url", rf)])
        if rf == "file":
            payload["response_format"] = "b64_json"
        fmt = payload.get("output_format")
        if fmt is None or isinstance(fmt, str):
            echo_format = _output_format(fmt)
            payload["output_format"] = "jpeg" if echo_format == "jpg" else echo_format
        size = payload.get("size")
        if isinstance(size, str) and "x" not in size:
            return _validation_error([_value_error(
                "size", "size must be in format 'WIDTHxHEIGHT' (e.g., '1024x1024')", size)])
    try:
        req = ImageGenerationRequest.model_validate(payload)
    except ValidationError as exc:
        return _validation_error(_body_errors(exc))
    if req.model is not None and req.model != IMAGE_MODEL:
        return _model_mismatch(req.model, IMAGE_MODEL)
    try:
        width, height = _parse_size(req.size) if req.size else DEFAULT_IMAGE_SIZE
    except ValueError as exc:
        return _error(str(exc), param="size")
    seed = _random_seed(req.seed)
    started = time.perf_counter()
    try:
        # n distinct pictures from one request seed, as one diffusion call with num_outputs_per_prompt=n gives
        images = await render_unless_disconnected(
            request.receive, f"image generation ({req.n} x {width}x{height})",
            lambda cancel: previews.render_images(req.prompt, seed, width, height, echo_format, req.n, cancel,
                                                 steps=req.num_inference_steps, guidance=req.guidance_scale),
        )
    except Exception as exc:  # noqa: BLE001 - vLLM-Omni turns any generation failure into a 500 with its text
        return _error(f"Image generation failed: {exc}", HTTPStatus.INTERNAL_SERVER_ERROR)
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
        return _error(f"{IMAGE_EDITS_PATH} accepts multipart/form-data only (got {ctype or 'no Content-Type'}): "
                      "send prompt, size, n, ... as form fields and 1 to 4 reference images as 'image' file parts")
    try:
        form = await request.form(max_part_size=MAX_FORM_PART_BYTES)
    except (StarletteHTTPException, MultiPartException) as exc:
        detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc)
        return _error(str(detail))
    try:
        return await _edit_from_form(form, request)
    finally:
        await form.close()


class _Refusal(Exception):
    """A request refused with vLLM-Omni's answer (`response`), raised by a form's checks and returned by its route."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _form_fields(form: Any, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """The form's text fields; FastAPI treats an empty form field as absent."""
    return {key: value for key, value in form.multi_items()
            if isinstance(value, str) and value != "" and key not in skip}


def _edit_form(form: Any) -> tuple[ImageEditForm, list[Any], list[str], str]:
    """The edit request, its reference files and URLs and its output format, checked in vLLM-Omni's order."""
    fields = _form_fields(form, skip=(EDIT_URL_FIELD, EDIT_URL_ARRAY_FIELD))
    # vLLM-Omni: `image` files, else `image[]`; then `url`, else `url[]` — in that order.
    files = form.getlist(EDIT_IMAGE_FIELD) or form.getlist(EDIT_IMAGE_ARRAY_FIELD)
    for name in (EDIT_IMAGE_FIELD, EDIT_IMAGE_ARRAY_FIELD):
        fields.pop(name, None)
    for i, item in enumerate(files):
        if isinstance(item, str):  # a text part where FastAPI expects an UploadFile
            raise _Refusal(_validation_error([{"type": "value_error", "loc": ("body", EDIT_IMAGE_FIELD, i),
                                               "msg": "Value error, Expected UploadFile, received: <class 'str'>",
                                               "input": item[:80]}]))
    urls = [u for u in (form.getlist(EDIT_URL_FIELD) or form.getlist(EDIT_URL_ARRAY_FIELD)) if isinstance(u, str) and u]
    try:
        req = ImageEditForm.model_validate(fields)
    except ValidationError as exc:
        raise _Refusal(_validation_error(_body_errors(exc))) from None
    if req.model is not None and req.model != IMAGE_MODEL:
        raise _Refusal(_model_mismatch(req.model, IMAGE_MODEL))
    fmt = _edit_output_format(req.output_format, req.background)
    if req.response_format != "b64_json":
        raise _Refusal(_error("Only response_format 'b64_json' is supported now."))
    count = len(files) + len(urls)
    if count == 0:
        raise _Refusal(_error("Field 'image' or 'url' is required", HTTPStatus.UNPROCESSABLE_ENTITY))
    if count > MAX_EDIT_IMAGES:
        raise _Refusal(_error(_too_many_images(count, MAX_EDIT_IMAGES)))
    return req, files, urls, fmt


async def _edit_references(files: list[Any], urls: list[str]) -> list[Image.Image]:
    """The reference images, files first, then URLs (numbered in that order in any message)."""
    references: list[Image.Image] = []
    try:
        for i, upload in enumerate(files, 1):
            assert isinstance(upload, UploadFile)
            label = f"image {i} ({upload.filename!r})"
            if upload.size is not None and upload.size > ENGINE_FILE_PART_BYTES:
                raise _Refusal(_error(f"{label} is {upload.size:,} bytes; the offline engine accepts files up to "
                                      f"{ENGINE_FILE_PART_BYTES // (1024 * 1024)} MB",
                                      HTTPStatus.REQUEST_ENTITY_TOO_LARGE, EDIT_IMAGE_FIELD))
            data = await upload.read()
            references.append(await asyncio.to_thread(_decode_image, data, label))
        for i, url in enumerate(urls, len(files) + 1):
            references.append(await asyncio.to_thread(_image_from_url, url, f"image {i} (url)"))
    except BadReference as exc:
        raise _Refusal(_error(str(exc))) from None
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
        raise _Refusal(_error(str(exc), param="size")) from None


async def _edit_from_form(form: Any, request: Request) -> Response:
    try:
        req, files, urls, fmt = _edit_form(form)
        references = await _edit_references(files, urls)
        width, height = _edit_size(req.size, references[0])
    except _Refusal as refusal:
        return refusal.response
    seed = _random_seed(req.seed)
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
        return _error(f"Image edit failed: {exc}", HTTPStatus.INTERNAL_SERVER_ERROR)
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


# ---------------------------------------------------------------------------------------------------------
# POST /v1/videos/sync
class BadReference(ValueError):
    """A reference image that cannot be used; the message says what to send instead."""


def _decode_image(data: bytes, source: str) -> Image.Image:
    if not data:
        raise BadReference(f"Invalid {source}: image data is empty.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the pixel check below refuses it
            probe = Image.open(io.BytesIO(data))
            pixels = probe.width * probe.height
            if pixels > MAX_REFERENCE_PIXELS:
                raise BadReference(
                    f"Invalid {source}: the image is {probe.width}x{probe.height} ({pixels:,} pixels); the offline "
                    f"engine accepts at most {MAX_REFERENCE_PIXELS:,} pixels (decompression-bomb guard). "
                    "Send a smaller image, e.g. fitted to the size you ask for."
                )
            return probe.convert("RGB")
    except BadReference:
        raise
    except Image.DecompressionBombError as exc:  # so large that Pillow refuses to even open it
        raise BadReference(f"Invalid {source}: the image is too large to decode safely ({exc}) The offline engine "
                           f"accepts at most {MAX_REFERENCE_PIXELS:,} pixels.") from None
    except (Image.UnidentifiedImageError, OSError, ValueError, SyntaxError):
        raise BadReference(f"Invalid {source}: provided content is not a valid image.") from None


def _reference_from_field(value: Any) -> Image.Image:
    """The `image_reference` form field, already JSON-decoded: {"image_url": "data:image/...;base64,..."}."""
    if isinstance(value, dict) and set(value) == {"file_id"}:
        raise BadReference("Invalid image_reference: file_id is not supported yet.")
    if not isinstance(value, dict) or set(value) != {"image_url"} or not isinstance(value["image_url"], str):
        raise BadReference(f'Invalid image_reference: expected a JSON object {{"image_url": ...}} holding '
                           f"{DATA_URL_HINT}; got {json.dumps(value)[:80]}")
    return _image_from_url(value["image_url"], "image_reference.image_url")


def _image_from_url(url: str, source: str) -> Image.Image:
    """A data URL's image (http(s) URLs are refused: the offline engine does not download)."""
    if url.startswith(("http://", "https://")):
        raise BadReference(f"Invalid {source}: the offline engine does not download URLs; send {DATA_URL_HINT}.")
    if not url.startswith("data:image"):
        raise BadReference(f"Invalid {source}: must be an http(s) URL or data URL ({DATA_URL_HINT}).")
    b64 = url.split(",", 1)[1] if "," in url else ""
    try:
        data = base64.b64decode("".join(b64.split()), validate=True)
    except (binascii.Error, ValueError):
        raise BadReference(f"Invalid {source}: image data is not valid base64.") from None
    return _decode_image(data, source)


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
        return _error(f"{VIDEO_SYNC_PATH} accepts multipart/form-data only (got {ctype or 'no Content-Type'}): "
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
        return _error(f"{detail}{hint}")
    try:
        return await _video_from_form(form, request)
    finally:
        await form.close()


def _video_form(form: Any) -> tuple[VideoSyncForm, Any, Any]:
    """The video request, its uploaded `input_reference` (or None) and its decoded `image_reference` JSON (or
    None), checked in vLLM-Omni's order."""
    fields = _form_fields(form)
    upload = form.get("input_reference")
    if isinstance(upload, str):
        fields.pop("input_reference", None)
        if upload:
            raise _Refusal(_validation_error([_value_error(
                "input_reference", "Expected UploadFile, received: <class 'str'>", upload)]))
        upload = None
    try:
        req = VideoSyncForm.model_validate(fields)
    except ValidationError as exc:
        raise _Refusal(_validation_error(_body_errors(exc))) from None
    image_reference = None
    if req.image_reference is not None:
        try:
            image_reference = loads(req.image_reference)
        except ValueError:
            raise _Refusal(_error("Invalid JSON in form field.", param="image_reference")) from None
    if image_reference is not None and upload is not None:
        raise _Refusal(_error("Provide either input_reference or image_reference, not both."))
    if req.model is not None and req.model != VIDEO_MODEL:
        raise _Refusal(_model_mismatch(req.model, VIDEO_MODEL))
    return req, upload, image_reference


async def _video_reference(upload: Any, image_reference: Any) -> Image.Image | None:
    """The reference image, from the uploaded file or the `image_reference` data URL; None without one."""
    try:
        if upload is not None:
            assert isinstance(upload, UploadFile)
            if upload.size is not None and upload.size > ENGINE_FILE_PART_BYTES:
                raise _Refusal(_error(f"input_reference {upload.filename!r} is {upload.size:,} bytes; the offline "
                                      f"engine accepts files up to {ENGINE_FILE_PART_BYTES // (1024 * 1024)} MB",
                                      HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "input_reference"))
            data = await upload.read()
            return await asyncio.to_thread(_decode_image, data, "input_reference")
        if image_reference is not None:
            return await asyncio.to_thread(_reference_from_field, image_reference)
    except BadReference as exc:
        raise _Refusal(_error(str(exc))) from None
    return None


def _video_shape(req: VideoSyncForm, reference: Image.Image | None) -> tuple[int, int, int, int]:
    """(width, height, frames, fps) as Wan's pipeline would make them, within the offline engine's limits."""
    # vLLM-Omni: `size` wins over width/height; fps defaults to 24; seconds × fps gives the frame count.
    width, height = req.width, req.height
    if req.size:
        width, height = (int(p) for p in req.size.split("x"))
        if width <= 0 or height <= 0:
            raise _Refusal(_error(f"Invalid size: {width}x{height}. Width and height must be positive integers.",
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
        raise _Refusal(_error(f"Video size {width}x{height} after rounding down to multiples of 16 is too small: "
                              "width and height must be at least 16 pixels.", param="size"))
    if width * height > MAX_VIDEO_PIXELS:
        raise _Refusal(_error(f"Video size {width}x{height} is too large for the offline engine: at most "
                              f"{MAX_VIDEO_PIXELS:,} pixels per frame (e.g. 1280x720).", param="size"))
    if frames > MAX_VIDEO_FRAMES:
        raise _Refusal(_error(f"{frames} frames is too many for the offline engine: at most {MAX_VIDEO_FRAMES} "
                              "(lower num_frames, seconds or fps).", param="num_frames"))
    return width, height, frames, fps


async def _video_from_form(form: Any, request: Request) -> Response:
    try:
        req, upload, image_reference = _video_form(form)
        reference = await _video_reference(upload, image_reference)
        width, height, frames, fps = _video_shape(req, reference)
    except _Refusal as refusal:
        return refusal.response
    request_id = f"video_sync-{uuid.uuid4().hex}"
    seed = _random_seed(req.seed)
    stages: dict[str, float] = {}
    started = time.perf_counter()
    try:
        mp4 = await render_unless_disconnected(
            request.receive, f"video render ({width}x{height}, {frames} frames)",
            lambda cancel: video_preview.render_video(req.prompt, seed, width, height, frames, fps, reference,
                                                      stages, cancel, steps=req.num_inference_steps,
                                                      guidance=req.guidance_scale),
        )
    except Exception as exc:  # noqa: BLE001 - vLLM-Omni answers any generation failure with a 500 and its text
        return _error(f"Video generation failed: {exc}", HTTPStatus.INTERNAL_SERVER_ERROR)
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
