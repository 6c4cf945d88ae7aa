"""A microphone's utterance, transcribed while it is spoken: audio frames in from any thread (a WebRTC track's,
any rate, layout and sample format), made 16 kHz mono PCM16 with PyAV's resampler and fed at once into the
listener's live stream (`Listener.stream_live`) on a background loop; the partial text and the figures are read
from any thread (a page's refresh).

    live = LiveListening(backend.client("listen"), loop)   # the session opens now
    live.feed(frame)                             # from the WebRTC thread, per frame
    live.partial, live.captured_s                # from the page, while it is spoken
    live.stop(); transcript = live.result(60)    # the final commit, then the final text

A browser sends a frame every 20 ms while its microphone is on. When none has come for `idle_s` (IDLE_S) the page
or the browser went away without Stop: the stream is ended as Stop would end it (the final commit, so the engine's
decoder is given back), what was heard is kept (`result`, `wav`), and `idle_ended` says why it ended.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from protocol.audio import wav_bytes
from protocol.listen import LISTEN_BYTES_PER_S, LISTEN_SAMPLE_RATE
from services.listen.realtime import queue_source
from services.listen.transcript import Transcript
from services.runtime import BackgroundLoop

MICROPHONE = "microphone"
IDLE_S = 10.0  # a browser sends a frame every 20 ms while connected: this long without one, it is gone


class FrameResampler:
    """Audio frames as a browser sends them (av.AudioFrame: any rate, layout, sample format) made 16 kHz mono
    PCM16, with PyAV's resampler (it keeps its own time: a gap in the browser's stamps is no error)."""

    def __init__(self) -> None:
        self._resampler: Any = None

    def __call__(self, frame: Any) -> bytes:
        import av

        if self._resampler is None:
            self._resampler = av.AudioResampler(format="s16", layout="mono", rate=LISTEN_SAMPLE_RATE)
        frame.pts = None
        return b"".join(bytes(out.planes[0])[: out.samples * 2] for out in self._resampler.resample(frame))

    def flush(self) -> bytes:
        """What the resampler still holds (at the end)."""
        if self._resampler is None:
            return b""
        return b"".join(bytes(out.planes[0])[: out.samples * 2] for out in self._resampler.resample(None))


class LiveListening:
    """One utterance from a microphone (see the module's doc). Thread-safe: `feed` from the media thread, the
    rest from the page's."""

    def __init__(self, listener: Any, loop: BackgroundLoop, *, model: str | None = None,
                 language: str | None = None, name: str = MICROPHONE, idle_s: float = IDLE_S) -> None:
        self.name = name
        self.idle_s = idle_s
        self._loop = loop
        self._lock = threading.Lock()
        self._pcm = bytearray()
        self._partial = ""
        self._stopped = False
        self._idle_ended = False
        self._resample = FrameResampler()
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._future = loop.submit(listener.stream_live(self._frames(idle_s), name=name, model=model,
                                                        language=language, on_partial=self._on_partial))

    async def _frames(self, idle_s: float) -> AsyncIterator[bytes]:
        """The frames fed, until `stop` — or until none came for `idle_s` (then the stream ends as Stop ends it)."""
        async for pcm in queue_source(self._queue, idle_s):
            yield pcm
        with self._lock:
            if self._stopped:
                return
            self._stopped = self._idle_ended = True
            rest = self._resample.flush()
            self._pcm += rest
        if rest:
            yield rest

    def _on_partial(self, text: str) -> None:
        with self._lock:
            self._partial = text

    def feed(self, frame: Any) -> None:
        """An av.AudioFrame as captured (48 kHz stereo s16 from a browser, usually): resampled and sent."""
        with self._lock:
            if self._stopped:
                return
            pcm = self._resample(frame)
        self.feed_pcm(pcm)

    def feed_pcm(self, pcm: bytes) -> None:
        """16 kHz mono PCM16, sent as it is."""
        with self._lock:
            if self._stopped or not pcm:
                return
            self._pcm += pcm
        self._loop.loop.call_soon_threadsafe(self._queue.put_nowait, pcm)

    def stop(self) -> None:
        """The utterance is over: the final commit (what the resampler still holds goes first)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            rest = self._resample.flush()
            self._pcm += rest
        if rest:
            self._loop.loop.call_soon_threadsafe(self._queue.put_nowait, rest)
        self._loop.loop.call_soon_threadsafe(self._queue.put_nowait, None)

    @property
    def partial(self) -> str:
        with self._lock:
            return self._partial

    @property
    def captured_s(self) -> float:
        with self._lock:
            return len(self._pcm) / LISTEN_BYTES_PER_S

    @property
    def stopped(self) -> bool:
        with self._lock:
            return self._stopped

    @property
    def idle_ended(self) -> bool:
        """The frames stopped coming for `idle_s` and the stream was ended without Stop."""
        with self._lock:
            return self._idle_ended

    @property
    def done(self) -> bool:
        """The stream ended: its final text came, or it failed (then `result` raises)."""
        return self._future.done()

    def result(self, timeout: float | None = None) -> Transcript:
        """The transcript (NoSpeech when no words were heard; the stream's error when it failed)."""
        return self._future.result(timeout)

    def cancel(self) -> None:
        self.stop()
        self._future.cancel()

    def wav(self) -> bytes:
        """What was captured, as a 16 kHz mono WAV."""
        with self._lock:
            return wav_bytes(bytes(self._pcm), LISTEN_SAMPLE_RATE)
