"""Realtime images: `ImageClient` over an `ImageTransport`.

    client = omni_client("http://127.0.0.1:8091", settings)
    result = client.generate(ImageRequest("a lighthouse at dawn", size="1024x1024", steps=4, seed=42))
    result.image, result.width, result.seed, result.model_s, result.total_s

    job = record_image(client, history, request)      # the same, recorded in the history (failures too)

The client validates the request (services/images/request.py), hands it to a transport
(services/images/transports.py: vLLM-Omni over httpx, a mock; services/images/sagemaker.py) and checks
what comes back: base64 that decodes to an image of the requested size and format.
"""

from __future__ import annotations

import base64
import binascii
import io
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PIL import Image

from protocol.errors import ServerError, StudioError
from protocol.images import ImageGenerationResponse
from services.images.request import ImageRequest
from services.images.transports import ImageTransport, OmniImageTransport, _number

if TYPE_CHECKING:
    from services.history import History, Job
    from services.settings import Settings


_PIL_FORMAT = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}




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
