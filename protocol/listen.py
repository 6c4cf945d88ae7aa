"""Listen (speech recognition): the `/v1/realtime` WebSocket messages and `POST /v1/audio/transcriptions`.

The studio's listen clients and the offline engine both import these models, so a protocol change is one edit
here. Names, fields, texts and error codes follow vLLM's speech-to-text entrypoints
(vllm/entrypoints/speech_to_text/realtime and .../transcription); docs/listen.md describes both routes.

Realtime, client → server: `session.update` (names the model; validates it), `input_audio_buffer.commit`
(starts generation), any number of `input_audio_buffer.append` (base64 PCM16, 16 kHz, mono), then
`input_audio_buffer.commit` with `final: true` (the audio is over). Server → client: `session.created` on
connect, `transcription.delta` while audio arrives, `transcription.done` with the text and usage, and `error`
events carrying one of `ERROR_CODES`.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from protocol.catalog import family
from protocol.errors import StudioError

REALTIME_PATH = "/v1/realtime"
TRANSCRIPTIONS_PATH = "/v1/audio/transcriptions"

# The listen family's default model (Voxtral Mini 4B Realtime, Apache-2.0; protocol/catalog.py): the model a
# listen client names by default, the one the offline engine answers to and the SageMaker listen endpoint serves.
DEFAULT_LISTEN_MODEL = family("listen").default_model

# The audio `input_audio_buffer.append` carries: raw PCM16 little-endian, 16 kHz, mono, base64-encoded.
LISTEN_SAMPLE_RATE = 16_000
LISTEN_CHANNELS = 1
LISTEN_SAMPLE_WIDTH = 2  # bytes per sample
LISTEN_BYTES_PER_S = LISTEN_SAMPLE_RATE * LISTEN_CHANNELS * LISTEN_SAMPLE_WIDTH

# The language settings that mean English (None: the server's default, which the studio takes for English). The
# offline recognizer understands English only, and word error rates are measured on English.
ENGLISH_LANGUAGES = ("en", "eng", "english", "en-us", "en-gb", "auto")


def is_english(language: str | None) -> bool:
    return language is None or language.strip().lower() in ENGLISH_LANGUAGES


# ---------------------------------------------------------------------------------------------------------
# Realtime errors: the `code` of an `error` event, and vLLM's texts for the ones it words itself
ErrorCode = Literal[
    "invalid_json", "invalid_event", "model_not_found", "model_not_validated", "invalid_audio", "unknown_event",
    "processing_error",
]
ERROR_CODES: tuple[str, ...] = ErrorCode.__args__  # type: ignore[attr-defined]
INVALID_JSON_TEXT = "Invalid JSON"
MISSING_MODEL_TEXT = "Missing required field: model"
MODEL_NOT_VALIDATED_TEXT = "Model not validated. Make sure to validate the model by sending a session.update event."
INVALID_AUDIO_TEXT = "Invalid audio data"


def model_not_found_text(model: str) -> str:
    return f"The model `{model}` does not exist."


def unknown_event_text(event_type: Any) -> str:
    return f"Unknown event type: {event_type}"


# A target that has no realtime route (its WebSocket handshake is refused, or it answers with this code).
UNSUPPORTED_CODE = "unsupported"
UNSUPPORTED_TEXT = "this server does not stream transcription; use a file"


class TranscriptionUnsupported(StudioError):
    """The target cannot stream transcription (no `/v1/realtime`): send the audio as a file instead."""

    def __init__(self, message: str = UNSUPPORTED_TEXT) -> None:
        super().__init__(message)


# ---------------------------------------------------------------------------------------------------------
# Realtime: client -> server (text frames, one JSON object each)
class SessionUpdate(BaseModel):
    """`session.update`: names the model; the server answers an unknown one with `model_not_found`."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["session.update"] = "session.update"
    model: str | None = None
    language: str | None = None  # not in vLLM's message (extra keys are ignored there); the offline engine reads it

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class InputAudioBufferAppend(BaseModel):
    """`input_audio_buffer.append`: base64 PCM16, 16 kHz, mono."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["input_audio_buffer.append"] = "input_audio_buffer.append"
    audio: str


class InputAudioBufferCommit(BaseModel):
    """`input_audio_buffer.commit`: without `final` it starts generation; with `final: true` the audio is over."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["input_audio_buffer.commit"] = "input_audio_buffer.commit"
    final: bool = False

    def wire(self) -> dict[str, Any]:
        return {"type": self.type, "final": True} if self.final else {"type": self.type}


# ---------------------------------------------------------------------------------------------------------
# Realtime: server -> client
class SessionCreated(BaseModel):
    """`session.created`: the first message of every connection."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["session.created"] = "session.created"
    id: str = Field(default_factory=lambda: f"sess-{uuid.uuid4().hex}")
    created: int = Field(default_factory=lambda: int(time.time()))


class TranscriptionDelta(BaseModel):
    """`transcription.delta`: text to add to what came before."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["transcription.delta"] = "transcription.delta"
    delta: str


class UsageInfo(BaseModel):
    """vLLM's usage object (prompt tokens are the audio's tokens)."""

    model_config = ConfigDict(extra="allow")

    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: dict[str, Any] | None = None


