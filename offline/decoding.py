"""Audio files the engine is sent (voice samples, references, files to transcribe), decoded with PyAV.

`decode_mono(content)` reads any container and codec PyAV knows (WAV, MP3, FLAC, OGG/Opus, WebM, M4A/MP4 — a
video file's first audio track too) and gives mono float32 samples at 16 kHz, what both the pitch analysis of
voice references and the recognizer take. A ValueError says why the bytes are not audio.
"""

from __future__ import annotations

import io
import itertools

import numpy as np

DECODE_RATE = 16_000  # Hz: the rate every decoded file is resampled to


def decode_mono(content: bytes, *, keep_s: float | None = None) -> tuple[np.ndarray, float]:
    """Mono float32 samples at DECODE_RATE (at most `keep_s` seconds of them; None keeps all) and the full
    duration in seconds (0.0 for a file that holds no samples)."""
    import av

    keep = None if keep_s is None else int(keep_s * DECODE_RATE)
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
                    if keep is None or kept < keep:
                        parts.append(data if keep is None else data[: keep - kept])
                        kept += parts[-1].size
    except ValueError:
        raise
    except Exception as exc:  # PyAV raises its own error types for anything that is not audio
        raise ValueError(str(exc) or type(exc).__name__) from None
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return samples.astype(np.float32, copy=False), total / DECODE_RATE
