"""`ListenEngine`: the engine's recognizer — its workers (offline.listen.whisper: Whisper tiny.en, the default, or
offline.listen.recognizer: pocketsphinx, by OMNI_ENGINE_RECOGNIZER or `python -m offline --recognizer`; each with
a Silero VAD of its own), the threads they run on and who holds which.

`create_app` (offline.server) makes one and keeps it on `app.state.listen`; the routes reach it through their
request, so nothing of it lives at module level and two apps in one process share nothing. Every decode runs on
the engine's own listen threads, never on the event loop, so the engine keeps answering while it recognizes.

A worker is leased to one request or stream at a time (`lease()`); at most `decoders` exist (each holds ~90 MB of
model), and a lease waits while all are out — in turn, at most `limits.lease_wait_s`, then `Busy` says the engine is
busy (offline.listen.limits). The first is loaded by `preload()` while the engine starts. The engine also counts
the open duplex sessions (`duplex_slot()`), each of which keeps a VAD of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from offline.guards import count_setting
from offline.listen.limits import ListenLimits
from offline.listen.models import PREVIEW_NOTES, SERVED_BY
from offline.listen.recognizer import FileTranscript, Utterances, Worker
from offline.listen.whisper import ModelMissing, WhisperUtterances, WhisperWorker

log = logging.getLogger(__name__)
T = TypeVar("T")

RECOGNIZER_ENV = "OMNI_ENGINE_RECOGNIZER"
RECOGNIZERS = ("whisper", "pocketsphinx")  # the first is the default
DECODERS_ENV = "OMNI_ENGINE_LISTEN_DECODERS"
THREADS_ENV = "OMNI_ENGINE_LISTEN_THREADS"
DEFAULT_DECODERS = 4
DEFAULT_THREADS = 2


class Busy(Exception):
    """No decoder (or no duplex session) came free in time; the message names the limit and its setting."""


class Lease:
    """One worker held by one request or stream. `call` runs a function of it on a listen thread; `release`
    gives it back — only once the thread's last call has ended, even when the caller was cancelled mid-call."""

    def __init__(self, engine: ListenEngine, worker: Worker) -> None:
        self.engine = engine
        self.worker = worker
        self._last: Future | None = None
        self._released = False

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        self._last = self.engine.submit(fn, *args)
        return await asyncio.wrap_future(self._last)

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        last = self._last
        if last is None or last.done():
            self.engine.give_back(self.worker)
            return
        loop = asyncio.get_running_loop()
        last.add_done_callback(lambda _: loop.call_soon_threadsafe(self.engine.give_back, self.worker))


class ListenEngine:
    """The recognizer's workers and threads (see the module's doc)."""

    def __init__(self, *, decoders: int = DEFAULT_DECODERS, threads: int = DEFAULT_THREADS,
                 limits: ListenLimits | None = None, recognizer: str = RECOGNIZERS[0]) -> None:
        if decoders < 1 or threads < 1:
            raise ValueError("the listen engine needs at least one decoder and one thread")
        if recognizer not in RECOGNIZERS:
            raise ValueError(f"the recognizer is {' or '.join(RECOGNIZERS)}, not {recognizer!r} ({RECOGNIZER_ENV})")
        self.recognizer = recognizer
        self.threads = threads
        self.decoders = decoders
        self.limits = limits or ListenLimits()
        self.duplex_open = 0  # duplex sessions open now (at most limits.duplex_sessions)
        self._threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="listen")
        self._idle: list[Worker] = []
        self._idle_lock = threading.Lock()
        self._slots = asyncio.Semaphore(decoders)  # bound to the app's loop on first use

    @classmethod
    def from_env(cls) -> ListenEngine:
        """Sizes from OMNI_ENGINE_LISTEN_DECODERS / OMNI_ENGINE_LISTEN_THREADS (defaults 4 and 2), limits from
        their OMNI_ENGINE_LISTEN_… settings (offline.listen.limits)."""
        return cls(decoders=count_setting(DECODERS_ENV, DEFAULT_DECODERS),
                   threads=count_setting(THREADS_ENV, DEFAULT_THREADS), limits=ListenLimits.from_env(),
                   recognizer=(os.environ.get(RECOGNIZER_ENV) or RECOGNIZERS[0]).strip().lower())

    @property
    def served_by(self) -> str:
        """What answers for the listen model: the recognizer's own name (the /v1/models card's `served_by`)."""
        return SERVED_BY[self.recognizer]

    @property
    def preview_note(self) -> str:
        """What the recognizer is, with its measured error rate (/v1/models, X-Offline-Preview)."""
        return PREVIEW_NOTES[self.recognizer]

    def new_worker(self) -> Worker | WhisperWorker:
        """A worker of the engine's recognizer (the Whisper model itself is loaded once and shared)."""
        if self.recognizer == "whisper":
            return WhisperWorker(self.threads)
        return Worker()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future:
        return self._threads.submit(fn, *args)

    def preload(self) -> None:
        """Load the first worker on a listen thread while the engine starts answering."""
        def load() -> None:
            try:
                worker = self.new_worker()
            except ModelMissing as exc:  # said now; each request says it again, as a 503
                log.error("listen: %s", exc)
                return
            with self._idle_lock:
                self._idle.append(worker)
            log.info("listen: the %s recognizer is loaded", self.recognizer)

        self._threads.submit(load)

    def shutdown(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def lease(self) -> Lease:
        """A worker of its own for one request or stream: waits in turn while all `decoders` are leased, at most
        `limits.lease_wait_s`; then Busy."""
        try:
            await asyncio.wait_for(self._slots.acquire(), self.limits.lease_wait_s)
        except TimeoutError:
            raise Busy(self.limits.busy_text(self.decoders)) from None
        try:
            with self._idle_lock:
                worker = self._idle.pop() if self._idle else None
            if worker is None:
                try:
                    worker = await asyncio.wrap_future(self.submit(self.new_worker))
                except ModelMissing as exc:  # a 503 naming the package to reinstall, as a busy engine's is
                    raise Busy(f"the engine's recognizer cannot run: {exc}") from None
        except BaseException:
            self._slots.release()
            raise
        return Lease(self, worker)

    @contextlib.contextmanager
    def duplex_slot(self) -> Iterator[None]:
        """One open duplex session counted while the block runs; Busy when `limits.duplex_sessions` are open."""
        if self.duplex_open >= self.limits.duplex_sessions:
            raise Busy(self.limits.duplex_busy_text())
        self.duplex_open += 1
        try:
            yield
        finally:
            self.duplex_open -= 1

    def give_back(self, worker: Worker) -> None:
        with self._idle_lock:
            self._idle.append(worker)
        self._slots.release()

    async def transcribe(self, samples: np.ndarray, duration_s: float, cancel: threading.Event) -> FileTranscript:
        """A whole file recognized, region by region; `cancel` set stops it before its next region."""
        lease = await self.lease()
        try:
            return await lease.call(lease.worker.transcribe, samples, duration_s, cancel)
        finally:
            lease.release()

    async def stream(self) -> tuple[Lease, Utterances | WhisperUtterances]:
        """A lease and the realtime recognition on it (release the lease when the stream ends)."""
        lease = await self.lease()
        try:
            return lease, await lease.call(lease.worker.stream)
        except BaseException:
            lease.release()
            raise

