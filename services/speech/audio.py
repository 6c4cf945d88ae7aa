"""PCM helpers: reading a WAV (protocol.audio writes them), duration, and a small waveform picture of what was
spoken."""

from __future__ import annotations

import io
import wave

import numpy as np

from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE, PCM_SAMPLE_WIDTH


def pcm_seconds(n_bytes: int, sample_rate: int = PCM_SAMPLE_RATE, channels: int = PCM_CHANNELS) -> float:
    return n_bytes / (PCM_SAMPLE_WIDTH * channels * sample_rate)


def read_wav(data: bytes) -> tuple[bytes, int, int]:
    """(pcm, sample_rate, channels) of a 16-bit WAV."""
    with wave.open(io.BytesIO(data), "rb") as w:
        if w.getsampwidth() != PCM_SAMPLE_WIDTH:
            raise ValueError(f"expected 16-bit WAV, got {8 * w.getsampwidth()}-bit")
        return w.readframes(w.getnframes()), w.getframerate(), w.getnchannels()


def samples(pcm: bytes, channels: int = PCM_CHANNELS) -> np.ndarray:
    """int16 mono samples (channels averaged)."""
    usable = len(pcm) - len(pcm) % (PCM_SAMPLE_WIDTH * channels)
    x = np.frombuffer(pcm[:usable], dtype="<i2")
    if channels > 1:
        x = x.reshape(-1, channels).mean(axis=1).astype(np.int16)
    return x


def envelope(pcm: bytes, points: int = 400, channels: int = PCM_CHANNELS) -> np.ndarray:
    """Peak amplitude (0..1) in `points` equal windows: a downsampled waveform."""
    x = np.abs(samples(pcm, channels).astype(np.float32)) / 32768.0
    if x.size == 0:
        return np.zeros(0, dtype=np.float32)
    points = max(1, min(points, x.size))
    edges = np.linspace(0, x.size, points + 1).astype(int)
    return np.maximum.reduceat(x, edges[:-1])


def waveform_png(pcm: bytes, width: int = 800, height: int = 120, channels: int = PCM_CHANNELS) -> bytes:
    """A PNG of the waveform (mirrored peak envelope), for the page to show under the player."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), (250, 250, 252))
    draw = ImageDraw.Draw(img)
    mid = height // 2
    draw.line([(0, mid), (width, mid)], fill=(210, 210, 220))
    env = envelope(pcm, width, channels)
    if env.size:
        peak = max(float(env.max()), 1e-3)
        scale = (mid - 2) / peak  # fill the height: the picture is about shape, not loudness
        xs = np.linspace(0, width - 1, env.size)
        for x, a in zip(xs, env, strict=True):
            h = max(1, int(a * scale))
            draw.line([(int(x), mid - h), (int(x), mid + h)], fill=(52, 101, 164))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()
