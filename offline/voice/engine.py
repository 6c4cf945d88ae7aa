"""The engine's voice: one object owning the loaded speaker, the synthesis workers, the scheduler and the counts.

`create_app` (offline.server) makes one `VoiceEngine` and keeps it on `app.state.voice`; the routes reach it from
their request. Synthesis runs on a dedicated worker thread so the event loop stays responsive, and what that
thread makes next, and how many words of it, is the scheduler's choice (offline.voice.scheduler). While several
listeners are served a second worker makes pieces beside the first, each on its own 1-thread session.

Work nobody waits for is not done: a stream that is closed, or whose `cancel` event is set (its client went
away), drops its queued request from the worker and stops at the next chunk boundary. `stats()` counts what
the voice really synthesized, so tests can see that.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from offline.styles import Style
from offline.voice.scheduler import Playback, Request, Scheduler, Stream
from offline.voice.speaker import Interrupted, PiperSpeaker
from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE, PCM_SAMPLE_WIDTH

log = logging.getLogger(__name__)

PCM_BYTES_PER_S = PCM_SAMPLE_RATE * PCM_SAMPLE_WIDTH * PCM_CHANNELS


class SynthesisCancelled(Exception):
    """The stream's `cancel` event was set: its client is gone, so the rest is not synthesized."""


@dataclass(frozen=True)
class SynthesisStats:
    """What this engine synthesized (tests and benchmarks read it; it costs one lock per sentence)."""

    pieces: int = 0  # Piper sentences synthesized (one model run each), warm-up included
    open_streams: int = 0  # stream_pcm() generators started and not yet finished


