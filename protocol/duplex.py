"""The speech-to-speech (duplex) session on `WS /v1/realtime`, as vLLM-Omni 0.30 serves it (its
docs/serving/realtime_duplex_api.md): the OpenAI Realtime event names, the subset Converse's native mode uses.

One route, two sessions. `/v1/realtime` without a query is vLLM's realtime *transcription* session
(protocol/listen.py); `/v1/realtime?duplex=1` (`1`, `true` or `on`) is the *duplex* session — vLLM-Omni's own
spelling (a vLLM-Omni deployment in duplex mode treats a bare connection as duplex too; the offline engine serves
both, so it needs the query). The duplex session opens on the client's first `session.update`, answered by
`session.created` then `session.updated`; later updates get `session.updated`.

Errors use the Realtime envelope `{"type": "error", "error": {"type", "code", "message", "event_id"?}}`; a
server with no duplex session answers with code `unsupported` (flat `{"type": "error", "error": "…",
"code": "unsupported"}` is read too: vLLM-Omni's handshake-stage errors are flat).

Audio: input 16 kHz PCM16 mono (base64 in `input_audio_buffer.append`), output 24 kHz PCM16 mono (base64 in
`response.output_audio.delta`, with `format` and `sample_rate_hz`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from protocol.limits import PCM_SAMPLE_RATE

DUPLEX_QUERY = "duplex"
DUPLEX_ON = ("1", "true", "on")
UNSUPPORTED_CODE = "unsupported"
NO_DUPLEX_TEXT = "this server has no speech-to-speech session; use --mode pipeline"
OUTPUT_SAMPLE_RATE = PCM_SAMPLE_RATE
THRESHOLD = 0.5
SILENCE_MS = 500
PREFIX_PADDING_MS = 300
EOT_THRESHOLD = 0.5  # semantic_vad: the end-of-turn model's probability that ends a turn
MIN_SPEECH_MS = 100  # speech shorter than this is not a turn (and does not interrupt)


def wants_duplex(query_value: str | None) -> bool:
    """Whether `?duplex=` selects the duplex session."""
    return (query_value or "").strip().lower() in DUPLEX_ON


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore")
    event_id: str | None = None


# -- client → server ------------------------------------------------------------------------------------------
class TurnDetection(BaseModel):
    """`server_vad`: a turn ends after `silence_duration_ms` below the VAD's `threshold`. `semantic_vad` (the OpenAI
    Realtime name for a turn decided by what was said; the offline engine's end-of-turn model, hearing/turn_end.py):
    at each pause the model scores the turn and it ends once the score reaches `eot_threshold`, or after 1.5 s of
    silence whatever it says; `silence_duration_ms` is then the window a pause falls back to when the model cannot
    score it. `eot_threshold` is the offline engine's own field, sent only with semantic_vad (vLLM-Omni 0.30 knows
    server_vad only and refuses keys it does not know)."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["server_vad", "semantic_vad"] = "server_vad"
    threshold: float = Field(THRESHOLD, ge=0.0, le=1.0)
    silence_duration_ms: int = Field(SILENCE_MS, ge=0, le=10_000)
    prefix_padding_ms: int = Field(PREFIX_PADDING_MS, ge=0, le=5_000)
    eot_threshold: float | None = Field(None, ge=0.0, le=1.0)  # semantic_vad; None: EOT_THRESHOLD


class SessionConfig(BaseModel):
    """The `session` object of `session.update`. `instructions`: for a model, its system prompt; for the
    offline engine, the scripted reply's rules (protocol/script.py; empty → the default script)."""

    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    modalities: list[str] = Field(default_factory=lambda: ["audio", "text"])
    instructions: str | None = None
    voice: str | None = None
    input_audio_format: str = "pcm16"
    output_audio_format: str = "pcm16"
    turn_detection: TurnDetection | None = Field(default_factory=TurnDetection)


