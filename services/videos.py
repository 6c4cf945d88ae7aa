"""Video generation as a job: `VideoClient` (submit, poll, result) over a `VideoTransport`, and
`VideoJobs`, which runs jobs on worker threads and keeps each one in the history.

    client = omni_client("http://127.0.0.1:8091", settings)
    result = client.generate(VideoRequest("the camera pans slowly", reference=png_bytes))   # blocking
    result.mp4, result.info.frames, result.model_s, result.wall_s

    jobs = VideoJobs(client, history)          # resumes or marks jobs a previous process left running
    job = jobs.start(VideoRequest(...))        # recorded (queued → running → succeeded | failed) at once
    history.get(job.id).status                 # a page polls the history; jobs.wait(job.id) blocks

The CLIENT builds the request body — multipart/form-data, field by field with urllib3's encoder, the
reference image fitted to the video size and sent as a JPEG data URL in `image_reference` under the
~1 MB part limit — so every transport sends the same, checkable bytes. A transport only moves them:

    handle = transport.submit(body, content_type)    # JobHandle (JSON-able: stored with the job)
    state = transport.poll(handle, wait_s=0.5)       # JobState: running | succeeded | failed | lost
    payload = transport.fetch(handle)                # VideoPayload: MP4 bytes, X-Inference-Time-S, request id
    transport.can_resume(handle)                     # may a new process poll this handle again?

`OmniVideoTransport` posts to a vLLM-Omni server's `/v1/videos/sync` on a thread and waits on it (a
synchronous call cannot be picked up again after a restart, so its handles are not resumable).
`MockVideoTransport` answers from a function for unit tests. The SageMaker async transport (S3 or inline
body, `invoke_endpoint_async`, polled output/failure objects) implements the same four methods, with
resumable handles.
"""

from __future__ import annotations

import concurrent.futures
import io
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import httpx
from urllib3.fields import RequestField
from urllib3.filepost import encode_multipart_formdata

from services import imaging
from services.errors import BackendUnreachable, InvalidInput, JobFailed, ServerError, StudioError
from services.images import SEED_MAX, error_message, in_range
from services.protocol import (
    VIDEO_HEADER_INFERENCE_TIME,
    VIDEO_HEADER_REQUEST_ID,
    VIDEO_HEADER_STAGE_DURATIONS,
    VIDEO_SYNC_PATH,
    ImageReference,
    VideoSyncForm,
)

if TYPE_CHECKING:
    from services.history import History, Job
    from services.settings import Settings

# The published defaults (Wan2.1-VACE-1.3B on the DLC).
DEFAULT_WIDTH, DEFAULT_HEIGHT = 480, 320
DEFAULT_FRAMES = 17
DEFAULT_FPS = 8
DEFAULT_STEPS = 30
DEFAULT_GUIDANCE = 5.0
SMOKE_TEST_STEPS = 4  # this few steps is a smoke test only: the video loses the reference's composition
SIZE_RANGE = (64, 1280)
FRAMES_RANGE = (1, 257)
FPS_RANGE = (1, 60)
STEPS_RANGE = (1, 200)
GUIDANCE_RANGE = (0.0, 20.0)
PART_LIMIT = imaging.REFERENCE_PART_LIMIT
REFERENCE_FILE = "reference.jpg"  # the fitted JPEG actually sent, kept with the job
VIDEO_FILE = "video.mp4"
JOB_TIMEOUT_S = 3600.0  # SageMaker async allows up to an hour
POLL_FIRST_S, POLL_MAX_S, POLL_GROWTH = 0.2, 3.0, 1.5

__all__ = [
    "JobHandle", "JobState", "Mp4Info", "MockVideoTransport", "MultipartBody", "OmniVideoTransport",
    "VideoClient", "VideoJobs", "VideoPayload", "VideoRequest", "VideoResult", "VideoTransport",
    "check_mp4", "encode_request", "omni_client", "poll_intervals",
]


# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VideoRequest:
    """What the user asks for, with the published defaults. `reference` is image bytes (any size/format
    Pillow reads); it is fitted to width×height before sending."""

    prompt: str
    width: int = DEFAULT_WIDTH
    height: int = DEFAULT_HEIGHT
    frames: int = DEFAULT_FRAMES
    fps: int = DEFAULT_FPS
    steps: int = DEFAULT_STEPS
    guidance: float = DEFAULT_GUIDANCE
    seed: int | None = None
    negative_prompt: str | None = None
    reference: bytes | None = field(default=None, repr=False)
    reference_name: str | None = None  # where the reference came from, for the record ("gallery: …", a file)
    model: str | None = None

    def validated(self, *, check_reference: bool = True) -> VideoRequest:
        """Every field checked (InvalidInput naming what to fix). `check_reference=False` leaves decoding the
        reference to encode_request, which checks it just the same — one decode instead of two."""
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInput("the motion prompt is empty: describe how the scene should move")
        in_range("width", self.width, *SIZE_RANGE)
        in_range("height", self.height, *SIZE_RANGE)
        in_range("frames", self.frames, *FRAMES_RANGE, hint="Wan rounds to 4k+1, e.g. 17, 33, 49")
        in_range("fps", self.fps, *FPS_RANGE)
        in_range("steps", self.steps, *STEPS_RANGE, hint=f"{DEFAULT_STEPS} keeps the composition")
        in_range("guidance", self.guidance, *GUIDANCE_RANGE, integer=False)
        if self.seed is not None:
            in_range("seed", self.seed, 0, SEED_MAX)
        if self.reference is not None and check_reference:
            imaging.check_image(self.reference, self.reference_name or "the reference image")
        neg = self.negative_prompt.strip() if isinstance(self.negative_prompt, str) else None
        return replace(self, prompt=self.prompt.strip(), negative_prompt=neg or None)

    @property
    def smoke_test(self) -> bool:
        return self.steps <= SMOKE_TEST_STEPS

    @property
    def size(self) -> str:
        return f"{self.width}x{self.height}"

    def with_seed(self) -> VideoRequest:
        return self if self.seed is not None else replace(self, seed=random.randint(0, SEED_MAX))

    def params(self) -> dict[str, Any]:
        """Plain values for the history and --json (the reference by name, not bytes)."""
        d = asdict(self)
        d.pop("reference")
        d["has_reference"] = self.reference is not None
        return d


@dataclass(frozen=True)
class MultipartBody:
    """The request body every transport sends as is."""

    body: bytes
    content_type: str  # multipart/form-data; boundary=…
    fields: dict[str, str]  # the text value of each part, in order (checkable)
    reference_jpeg: bytes | None  # the fitted JPEG inside image_reference

    def __len__(self) -> int:
        return len(self.body)


def encode_request(request: VideoRequest, *, boundary: str | None = None) -> MultipartBody:
    """The multipart body of `POST /v1/videos/sync` for `request` (validated; its seed must be set to be
    reproducible). Each part is built with urllib3's RequestField, so each can be checked on its own."""
    jpeg = None
    reference_field = None
    if request.reference is not None:
        fitted = imaging.fit_to(imaging.open_image(request.reference, request.reference_name or "the reference image"),
                                request.width, request.height)
        wrapper = len(ImageReference(image_url="").model_dump_json())
        url = imaging.jpeg_data_url(fitted, limit=PART_LIMIT, overhead=wrapper)
        jpeg = _data_url_bytes(url)
        reference_field = ImageReference(image_url=url).model_dump_json()
    form = VideoSyncForm(
        prompt=request.prompt, model=request.model, width=request.width, height=request.height,
        num_frames=request.frames, fps=request.fps, num_inference_steps=request.steps,
        guidance_scale=request.guidance, seed=request.seed, negative_prompt=request.negative_prompt,
        image_reference=reference_field,
    )
    fields = form.form_fields()
    parts = []
    for name, value in fields.items():
        if len(value.encode()) > PART_LIMIT:
            raise InvalidInput(f"the {name} field is {len(value.encode()):,} bytes; the server accepts parts of at "
                               f"most about {PART_LIMIT:,} bytes — shorten it")
        part = RequestField(name=name, data=value)
        part.make_multipart()  # Content-Disposition: form-data; name="…" — a plain text part
        parts.append(part)
    body, content_type = encode_multipart_formdata(parts, boundary=boundary)
    return MultipartBody(body=body, content_type=content_type, fields=fields, reference_jpeg=jpeg)


