"""A recording to listen to: read, checked, and made what the realtime route takes (PCM16, 16 kHz, mono).

    audio = load_audio(path.read_bytes(), name="meeting.m4a")
    audio.data      # the file as given (what `POST /v1/audio/transcriptions` uploads)
    audio.pcm       # 16 kHz mono PCM16 (what `/v1/realtime` streams), resampled with soxr
    audio.seconds

Any format PyAV decodes — WAV, MP3, FLAC, OGG/Opus, WebM, M4A, a video file's audio track — at any sample rate
and channel count (resampled and mixed down, never refused), through services.speech.reference's decoder. Each
refusal is an InvalidInput naming what to fix: empty, larger than 25 MB, not audio or damaged, longer than an
hour, or silent ("no speech found"). Nothing of the audio is logged, and its repr leaves the bytes out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from protocol.errors import InvalidInput
from protocol.limits import LISTEN_AUDIO_MAX_S, TRANSCRIPTION_FILE_MAX_BYTES
from protocol.listen import LISTEN_BYTES_PER_S, LISTEN_SAMPLE_RATE
from services.speech.reference import decode_recording

ADVICE = "give a recording with speech in it (WAV, MP3, FLAC, OGG/Opus, WebM, M4A, or a video with sound)"
SILENT_PEAK_DBFS = -60.0  # nothing louder than this: digital silence or a dead microphone


class NoSpeech(InvalidInput):
    """The recording holds no speech (silence, or noise the recognizer hears no words in)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no speech found in {name}: {ADVICE}")


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


@dataclass(frozen=True)
class ListenAudio:
    """A checked recording: the file as given and its 16 kHz mono PCM16. The audio stays out of repr."""

    name: str
    data: bytes = field(repr=False)
    pcm: bytes = field(repr=False)
    source_format: str = ""
    source_rate: int = 0
    source_channels: int = 0

    @property
    def seconds(self) -> float:
        return len(self.pcm) / LISTEN_BYTES_PER_S


def load_audio(data: bytes, name: str = "the recording") -> ListenAudio:
    """Check a recording and convert it for listening; InvalidInput (NoSpeech when silent) naming what to fix."""
    if not data:
        raise NoSpeech(f"{name} (it is empty)")
    if len(data) > TRANSCRIPTION_FILE_MAX_BYTES:
        raise InvalidInput(f"{name} is {_mb(len(data))}; the limit is {_mb(TRANSCRIPTION_FILE_MAX_BYTES)} (what "
                           "/v1/audio/transcriptions takes): send a compressed file (MP3, OGG/Opus) or a shorter part")
    decoded = decode_recording(data, what=name, advice=ADVICE, limit_s=LISTEN_AUDIO_MAX_S, to_rate=LISTEN_SAMPLE_RATE)
    if decoded.cut_short:
        raise InvalidInput(f"{name} is longer than {LISTEN_AUDIO_MAX_S // 60} minutes: split it into shorter parts")
    samples = decoded.samples_at(LISTEN_SAMPLE_RATE)
    peak = float(np.abs(samples).max(initial=0.0))
    if samples.size == 0 or peak <= 0 or 20 * math.log10(peak) < SILENT_PEAK_DBFS:
        raise NoSpeech(f"{name} (it is silent)")
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()
    return ListenAudio(name=name, data=data, pcm=pcm, source_format=decoded.container, source_rate=decoded.rate,
                       source_channels=decoded.channels)
