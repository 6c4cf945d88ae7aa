"""The vLLM-Omni wire messages, each defined exactly once.

The studio's clients, the embedded offline engine and the local SageMaker emulator all import these
models, so a protocol change is one edit here. Field names, defaults and rules follow vLLM-Omni 0.30
(see shared/docs/PROTOCOLS.md §1–2).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

# ---------------------------------------------------------------------------------------------------------
# Audio format facts shared by every speech path.
PCM_SAMPLE_RATE = 24_000  # Hz; streamed PCM is s16le mono at this rate
PCM_SAMPLE_WIDTH = 2  # bytes per sample
PCM_CHANNELS = 1

SPEECH_STREAM_PATH = "/v1/audio/speech/stream"
MAX_INPUT_TEXT_MESSAGE_BYTES = 128 * 1024  # per input.text message
MAX_CONFIG_MESSAGE_BYTES = 4 * 1024 * 1024  # session.config may carry ref_audio
CONFIG_TIMEOUT_S = 10.0  # session.config must arrive within this
IDLE_TIMEOUT_S = 30.0  # between messages

ResponseFormat = Literal["wav", "pcm", "flac", "mp3", "opus"]
SplitGranularity = Literal["none", "sentence", "clause"]
TaskType = Literal["CustomVoice", "VoiceDesign", "Base"]

# Qwen3-TTS CustomVoice facts (the voice endpoint's model); the offline engine has its own voice list.
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
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream_audio: bool = False
    split_granularity: SplitGranularity = "none"
    initial_codec_chunk_frames: int | None = Field(default=None, ge=1)
    max_new_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
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
    model_config = ConfigDict(extra="ignore")

    type: Literal["audio.start"] = "audio.start"
    utterance_index: int = 0
    sentence_index: int = 0
    sentence_text: str = ""
    format: str = "wav"
    sample_rate: int | None = None  # only with stream_audio + pcm
    channels: int | None = None

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


def dumps(message: BaseModel) -> str:
    """Serialise a wire model as one compact JSON text frame."""
    wire = getattr(message, "wire", None)
    data = wire() if callable(wire) else message.model_dump()
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def error_text(body: str) -> str:
    """The server's own words from a vLLM-Omni/OpenAI/FastAPI error body (or the start of the body)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:500]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        detail = data.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list):  # FastAPI validation errors
            return "; ".join(
                f"{'.'.join(str(p) for p in d.get('loc', [])[1:]) or 'body'}: {d.get('msg')}"
                for d in detail if isinstance(d, dict)
            ) or str(detail)
        if data.get("message"):
            return str(data["message"])
    return str(data)[:500]


# ---------------------------------------------------------------------------------------------------------
# REST: voices
class VoicesResponse(BaseModel):
    """`GET /v1/audio/voices`."""

    voices: list[str]
    uploaded_voices: list[Any] = Field(default_factory=list)


# REST: OpenAI-compatible non-streaming speech
class SpeechRequest(BaseModel):
    """`POST /v1/audio/speech`."""

    model_config = ConfigDict(extra="ignore")

    input: str = Field(min_length=1)
    model: str | None = None
    voice: str | None = None
    language: str | None = None
    task_type: TaskType | None = None
    instructions: str | None = None
    response_format: ResponseFormat = "wav"
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    stream: bool = False
    stream_format: Literal["sse", "audio"] | None = None
    seed: int | None = None


class SpeechAudioDelta(BaseModel):
    """SSE `speech.audio.delta` of `POST /v1/audio/speech` with `stream=true`: base64 audio bytes."""

    type: Literal["speech.audio.delta"] = "speech.audio.delta"
    audio: str
    response_format: str = "pcm"


class SpeechAudioDone(BaseModel):
    model_config = ConfigDict(extra="allow")  # vLLM-Omni adds `usage`

    type: Literal["speech.audio.done"] = "speech.audio.done"


class ErrorInfo(BaseModel):
    """The `error` object of a REST error body (OpenAI / vLLM shape)."""

    model_config = ConfigDict(extra="allow")  # generation failures add partial_audio / action

    message: str
    type: str = "BadRequestError"
    param: str | None = None
    code: int = 400


class ErrorResponse(BaseModel):
    """`{"error": {...}}`: what vLLM-Omni's REST routes return with a 4xx/5xx status."""

    error: ErrorInfo


