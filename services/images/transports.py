"""Image transports: one method, httpx-style, so the client logic is written once.

    payload, timings = transport.generate(ImageGenerationRequest)   # ImageGenerationResponse, TransportTimings
    payload, timings = transport.edit(body, content_type)           # the multipart body of an edit, as is
    transport.payload_limit                                         # bytes an edit's body may have, or None

`OmniImageTransport` posts JSON to a vLLM-Omni server's `/v1/images/generations` (`b64_json`) and an edit's
multipart body to `/v1/images/edits`; `MockImageTransport` answers from functions, for unit tests; the
SageMaker transport is in services/images/sagemaker.py (its payload_limit is SageMaker's realtime limit).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx
from pydantic import ValidationError

from protocol.common import HEADER_INFERENCE_TIME, error_text
from protocol.errors import BackendUnreachable, ServerError
from protocol.images import IMAGE_EDITS_PATH, IMAGES_PATH, ImageGenerationRequest, ImageGenerationResponse

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class TransportTimings:
    """What the transport measured: the model's own time when the server reports it, and the round trip."""

    model_s: float | None
    request_s: float


@runtime_checkable
class ImageTransport(Protocol):
    target: str  # where requests go, for messages
    payload_limit: int | None  # the most bytes an edit's body may have (None: no limit the studio must fit)
    payload_limit_name: str  # that limit, as messages name it

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]: ...
    def edit(self, body: bytes, content_type: str) -> tuple[ImageGenerationResponse, TransportTimings]: ...


def error_message(resp: httpx.Response) -> str:
    """The server's own words from a vLLM-Omni/OpenAI/FastAPI error body (or the start of the body)."""
    return error_text(resp.text) or resp.reason_phrase


class OmniImageTransport:
    """vLLM-Omni's `POST /v1/images/generations` and `POST /v1/images/edits` over httpx (one pooled client)."""

    payload_limit: int | None = None  # vLLM-Omni sets no bound on an edit's file parts
    payload_limit_name = "the server's request limit"

    def __init__(self, url: str, *, timeout: float = 120.0, connect_timeout: float = 10.0,
                 http_transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.target = self.url + IMAGES_PATH
        self._http = httpx.Client(timeout=httpx.Timeout(timeout, connect=connect_timeout), transport=http_transport)

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]:
        return self._post(self.target, json=request.wire())

    def edit(self, body: bytes, content_type: str) -> tuple[ImageGenerationResponse, TransportTimings]:
        return self._post(self.url + IMAGE_EDITS_PATH, content=body,
                          headers={"Content-Type": content_type, "Accept": "application/json"})

    def _post(self, url: str, **kwargs: Any) -> tuple[ImageGenerationResponse, TransportTimings]:
        t0 = time.perf_counter()
        try:
            resp = self._http.post(url, **kwargs)
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
            raise ServerError(f"the image server at {self.url} sent a response that is not an image result "
                              f"(HTTP {resp.status_code}, {resp.headers.get('content-type') or 'no content type'})",
                              status=resp.status_code) from None
        return payload, TransportTimings(model_s=_float_header(resp.headers.get(HEADER_INFERENCE_TIME)),
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
    """Answers from `handler(request)` (and an edit from `edit_handler(body, content_type)`), which return an
    ImageGenerationResponse or raise (like httpx's MockTransport). Records every request and edit body."""

    payload_limit_name = "the mock's request limit"

    def __init__(self, handler: Callable[[ImageGenerationRequest], ImageGenerationResponse], *,
                 target: str = "mock://images", model_s: float | None = None,
                 edit_handler: Callable[[bytes, str], ImageGenerationResponse] | None = None,
                 payload_limit: int | None = None) -> None:
        self.target = target
        self._handler = handler
        self._edit_handler = edit_handler
        self._model_s = model_s
        self.payload_limit = payload_limit
        self.requests: list[ImageGenerationRequest] = []
        self.edits: list[tuple[bytes, str]] = []

    def edit(self, body: bytes, content_type: str) -> tuple[ImageGenerationResponse, TransportTimings]:
        self.edits.append((body, content_type))
        if self._edit_handler is None:
            raise ServerError("the mock image transport was given no edit_handler", status=404)
        t0 = time.perf_counter()
        payload = self._edit_handler(body, content_type)
        return payload, TransportTimings(model_s=self._model_s, request_s=time.perf_counter() - t0)

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]:
        self.requests.append(request)
        t0 = time.perf_counter()
        payload = self._handler(request)
        return payload, TransportTimings(model_s=self._model_s, request_s=time.perf_counter() - t0)
