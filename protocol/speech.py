"""The speech routes: the `/v1/audio/speech/stream` WebSocket messages and REST speech (voices: protocol/voices.py).

The studio's clients, the embedded offline engine and the local SageMaker emulator all import these
models, so a protocol change is one edit here. Field names, defaults and rules follow vLLM-Omni 0.30
(docs/protocols.md, "Speech stream" and "REST speech").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from protocol.catalog import family, models_of
from protocol.common import ErrorInfo
from protocol.limits import SPEECH_INPUT_MAX_CHARS, SPEED

SPEECH_STREAM_PATH = "/v1/audio/speech/stream"

ResponseFormat = Literal["wav", "pcm", "flac", "mp3", "opus"]
SplitGranularity = Literal["none", "sentence", "clause"]
TaskType = Literal["CustomVoice", "VoiceDesign", "Base"]

# The task types each voice model serves (Qwen3-TTS: one per checkpoint). The offline engine previews all
# three; a model not listed here is asked for nothing beyond a preset voice.
VOICE_MODELS: dict[str, tuple[TaskType, ...]] = {m.id: m.task_types for m in models_of("voice")}  # type: ignore[misc]
DEFAULT_VOICE_MODEL = family("voice").default_model
OFFLINE_TASK_TYPES: tuple[TaskType, ...] = ("CustomVoice", "VoiceDesign", "Base")


def task_types_for_model(model_id: str | None) -> tuple[TaskType, ...]:
    """What a voice model can do; CustomVoice (a preset voice) when the model is unknown."""
    return VOICE_MODELS.get(model_id or "", ("CustomVoice",))


def models_for_task(task_type: TaskType) -> list[str]:
    """The model ids that serve `task_type` (to say which one to deploy)."""
    return [m for m, types in VOICE_MODELS.items() if task_type in types]


# Qwen3-TTS CustomVoice facts (the voice endpoint's model): its preset speakers (lower-case, as vLLM-Omni
# lists them) and its languages. The offline engine accepts them all (offline/styles.py renders each speaker).
QWEN3_TTS_SPEAKERS = ["vivian", "serena", "uncle_fu", "dylan", "eric", "ryan", "aiden", "ono_anna", "sohee"]
QWEN3_TTS_LANGUAGES = [
    "Auto", "Chinese", "English", "Japanese", "Korean", "German",
    "French", "Russian", "Portuguese", "Spanish", "Italian",
]


# ---------------------------------------------------------------------------------------------------------
# Speech stream: client -> server (text frames, one JSON object each)
class SessionConfig(BaseModel):
    """`session.config`: must be the first message; may be resent between utterances.

    Unknown keys are ignored (as vLLM-Omni does); `stream_audio` requires `response_format="pcm"`
    and `speed=1.0`.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    type: Literal["session.config"] = "session.config"
    voice: str | None = Field(default=None, validation_alias=AliasChoices("voice", "speaker"))
    language: str | None = None
    task_type: TaskType | None = None
    instructions: str | None = None
    response_format: ResponseFormat = "wav"
    speed: float = Field(default=1.0, ge=SPEED.lo, le=SPEED.hi)
    stream_audio: bool = False
    split_granularity: SplitGranularity = "none"
    initial_codec_chunk_frames: int | None = Field(default=None, ge=1)
    max_new_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = None
    word_timestamps: bool = False
    ref_audio: str | None = None
    ref_text: str | None = None
    model: str | None = None

    @model_validator(mode="after")
    def _stream_audio_needs_pcm(self) -> SessionConfig:
        if self.stream_audio:
            if self.response_format != "pcm":
                # vLLM-Omni's wording: clients show it as is
                raise ValueError(
                    "WebSocket streaming audio (stream_audio=true) requires response_format='pcm'. "
                    f"Got response_format='{self.response_format}'."
                )
            if self.speed != 1.0:
                raise ValueError(
                    "WebSocket stream_audio=true currently requires speed=1.0; "
                    "native speed control is only available through HTTP streaming."
                )
        return self

    def wire(self) -> dict[str, Any]:
        """The JSON object to send: unset optional fields are left out."""
        return self.model_dump(exclude_none=True)


