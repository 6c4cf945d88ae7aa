"""Video transports only move the client's bytes:

    handle = transport.submit(body, content_type)    # JobHandle (JSON-able: stored with the job)
    state = transport.poll(handle, wait_s=0.5)       # JobState: running | succeeded | failed | lost
    payload = transport.fetch(handle)                # VideoPayload: MP4 bytes, X-Inference-Time-S, request id
    transport.can_resume(handle)                     # may a new process poll this handle again?

`OmniVideoTransport` posts to a vLLM-Omni server's `/v1/videos/sync` on a thread and waits on it (a
synchronous call cannot be picked up again after a restart, so its handles are not resumable).
`MockVideoTransport` answers from a function for unit tests. The SageMaker async transport
(services/videos/sagemaker.py) implements the same four methods, with resumable handles.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import httpx

from protocol.common import (
    HEADER_INFERENCE_TIME,
    HEADER_REQUEST_ID,
    HEADER_STAGE_DURATIONS,
)
from protocol.errors import BackendUnreachable, JobFailed, ServerError, StudioError
from protocol.videos import VIDEO_SYNC_PATH
from services.images.transports import error_message

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class JobHandle:
    """What a transport needs to find a submitted job again. JSON-able: it is stored with the job."""

    transport: str  # the transport kind, e.g. "omni-sync", "sagemaker-async"
    target: str  # where it was sent (URL, endpoint name)
    id: str  # the transport's id for it (request id, InferenceId)
    resumable: bool  # may another process poll it again (after a restart)?
    data: dict[str, str] = field(default_factory=dict)  # e.g. output/failure locations

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobHandle:
        return cls(transport=d["transport"], target=d["target"], id=d["id"], resumable=bool(d["resumable"]),
                   data=dict(d.get("data") or {}))


@dataclass(frozen=True)
class JobState:
    state: Literal["running", "succeeded", "failed", "lost"]  # lost: the transport knows nothing of it
    error: str | None = None  # the failure text the server left (failed / lost)
    detail: str | None = None  # what it is waiting for, for progress displays
    notice: str | None = None  # what a person should see while it runs, e.g. "starting an instance (about 8 min)"


@dataclass(frozen=True)
class VideoPayload:
    mp4: bytes
    model_s: float | None  # X-Inference-Time-S: the server's own time
    request_id: str | None = None
    stage_durations: str | None = None


@runtime_checkable
class VideoTransport(Protocol):
    target: str

    def submit(self, body: bytes, content_type: str) -> JobHandle: ...
    def poll(self, handle: JobHandle, wait_s: float = 0.0) -> JobState: ...
    def fetch(self, handle: JobHandle) -> VideoPayload: ...
    def can_resume(self, handle: JobHandle) -> bool: ...


class OmniVideoTransport:
    """`POST /v1/videos/sync` of a vLLM-Omni server. The call runs on its own daemon thread; `poll` waits
    on it, so the result is read the moment the server answers."""

    kind = "omni-sync"

    def __init__(self, url: str, *, timeout: float = 600.0, connect_timeout: float = 10.0,
                 http_transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self.target = self.url + VIDEO_SYNC_PATH
        self._http = httpx.Client(timeout=httpx.Timeout(timeout, connect=connect_timeout), transport=http_transport)
        self._calls: dict[str, concurrent.futures.Future[VideoPayload]] = {}
        self._lock = threading.Lock()

    def submit(self, body: bytes, content_type: str) -> JobHandle:
        call_id = uuid.uuid4().hex
        future: concurrent.futures.Future[VideoPayload] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            self._calls[call_id] = future

        def run() -> None:
            try:
                future.set_result(self._post(body, content_type))
            except BaseException as exc:  # delivered to poll(); nothing escapes the thread
                future.set_exception(exc)

        threading.Thread(target=run, name=f"video-sync-{call_id[:8]}", daemon=True).start()
        return JobHandle(self.kind, self.target, call_id, resumable=False)

    def _post(self, body: bytes, content_type: str) -> VideoPayload:
        try:
            resp = self._http.post(self.target, content=body,
                                   headers={"Content-Type": content_type, "Accept": "video/mp4"})
        except httpx.TimeoutException as exc:
            raise BackendUnreachable(f"the video server at {self.url} did not answer in time "
                                     f"({type(exc).__name__}); a long video may need a larger request_timeout_s") from None
        except httpx.HTTPError as exc:
            raise BackendUnreachable(f"cannot reach the video server at {self.url} ({type(exc).__name__}: {exc}); "
                                     "is it running, and is the URL right?") from None
        if resp.status_code >= 400:
            raise ServerError(f"the video server refused the request (HTTP {resp.status_code}): {error_message(resp)}",
                              status=resp.status_code)
        try:
            model_s = float(resp.headers[HEADER_INFERENCE_TIME])
        except (KeyError, ValueError):
            model_s = None
        return VideoPayload(mp4=resp.content, model_s=model_s, request_id=resp.headers.get(HEADER_REQUEST_ID),
                            stage_durations=resp.headers.get(HEADER_STAGE_DURATIONS))

    def poll(self, handle: JobHandle, wait_s: float = 0.0) -> JobState:
        with self._lock:
            future = self._calls.get(handle.id)
        if future is None:
            return JobState("lost", error=f"this process has no call {handle.id} to {handle.target} (a synchronous "
                                          "call ends with the process that made it)")
        done, _ = concurrent.futures.wait([future], timeout=max(0.0, wait_s))
        if not done:
            return JobState("running", detail=f"waiting for {self.target}")
        exc = future.exception()
        if exc is not None:
            with self._lock:
                self._calls.pop(handle.id, None)
            return JobState("failed", error=str(exc) if isinstance(exc, StudioError) else f"{type(exc).__name__}: {exc}")
        return JobState("succeeded")

    def fetch(self, handle: JobHandle) -> VideoPayload:
        with self._lock:
            future = self._calls.pop(handle.id, None)
        if future is None or not future.done():
            raise JobFailed(f"no finished call {handle.id} to fetch from {handle.target}")
        return future.result()

    def can_resume(self, handle: JobHandle) -> bool:
        return False  # the HTTP call died with the process that made it

    def close(self) -> None:
        self._http.close()


class MockVideoTransport:
    """Runs `handler(body, content_type) -> VideoPayload` (or raises) at submit; records what it got.
    `polls_until_done` makes poll() report "running" that many times first."""

    kind = "mock"

    def __init__(self, handler: Callable[[bytes, str], VideoPayload], *, target: str = "mock://videos",
                 polls_until_done: int = 0, resumable: bool = False) -> None:
        self.target = target
        self._handler = handler
        self._polls_until_done = polls_until_done
        self._resumable = resumable
        self.submitted: list[tuple[bytes, str]] = []
        self._results: dict[str, VideoPayload | BaseException] = {}
        self._polls: dict[str, int] = {}

    def submit(self, body: bytes, content_type: str) -> JobHandle:
        self.submitted.append((body, content_type))
        handle = JobHandle(self.kind, self.target, uuid.uuid4().hex, resumable=self._resumable)
        try:
            self._results[handle.id] = self._handler(body, content_type)
        except Exception as exc:
            self._results[handle.id] = exc
        return handle

    def poll(self, handle: JobHandle, wait_s: float = 0.0) -> JobState:
        if handle.id not in self._results:
            return JobState("lost", error="unknown to the mock")
        seen = self._polls[handle.id] = self._polls.get(handle.id, 0) + 1
        if seen <= self._polls_until_done:
            time.sleep(min(wait_s, 0.01))
            return JobState("running", detail=f"poll {seen}")
        r = self._results[handle.id]
        return JobState("failed", error=str(r)) if isinstance(r, BaseException) else JobState("succeeded")

    def fetch(self, handle: JobHandle) -> VideoPayload:
        r = self._results[handle.id]
        if isinstance(r, BaseException):
            raise JobFailed(str(r))
        return r

    def can_resume(self, handle: JobHandle) -> bool:
        return handle.resumable and handle.id in self._results
