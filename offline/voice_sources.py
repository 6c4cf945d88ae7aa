"""A voice's sources as vLLM-Omni checks them: a recording (an uploaded `audio_sample` or a speech request's
`ref_audio` data URL) decoded and measured, and a `speaker_embedding`'s numbers — in vLLM-Omni's words
(serving_speech.py's upload_voice / upload_voice_embedding, the Qwen3-TTS reference checks).

A recording is decoded with PyAV (offline.decoding: wav, mp3, flac, ogg/opus, aac/mp4, webm), must be 1–30 s
long, and is measured for its median pitch (offline.styles), which the Piper voice is shifted to. `ref_audio`
must be a data URL (`data:audio/wav;base64,...`): the engine fetches nothing, so http(s) and file URLs are
refused with a message saying so; each one is decoded and measured once (a session sends the same one with
every unit). An embedding is a non-empty list of at most 4096 finite numbers, of 1024 (0.6B) or 2048 (1.7B).
The uploaded voices themselves and their routes are offline/voices.py.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from offline import styles
from offline.decoding import DECODE_RATE, decode_mono

REF_AUDIO_MIN_S = 1.0  # vLLM-Omni's bounds on a reference / voice sample
REF_AUDIO_MAX_S = 30.0
MAX_EMBEDDING_LENGTH = 4096
EMBEDDING_DIMS = {"0.6B": 1024, "1.7B": 2048}


class VoiceError(ValueError):
    """An upload or reference vLLM-Omni would refuse; the message is its text."""


# ---------------------------------------------------------------------------------------------------------
# Decoding and measuring a recording
@dataclass(frozen=True)
class Reference:
    """A decoded voice reference: how long it is and its median pitch (None: nothing voiced was found)."""

    duration_s: float
    median_f0: float | None


def decode_audio(content: bytes) -> tuple[np.ndarray, int, float]:
    """Mono float32 samples at 16 kHz (at most REF_AUDIO_MAX_S + 1 s of them), the rate, and the full duration.

    Any container and codec PyAV reads (offline.decoding); a ValueError says why the bytes are not audio.
    """
    samples, duration = decode_mono(content, keep_s=REF_AUDIO_MAX_S + 1.0)
    if duration == 0:
        raise ValueError("the file holds no audio samples")
    return samples, DECODE_RATE, duration


def check_duration(duration: float) -> None:
    """vLLM-Omni's bounds on a reference's length, in its words."""
    if duration < REF_AUDIO_MIN_S:
        raise VoiceError(
            f"Reference audio too short ({duration:.1f}s). At least {REF_AUDIO_MIN_S:.0f}s of clear speech is required."
        )
    if duration > REF_AUDIO_MAX_S:
        raise VoiceError(
            f"Reference audio too long ({duration:.1f}s). Maximum {REF_AUDIO_MAX_S:.0f}s supported — use a shorter clip."
        )


def measure(content: bytes, *, what: str) -> Reference:
    """Decode and measure a recording (blocking: call it in a worker thread)."""
    try:
        samples, rate, duration = decode_audio(content)
    except ValueError as exc:
        raise VoiceError(f"Could not decode {what}: {exc}") from None
    check_duration(duration)
    return Reference(duration_s=duration, median_f0=styles.median_f0(samples, rate))


# ref_audio data URLs: decoded and measured once each (a session sends the same one with every unit)
_REFERENCE_CACHE_SIZE = 32
_reference_cache: OrderedDict[str, Reference] = OrderedDict()


def ref_audio_format_error(ref_audio: str) -> str | None:
    """Why `ref_audio` is not a reference this engine can use, or None."""
    if ref_audio.startswith("data:"):
        return None
    if ref_audio.startswith(("http://", "https://", "file://")):
        return (
            "The offline engine does not fetch ref_audio from URLs or files; send the recording itself as a "
            "base64 data URL (data:audio/wav;base64,...)"
        )
    # vLLM-Omni's wording for anything else
    return "ref_audio must be a URL (http/https), base64 data URL (data:...), or file URI (file://...)"


def _data_url_bytes(url: str) -> bytes:
    header, sep, payload = url.partition(",")
    if not sep:
        raise VoiceError("ref_audio is not a valid data URL: it has no ',' before the data")
    if not header.endswith(";base64"):
        raise VoiceError("ref_audio data URL must be base64-encoded (data:audio/wav;base64,...)")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VoiceError(f"ref_audio data URL does not hold valid base64: {exc}") from None


async def reference_from_data_url(ref_audio: str) -> Reference:
    """The measured reference of a `ref_audio` data URL (cached by content)."""
    if (error := ref_audio_format_error(ref_audio)) is not None:
        raise VoiceError(error)
    key = hashlib.sha256(ref_audio.encode("utf-8", "surrogatepass")).hexdigest()
    if (cached := _reference_cache.get(key)) is not None:
        _reference_cache.move_to_end(key)
        return cached
    content = _data_url_bytes(ref_audio)
    reference = await asyncio.to_thread(measure, content, what="ref_audio")
    _reference_cache[key] = reference
    while len(_reference_cache) > _REFERENCE_CACHE_SIZE:
        _reference_cache.popitem(last=False)
    return reference


def no_pitch_message(what: str) -> str:
    return (
        f"{what} has no voiced speech the offline engine can measure (no pitch found in it); "
        "use a recording of clear speech without long silences or loud noise"
    )



# ---------------------------------------------------------------------------------------------------------
# Speaker embeddings
def embedding_error(embedding: Any) -> str | None:
    """vLLM-Omni's checks of a decoded `speaker_embedding` upload (its words), or None."""
    if not isinstance(embedding, list) or not embedding:
        return "'speaker_embedding' must be a non-empty list of numbers"
    if len(embedding) > MAX_EMBEDDING_LENGTH:
        return f"'speaker_embedding' exceeds maximum length ({MAX_EMBEDDING_LENGTH} elements)"
    if not all(isinstance(x, int | float) for x in embedding):
        return "'speaker_embedding' must contain only numeric values"
    if not all(math.isfinite(x) for x in embedding):
        return "'speaker_embedding' values must be finite (no NaN or Inf)"
    return embedding_dim_error(len(embedding))


def embedding_dim_error(dim: int, model: str | None = None) -> str | None:
    """The embedding size the loaded model takes (the named model's, or any Qwen3-TTS size)."""
    sizes = [d for size, d in EMBEDDING_DIMS.items() if model is None or f"-{size}-" in model]
    if dim in sizes or not sizes:
        return None
    expected = " or ".join(str(d) for d in sizes)
    return f"speaker_embedding has {dim} dimensions; expected {expected} for the loaded Qwen3-TTS model"
