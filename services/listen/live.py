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


class MicrophoneFeed:
    """The one bridge from a browser's microphone to a coroutine on the background loop, for Listen and Converse
    alike: frames from the media thread (`feed`), made 16 kHz mono PCM16 once (FrameResampler) and queued to the
    loop, where `source()` yields them; `stop()` ends it (what the resampler still holds goes first), and so does
    no frame for `idle_s` (`idle_ended` then says so). With `keep`, what was heard is kept (`pcm()`)."""

    def __init__(self, loop: BackgroundLoop, *, idle_s: float = IDLE_S, keep: bool = False) -> None:
        self._loop = loop
        self._idle_s = idle_s
        self._keep = keep
        self._lock = threading.Lock()
        self._pcm = bytearray()
        self._resample = FrameResampler()
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.stopped = False
        self.idle_ended = False

    async def source(self) -> AsyncIterator[bytes]:
        """The PCM fed, until `stop` — or until none came for `idle_s` (then it ends as Stop ends it)."""
        async for pcm in queue_source(self._queue, self._idle_s):
            yield pcm
        with self._lock:
            if self.stopped:
                return
            self.stopped = self.idle_ended = True
            rest = self._resample.flush()
            self._hold(rest)
        if rest:
            yield rest

    def _hold(self, pcm: bytes) -> None:
        if self._keep:
            self._pcm += pcm

    def feed(self, frame: Any) -> None:
        """An av.AudioFrame as captured (48 kHz stereo s16 from a browser, usually): resampled and sent."""
        with self._lock:
            if self.stopped:
                return
            pcm = self._resample(frame)
        self.feed_pcm(pcm)

    def feed_pcm(self, pcm: bytes) -> None:
        """16 kHz mono PCM16, sent as it is (a test's microphone)."""
        with self._lock:
            if self.stopped or not pcm:
                return
            self._hold(pcm)
        self._loop.loop.call_soon_threadsafe(self._queue.put_nowait, pcm)

    def stop(self) -> None:
        """The microphone is done: what the resampler still holds, then the end."""
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
            rest = self._resample.flush()
            self._hold(rest)
        if rest:
            self._loop.loop.call_soon_threadsafe(self._queue.put_nowait, rest)
        self._loop.loop.call_soon_threadsafe(self._queue.put_nowait, None)

    def pcm(self) -> bytes:
        with self._lock:
            return bytes(self._pcm)

    @property
    def seconds(self) -> float:
        with self._lock:
            return len(self._pcm) / LISTEN_BYTES_PER_S


class LiveListening:
    """One utterance from a microphone (see the module's doc). Thread-safe: `feed` from the media thread, the
    rest from the page's."""

    def __init__(self, listener: Any, loop: BackgroundLoop, *, model: str | None = None,
                 language: str | None = None, name: str = MICROPHONE, idle_s: float = IDLE_S) -> None:
        self.name = name
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._partial = ""
        self.mic = MicrophoneFeed(loop, idle_s=idle_s, keep=True)
        self.feed, self.feed_pcm, self.stop = self.mic.feed, self.mic.feed_pcm, self.mic.stop
        self._future = loop.submit(listener.stream_live(self.mic.source(), name=name, model=model,
                                                        language=language, on_partial=self._on_partial))

    def _on_partial(self, text: str) -> None:
        with self._lock:
            self._partial = text

    @property
    def partial(self) -> str:
        with self._lock:
            return self._partial

    @property
    def captured_s(self) -> float:
        return self.mic.seconds

    @property
    def stopped(self) -> bool:
        return self.mic.stopped

    @property
    def idle_ended(self) -> bool:
        """The frames stopped coming for `idle_s` and the stream was ended without Stop."""
        return self.mic.idle_ended

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
        return wav_bytes(self.mic.pcm(), LISTEN_SAMPLE_RATE)