class InputText(BaseModel):
    """`input.text`: appended to the server's text buffer (≤ 128 KiB per message)."""

    type: Literal["input.text"] = "input.text"
    text: str


class InputDone(BaseModel):
    """`input.done`: a flush, not a close — the rest is synthesized, then `session.done`."""

    type: Literal["input.done"] = "input.done"


class SessionClose(BaseModel):
    """`session.close`: the server closes the socket."""

    type: Literal["session.close"] = "session.close"


# ---------------------------------------------------------------------------------------------------------
# Speech stream: server -> client (text frames; audio goes in binary frames between start and done)
class AudioStart(BaseModel):
    """`audio.start`: exactly vLLM-Omni 0.30's keys, in its order (`sample_rate` only with stream_audio + pcm).

    Keys vLLM-Omni does not send (a `channels` from other servers, say) are ignored when parsing.
    """

    model_config = ConfigDict(extra="ignore")

    type: Literal["audio.start"] = "audio.start"
    utterance_index: int = 0
    sentence_index: int = 0
    sentence_text: str = ""
    format: str = "wav"
    sample_rate: int | None = None  # only with stream_audio + pcm

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class AudioDone(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["audio.done"] = "audio.done"
    utterance_index: int = 0
    sentence_index: int = 0
    total_bytes: int = 0
    error: bool = False


class SessionDone(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["session.done"] = "session.done"
    utterance_index: int = 0
    total_sentences: int = 0


class ErrorEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["error"] = "error"
    message: str
    partial_audio: bool | None = None  # set on generation failures
    action: str | None = None  # "discard" on generation failures

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


ServerEvent = Annotated[AudioStart | AudioDone | SessionDone | ErrorEvent, Field(discriminator="type")]
_server_event = TypeAdapter(ServerEvent)


class ProtocolError(ValueError):
    """A message from the peer that does not follow the protocol."""


def parse_server_event(text: str | bytes) -> AudioStart | AudioDone | SessionDone | ErrorEvent:
    """Decode one text frame sent by a speech server into its typed event."""
    try:
        return _server_event.validate_json(text)
    except ValidationError as exc:
        raise ProtocolError(f"unexpected message from the speech server: {text[:200]!r} ({exc.error_count()} errors)") from exc


# ---------------------------------------------------------------------------------------------------------
# REST: OpenAI-compatible non-streaming speech
class SpeechRequest(BaseModel):
    """`POST /v1/audio/speech`."""

    model_config = ConfigDict(extra="ignore")

    input: str = Field(min_length=1, max_length=SPEECH_INPUT_MAX_CHARS)
    model: str | None = None
    voice: str | None = None
    language: str | None = None
    task_type: TaskType | None = None
    instructions: str | None = None
    response_format: ResponseFormat = "wav"
    speed: float = Field(default=1.0, ge=SPEED.lo, le=SPEED.hi)
    stream: bool = False
    stream_format: Literal["sse", "audio"] | None = None
    seed: int | None = None
    ref_audio: str | None = None  # Base: a data:audio/wav;base64,... URL
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = None
    max_new_tokens: int | None = Field(default=None, ge=1)
    initial_codec_chunk_frames: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_voice_source(self) -> SpeechRequest:
        if self.speaker_embedding is not None and self.ref_audio is not None:
            raise ValueError("'speaker_embedding' and 'ref_audio' are mutually exclusive")  # vLLM-Omni's words
        return self


class SpeechAudioDelta(BaseModel):
    """SSE `speech.audio.delta` of `POST /v1/audio/speech` with `stream=true`: base64 audio bytes."""

    type: Literal["speech.audio.delta"] = "speech.audio.delta"
    audio: str
    response_format: str = "pcm"


class SpeechAudioDone(BaseModel):
    model_config = ConfigDict(extra="allow")  # vLLM-Omni adds `usage`

    type: Literal["speech.audio.done"] = "speech.audio.done"


class SpeechAudioError(BaseModel):
    type: Literal["speech.audio.error"] = "speech.audio.error"
    error: ErrorInfo


# ---------------------------------------------------------------------------------------------------------
