"""Realtime images: `ImageClient` over an `ImageTransport`.

    client = omni_client("http://127.0.0.1:8091", settings)
    result = client.generate(ImageRequest("a lighthouse at dawn", size="1024x1024", steps=4, seed=42))
    result.image, result.width, result.seed, result.model_s, result.total_s

    job = record_image(client, history, request)      # the same, recorded in the history (failures too)

A transport is one method (httpx-style, so the client logic is written once):

    payload, timings = transport.generate(ImageGenerationRequest)   # ImageGenerationResponse, TransportTimings

`OmniImageTransport` posts JSON to a vLLM-Omni server's `/v1/images/generations` (`b64_json`).
`MockImageTransport` answers from a function, for unit tests. The SageMaker transport (invoke_endpoint
with `CustomAttributes="route=/v1/images/generations"`) implements the same method.

FLUX.2-klein is distilled and wants about 4 steps while the server default is 50, so steps are always
sent explicitly (default 4). The seed is always sent too — drawn here when the caller gives none — so the
result records the seed that made it.
"""

from __future__ import annotations

import base64
import binascii
import io
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx
from PIL import Image
from pydantic import ValidationError

from services.errors import BackendUnreachable, InvalidInput, ServerError, StudioError
from services.protocol import (
    IMAGE_SIZE_MAX,
    IMAGE_SIZE_MIN,
    ImageGenerationRequest,
    ImageGenerationResponse,
    ImageOutputFormat,
    error_text,
    parse_size,
)

if TYPE_CHECKING:
    from services.history import History, Job
    from services.settings import Settings

IMAGES_PATH = "/v1/images/generations"
INFERENCE_TIME_HEADER = "X-Inference-Time-S"  # model time: this header, else a numeric `inference_time_s` in the body
DEFAULT_SIZE = "1024x1024"
DEFAULT_STEPS = 4  # FLUX.2-klein is distilled: ~4 steps; the server's own default is 50
STEPS_RANGE = (1, 200)
GUIDANCE_RANGE = (0.0, 20.0)
N_RANGE = (1, 10)
SEED_MAX = 2**32 - 1
FORMATS: tuple[ImageOutputFormat, ...] = ("png", "jpeg", "webp")
_PIL_FORMAT = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}

__all__ = [
    "ImageClient", "ImageRequest", "ImageResult", "ImageTransport", "MockImageTransport", "OmniImageTransport",
    "TransportTimings", "omni_client", "record_image",
]


# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImageRequest:
    """What the user asks for. `validated()` checks every field and names what to fix."""

    prompt: str
    negative_prompt: str | None = None
    size: str = DEFAULT_SIZE
    steps: int = DEFAULT_STEPS
    guidance: float | None = None
    seed: int | None = None
    n: int = 1
    output_format: ImageOutputFormat = "png"
    model: str | None = None

    def validated(self) -> ImageRequest:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInput("the prompt is empty: describe the image you want")
        try:
            w, h = parse_size(str(self.size).strip())
        except ValueError as exc:
            raise InvalidInput(f"{exc}; width and height between {IMAGE_SIZE_MIN} and {IMAGE_SIZE_MAX}") from None
        in_range("steps", self.steps, *STEPS_RANGE, hint="FLUX.2-klein wants about 4")
        in_range("n (images per request)", self.n, *N_RANGE)
        if self.guidance is not None:
            in_range("guidance", self.guidance, *GUIDANCE_RANGE, integer=False)
        if self.seed is not None:
            in_range("seed", self.seed, 0, SEED_MAX)
        if self.output_format not in FORMATS:
            raise InvalidInput(f"output format {self.output_format!r} is not one of {', '.join(FORMATS)}")
        neg = self.negative_prompt.strip() if isinstance(self.negative_prompt, str) else None
        return replace(self, prompt=self.prompt.strip(), size=f"{w}x{h}", negative_prompt=neg or None)

    @property
    def width(self) -> int:
        return parse_size(self.size)[0]

    @property
    def height(self) -> int:
        return parse_size(self.size)[1]

    def with_seed(self) -> ImageRequest:
        """This request with a seed: the caller's, or a fresh random one (so the result can say which)."""
        return self if self.seed is not None else replace(self, seed=random.randint(0, SEED_MAX))

    def wire(self) -> ImageGenerationRequest:
        return ImageGenerationRequest(
            prompt=self.prompt, model=self.model, n=self.n, size=self.size, num_inference_steps=self.steps,
            guidance_scale=self.guidance, negative_prompt=self.negative_prompt, seed=self.seed,
            output_format=self.output_format,
        )

    def params(self) -> dict[str, Any]:
        """The parameters as plain values (history, --json, "reuse these settings")."""
        return asdict(self)