class VoiceEngine:
    """The Piper voice (loaded once, lazily or via `preload()`), its two workers and the scheduler between them.

    One lock guards the scheduler, the second worker's busy flag and the counts; loading has its own, so a
    stream can be asked for while the model loads.
    """

    def __init__(self, *, workers: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._workers = workers  # None: OMNI_ENGINE_VOICE_WORKERS, read when the voice loads
        self._scheduler = Scheduler(clock)
        self._lock = threading.Lock()
        self._helper_busy = False
        self._stats = SynthesisStats()
        self._speaker: PiperSpeaker | None = None
        self._speaker_lock = threading.Lock()
        self._synthesis = ThreadPoolExecutor(max_workers=1, thread_name_prefix="piper-synthesis")
        self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="piper-synthesis-2")

    # -- the speaker ----------------------------------------------------------------------------------------
    def speaker(self) -> PiperSpeaker:
        """The Piper speaker, loaded on first use (blocking; call from a worker thread)."""
        if self._speaker is None:
            with self._speaker_lock:
                if self._speaker is None:
                    log.info("loading the Piper voice")
                    speaker = PiperSpeaker.load(workers=self._workers, on_piece=self._count_piece)
                    with self._lock:
                        self._scheduler.interrupter = speaker.piper_voice.session
                        self._scheduler.workers = speaker.workers
                    self._speaker = speaker
        return self._speaker

    def preload(self) -> None:
        """Start loading the voice on the synthesis thread so the first client does not wait for it."""
        self._synthesis.submit(self.speaker)

    def shutdown(self) -> None:
        """Stop the workers (the app is closing): queued pieces are dropped, a running one finishes."""
        self._synthesis.shutdown(wait=False, cancel_futures=True)
        self._helper.shutdown(wait=False, cancel_futures=True)

    async def median_f0(self) -> float:
        """The Piper voice's own median pitch in Hz (measured on the synthesis thread the first time)."""
        loop = asyncio.get_running_loop()
        speaker = self._speaker or await loop.run_in_executor(self._synthesis, self.speaker)
        if speaker.measured_f0 is not None:
            return speaker.measured_f0
        return await loop.run_in_executor(self._synthesis, speaker.median_f0)

    # -- counts ---------------------------------------------------------------------------------------------
    def stats(self) -> SynthesisStats:
        """A snapshot of this engine's synthesis counters."""
        with self._lock:
            return self._stats

    def _count_piece(self) -> None:
        with self._lock:
            self._stats = replace(self._stats, pieces=self._stats.pieces + 1)

    def _count_stream(self, change: int) -> None:
        with self._lock:
            self._stats = replace(self._stats, open_streams=self._stats.open_streams + change)

    # -- the workers ----------------------------------------------------------------------------------------
    def _serve(self, worker: int, taken: tuple[Request, int, int]) -> bool:
        """Make one taken piece on `worker`; False when it was interrupted (it waits again)."""
        request, start, end = taken
        future: Future = request.handle
        if not future.running() and not future.set_running_or_notify_cancel():
            with self._lock:
                self._scheduler.release(request)
            return True
        stream = request.stream
        try:
            if stream.cancel is not None and stream.cancel.is_set():
                raise SynthesisCancelled("speech synthesis was cancelled: its client is gone")
            speaker = self.speaker()
            # A lone listener's piece gets both threads; side by side, each worker has its own 1-thread session.
            with self._lock:
                side_by_side = worker or (not request.idle and self._scheduler.parallel(worker))
            frames = stream.synthesize(start, end, speaker.parallel[worker] if side_by_side else None)
        except Interrupted:
            with self._lock:
                self._scheduler.requeue(request, start)
            return False
        except BaseException as exc:  # handed to the stream's consumer
            with self._lock:
                self._scheduler.release(request)
            future.set_exception(exc)
        else:
            with self._lock:
                self._scheduler.finished(request, start, end, sum(map(len, frames)) / PCM_BYTES_PER_S)
            future.set_result(frames)
        return True

    def _take(self, worker: int, *, busy_only: bool = False) -> tuple[Request, int, int] | None:
        with self._lock:
            return self._scheduler.take(worker, busy_only=busy_only)

    def _run_next(self) -> None:
        """The first worker: make one piece of the most urgent stream. Submitted once per request, so every
        request is served; one whose request was served or dropped meanwhile finds nothing (or serves another).
        An interrupted piece waits again, and this call serves whoever is most urgent now."""
        while (taken := self._take(0)) is not None:
            self._wake_helper()
            if self._serve(0, taken):
                return

    def _wake_helper(self) -> None:
        """Start the second worker when it has something to do (only ever from the first worker's side: while
        the first worker is held, nothing is made)."""
        speaker = self._speaker
        with self._lock:
            if self._helper_busy or speaker is None or speaker.workers < 2 or not self._scheduler.wanted():
                return
            self._helper_busy = True
        self._helper.submit(self._run_helper)

    def _run_helper(self) -> None:
        """The second worker: pieces side by side with the first while the engine serves several listeners."""
        try:
            while (taken := self._take(1, busy_only=True)) is not None:
                self._serve(1, taken)
        finally:
            with self._lock:
                self._helper_busy = False

    def _ask(self, stream: Stream) -> Request:
        with self._lock:
            request = self._scheduler.ask(stream, Future())
        self._synthesis.submit(self._run_next)
        self._wake_helper()
        return request

    def _forget(self, request: Request | None, stream: Stream) -> None:
        """The stream's consumer is done (or gone): its waiting request and the stream leave the scheduler."""
        with self._lock:
            if request is not None:
                self._scheduler.drop(request)
            self._scheduler.close(stream)
        if request is not None:
            request.handle.cancel()

    # -- streams --------------------------------------------------------------------------------------------
    async def stream_pcm(
        self,
        text: str,
        *,
        speed: float = 1.0,
        fast_start: bool = True,
        cancel: threading.Event | None = None,
        style: Style | None = None,
        playback: Playback | None = None,
    ) -> AsyncIterator[bytes]:
        """Speak `text` as 24 kHz s16le mono PCM chunks, made piece by piece on the worker thread as the
        scheduler decides.

        `playback` is the listener's clock when several calls make one utterance (a WebSocket session's units);
        without it the call has its own, streamed when `fast_start` (first audio counts) or a whole file when
        not. The next piece is asked for before the current one is handed over, so the worker keeps going while
        the consumer sends; concurrent streams interleave piece by piece.

        Nothing is synthesized for a consumer that is gone: when the generator is closed (close it, e.g. with
        `contextlib.aclosing`, or cancel the task iterating it) its waiting request is dropped, and once
        `cancel` is set a request that reaches the worker makes nothing and the stream raises
        SynthesisCancelled (never a silent early end). A piece already being synthesized finishes, unobserved:
        that is the most a cancelled stream costs.
        """
        loop = asyncio.get_running_loop()
        self._count_stream(1)
        try:
            speaker = self._speaker or await loop.run_in_executor(self._synthesis, self.speaker)  # no hop once loaded
            stream = Stream(text, playback or Playback(streaming=fast_start),
                            speaker.voicing(speed=speed, style=style), cancel)
            with self._lock:
                self._scheduler.open(stream)
            request = None if stream.finished else self._ask(stream)
            try:
                while request is not None:
                    frames = await asyncio.wrap_future(request.handle)
                    request = None if stream.finished else self._ask(stream)
                    for frame in frames:
                        yield frame
            finally:
                self._forget(request, stream)
        finally:
            self._count_stream(-1)
