"""Realtime images: `ImageClient` over an `ImageTransport`.

    client = omni_client("http://127.0.0.1:8091", settings)
    result = client.generate(ImageRequest("a lighthouse at dawn", size="1024x1024", steps=4, seed=42))
    result.image, result.width, result.seed, result.model_s, result.total_s

    job = record_image(client, history, request)      # the same, recorded in the history (failures too)

    edited = client.edit(ImageEditRequest("make them friends", (EditReference(png, "cat.png"), ...)))
    edited.fitting                                    # what was done to fit the references, or None
    job = record_edit(client, history, edit_request)  # recorded with its references as the job's inputs

The client validates the request (services/images/request.py, services/images/edits.py), hands it to a
transport (services/images/transports.py: vLLM-Omni over httpx, a mock; services/images/sagemaker.py) and
checks what comes back: base64 that decodes to an image of the requested size and format.
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
from services.access import require
from services.images.edits import EditBody, ImageEditRequest, prepare_edit
from services.images.request import ImageRequest
from services.images.transports import ImageTransport, OmniImageTransport, TransportTimings, _number

if TYPE_CHECKING:
    from services.history import History, Job
    from services.settings import Settings


_PIL_FORMAT = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}




@dataclass(frozen=True)
class ImageResult:
    """The images (encoded bytes, checked), the exact request that made them, and the timings."""

    images: list[bytes]
    request: ImageRequest | ImageEditRequest  # exactly what was sent, seed (and an edit's size) included
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
    fitting: str | None = None  # an edit: what was done to its references to send them, in words; None: as given
    references: list[dict[str, Any]] = field(default_factory=list)  # an edit: each reference, as sent

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
        return self._result(request, payload, timings, t0)

    def prepare_edit(self, request: ImageEditRequest) -> tuple[ImageEditRequest, EditBody]:
        """The edit as it will be sent (checked, size and seed set) and its body, fitted under the transport's
        request size limit when it has one. Bad input raises InvalidInput here, before anything is sent."""
        return prepare_edit(request, limit=getattr(self.transport, "payload_limit", None),
                            limit_name=getattr(self.transport, "payload_limit_name", "the request limit"))

    def edit(self, request: ImageEditRequest) -> ImageResult:
        """Edit: the prompt applied to 1–4 reference images (`POST /v1/images/edits`)."""
        t0 = time.perf_counter()
        request, body = self.prepare_edit(request)
        return self.send_edit(request, body, started=t0)

    def send_edit(self, request: ImageEditRequest, body: EditBody, *, started: float | None = None) -> ImageResult:
        """Send a prepared edit and check what comes back."""
        t0 = time.perf_counter() if started is None else started
        payload, timings = self.transport.edit(body.body, body.content_type)
        return self._result(request, payload, timings, t0, fitting=body.fitting, references=body.describe())

    def _result(self, request: ImageRequest | ImageEditRequest, payload: ImageGenerationResponse,
                timings: TransportTimings, t0: float, **more: Any) -> ImageResult:
        images, fmt = self._check(request, payload)
        extra = payload.model_extra or {}
        preview = extra.get("preview")
        model_s = timings.model_s if timings.model_s is not None else _number(extra.get("inference_time_s"))
        return ImageResult(
            images=images, request=request, width=request.width, height=request.height, format=fmt,
            model_s=model_s, request_s=timings.request_s, total_s=time.perf_counter() - t0,
            preview=bool(preview), preview_note=preview if isinstance(preview, str) else None,
            revised_prompt=payload.data[0].revised_prompt if payload.data else None, extra=dict(extra), **more,
        )

    def _check(self, request: ImageRequest | ImageEditRequest,
               payload: ImageGenerationResponse) -> tuple[list[bytes], str]:
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
    recording it; bad input raises before anything is recorded, and so does a `history` acting for someone whose
    role may not generate (Forbidden: nothing reaches the server)."""
    require(history.actor, "generate")
    request = request.validated().with_seed()
    job = history.jobs.create("image", request.prompt, request.params(), target=client.target, status="running")
    return _record(history, job, lambda: client.generate(request))


def record_edit(client: ImageClient, history: History, request: ImageEditRequest) -> Job:
    """Edit and record, like record_image: an image job (so the gallery and "Use for video" take it) whose
    params carry the references (name, gallery job id, format and size, what was sent) and whose inputs are
    the reference files (`reference-1.png`, …, as prepared, before any fitting); meta says `edit: true` and
    `fitting`. Bad input (or a role that may not generate: Forbidden) raises before anything is recorded."""
    require(history.actor, "generate")
    t0 = time.perf_counter()
    request, body = client.prepare_edit(request)
    described = [{**kept.describe(), "sent": sent.describe()["sent"]} for kept, sent in zip(body.prepared, body.references)]
    params = request.params() | {"references": described, "body_bytes": len(body)}
    inputs = {r.filename: r.data for r in body.prepared}
    job = history.jobs.create("image", request.prompt, params, target=client.target, status="running", inputs=inputs,
                         meta={"edit": True, "seed": request.seed, "fitting": body.fitting})
    return _record(history, job, lambda: client.send_edit(request, body, started=t0),
                   {"edit": True, "references": len(body.references), "fitting": body.fitting})


def _record(history: History, job: Job, run: Any, extra_meta: dict[str, Any] | None = None) -> Job:
    try:
        result = run()
    except StudioError as exc:
        history.jobs.fail(job.id, str(exc))
        raise
    except Exception as exc:  # a bug must not leave the row "running" forever
        history.jobs.fail(job.id, f"unexpected error: {type(exc).__name__}: {exc}")
        raise
    ext = "jpg" if result.format == "jpeg" else result.format
    files = {f"image-{i}.{ext}": data for i, data in enumerate(result.images)}
    meta = {"seed": result.seed, "width": result.width, "height": result.height, "format": result.format,
            "preview": result.preview, **(extra_meta or {})}
    if result.preview_note:
        meta["preview_note"] = result.preview_note
    if result.revised_prompt:
        meta["revised_prompt"] = result.revised_prompt
    return history.jobs.succeed(job.id, files, timings=result.timings(), meta=meta)