def in_range(name: str, value: Any, lo: float, hi: float, *, integer: bool = True, hint: str = "") -> None:
    """InvalidInput naming `name` unless `value` is a number (whole, unless `integer=False`) in [lo, hi]."""
    ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok_type or not (lo <= value <= hi):
        kind = "a whole number" if integer else "a number"
        extra = f" ({hint})" if hint else ""
        raise InvalidInput(f"{name} must be {kind} from {lo:g} to {hi:g}{extra}; got {value!r}")


@dataclass(frozen=True)
class TransportTimings:
    """What the transport measured: the model's own time when the server reports it, and the round trip."""

    model_s: float | None
    request_s: float


@dataclass(frozen=True)
class ImageResult:
    """The images (encoded bytes, checked), the exact request that made them, and the timings."""

    images: list[bytes]
    request: ImageRequest  # exactly what was sent, seed included
    width: int
    height: int
    format: str  # png | jpeg | webp
    model_s: float | None  # the server's inference time, when it reports one
    request_s: float  # the HTTP (or invoke_endpoint) round trip
    total_s: float  # from generate() to the checked result
    preview: bool = False  # an offline preview, not a diffusion model's image
    preview_note: str | None = None
    revised_prompt: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def image(self) -> bytes:
        return self.images[0]

    @property
    def seed(self) -> int | None:
        return self.request.seed

    def timings(self) -> dict[str, float]:
        out = {"request_s": round(self.request_s, 4), "total_s": round(self.total_s, 4)}
        if self.model_s is not None:
            out["model_s"] = round(self.model_s, 4)
        return out


# ---------------------------------------------------------------------------------------------------------
@runtime_checkable
class ImageTransport(Protocol):
    target: str  # where requests go, for messages

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]: ...


def error_message(resp: httpx.Response) -> str:
    """The server's own words from a vLLM-Omni/OpenAI/FastAPI error body (or the start of the body)."""
    return error_text(resp.text) or resp.reason_phrase


class OmniImageTransport:
    """vLLM-Omni's `POST /v1/images/generations` over httpx (one pooled client)."""

    def __init__(self, url: str, *, timeout: float = 120.0, connect_timeout: float = 10.0,
                 http_transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.target = self.url + IMAGES_PATH
        self._http = httpx.Client(timeout=httpx.Timeout(timeout, connect=connect_timeout), transport=http_transport)

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]:
        t0 = time.perf_counter()
        try:
            resp = self._http.post(self.target, json=request.wire())
        except httpx.TimeoutException as exc:
            raise BackendUnreachable(f"the image server at {self.url} did not answer in time ({type(exc).__name__}); "
                                     "it may be busy or still loading the model — try again") from None
        except httpx.HTTPError as exc:
            raise BackendUnreachable(f"cannot reach the image server at {self.url} ({type(exc).__name__}: {exc}); "
                                     "is it running, and is the URL right?") from None
        request_s = time.perf_counter() - t0
        if resp.status_code >= 400:
            raise ServerError(f"the image server refused the request (HTTP {resp.status_code}): {error_message(resp)}",
                              status=resp.status_code)
        try:
            payload = ImageGenerationResponse.model_validate_json(resp.content)
        except ValidationError:
            raise ServerError(f"the image server at {self.url} sent a response that is not an image generation "
                              f"result: {resp.text[:200]!r}", status=resp.status_code) from None
        return payload, TransportTimings(model_s=_float_header(resp.headers.get(INFERENCE_TIME_HEADER)),
                                         request_s=request_s)

    def close(self) -> None:
        self._http.close()


