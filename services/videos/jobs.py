"""Video jobs that survive restarts: `VideoJobs` runs each job on a worker thread and keeps it in the history.

    jobs = VideoJobs(client, history)          # resumes or marks jobs a previous process left running
    job = jobs.start(VideoRequest(...))        # recorded (queued → running → succeeded | failed) at once
    history.jobs.get(job.id).status            # a page polls the history; jobs.wait(job.id) blocks
    jobs.start(request, history=mine)          # one runner per process, each job for the person it is started as
    jobs.start(request, deliver=write_out)     # the MP4 handed over before the history keeps its copy (the CLI's --out)

A job is recorded by the history it is started with (`history.acting_as(person)`: Forbidden before anything is
sent when their role may not generate), and its worker carries it on as that person. Jobs a previous process
left are resumed for whoever made them (`History.acting_for_owner`).

Replicas of a team studio share the history: each runner renews the lease of the jobs it runs every third of the
history's `job_lease_s`, and looks for jobs whose lease lapsed (their replica died) as often, taking over those it
can poll (services/history/jobs.py). A renewal that finds its job taken over stops polling it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from protocol.errors import StudioError
from services.access import require
from services.videos.client import JOB_TIMEOUT_S, VideoClient, check_mp4
from services.videos.request import MultipartBody, VideoRequest
from services.videos.transports import JobHandle, JobState

if TYPE_CHECKING:
    from services.history import History, Job


log = logging.getLogger(__name__)
REFERENCE_FILE = "reference.jpg"  # the fitted JPEG actually sent, kept with the job


VIDEO_FILE = "video.mp4"


class VideoJobs:
    """Runs video jobs on worker threads, one record per job in the history, whatever happens.

    On creation it looks for jobs a previous process left unfinished: those its transport can poll again
    (same target, resumable handle) are claimed and resumed here; those nobody can pick up again are
    marked `interrupted` with a message (by `history.jobs.recover`)."""

    def __init__(self, client: VideoClient, history: History, *, job_timeout_s: float = JOB_TIMEOUT_S,
                 recover: bool = True) -> None:
        self.client = client
        self.history = history
        self.job_timeout_s = job_timeout_s
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.resumed: list[str] = []
        self._unrecorded: dict[str, str] = {}  # job id → a failure the history could not record (a full disk)
        self._lost: dict[str, threading.Event] = {}  # job id → set when this runner must stop polling it
        if recover:
            self.resumed = self.recover()
        self._keeper = threading.Thread(target=self._keep, args=(recover,), name="video-job-leases", daemon=True)
        self._keeper.start()

    # -- public -----------------------------------------------------------------------------------------
    def start(self, request: VideoRequest, *, history: History | None = None,
              deliver: Callable[[bytes], None] | None = None) -> Job:
        """Record the job (in `history`, the person's view; else the runner's own) and start it. Bad input
        raises InvalidInput, a role that may not generate Forbidden, and neither records or sends anything.
        `deliver(mp4)` gets the checked result before the history saves its copy: a full data disk then
        loses the history's copy, not the video."""
        history = history or self.history
        require(history.actor, "generate")
        t0 = time.perf_counter()
        request, body = self.client.prepare(request)
        params = request.params() | {"body_bytes": len(body)}
        inputs = {REFERENCE_FILE: body.reference_jpeg} if body.reference_jpeg else None
        job = history.jobs.create("video", request.prompt, params, target=self.client.target, inputs=inputs,
                             meta={"seed": request.seed, "smoke_test": request.smoke_test})
        self._spawn(job.id, history, lambda: self._run(history, job.id, body, t0, deliver))
        return job

    def wait(self, job_id: str, timeout: float | None = None, *, history: History | None = None) -> Job:
        """Block until the job's worker is done here; the job as recorded (as `history`'s person sees it)."""
        with self._lock:
            thread = self._threads.get(job_id)
        if thread is not None:
            thread.join(timeout)
        return (history or self.history).jobs.get(job_id)

    def problem(self, job_id: str) -> str | None:
        """Why the job ended here, when the history could not record it (it stays unfinished in the record,
        for `history.jobs.recover` in a later process to resume or mark interrupted)."""
        with self._lock:
            return self._unrecorded.get(job_id)

    def running(self) -> list[str]:
        with self._lock:
            return [j for j, t in self._threads.items() if t.is_alive()]

    def close(self) -> None:
        """Stop polling (jobs left running stay `running` in the history, to be resumed or marked later)."""
        self._stop.set()

    def _keep(self, sweep: bool) -> None:
        """Every third of the lease: renew the lease of each job running here (one taken over by another replica
        is let go), and — for a runner that recovers — take over jobs whose lease lapsed elsewhere."""
        every = max(0.2, self.history.job_lease_s / 3)
        while not self._stop.wait(every):
            for job_id in self.running():
                try:
                    kept = self.history.jobs.renew(job_id)  # by owner (this process), whoever's job it is
                except Exception as exc:  # noqa: BLE001 — the keeper must outlive a database that is away
                    log.warning("could not renew the lease of video job %s (tried again in %.0f s): %s", job_id,
                                every, exc)
                    continue  # the next round tries again: the lease has room for two misses
                if not kept:
                    with self._lock:
                        lost = self._lost.get(job_id)
                    if lost is not None:
                        lost.set()
            if sweep:
                try:
                    self.resumed += self.recover()
                except Exception as exc:  # noqa: BLE001 — as above: the next round looks again
                    log.warning("could not look for video jobs whose lease lapsed: %s", exc)

    def recover(self) -> list[str]:
        resumed = []
        for job in self.history.jobs.recover():  # of every user
            handle = JobHandle.from_dict(job.handle or {})
            if job.kind != "video" or handle.target != self.client.target:
                continue  # a runner for that target picks it up
            owner = self.history.acting_for_owner(job)  # carried on for whoever made it
            if not self.client.transport.can_resume(handle):
                owner.jobs.fail(job.id, f"the studio stopped while this job ran on {handle.target}, and it "
                                   "cannot be polled again; generate it again (its settings are kept)",
                           status="interrupted")
                continue
            if owner.jobs.claim(job):
                started = job.started_at or job.created_at
                self._spawn(job.id, owner,
                            lambda o=owner, j=job.id, h=handle, s=started: self._follow(o, j, h, wall_from=s))
                resumed.append(job.id)
        return resumed

    # -- workers ----------------------------------------------------------------------------------------
    def _spawn(self, job_id: str, history: History, work: Callable[[], None]) -> None:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # nothing may leave a job unrecorded
                self._record_failure(history, job_id, f"unexpected error: {type(exc).__name__}: {exc}")

        thread = threading.Thread(target=run, name=f"video-job-{job_id}", daemon=True)
        with self._lock:
            self._threads = {j: t for j, t in self._threads.items() if t.is_alive()}
            self._threads[job_id] = thread
        thread.start()

    def _run(self, history: History, job_id: str, body: MultipartBody, t0: float,
             deliver: Callable[[bytes], None] | None = None) -> None:
        try:
            handle = self.client.submit(body)
        except StudioError as exc:
            self._record_failure(history, job_id, str(exc))
            return
        history.jobs.mark_running(job_id, handle.to_dict())
        self._follow(history, job_id, handle, perf_t0=t0, deliver=deliver)

    def _follow(self, history: History, job_id: str, handle: JobHandle, *, perf_t0: float | None = None,
                wall_from: float | None = None, deliver: Callable[[bytes], None] | None = None) -> None:
        def wall() -> float:
            return time.perf_counter() - perf_t0 if perf_t0 is not None else time.time() - (wall_from or time.time())

        try:
            shown: list[str | None] = [None]

            def notice(running: JobState) -> None:  # e.g. "starting an instance": kept with the job for the page
                if running.notice != shown[0]:
                    shown[0] = running.notice
                    history.jobs.note(job_id, running.notice)

            lost = threading.Event()
            with self._lock:
                self._lost[job_id] = lost
            stop = _either(self._stop, lost)
            state = self.client.wait(handle, timeout_s=self.job_timeout_s, stop=stop, on_running=notice)
            if shown[0] is not None:
                history.jobs.note(job_id, None)  # over: the notice is no longer true
            if state.state == "lost":
                self._record_failure(history, job_id, state.error or "the server lost the job", status="interrupted")
                return
            if state.state == "failed":
                self._record_failure(history, job_id, state.error or "the server reported a failure", wall_s=wall())
                return
            payload = self.client.result(handle)
            info = check_mp4(payload.mp4, where=f"the video server at {handle.target}")
        except StudioError as exc:
            if self._stop.is_set() or self._taken_over(job_id):
                return  # closing, or another replica runs it now: leave the record to whoever holds it
            self._record_failure(history, job_id, str(exc), wall_s=wall())
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
        if deliver is not None:
            deliver(payload.mp4)
        try:
            history.jobs.succeed(job_id, {VIDEO_FILE: payload.mp4}, timings=timings, meta=meta)
        except StudioError as exc:  # e.g. no space left for the MP4: recorded as the job's failure when possible
            self._record_failure(history, job_id, str(exc), wall_s=wall_s)

    def _taken_over(self, job_id: str) -> bool:
        with self._lock:
            lost = self._lost.get(job_id)
        return lost is not None and lost.is_set()

    def _record_failure(self, history: History, job_id: str, message: str, *,
                        status: Literal["failed", "interrupted"] = "failed", wall_s: float | None = None) -> None:
        try:
            history.jobs.fail(job_id, message, status=status,
                         timings={"wall_s": round(wall_s, 4)} if wall_s is not None else None)
        except Exception as exc:  # the history itself is broken (a full disk): kept here, for whoever waits
            why = "" if str(exc) == message else f": {exc}"
            with self._lock:
                self._unrecorded[job_id] = f"{message} (the history could not record this{why})"


class _either:
    """An Event-like view that is set when either of two events is (what `VideoClient.wait` checks as `stop`)."""

    def __init__(self, a: threading.Event, b: threading.Event) -> None:
        self.a, self.b = a, b

    def is_set(self) -> bool:
        return self.a.is_set() or self.b.is_set()


def job_request(job: Job) -> VideoRequest:
    """The VideoRequest a recorded job was made with (reference: the fitted JPEG that was sent)."""
    p = job.params
    ref = job.input_file(REFERENCE_FILE)
    return VideoRequest(
        prompt=job.prompt, width=p["width"], height=p["height"], frames=p["frames"], fps=p["fps"],
        steps=p["steps"], guidance=p["guidance"], seed=p.get("seed"), negative_prompt=p.get("negative_prompt"),
        reference=ref,
        reference_name=p.get("reference_name"), model=p.get("model"),
    )
