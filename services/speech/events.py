"""What a speech session hands back: each streamed PCM frame (`PcmChunk`), the events of an utterance
(`SpeechEvent`: the server's typed messages and the chunks between them) and a whole `Utterance` — its text,
voice, figures, audio and the error it ended with (services/speech/session.py makes them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from protocol.audio import wav_bytes
from protocol.errors import StudioError
from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE
from protocol.speech import AudioDone, AudioStart, ErrorEvent, SessionDone
from services.speech.recording import SessionStats


@dataclass(frozen=True, slots=True)
class PcmChunk:
    """One binary frame of streamed audio: s16le PCM at `sample_rate` (from the unit's audio.start)."""

    data: bytes
    utterance_index: int
    sentence_index: int
    sample_rate: int = PCM_SAMPLE_RATE
    channels: int = PCM_CHANNELS
    type: Literal["pcm"] = "pcm"


SpeechEvent = AudioStart | PcmChunk | AudioDone | SessionDone | ErrorEvent


@dataclass
class Utterance:
    """What one utterance produced: text, voice, figures, the audio (also when it ended badly), the error."""

    text: str
    voice: str | None
    language: str | None
    stats: SessionStats
    pcm: bytes
    error: StudioError | None = None
    created_at: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.error is None

    def wav(self) -> bytes:
        return wav_bytes(self.pcm, self.stats.sample_rate, self.stats.channels)

    def raise_for_error(self) -> Utterance:
        if self.error is not None:
            raise self.error
        return self



OnAudio = Callable[[PcmChunk], None]  # handed each chunk the moment it arrives (playback)
