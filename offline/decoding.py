"""Audio files the engine is sent (voice samples, references, files to transcribe), decoded with PyAV — and the
files it answers with, encoded the same way (`encode_pcm`: speech's mp3/flac/aac/opus, sound's flac/mp3).

`decode_mono(content)` reads any container and codec PyAV knows (WAV, MP3, FLAC, OGG/Opus, WebM, M4A/MP4 — a
video file's first audio track too) and gives mono float32 samples at 16 kHz, what both the pitch analysis of
voice references and the recognizer take. A ValueError says why the bytes are not audio; with `max_s`, TooLong
says a file is longer than that, having decoded no more of it (so its samples never take more memory than that).
"""

from __future__ import annotations

import io
import itertools

import numpy as np

DECODE_RATE = 16_000  # Hz: the rate every decoded file is resampled to


class TooLong(ValueError):
    """The file is longer than the caller's `max_s`: `duration_s` is its length as its container states it
    (None when it states none); decoding stopped at the limit."""

    def __init__(self, duration_s: float | None) -> None:
        super().__init__("the audio is longer than the limit")
        self.duration_s = duration_s


def decode_mono(content: bytes, *, keep_s: float | None = None,
                max_s: float | None = None) -> tuple[np.ndarray, float]:
    """Mono float32 samples at DECODE_RATE (at most `keep_s` seconds of them; None keeps all) and the full
    duration in seconds (0.0 for a file that holds no samples). With `max_s`, a longer file raises TooLong once
    that much is decoded."""
    import av

    keep = None if keep_s is None else int(keep_s * DECODE_RATE)
    most = None if max_s is None else int(max_s * DECODE_RATE)
    try:
        with av.open(io.BytesIO(content), mode="r") as container:
            stream = next((s for s in container.streams if s.type == "audio"), None)
            if stream is None:
                raise ValueError("no audio stream in the file")
            resampler = av.AudioResampler(format="flt", layout="mono", rate=DECODE_RATE)
            parts: list[np.ndarray] = []
            kept = total = 0
            for frame in itertools.chain(container.decode(stream), [None]):  # None: the resampler's tail
                for out in resampler.resample(frame):
                    data = out.to_ndarray().reshape(-1)
                    total += data.size
                    if most is not None and total > most:
                        raise TooLong(_stated_duration(container, stream))
                    if keep is None or kept < keep:
                        parts.append(data if keep is None else data[: keep - kept])
                        kept += parts[-1].size
    except ValueError:  # TooLong too
        raise
    except Exception as exc:  # PyAV raises its own error types for anything that is not audio
        raise ValueError(str(exc) or type(exc).__name__) from None
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return samples.astype(np.float32, copy=False), total / DECODE_RATE


def _stated_duration(container, stream) -> float | None:  # type: ignore[no-untyped-def]
    """The length in seconds the file's headers state (the stream's, else the container's), None without one."""
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / 1_000_000  # av.time_base: microseconds
    return None


def encode_pcm(samples: np.ndarray, *, rate: int, channels: int, container: str, codec: str) -> bytes:
    """16-bit samples (interleaved when stereo) as a file: PyAV's `codec` in its `container`."""
    import av

    layout = "stereo" if channels == 2 else "mono"
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        if samples.size:
            frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout=layout)
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()