class SessionUpdate(_Event):
    type: Literal["session.update"] = "session.update"
    session: SessionConfig = Field(default_factory=SessionConfig)


class InputAudioBufferAppend(_Event):
    type: Literal["input_audio_buffer.append"] = "input_audio_buffer.append"
    audio: str  # base64 PCM16, 16 kHz mono


class ResponseCancel(_Event):
    type: Literal["response.cancel"] = "response.cancel"
    response_id: str | None = None


class ConversationItemTruncate(_Event):
    type: Literal["conversation.item.truncate"] = "conversation.item.truncate"
    item_id: str
    content_index: int = Field(0, ge=0)
    audio_end_ms: int = Field(ge=0)  # what the client actually played of the item's audio


# -- server → client ------------------------------------------------------------------------------------------
class SessionCreated(_Event):
    type: Literal["session.created"] = "session.created"
    session: dict[str, Any] = Field(default_factory=dict)


class SessionUpdated(_Event):
    type: Literal["session.updated"] = "session.updated"
    session: dict[str, Any] = Field(default_factory=dict)


class SpeechStarted(_Event):
    type: Literal["input_audio_buffer.speech_started"] = "input_audio_buffer.speech_started"
    audio_start_ms: int  # on the session's input audio clock (ms of audio appended before it)
    item_id: str


class SpeechStopped(_Event):
    type: Literal["input_audio_buffer.speech_stopped"] = "input_audio_buffer.speech_stopped"
    audio_end_ms: int
    item_id: str


class InputTranscriptionCompleted(_Event):
    """The user's transcript (vLLM-Omni sends it after the commit fan-out, as OpenAI does)."""

    type: Literal["conversation.item.input_audio_transcription.completed"] = (
        "conversation.item.input_audio_transcription.completed")
    item_id: str
    content_index: int = 0
    transcript: str


class ResponseCreated(_Event):
    type: Literal["response.created"] = "response.created"
    response_id: str
    response: dict[str, Any] = Field(default_factory=dict)


class _ResponseScoped(_Event):
    response_id: str
    item_id: str
    output_index: int = 0
    content_index: int = 0


class OutputAudioDelta(_ResponseScoped):
    type: Literal["response.output_audio.delta"] = "response.output_audio.delta"
    delta: str  # base64 PCM16
    format: str = "pcm16"
    sample_rate_hz: int = OUTPUT_SAMPLE_RATE


class OutputAudioTranscriptDelta(_ResponseScoped):
    type: Literal["response.output_audio_transcript.delta"] = "response.output_audio_transcript.delta"
    delta: str


class ResponseDone(_Event):
    """`response.status` is `completed`, `cancelled` (status_details.reason `barge_in` or `client_cancelled`)
    or `failed`."""

    type: Literal["response.done"] = "response.done"
    response_id: str
    response: dict[str, Any] = Field(default_factory=dict)

    @property
    def status(self) -> str:
        return str(self.response.get("status", ""))


class ItemTruncated(_Event):
    type: Literal["conversation.item.truncated"] = "conversation.item.truncated"
    item_id: str
    content_index: int = 0
    audio_end_ms: int


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str = "invalid_request_error"
    code: str
    message: str
    event_id: str | None = None


class DuplexError(_Event):
    type: Literal["error"] = "error"
    error: ErrorDetail


def error_of(event: dict[str, Any]) -> tuple[str, str]:
    """(code, message) of an `error` event in either shape (nested Realtime or flat)."""
    inner = event.get("error")
    if isinstance(inner, dict):
        return str(inner.get("code") or ""), str(inner.get("message") or inner.get("code") or "error")
    return str(event.get("code") or ""), str(inner or event.get("message") or event.get("code") or "error")


def response_body(response_id: str, status: str, *, reason: str | None = None) -> dict[str, Any]:
    """The `response` object of response.created / response.done."""
    details = None if reason is None else {"type": status, "reason": reason}
    return {"id": response_id, "object": "realtime.response", "status": status, "status_details": details}