def _data_url_bytes(url: str) -> bytes:
    import base64

    return base64.b64decode(url.split(",", 1)[1])


# ---------------------------------------------------------------------------------------------------------
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
            model_s = float(resp.headers[VIDEO_HEADER_INFERENCE_TIME])
        except (KeyError, ValueError):
            model_s = None
        return VideoPayload(mp4=resp.content, model_s=model_s, request_id=resp.headers.get(VIDEO_HEADER_REQUEST_ID),
                            stage_durations=resp.headers.get(VIDEO_HEADER_STAGE_DURATIONS))

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


def poll_intervals(first: float = POLL_FIRST_S, most: float = POLL_MAX_S, growth: float = POLL_GROWTH) -> Iterator[float]:
    """Fast at first, then backing off: 0.2, 0.3, 0.45, … up to `most` seconds."""
    wait = first
    while True:
        yield wait
        wait = min(most, wait * growth)


# ---------------------------------------------------------------------------------------------------------
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

    def wait(self, handle: JobHandle, *, timeout_s: float = JOB_TIMEOUT_S,
             stop: threading.Event | None = None) -> JobState:
        """Poll with backoff until the job is final (or `timeout_s` passes: JobFailed, the job may go on)."""
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


def omni_client(url: str, settings: Settings) -> VideoClient:
    """The video client for a vLLM-Omni server (or the offline engine) at `url`."""
    return VideoClient(OmniVideoTransport(url, timeout=max(settings.request_timeout_s, 60.0),
                                          connect_timeout=settings.connect_timeout_s))