class TranscriptionDone(BaseModel):
    """`transcription.done`: the whole text of the utterance, and its usage."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["transcription.done"] = "transcription.done"
    text: str
    usage: UsageInfo | None = None


class RealtimeError(BaseModel):
    """`error`: `error` is the text, `code` one of ERROR_CODES (or UNSUPPORTED_CODE from another server)."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["error"] = "error"
    error: str
    code: str | None = None


RealtimeServerEvent = Annotated[
    SessionCreated | TranscriptionDelta | TranscriptionDone | RealtimeError, Field(discriminator="type")
]
_server_event = TypeAdapter(RealtimeServerEvent)


class ListenProtocolError(ValueError):
    """A message from the server that does not follow the realtime protocol."""


def parse_realtime_event(text: str | bytes) -> SessionCreated | TranscriptionDelta | TranscriptionDone | RealtimeError:
    """Decode one text frame a realtime server sent into its typed event."""
    try:
        return _server_event.validate_json(text)
    except ValidationError as exc:
        raise ListenProtocolError(
            f"unexpected message from the transcription server: {text[:200]!r} ({exc.error_count()} errors)"
        ) from exc


# ---------------------------------------------------------------------------------------------------------
# Files: POST /v1/audio/transcriptions (multipart/form-data)
TranscriptionFormat = Literal["json", "text", "srt", "verbose_json", "vtt"]
TRANSCRIPTION_FORMATS: tuple[str, ...] = TranscriptionFormat.__args__  # type: ignore[attr-defined]
FILE_FIELD = "file"
GRANULARITIES_FIELD = "timestamp_granularities[]"
MAX_FILE_TEXT = "Maximum file size exceeded"  # vLLM's words for an upload over TRANSCRIPTION_FILE_MAX_BYTES
INVALID_FILE_TEXT = "Invalid or unsupported audio file."  # vLLM's words for bytes it cannot decode


class TranscriptionForm(BaseModel):
    """The text fields of `POST /v1/audio/transcriptions`; the audio goes as the `file` part."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    model: str | None = None
    language: str | None = None
    prompt: str = ""
    response_format: TranscriptionFormat = "json"
    timestamp_granularities: list[Literal["word", "segment"]] = Field(
        default_factory=list, alias=GRANULARITIES_FIELD)
    temperature: float = 0.0

    def form_fields(self) -> dict[str, str | list[str]]:
        """The text parts of the multipart body (unset ones left out; a list repeats its field)."""
        fields: dict[str, str | list[str]] = {k: str(v) for k, v in (
            ("model", self.model), ("language", self.language), ("prompt", self.prompt or None)) if v is not None}
        fields["response_format"] = self.response_format
        if self.timestamp_granularities:
            fields[GRANULARITIES_FIELD] = list(self.timestamp_granularities)
        return fields


class DurationUsage(BaseModel):
    """The `usage` of a json answer: the audio's length, rounded up to whole seconds (OpenAI's rule)."""

    type: Literal["duration"] = "duration"
    seconds: int


class TranscriptionResponse(BaseModel):
    """`response_format=json`: `{"text": …, "usage": {"type": "duration", "seconds": N}}`."""

    model_config = ConfigDict(extra="ignore")

    text: str
    usage: DurationUsage | None = None


class TranscriptionSegment(BaseModel):
    """One segment of a verbose_json answer (OpenAI's fields; `start`/`end` in seconds)."""

    model_config = ConfigDict(extra="ignore")

    id: int
    seek: int = 0
    start: float
    end: float
    text: str
    tokens: list[int] = Field(default_factory=list)
    temperature: float = 0.0
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float | None = None


class TranscriptionVerbose(BaseModel):
    """`response_format=verbose_json`. vLLM sends `duration` as a string; OpenAI as a number: both parse."""

    model_config = ConfigDict(extra="ignore")

    task: str = "transcribe"
    language: str | None = None
    duration: float | str = 0.0
    text: str
    segments: list[TranscriptionSegment] | None = None
    words: list[dict[str, Any]] | None = None


def _clock(seconds: float, separator: str) -> str:
    millis = int(round(max(0.0, seconds) * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def cue_text(text: str) -> str:
    """A segment's text as one cue's payload: on one line (any line break — a blank line would end the cue and
    let the text start a cue of its own — becomes a space) and without `-->` (a timing line's arrow; `->` instead)."""
    line = " ".join(text.split())
    while "-->" in line:
        line = line.replace("-->", "->")
    return line


def srt(segments: list[TranscriptionSegment]) -> str:
    """SubRip subtitles: numbered cues `HH:MM:SS,mmm --> HH:MM:SS,mmm`, a blank line between them; each cue's
    text on one line (`cue_text`)."""
    cues = [f"{i}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{cue_text(s.text)}"
            for i, s in enumerate(segments, 1)]
    return "\n\n".join(cues) + "\n" if cues else ""


def vtt(segments: list[TranscriptionSegment]) -> str:
    """WebVTT subtitles: the `WEBVTT` header, then cues `HH:MM:SS.mmm --> HH:MM:SS.mmm`; each cue's text on one
    line (`cue_text`) with `&`, `<` and `>` escaped, so no text is read as a tag or an entity."""
    parts = ["WEBVTT"] + [f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{_vtt_escape(cue_text(s.text))}"
                          for s in segments]
    return "\n\n".join(parts) + "\n"


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
