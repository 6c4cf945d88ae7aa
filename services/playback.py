"""Playback routing: each PCM chunk goes to the browser's WebRTC audio track the moment it arrives.

The track itself is streamlit-webrtc's PCM source (`create_pcm_audio_source_track(sample_rate=24000)`,
created by the page, since it lives in Streamlit's session); it pads underruns with silence, paces to
real time, and aiortc's Opus encoder takes it to 48 kHz. A browser session's source can be replaced
(the player disconnects and reconnects), so speech sessions push into a `Playback`, which forwards to
whichever source is attached *now*. `push` and `attach` are thread-safe: pushes come from the
background loop thread, attaches from the Streamlit script thread.

The engine makes speech faster than real time, so when generation ends the track may still hold seconds of
it: `queued_seconds()` says how much is still to play (the page keeps Stop live until it is 0) and `stop()`
drops it.
"""

from __future__ import annotations

import threading
from typing import Protocol

import numpy as np

from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE


class PcmSource(Protocol):
    """What the WebRTC track offers (streamlit_webrtc.pcm_source.PcmAudioSource has exactly this)."""

    def push(self, pcm: bytes | np.ndarray) -> None: ...
    def clear(self) -> None: ...


def _queued_samples(source: PcmSource) -> int:
    """Samples the source still has to play. streamlit-webrtc's PcmAudioSource has no public figure for it,
    but its queue is an `av.AudioFifo` (`samples`) behind its own lock; a source without one reports 0."""
    queued = getattr(source, "queued_samples", None)
    if callable(queued):
        return int(queued())
    fifo, lock = getattr(source, "_fifo", None), getattr(source, "_lock", None)
    if fifo is None or lock is None:
        return 0
    with lock:
        return int(source._fifo.samples)  # type: ignore[attr-defined]  # re-read: clear() replaces the fifo


class Playback:
    """Forwards PCM chunks to the attached source, converting to its rate and to mono if needed."""

    def __init__(self, sample_rate: int = PCM_SAMPLE_RATE) -> None:
        self.sample_rate = sample_rate
        self._source: PcmSource | None = None
        self._lock = threading.Lock()
        self._resampler: tuple[int, object] | None = None  # (input rate, soxr.ResampleStream)
        self.pushed_chunks = 0
        self.pushed_bytes = 0  # at the source's rate, after conversion
        self.dropped_chunks = 0  # arrived while no player was attached (still in the recording)

    def attach(self, source: PcmSource | None) -> None:
        with self._lock:
            self._source = source

    @property
    def attached(self) -> bool:
        return self._source is not None

    def start_utterance(self) -> None:
        """A new utterance: drop whatever the previous one still had queued."""
        with self._lock:
            self._resampler = None
            self.pushed_chunks = self.pushed_bytes = self.dropped_chunks = 0
            if self._source is not None:
                self._source.clear()

    def stop(self) -> None:
        """Silence now: drop what is queued but not yet played (Stop, also after generation ended)."""
        self.start_utterance()

    def queued_seconds(self) -> float:
        """Seconds of audio pushed but not yet played by the attached source (0 with none attached)."""
        with self._lock:
            source = self._source
        return 0.0 if source is None else _queued_samples(source) / self.sample_rate

    def push(self, pcm: bytes, sample_rate: int = PCM_SAMPLE_RATE, channels: int = PCM_CHANNELS) -> float | None:
        """Queue `pcm` on the attached source; the seconds still queued ahead of it (when it will start playing,
        from now, at the studio's end of the connection), or None when no player is attached."""
        with self._lock:
            source = self._source
            if source is None:
                self.dropped_chunks += 1
                return None
            ahead = _queued_samples(source) / self.sample_rate
            samples = self._convert(pcm, sample_rate, channels)
            if samples.size:
                source.push(samples)
                self.pushed_chunks += 1
                self.pushed_bytes += 2 * samples.size
            return ahead

    def _convert(self, pcm: bytes, sample_rate: int, channels: int) -> np.ndarray:
        usable = len(pcm) - len(pcm) % (2 * channels)
        x = np.frombuffer(pcm[:usable], dtype="<i2")
        if channels > 1:
            x = x.reshape(-1, channels).mean(axis=1).astype(np.int16)
        if sample_rate == self.sample_rate:
            return x.astype(np.int16, copy=False)
        import soxr

        # A streaming resampler keeps its state across chunks (no clicks at chunk edges).
        if self._resampler is None or self._resampler[0] != sample_rate:
            self._resampler = (sample_rate, soxr.ResampleStream(sample_rate, self.sample_rate, 1, dtype="int16"))
        return self._resampler[1].resample_chunk(x)  # type: ignore[attr-defined]
