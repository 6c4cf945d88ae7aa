"""Running a sweep: each concurrency level in turn, closed loop, on the studio's own clients.

    report = asyncio.run(run_sweep(backend, plan, target, on_progress=print))
    run = SweepRun(loop, backend, plan, target, history=history)   # from a UI thread: run.progress(), .result()

At a level of concurrency c, c workers each take the next of the level's N requests, send it, wait for it to
end and take the next, until all N are sent: never more than c requests in flight, and a new one starts the
moment one ends (closed loop: the load is what the target can take, not a fixed arrival rate). Levels run one
after the other, lowest first.

What one request is, is its family's (services/load/family.py: the load part its family module registers, whose
`unit` is made once before the warm-up):

- voice (services/load/voice.py): a full streaming session through `SpeechClient.say` — the same SpeechSession the
  Voice page uses; first audio (TTFA, from input.done), audio seconds and RTF are the session's own figures;
- image (image.py): one generation through `ImageClient.generate` (the image checked as the Image page checks it);
- video (video.py): one whole job through `VideoClient.generate`: submit, poll, fetch (S3 on SageMaker), MP4 decoded;
- listen (listen.py): one live stream through the backend's `Listener.stream` — the recording sent over
  `/v1/realtime` at real time; the final text's latency, the first partial and the audio seconds are the
  transcript's own figures. The recording is the plan's, or the plan's sentence spoken by the offline engine's
  voice, made once before the warm-up.

Every load kind runs through `run_levels` (the warm-up, the levels, the cap): `run_sweep` with a family's unit of
work, services/load/converse.py with whole conversations.

First `plan.warmup` requests run one at a time, outside every figure (the report keeps them under
`warmup`); if one fails, the sweep stops there with its error (WarmupFailed), before any level's load.
A request that fails is a sample with `ok: false` and the error's text; throttling (SageMaker's
ThrottlingException, HTTP 429 or 503) is flagged and counted, never fatal. After the wall-clock cap (or
`stop`), no new request is sent; those in flight finish (each under its own client timeout) and the report says
why it ended early.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.errors import StudioError
from services.access import require
from services.base import Backend
from services.load.family import Failed
from services.load.plan import LoadPlan, load_family
from services.load.report import LevelReport, LoadReport, Sample
from services.load.target import LoadTarget

if TYPE_CHECKING:
    from services.history import History
    from services.runtime import BackgroundLoop

log = logging.getLogger(__name__)

_THROTTLING = re.compile(r"Throttling|TooManyRequests|Too Many Requests|\bHTTP 429\b|\bHTTP 503\b|"
                         r"ServiceUnavailable|\(429\)|\(503\)", re.IGNORECASE)


def is_throttling(error: BaseException | str | None) -> bool:
    """SageMaker's ThrottlingException, or an HTTP 429 / 503 from any target (the status or the text says so)."""
    if error is None:
        return False
    if getattr(error, "status", None) in (429, 503):
        return True
    return bool(_THROTTLING.search(str(error)))


@dataclass(frozen=True)
class Progress:
    """Where a sweep is: the level (index and concurrency), requests finished of those planned, in flight."""

    level_index: int
    levels: int
    concurrency: int
    level_done: int
    level_planned: int
    done: int  # over the whole sweep
    total: int
    in_flight: int
    errors: int  # over the whole sweep
    elapsed_s: float

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 1.0

    def text(self) -> str:
        return (f"level {self.level_index + 1}/{self.levels} (concurrency {self.concurrency}): "
                f"{self.level_done}/{self.level_planned} done, {self.in_flight} in flight · {self.done}/{self.total} "
                f"overall, {self.errors} error{'s' if self.errors != 1 else ''} · {self.elapsed_s:.0f} s")


OnProgress = Callable[[Progress], None]


class WarmupFailed(StudioError):
    """The request sent before the levels failed: every request of the sweep would (a voice the target lacks, a
    model that is not loaded). Nothing else was sent."""


def new_report(plan: LoadPlan, target: LoadTarget) -> LoadReport:
    """The report a sweep of `plan` on `target` fills in, level by level."""
    return LoadReport(
        modality=plan.modality, backend=target.backend, target=target.target, levels=[], slo=plan.slo,
        instance_type=target.instance_type, usd_per_hour=target.usd_per_hour, price_source=target.price_source,
        price_note=target.price_note, machine=target.machine, emulated=target.emulated, work=dict(plan.work),
        requests_per_level=plan.requests, max_wall_s=plan.max_wall_s,
    )


async def run_sweep(backend: Backend, plan: LoadPlan, target: LoadTarget, *, on_progress: OnProgress | None = None,
                    stop: threading.Event | None = None, clock: Callable[[], float] = time.perf_counter) -> LoadReport:
    """Every level of `plan` against `backend` (which `target` describes); the report with every sample."""
    report = new_report(plan, target)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(plan.levels), thread_name_prefix="load")
    try:
        unit = await load_family(plan.modality).unit(backend, plan, target, pool)
        report.work |= unit.work  # listen: the recording its streams send
        return await run_levels(report, plan, unit.send, on_progress=on_progress, stop=stop, clock=clock)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


