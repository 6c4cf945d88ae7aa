"""Streaming speech: `SpeechClient` → `SpeechSession` over a `SpeechTransport`.

- session.py         SpeechSession: one connection, any number of utterances
- config.py          speech_config: a session.config built and checked before anything is sent
- events.py          PcmChunk, SpeechEvent, Utterance: what a session yields and returns
- recording.py       SessionStats and the thread-safe recording (figures, PCM) of a session's utterance
- client.py          SpeechClient (open sessions, list voices/languages), SpeechRun (watched from a UI thread)
- transport.py       the four-method transport interface
- websocket.py       vLLM-Omni's `/v1/audio/speech/stream` (and the offline engine)
- sagemaker_http2.py SageMaker's HTTP/2 bidirectional stream
- http2_clients.py   its connections: one SDK client per event loop, credentials, TLS trust, TCP_NODELAY
- mock.py            a scripted in-memory server for tests
- text.py            speakable(text): the one check of a voice request's text; pieces under the message limit
- audio.py           WAV, envelope and waveform pictures
- reference.py       load_reference(bytes) -> ReferenceAudio: a cloning reference checked (length 3–30 s, not
                     silent, not clipped, ≤ 10 MB, audio at all) and made mono 24 kHz WAV; `.data_url()` is the
                     `ref_audio` of a Base request, `.wav` the `audio_sample` of a saved voice
- voices.py          the voice library of a target (`backend.client("voices")`): add(name, reference, consent_id, …),
                     list(), delete(name); OmniVoices (REST) and SageMakerVoices (uploads only, the studio's records)

What a target's voice can do: `client.task_types()` (CustomVoice, VoiceDesign, Base, from its model);
`client.check(config)` refuses a task type the model lacks, naming the model to deploy.
`speech_config(..., task_type=, instructions=, ref_audio=, ref_text=, initial_codec_chunk_frames=)` checks
the rest (VoiceDesign needs a description, Base a reference or a saved voice, instructions within
protocol.limits.INSTRUCTIONS_MAX_CHARS).
"""

from protocol.audio import wav_bytes
from services.speech.audio import pcm_seconds, read_wav, waveform_png
from services.speech.client import (
    OmniCatalog,
    SpeechCatalog,
    SpeechClient,
    SpeechRun,
    SpeechRuns,
    omni_client,
)
from services.speech.config import speech_config
from services.speech.events import PcmChunk, SpeechEvent, Utterance
from services.speech.mock import MockPeer, MockTransport
from services.speech.reference import ReferenceAudio, load_reference
from services.speech.recording import SessionStats
from services.speech.session import SpeechSession
from services.speech.text import SpeakableText, require_text, speakable
from services.speech.transport import SpeechTransport
from services.speech.voices import OmniVoices, SageMakerVoices, SavedVoice, VoiceLibrary
from services.speech.websocket import WebSocketTransport

__all__ = [
    "MockPeer", "MockTransport", "OmniCatalog", "PcmChunk", "ReferenceAudio", "SessionStats", "SpeakableText", "SpeechCatalog", "SpeechClient",
    "OmniVoices", "SageMakerVoices", "SavedVoice", "SpeechEvent", "SpeechRun", "SpeechRuns", "SpeechSession",
    "SpeechTransport", "Utterance", "VoiceLibrary", "WebSocketTransport",
    "load_reference", "omni_client", "pcm_seconds", "read_wav", "require_text", "speakable", "speech_config", "wav_bytes", "waveform_png",
]
