"""Video generation as a job: `VideoClient` (prepare, submit, wait, result) over a `VideoTransport`.

    client = omni_client("http://127.0.0.1:8091", settings)
    result = client.generate(VideoRequest("the camera pans slowly", reference=png_bytes))   # blocking
    result.mp4, result.info.frames, result.model_s, result.wall_s

The request and its multipart body: services/videos/request.py. Transports: services/videos/transports.py
(vLLM-Omni, mock) and services/videos/sagemaker.py (async, S3). Jobs kept in the history across restarts:
services/videos/jobs.py. Outputs are checked here: the MP4 must decode to frames (`check_mp4`).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from protocol.errors import JobFailed, ServerError
from services.videos.request import MultipartBody, VideoRequest, encode_request
from services.videos.transports import (
    JobHandle,
    JobState,
    OmniVideoTransport,
    VideoPayload,
    VideoTransport,
)

if TYPE_CHECKING:
    from services.settings import Settings


JOB_TIMEOUT_S = 3600.0  # SageMaker async allows up to an hour


POLL_FIRST_S, POLL_MAX_S, POLL_GROWTH = 0.2, 3.0, 1.5


def poll_intervals(first: float = POLL_FIRST_S, most: float = POLL_MAX_S, growth: float = POLL_GROWTH) -> Iterator[float]:
    """Fast at first, then backing off: 0.2, 0.3, 0.45, … up to `most` seconds."""
    wait = first
    while True:
        yield wait
        wait = min(most, wait * growth)


@dataclass(frozen=True)
class Mp4Info:
    frames: int
    width: int
    height: int
    fps: float
    duration_s: float
    codec: str


def check_mp4(data: bytes, *, where: str = "the video server") -> Mp4Info:
    """Decode the whole file with PyAV: it must be an MP4 with a video stream and frames."""
    import av

    if not data:
        raise ServerError(f"{where} returned an empty body instead of an MP4")
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if "mp4" not in container.format.name.split(","):
                raise ServerError(f"{where} returned {container.format.name}, not an MP4")
            if not container.streams.video:
                raise ServerError(f"{where} returned an MP4 without a video stream")
            stream = container.streams.video[0]
            frames = sum(1 for _ in container.decode(stream))
            rate = float(stream.average_rate or stream.guessed_rate or 0)
            codec = stream.codec_context.name
            width, height = stream.codec_context.width, stream.codec_context.height
    except ServerError:
        raise
    except (av.error.FFmpegError, ValueError, OSError) as exc:
        raise ServerError(f"{where} returned bytes that are not a playable MP4 ({exc})") from None
    if frames == 0:
        raise ServerError(f"{where} returned an MP4 with no frames")
    return Mp4Info(frames=frames, width=width, height=height, fps=rate,
                   duration_s=frames / rate if rate else 0.0, codec=codec)


@dataclass(frozen=True)
class VideoResult:
    mp4: bytes
    request: VideoRequest  # exactly what was sent, seed included
    info: Mp4Info
    model_s: float | None  # the server's X-Inference-Time-S
    wall_s: float  # from encoding the request to the checked MP4 in hand
    request_id: str | None = None
    body_bytes: int = 0
    reference_jpeg: bytes | None = field(default=None, repr=False)

    def timings(self) -> dict[str, float]:
        out = {"wall_s": round(self.wall_s, 4)}
        if self.model_s is not None:
            out["model_s"] = round(self.model_s, 4)
            out["overhead_s"] = round(self.wall_s - self.model_s, 4)
        return out


class VideoClient:
    """Job-shaped: `encode` → `submit` → `poll` … → `result`; `generate` does all of it, blocking."""

    def __init__(self, transport: VideoTransport) -> None:
        self.transport = transport

    @property
    def target(self) -> str:
        return self.transport.target

    def prepare(self, request: VideoRequest) -> tuple[VideoRequest, MultipartBody]:
        """Validate, fix the seed, build the body. Raises InvalidInput before anything is sent."""
        request = request.validated(check_reference=False).with_seed()
        return request, encode_request(request)  # decodes and checks the reference

    def submit(self, body: MultipartBody) -> JobHandle:
        return self.transport.submit(body.body, body.content_type)

    def poll(self, handle: JobHandle, wait_s: float = 0.0) -> JobState:
        return self.transport.poll(handle, wait_s)

    def wait(self, handle: JobHandle, *, timeout_s: float = JOB_TIMEOUT_S, stop: Stop | None = None,
             on_running: Callable[[JobState], None] | None = None) -> JobState:
        """Poll with backoff until the job is final (or `timeout_s` passes: JobFailed, the job may go on);
        `on_running` sees each state while it runs (its `notice` is for the person waiting)."""
        deadline = time.monotonic() + timeout_s
        for wait in poll_intervals(most=getattr(self.transport, "poll_max_s", POLL_MAX_S)):
            left = deadline - time.monotonic()
            if left <= 0:
                raise JobFailed(f"no result from {handle.target} after {timeout_s:.0f} s; the job may still "
                                "finish on the server")
            if stop is not None and stop.is_set():
                raise JobFailed("stopped while waiting for the server")
            state = self.transport.poll(handle, min(wait, left))
            if state.state != "running":
                return state
            if on_running is not None:
                on_running(state)
        raise AssertionError  # poll_intervals never ends

    def result(self, handle: JobHandle) -> VideoPayload:
        payload = self.transport.fetch(handle)
        return payload

    def generate(self, request: VideoRequest, *, timeout_s: float = JOB_TIMEOUT_S) -> VideoResult:
        """The whole job in the caller's thread; raises JobFailed with the server's text on failure."""
        t0 = time.perf_counter()
        request, body = self.prepare(request)
        handle = self.submit(body)
        state = self.wait(handle, timeout_s=timeout_s)
        if state.state != "succeeded":
            raise JobFailed(state.error or f"the video job on {handle.target} ended as {state.state}")
        payload = self.result(handle)
        info = check_mp4(payload.mp4, where=f"the video server at {self.target}")
        return VideoResult(mp4=payload.mp4, request=request, info=info, model_s=payload.model_s,
                           wall_s=time.perf_counter() - t0, request_id=payload.request_id,
                           body_bytes=len(body), reference_jpeg=body.reference_jpeg)

    def close(self) -> None:
        close = getattr(self.transport, "close", None)
        if callable(close):
            close()


class Stop(Protocol):
    """What `wait` checks between polls: a threading.Event, or anything with its `is_set`."""

    def is_set(self) -> bool: ...


def omni_client(url: str, settings: Settings) -> VideoClient:
    """The video client for a vLLM-Omni server (or the offline engine) at `url`."""
    return VideoClient(OmniVideoTransport(url, timeout=max(settings.request_timeout_s, 60.0),
                                          connect_timeout=settings.connect_timeout_s))
