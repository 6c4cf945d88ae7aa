"""A clip's sounds as the caller hands them over — samples, or a file — made into the track's 48 kHz stereo.

    Audio(samples, rate)                     # float in [-1, 1] or int16; shaped (frames,) or (frames, channels)
    Audio.from_pcm16(pcm, 24_000)            # what the voice engine streams: s16le mono at 24 kHz
    load_audio(Path("music.mp3"), role="soundtrack", max_s=5.5)   # any file PyAV decodes: wav, flac, mp3, m4a, ogg
    to_track_format(audio)                   # (frames, 2) float32 at 48 kHz, resampled with soxr

Files are decoded with PyAV only (its resampler changes the sample format and downmixes more than two channels to
stereo, never the rate); the rate is changed once, by soxr at its high quality, so a narration at 24 kHz and a
soundtrack at 44.1 kHz meet at 48 kHz without two resampling passes. `max_s` stops decoding a long file once the
clip has what it needs (a five-minute song under a five-second clip costs a few hundred milliseconds less).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np

from services.clips.errors import ClipError

TRACK_RATE = 48_000  # Hz: the clip's audio track, AAC's usual rate for video
TRACK_CHANNELS = 2


@dataclass(frozen=True)
class Audio:
    """PCM samples and their rate. `samples` is kept as float32 shaped (frames, channels), full scale ±1.0;
    int16 input is scaled by 1/32768, a 1-D array is mono. At most two channels (a file with more is downmixed
    when decoded). The samples stay out of repr."""

    samples: np.ndarray = field(repr=False)
    rate: int

    def __post_init__(self) -> None:
        x = np.asarray(self.samples)
        if x.ndim == 1:
            x = x.reshape(-1, 1)
        if x.ndim != 2 or x.shape[1] not in (1, 2):
            raise ClipError(f"audio samples must be shaped (frames,) or (frames, 1 or 2 channels), got {x.shape}: "
                            "pass mono or stereo, frames first")
        if np.issubdtype(x.dtype, np.integer):
            scale = float(-np.iinfo(x.dtype).min) if np.issubdtype(x.dtype, np.signedinteger) else None
            if scale is None:
                raise ClipError(f"audio samples of type {x.dtype} are not supported: pass int16 or float samples")
            x = x.astype(np.float32) / scale
        x = np.ascontiguousarray(x, dtype=np.float32)
        if not np.isfinite(x).all():
            raise ClipError("the audio samples hold NaN or infinite values")
        if int(self.rate) <= 0:
            raise ClipError(f"the sample rate must be positive, got {self.rate}")
        object.__setattr__(self, "samples", x)
        object.__setattr__(self, "rate", int(self.rate))

    @classmethod
    def from_pcm16(cls, pcm: bytes, rate: int, channels: int = 1) -> Audio:
        """Little-endian 16-bit PCM, interleaved (a trailing partial frame, from a cut stream, is dropped)."""
        if channels not in (1, 2):
            raise ClipError(f"PCM must be mono or stereo, got {channels} channels")
        usable = len(pcm) - len(pcm) % (2 * channels)
        return cls(np.frombuffer(pcm[:usable], dtype="<i2").reshape(-1, channels), rate)

    @property
    def channels(self) -> int:
        return int(self.samples.shape[1])

    @property
    def frames(self) -> int:
        return int(self.samples.shape[0])

    @property
    def seconds(self) -> float:
        return self.frames / self.rate


# What a caller may hand over for a sound: samples, a file's path, or a whole file's bytes (a speech answer).
AudioSource = Union[Audio, str, os.PathLike, bytes]


@dataclass(frozen=True)
class LoadedAudio:
    """A sound as decoded: the samples (cut at `max_s` when decoding stopped early) and the source's full length —
    the decoded length when decoding reached the end, else the length the file states (None if it states none)."""

    audio: Audio
    source_s: float | None


def load_audio(source: AudioSource, *, role: str, max_s: float | None = None) -> LoadedAudio:
    """The samples of `source` at their own rate. `role` ("narration", "soundtrack") names the part in errors: a
    missing file, one that is not audio PyAV can read, one without an audio stream, each a ClipError naming it."""
    if isinstance(source, Audio):
        return LoadedAudio(source, source.seconds)
    if isinstance(source, bytes | bytearray | memoryview):
        return _decode(io.BytesIO(bytes(source)), f"the {role} ({len(source)} bytes)", max_s)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise ClipError(f"the {role} file {path} does not exist" if not path.exists()
                            else f"the {role} {path} is not a file")
        return _decode(path, f"the {role} file {path}", max_s)
    raise ClipError(f"the {role} must be Audio (samples and a rate), a file's path or a file's bytes, "
                    f"not {type(source).__name__}")


def _decode(file: Any, what: str, max_s: float | None) -> LoadedAudio:
    import av

    try:
        container = av.open(file if not isinstance(file, Path) else str(file), mode="r")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise ClipError(f"{what} is not audio PyAV can read ({exc})") from None
    with container:
        if not container.streams.audio:
            raise ClipError(f"{what} has no audio stream")
        stream = container.streams.audio[0]
        rate = int(stream.codec_context.sample_rate or stream.rate or 0)
        if rate <= 0:
            raise ClipError(f"{what} states no sample rate")
        channels = 2 if (stream.codec_context.channels or 1) >= 2 else 1
        # Packed float32 in the file's own rate: PyAV converts the format (and downmixes 5.1 to stereo), soxr alone
        # changes the rate later.
        resampler = av.AudioResampler(format="flt", layout="stereo" if channels == 2 else "mono", rate=rate)
        limit = None if max_s is None else int(max_s * rate) + 1
        chunks: list[np.ndarray] = []
        got, cut = 0, False
        try:
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1, channels))
                    got += chunks[-1].shape[0]
                if limit is not None and got >= limit:
                    cut = True
                    break
            else:
                for out in resampler.resample(None):
                    chunks.append(out.to_ndarray().reshape(-1, channels))
        except (av.error.FFmpegError, ValueError) as exc:
            raise ClipError(f"{what} could not be decoded ({exc})") from None
        stated = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else (
            container.duration / 1e6 if container.duration else None)
    samples = np.concatenate(chunks) if chunks else np.zeros((0, channels), dtype=np.float32)
    audio = Audio(samples, rate)
    return LoadedAudio(audio, stated if cut else audio.seconds)


def to_track_format(audio: Audio) -> np.ndarray:
    """`audio` as the track takes it: (frames, 2) float32 at 48 kHz. The rate is changed by soxr (high quality),
    before mono is doubled to stereo, so a mono voice is resampled once, not twice."""
    x = audio.samples
    if audio.rate != TRACK_RATE and x.shape[0]:
        import soxr

        x = soxr.resample(x, audio.rate, TRACK_RATE, quality="HQ")
        x = x.reshape(-1, audio.channels)
    if x.shape[1] == 1:
        x = np.repeat(x, TRACK_CHANNELS, axis=1)
    return np.ascontiguousarray(x, dtype=np.float32)