# ---------------------------------------------------------------------------------------------------------
class VideoJobs:
    """Runs video jobs on worker threads, one record per job in the history, whatever happens.

    On creation it looks for jobs a previous process left unfinished: those its transport can poll again
    (same target, resumable handle) are claimed and resumed here; those nobody can pick up again are
    marked `interrupted` with a message (by History.recover)."""

    def __init__(self, client: VideoClient, history: History, *, job_timeout_s: float = JOB_TIMEOUT_S,
                 recover: bool = True) -> None:
        self.client = client
        self.history = history
        self.job_timeout_s = job_timeout_s
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.resumed: list[str] = []
        if recover:
            self.resumed = self.recover()

    # -- public -----------------------------------------------------------------------------------------
    def start(self, request: VideoRequest) -> Job:
        """Record the job and start it. Bad input raises InvalidInput and records nothing."""
        t0 = time.perf_counter()
        request, body = self.client.prepare(request)
        params = request.params() | {"body_bytes": len(body)}
        inputs = {REFERENCE_FILE: body.reference_jpeg} if body.reference_jpeg else None
        job = self.history.create("video", request.prompt, params, target=self.client.target, inputs=inputs,
                                  meta={"seed": request.seed, "smoke_test": request.smoke_test})
        self._spawn(job.id, lambda: self._run(job.id, body, t0))
        return job

    def wait(self, job_id: str, timeout: float | None = None) -> Job:
        """Block until the job's worker is done here; the job as recorded."""
        with self._lock:
            thread = self._threads.get(job_id)
        if thread is not None:
            thread.join(timeout)
        return self.history.get(job_id)

    def running(self) -> list[str]:
        with self._lock:
            return [j for j, t in self._threads.items() if t.is_alive()]

    def close(self) -> None:
        """Stop polling (jobs left running stay `running` in the history, to be resumed or marked later)."""
        self._stop.set()

    def recover(self) -> list[str]:
        resumed = []
        for job in self.history.recover():
            handle = JobHandle.from_dict(job.handle or {})
            if job.kind != "video" or handle.target != self.client.target:
                continue  # a runner for that target picks it up
            if not self.client.transport.can_resume(handle):
                self.history.fail(job.id, f"the studio stopped while this job ran on {handle.target}, and it "
                                          "cannot be polled again; generate it again (its settings are kept)",
                                  status="interrupted")
                continue
            if self.history.claim(job):
                started = job.started_at or job.created_at
                self._spawn(job.id, lambda j=job.id, h=handle, s=started: self._follow(j, h, wall_from=s))
                resumed.append(job.id)
        return resumed

    # -- workers ----------------------------------------------------------------------------------------
    def _spawn(self, job_id: str, work: Callable[[], None]) -> None:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # nothing may leave a job unrecorded
                self._record_failure(job_id, f"unexpected error: {type(exc).__name__}: {exc}")

        thread = threading.Thread(target=run, name=f"video-job-{job_id}", daemon=True)
        with self._lock:
            self._threads = {j: t for j, t in self._threads.items() if t.is_alive()}
            self._threads[job_id] = thread
        thread.start()

    def _run(self, job_id: str, body: MultipartBody, t0: float) -> None:
        try:
            handle = self.client.submit(body)
        except StudioError as exc:
            self._record_failure(job_id, str(exc))
            return
        self.history.mark_running(job_id, handle.to_dict())
        self._follow(job_id, handle, perf_t0=t0)

    def _follow(self, job_id: str, handle: JobHandle, *, perf_t0: float | None = None,
                wall_from: float | None = None) -> None:
        def wall() -> float:
            return time.perf_counter() - perf_t0 if perf_t0 is not None else time.time() - (wall_from or time.time())

        try:
            state = self.client.wait(handle, timeout_s=self.job_timeout_s, stop=self._stop)
            if state.state == "lost":
                self._record_failure(job_id, state.error or "the server lost the job", status="interrupted")
                return
            if state.state == "failed":
                self._record_failure(job_id, state.error or "the server reported a failure", wall_s=wall())
                return
            payload = self.client.result(handle)
            info = check_mp4(payload.mp4, where=f"the video server at {handle.target}")
        except StudioError as exc:
            if self._stop.is_set():
                return  # closing: leave it running in the record, for the next process
            self._record_failure(job_id, str(exc), wall_s=wall())
            return
        wall_s = wall()
        timings = {"wall_s": round(wall_s, 4)}
        if payload.model_s is not None:
            timings |= {"model_s": round(payload.model_s, 4), "overhead_s": round(wall_s - payload.model_s, 4)}
        meta = {"frames": info.frames, "width": info.width, "height": info.height, "fps": info.fps,
                "duration_s": round(info.duration_s, 4), "codec": info.codec, "mp4_bytes": len(payload.mp4)}
        if payload.request_id:
            meta["request_id"] = payload.request_id
        if payload.stage_durations:
            meta["stage_durations"] = payload.stage_durations
        self.history.succeed(job_id, {VIDEO_FILE: payload.mp4}, timings=timings, meta=meta)

    def _record_failure(self, job_id: str, message: str, *, status: Literal["failed", "interrupted"] = "failed",
                        wall_s: float | None = None) -> None:
        try:
            self.history.fail(job_id, message, status=status,
                              timings={"wall_s": round(wall_s, 4)} if wall_s is not None else None)
        except Exception:  # the history itself is broken: nothing more can be recorded
            pass


def job_request(job: Job) -> VideoRequest:
    """The VideoRequest a recorded job was made with (reference: the fitted JPEG that was sent)."""
    p = job.params
    ref = job.input_path(REFERENCE_FILE)
    return VideoRequest(
        prompt=job.prompt, width=p["width"], height=p["height"], frames=p["frames"], fps=p["fps"],
        steps=p["steps"], guidance=p["guidance"], seed=p.get("seed"), negative_prompt=p.get("negative_prompt"),
        reference=ref.read_bytes() if ref is not None and ref.exists() else None,
        reference_name=p.get("reference_name"), model=p.get("model"),
    )