def _float_header(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    """A server-reported time in the body (the offline engine's `inference_time_s`), if it is a number."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class MockImageTransport:
    """Answers from `handler(request)`, which returns an ImageGenerationResponse or raises (like httpx's
    MockTransport). Records every request it got."""

    def __init__(self, handler: Callable[[ImageGenerationRequest], ImageGenerationResponse], *,
                 target: str = "mock://images", model_s: float | None = None) -> None:
        self.target = target
        self._handler = handler
        self._model_s = model_s
        self.requests: list[ImageGenerationRequest] = []

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]:
        self.requests.append(request)
        t0 = time.perf_counter()
        payload = self._handler(request)
        return payload, TransportTimings(model_s=self._model_s, request_s=time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------------------
class ImageClient:
    """Validates the request, sends it, and checks what comes back: base64 that decodes to an image of the
    requested size and format, one per requested image."""

    def __init__(self, transport: ImageTransport) -> None:
        self.transport = transport

    @property
    def target(self) -> str:
        return self.transport.target

    def generate(self, request: ImageRequest) -> ImageResult:
        t0 = time.perf_counter()
        request = request.validated().with_seed()
        payload, timings = self.transport.generate(request.wire())
        images, fmt = self._check(request, payload)
        extra = payload.model_extra or {}
        preview = extra.get("preview")
        model_s = timings.model_s if timings.model_s is not None else _number(extra.get("inference_time_s"))
        return ImageResult(
            images=images, request=request, width=request.width, height=request.height, format=fmt,
            model_s=model_s, request_s=timings.request_s, total_s=time.perf_counter() - t0,
            preview=bool(preview), preview_note=preview if isinstance(preview, str) else None,
            revised_prompt=payload.data[0].revised_prompt if payload.data else None, extra=dict(extra),
        )

    def _check(self, request: ImageRequest, payload: ImageGenerationResponse) -> tuple[list[bytes], str]:
        where = f"the image server at {self.target}"
        if len(payload.data) != request.n:
            raise ServerError(f"{where} returned {len(payload.data)} images for n={request.n}")
        fmt = (payload.output_format or request.output_format).lower()
        fmt = "jpeg" if fmt == "jpg" else fmt
        images = []
        for i, item in enumerate(payload.data):
            if not item.b64_json:
                raise ServerError(f"{where} returned image {i + 1} without b64_json (url={item.url!r}); "
                                  "the studio asks for response_format=b64_json")
            try:
                data = base64.b64decode(item.b64_json, validate=True)
            except (binascii.Error, ValueError):
                raise ServerError(f"{where} returned image {i + 1} as invalid base64") from None
            try:
                with Image.open(io.BytesIO(data)) as im:
                    actual, size = im.format, im.size
                    im.verify()  # checks the whole file's structure without keeping pixels
            except Exception as exc:
                raise ServerError(f"{where} returned image {i + 1} that is not a readable image ({exc})") from None
            if actual != _PIL_FORMAT.get(fmt, fmt.upper()):
                raise ServerError(f"{where} returned image {i + 1} as {actual}, but said {fmt}")
            if size != (request.width, request.height):
                raise ServerError(f"{where} returned image {i + 1} of {size[0]}x{size[1]}, not the requested {request.size}")
            images.append(data)
        return images, fmt

    def close(self) -> None:
        close = getattr(self.transport, "close", None)
        if callable(close):
            close()


def omni_client(url: str, settings: Settings) -> ImageClient:
    """The image client for a vLLM-Omni server (or the offline engine) at `url`."""
    return ImageClient(OmniImageTransport(url, timeout=settings.request_timeout_s,
                                          connect_timeout=settings.connect_timeout_s))


# ---------------------------------------------------------------------------------------------------------
def record_image(client: ImageClient, history: History, request: ImageRequest) -> Job:
    """Generate and record: the job row is written first (running), then the images and timings — or the
    failure text, so a failed attempt stays in the history with its settings. Raises the StudioError after
    recording it; bad input raises before anything is recorded."""
    request = request.validated().with_seed()
    job = history.create("image", request.prompt, request.params(), target=client.target, status="running")
    try:
        result = client.generate(request)
    except StudioError as exc:
        history.fail(job.id, str(exc))
        raise
    except Exception as exc:  # a bug must not leave the row "running" forever
        history.fail(job.id, f"unexpected error: {type(exc).__name__}: {exc}")
        raise
    ext = "jpg" if result.format == "jpeg" else result.format
    files = {f"image-{i}.{ext}": data for i, data in enumerate(result.images)}
    meta = {"seed": result.seed, "width": result.width, "height": result.height, "format": result.format,
            "preview": result.preview}
    if result.preview_note:
        meta["preview_note"] = result.preview_note
    if result.revised_prompt:
        meta["revised_prompt"] = result.revised_prompt
    return history.succeed(job.id, files, timings=result.timings(), meta=meta)