async def run_levels(report: LoadReport, plan: LoadPlan, one: Callable[[], Awaitable[dict[str, Any]]], *,
                     on_progress: OnProgress | None = None, stop: threading.Event | None = None,
                     clock: Callable[[], float] = time.perf_counter) -> LoadReport:
    """The warm-up, then each level of `plan` closed loop, every request being `one()` (a sample's figures, or
    Failed with some): what every load kind runs, into `report`."""
    sweep_t0 = clock()
    deadline = sweep_t0 + plan.max_wall_s
    counts = {"done": 0, "errors": 0}

    def halted() -> str | None:
        if stop is not None and stop.is_set():
            return "stopped by request"
        if clock() >= deadline:
            return f"the wall-clock cap of {plan.max_wall_s:g} s was reached"
        return None

    for i in range(plan.warmup):
        sample = await measure(i, one, clock(), clock)
        report.warmup.append(sample)
        if not sample.ok:
            raise WarmupFailed(f"the warm-up request to {report.target} failed, so no sweep was run: {sample.error}")
    for index, c in enumerate(plan.levels):
        if (why := halted()) is not None:
            report.stopped = why
            break
        level = await _run_level(index, c, plan, one, counts, clock, sweep_t0, halted, on_progress)
        report.levels.append(level)
        if level.requests < plan.requests:
            report.stopped = halted() or "stopped"
            break
    report.finished_at = time.time()
    return report


async def measure(index: int, one: Callable[[], Awaitable[dict[str, Any]]], t0: float,
                  clock: Callable[[], float]) -> Sample:
    """One request, timed from `t0`: its figures, or how it failed (every failure becomes the sample's error)."""
    start = clock() - t0
    figures: dict[str, Any] = {}
    error: BaseException | None = None
    try:
        figures = await one()
    except Failed as failed:
        figures, error = failed.figures, failed.error
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # StudioError, or a bug: one failed request, not a dead sweep
        error = exc
    end = clock() - t0
    text = None if error is None else (str(error) if isinstance(error, StudioError) else f"{type(error).__name__}: {error}")
    return Sample.of(figures, index=index, start_s=round(start, 4), end_s=round(end, 4), ok=error is None,
                     error=text, throttled=is_throttling(error))


async def _run_level(index: int, c: int, plan: LoadPlan, one: Callable[[], Awaitable[dict[str, Any]]],
                     counts: dict[str, int], clock: Callable[[], float], sweep_t0: float,
                     halted: Callable[[], str | None], on_progress: OnProgress | None) -> LevelReport:
    t0 = clock()
    samples: list[Sample] = []
    state = {"issued": 0, "in_flight": 0}

    def report_progress() -> None:
        if on_progress is None:
            return
        try:
            on_progress(Progress(index, len(plan.levels), c, len(samples), plan.requests, counts["done"],
                                 plan.total_requests, state["in_flight"], counts["errors"], clock() - sweep_t0))
        except Exception:
            log.exception("the progress callback failed; the sweep goes on")

    async def worker() -> None:
        while state["issued"] < plan.requests and halted() is None:
            i = state["issued"]
            state["issued"] += 1
            state["in_flight"] += 1
            try:
                sample = await measure(i, one, t0, clock)
            finally:
                state["in_flight"] -= 1
            samples.append(sample)
            counts["done"] += 1
            counts["errors"] += not sample.ok
            report_progress()

    report_progress()
    await asyncio.gather(*(worker() for _ in range(c)))
    return LevelReport(plan.modality, c, plan.requests, tuple(sorted(samples, key=lambda s: s.index)))


class SweepRun:
    """A sweep running on the process's background loop, watched from a UI thread: `progress()`, `done`,
    `result()`, `stop()`. With a history, the finished report is saved there (`saved_id`), as its actor's: one
    whose role may not run load sweeps is refused (Forbidden) before any request is sent."""

    def __init__(self, loop: BackgroundLoop, backend: Backend, plan: LoadPlan, target: LoadTarget, *,
                 history: History | None = None, title: str | None = None) -> None:
        if history is not None:
            require(history.actor, "load_test")
        self.plan, self.target = plan, target
        self._progress: Progress | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._history, self._title = history, title
        self.saved_id: str | None = None
        self.save_error: str | None = None
        self._future = loop.submit(self._run(backend))

    async def _run(self, backend: Backend) -> LoadReport:
        report = await run_sweep(backend, self.plan, self.target, on_progress=self._on_progress, stop=self._stop)
        report.title = self._title
        if self._history is not None:
            try:
                self.saved_id = self._history.load_reports.save(report.to_dict())
            except StudioError as exc:
                self.save_error = str(exc)
        return report

    def _on_progress(self, p: Progress) -> None:
        with self._lock:
            self._progress = p

    def progress(self) -> Progress | None:
        with self._lock:
            return self._progress

    @property
    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> LoadReport:
        return self._future.result(timeout)

    def stop(self) -> None:
        """No new requests; those in flight finish, and the report keeps what ran."""
        self._stop.set()