class SpeechAudioError(BaseModel):
    type: Literal["speech.audio.error"] = "speech.audio.error"
    error: ErrorInfo


# ---------------------------------------------------------------------------------------------------------
# REST: images
IMAGE_SIZE_MIN = 64
IMAGE_SIZE_MAX = 2048
ImageOutputFormat = Literal["png", "jpeg", "webp"]


def parse_size(size: str, *, lo: int = IMAGE_SIZE_MIN, hi: int = IMAGE_SIZE_MAX) -> tuple[int, int]:
    """`"WxH"` -> (W, H), both within [lo, hi]; a ValueError names what to fix."""
    parts = size.lower().split("x") if isinstance(size, str) else []
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"Invalid size format: {size!r}; expected 'WIDTHxHEIGHT', e.g. '1024x1024'")
    w, h = (int(p) for p in parts)
    if not (lo <= w <= hi and lo <= h <= hi):
        raise ValueError(f"Invalid size {size!r}: width and height must be between {lo} and {hi}")
    return w, h


class ImageGenerationRequest(BaseModel):
    """`POST /v1/images/generations` (JSON)."""

    model_config = ConfigDict(extra="ignore")

    prompt: str = Field(min_length=1)
    model: str | None = None
    n: int = Field(default=1, ge=1, le=10)
    size: str | None = None
    num_inference_steps: int | None = Field(default=None, ge=1, le=200)
    guidance_scale: float | None = Field(default=None, ge=0.0, le=20.0)
    negative_prompt: str | None = None
    seed: int | None = None
    output_format: ImageOutputFormat = "png"
    response_format: Literal["b64_json"] = "b64_json"

    def wire(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class ImageData(BaseModel):
    b64_json: str | None = None
    url: str | None = None
    revised_prompt: str | None = None


class ImageGenerationResponse(BaseModel):
    model_config = ConfigDict(extra="allow")  # servers may add fields (the offline engine adds `preview`)

    created: int
    data: list[ImageData]
    output_format: str = "png"
    size: str | None = None


# ---------------------------------------------------------------------------------------------------------
# REST: videos (multipart form fields of POST /v1/videos/sync)
VIDEO_SYNC_PATH = "/v1/videos/sync"


class VideoSyncForm(BaseModel):
    """The form fields of `POST /v1/videos/sync` (multipart/form-data only). Values travel as strings."""

    model_config = ConfigDict(extra="ignore")

    prompt: str = Field(min_length=1)
    model: str | None = None
    width: int | None = Field(default=None, ge=16, le=2048)
    height: int | None = Field(default=None, ge=16, le=2048)
    size: str | None = Field(default=None, pattern=r"^\d+x\d+$")  # "WxH"; wins over width/height (vLLM-Omni)
    seconds: str | None = Field(default=None, pattern=r"^[1-9]\d*$")  # num_frames = seconds × fps when absent
    num_frames: int | None = Field(default=None, ge=1, le=257)
    fps: int | None = Field(default=None, ge=1, le=60)
    num_inference_steps: int | None = Field(default=None, ge=1, le=200)
    guidance_scale: float | None = Field(default=None, ge=0.0, le=20.0)
    seed: int | None = None
    negative_prompt: str | None = None
    image_reference: str | None = None  # JSON string {"image_url": "data:image/jpeg;base64,..."}

    def form_fields(self) -> dict[str, str]:
        """The text parts of the multipart body, in a stable order."""
        return {k: str(v) for k, v in self.model_dump(exclude_none=True).items()}


class ImageReference(BaseModel):
    """The JSON value of the `image_reference` form field."""

    image_url: str


VIDEO_HEADER_REQUEST_ID = "X-Request-Id"
VIDEO_HEADER_INFERENCE_TIME = "X-Inference-Time-S"
VIDEO_HEADER_STAGE_DURATIONS = "X-Stage-Durations"


# ---------------------------------------------------------------------------------------------------------
# REST: health and models
class HealthResponse(BaseModel):
    status: str = "healthy"


class ModelCard(BaseModel):
    id: str
    object: str = "model"
    owned_by: str = "vllm-omni"


class ModelList(BaseModel):
    object: str = "list"
    data: list[ModelCard]
