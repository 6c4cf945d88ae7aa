"""A reference recording for voice cloning: checked, then converted to what the voice models take.

    ref = load_reference(uploaded_bytes)       # WAV, MP3, FLAC, OGG/Opus, WebM: what st.audio_input and uploads give
    ref.seconds, ref.level_dbfs                 # what was found (for the page to show)
    speech_config(task_type="Base", ref_audio=ref, ref_text="…")   # sent as ref_audio=ref.data_url()
    voices.add("anna", ref.wav, consent_id="…")                     # uploaded as audio_sample

The bytes are decoded with PyAV and checked, each failure an InvalidInput naming what to fix: larger than
protocol.limits.VOICE_SAMPLE_MAX_BYTES, not audio, shorter or longer than REFERENCE_AUDIO_SECONDS, silent,
or clipped. The result is mono 24 kHz 16-bit WAV (resampled with soxr) and its `data:audio/wav;base64,…` URL
(vLLM-Omni's `ref_audio`; docs/protocols.md). A person's voice is personal data: nothing of a reference
(bytes, level, length) is logged here, and its repr leaves the audio out.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocol.audio import wav_bytes
from protocol.errors import InvalidInput
from protocol.limits import PCM_SAMPLE_RATE, REFERENCE_AUDIO_SECONDS, VOICE_SAMPLE_MAX_BYTES

ADVICE = "record 5–20 s of one person speaking"
# Silent: nothing reaches -40 dBFS, or the average level (RMS) is under -50 dBFS (room noise is about -60).
SILENT_PEAK_DBFS = -40.0
SILENT_RMS_DBFS = -50.0
# Clipped: more than this share of the samples sit at full scale (flat tops where the input overloaded).
CLIP_LEVEL = 0.999
CLIPPED_SHARE = 0.01
_DECODE_LIMIT_S = REFERENCE_AUDIO_SECONDS.hi + 1.0  # stop decoding past this: the answer is "too long" anyway
_FLOOR_DB = -120.0


@dataclass(frozen=True)
class ReferenceAudio:
    """A checked reference recording, as mono 24 kHz s16 WAV. The audio stays out of repr (and of logs)."""

    wav: bytes = field(repr=False)
    seconds: float
    source_format: str  # the container PyAV found: "wav", "ogg", "mp3", "matroska,webm", …
    source_rate: int
    source_channels: int
    level_dbfs: float  # RMS of the recording
    peak_dbfs: float

    @property
    def sample_rate(self) -> int:
        return PCM_SAMPLE_RATE

    def data_url(self) -> str:
        """`data:audio/wav;base64,…`: the `ref_audio` of a Base (clone) request."""
        return "data:audio/wav;base64," + base64.b64encode(self.wav).decode("ascii")


def _bytes_of(source: Any) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    getvalue = getattr(source, "getvalue", None)  # io.BytesIO, Streamlit's UploadedFile
    if callable(getvalue):
        return bytes(getvalue())
    read = getattr(source, "read", None)
    if callable(read):
        return bytes(read())
    raise InvalidInput(f"the reference must be the bytes of a recording, not {type(source).__name__}")


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def _db(x: float) -> float:
    return max(_FLOOR_DB, 20.0 * math.log10(x)) if x > 0 else _FLOOR_DB


def _float_planes(frame: Any) -> np.ndarray:
    """One decoded frame as float32 samples shaped (channels, n), in [-1, 1] for integer formats."""
    arr = frame.to_ndarray()
    channels = len(frame.layout.channels) or 1
    if not frame.format.is_planar:
        arr = arr.reshape(-1, channels).T
    if arr.dtype == np.uint8:
        return (arr.astype(np.float32) - 128.0) / 128.0
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.float32) / float(-np.iinfo(arr.dtype).min)
    return arr.astype(np.float32, copy=False)


@dataclass
class DecodedAudio:
    """A recording as PyAV decoded it: mono float32 samples and what was measured on the way (levels, clipping,
    channels). The audio stays out of repr."""

    mono: list[np.ndarray] = field(default_factory=list, repr=False)
    rate: int = 0  # the recording's own sample rate
    mono_rate: int = 0  # the rate `mono` is kept at (the recording's, unless decoding resampled it)
    channels: int = 0
    samples: int = 0  # per channel, at `rate`
    total: int = 0  # over all channels
    clipped: int = 0
    peak: float = 0.0
    energy: float = 0.0
    cut_short: bool = False  # decoding stopped past its limit
    container: str = ""
    reported_s: float | None = None

    @property
    def seconds(self) -> float:
        return self.samples / self.rate if self.rate else 0.0

    def samples_at(self, rate: int) -> np.ndarray:
        """All the mono samples at `rate` (resampled with soxr when they are kept at another)."""
        mono = np.concatenate(self.mono) if self.mono else np.zeros(0, dtype=np.float32)
        if self.mono_rate and self.mono_rate != rate and mono.size:
            import soxr

            mono = soxr.resample(mono, self.mono_rate, rate, quality="HQ")
        return mono.astype(np.float32, copy=False)


def _measure(out: DecodedAudio, planes: np.ndarray) -> None:
    out.channels = max(out.channels, planes.shape[0])
    magnitude = np.abs(planes)
    out.clipped += int(np.count_nonzero(magnitude >= CLIP_LEVEL))
    out.peak = max(out.peak, float(magnitude.max(initial=0.0)))
    out.energy += float(np.square(planes, dtype=np.float64).sum())
    out.total += planes.size
    out.samples += planes.shape[1]


def decode_recording(data: bytes, *, what: str = "the reference",
                     advice: str = f"give a WAV, MP3, FLAC, OGG or WebM recording and {ADVICE}",
                     limit_s: float | None = _DECODE_LIMIT_S, to_rate: int | None = None) -> DecodedAudio:
    """Decode any recording PyAV reads (its first audio track) into mono float32, measuring it on the way.

    `what` names it in messages and `advice` ends them; decoding stops past `limit_s` seconds (`cut_short`);
    with `to_rate` the samples are resampled with soxr while they are decoded (long recordings stay small).
    InvalidInput when there is no audio track, the bytes are not audio, the rate changes mid-way or there are
    no samples.
    """
    import av  # PyAV: FFmpeg's demuxers and decoders (pinned in requirements.txt)

    out = DecodedAudio()
    resampler: Any = None
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            out.container = container.format.name
            streams = container.streams.audio
            if not streams:
                raise InvalidInput(f"{what} has no sound in it (no audio track): {advice}")
            if container.duration:
                out.reported_s = container.duration / 1_000_000
            for frame in container.decode(streams[0]):
                if not frame.samples:
                    continue
                if out.rate == 0:
                    out.rate = out.mono_rate = frame.sample_rate
                    if to_rate and to_rate != out.rate:
                        import soxr

                        resampler, out.mono_rate = soxr.ResampleStream(out.rate, to_rate, 1, dtype="float32"), to_rate
                elif frame.sample_rate != out.rate:
                    raise InvalidInput(f"{what} changes its sample rate mid-way ({out.rate} → "
                                       f"{frame.sample_rate} Hz); save it again as one WAV file")
                planes = _float_planes(frame)
                _measure(out, planes)
                mono = planes.mean(axis=0).astype(np.float32, copy=False)
                out.mono.append(resampler.resample_chunk(mono) if resampler is not None else mono)
                if limit_s is not None and out.samples > limit_s * out.rate:
                    out.cut_short = True
                    break
    except InvalidInput:
        raise
    except (av.FFmpegError, ValueError, OSError, IndexError, MemoryError) as exc:  # not audio, or damaged
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise InvalidInput(f"{what} is not audio that can be read ({why}): {advice}") from None
    if out.samples == 0 or out.rate <= 0:
        raise InvalidInput(f"{what} holds no audio samples: {advice}")
    if resampler is not None:
        out.mono.append(resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
    return out


def load_reference(source: bytes | Any) -> ReferenceAudio:
    """Check a reference recording and convert it to mono 24 kHz s16 WAV; InvalidInput naming what to fix."""
    data = _bytes_of(source)
    if not data:
        raise InvalidInput(f"the reference is empty: {ADVICE}")
    if len(data) > VOICE_SAMPLE_MAX_BYTES:
        raise InvalidInput(f"the reference file is {_mb(len(data))}; the limit is {_mb(VOICE_SAMPLE_MAX_BYTES)}: "
                           f"{ADVICE} (a compressed file such as MP3 or OGG is smaller)")
    d = decode_recording(data)
    seconds = d.seconds
    lo, hi = REFERENCE_AUDIO_SECONDS
    if d.cut_short or seconds > hi:
        length = max(seconds, d.reported_s or 0.0)
        said = f"{length:.1f} s" if not d.cut_short or d.reported_s else f"longer than {hi:.0f} s"
        raise InvalidInput(f"the reference is {said}; the limit is {hi:.0f} s: trim it, or {ADVICE}")
    if seconds < lo:
        raise InvalidInput(f"the reference is {seconds:.1f} s; at least {lo:.0f} s are needed: {ADVICE}")
    rms = math.sqrt(d.energy / d.total) if d.total else 0.0
    level, peak = _db(rms), _db(d.peak)
    if peak < SILENT_PEAK_DBFS or level < SILENT_RMS_DBFS:
        raise InvalidInput(f"the reference is silent (loudest {peak:.0f} dBFS, average {level:.0f} dBFS): check the "
                           f"microphone and {ADVICE}")
    share = d.clipped / d.total
    if share > CLIPPED_SHARE:
        raise InvalidInput(f"the reference is clipped ({share:.0%} of its samples are at full scale, so the voice is "
                           f"distorted): record again further from the microphone or with a lower input level, and "
                           f"{ADVICE}")
    mono = d.samples_at(PCM_SAMPLE_RATE)
    pcm = (np.clip(mono, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()
    return ReferenceAudio(
        wav=wav_bytes(pcm, PCM_SAMPLE_RATE, 1), seconds=len(mono) / PCM_SAMPLE_RATE, source_format=d.container,
        source_rate=d.rate, source_channels=d.channels, level_dbfs=round(level, 1), peak_dbfs=round(peak, 1),
    )
