"""A strict vLLM-Omni peer for `POST /v1/audio/generate`: what a GPU server serving Stable Audio Open 1.0 accepts
and answers, with nothing the offline engine adds — to test the studio's sound client against.

`StrictAudioGenerateRequest` mirrors vLLM-Omni 0.30's `OpenAICreateAudioGenerateRequest`
(vllm_omni/entrypoints/openai/protocol/audio.py) field for field, default for default, bound for bound, except
that an unknown key is refused (`extra="forbid"`, where vLLM-Omni silently drops it): a client that sends a field
the server would ignore finds out here. `peer_app()` answers as vLLM-Omni's route and handler do
(api_server.py `create_audio_generate`, serving_audio_generate.py, the Stable Audio pipeline's checks):
- 400 with vLLM's validation body for a non-JSON body or a request the model refuses (vLLM turns FastAPI's 422
  into 400), `param` naming the field;
- 404 NotFoundError "The model `x` does not exist." for another model;
- the pipeline's refusals as 400 (its ValueError texts: a clip longer than the 47.55 s window, audio_start or its
  end outside the seconds conditioning's 0–512);
- otherwise the raw file (wav, pcm, flac, mp3) with its media type and no extra headers: a quiet 440 Hz tone of
  exactly the frames vLLM-Omni's cut of the window gives (a start near the window's end gives a shorter clip);
  `opus` fails as writing 44.1 kHz Opus does.
Every request it accepted is kept, as sent, in `app.state.seen`.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Literal

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from offline.media_answers import body_errors, validation_error
from offline.sound import encode
from protocol.common import ErrorInfo, ErrorResponse, HealthResponse, ModelCard, ModelList, loads
from protocol.limits import SOUND_SAMPLE_RATE, SOUND_WINDOW_FRAMES
from protocol.sound import SOUND_MEDIA_TYPES, SOUND_MODEL, SOUND_PATH, answer_frames

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
WINDOW_SECONDS = SOUND_WINDOW_FRAMES / SOUND_SAMPLE_RATE  # the pipeline's max_audio_length_in_s
SECONDS_CONDITIONING = (0, 512)  # the projection model's min_value / max_value (seconds_start, seconds_total)


class StrictAudioGenerateRequest(BaseModel):
    """vLLM-Omni 0.30's request model for `/v1/audio/generate`, refusing unknown keys."""

    model_config = ConfigDict(extra="forbid")

    input: str
    model: str | None = None
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus"] = "wav"
    speed: float | None = Field(default=1.0, ge=0.25, le=4.0)
    stream_format: Literal["sse", "audio"] | None = "audio"
    audio_length: float | None = Field(default=None, gt=0)
    audio_start: float | None = 0.0
    negative_prompt: str | None = None
    guidance_scale: float | None = Field(default=None, ge=0, le=1000)
    num_inference_steps: int | None = Field(default=None, ge=1, le=1000)
    seed: int | None = Field(default=None, ge=_INT64_MIN, le=_INT64_MAX)

    @field_validator("input")
    @classmethod
    def _input(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("input cannot be empty")
        return v

    @field_validator("stream_format")
    @classmethod
    def _stream_format(cls, v: str | None) -> str | None:
        if v == "sse":
            raise ValueError("'sse' is not a supported stream_format yet. Please use 'audio'.")
        return v


def _handler_error(message: str, kind: str = "BadRequestError", status: int = HTTPStatus.BAD_REQUEST,
                   param: str | None = None) -> JSONResponse:
    info = ErrorInfo(message=message, type=kind, param=param, code=int(status))
    return JSONResponse(ErrorResponse(error=info).model_dump(), status_code=int(status))


def pipeline_refusal(req: StrictAudioGenerateRequest) -> str | None:
    """The Stable Audio pipeline's ValueError for these fields, in its words, or None. Without audio_length the
    handler passes no window at all, so audio_start is ignored."""
    if req.audio_length is None:
        return None
    start = req.audio_start if req.audio_start is not None else 0.0
    end = start + req.audio_length
    if end - start > WINDOW_SECONDS:
        return f"Requested audio length ({end - start}s) exceeds maximum ({WINDOW_SECONDS}s)"
    lo, hi = SECONDS_CONDITIONING
    if end < start:
        return f"`audio_end_in_s={end}` must be higher than `audio_start_in_s={start}`"
    if not lo <= start <= hi:
        return f"`audio_start_in_s` must be between {lo} and {hi}, got {start}"
    if not lo <= end <= hi:
        return f"`audio_end_in_s` must be between {lo} and {hi}, got {end}"
    return None


def peer_app(served_model: str = SOUND_MODEL) -> FastAPI:
    """The strict peer serving `served_model` (see the module docstring)."""
    app = FastAPI(title="strict vLLM-Omni peer: /v1/audio/generate")
    app.state.seen = []  # each accepted request's JSON, as sent

    @app.get("/health")
    async def health() -> HealthResponse:
        return HealthResponse()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return ModelList(data=[ModelCard(id=served_model)]).model_dump()

    @app.post(SOUND_PATH)
    async def generate(request: Request) -> Response:
        if request.headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/json":
            return validation_error(["Unsupported Media Type: Only 'application/json' is allowed"])
        try:
            payload = loads(await request.body())
            req = StrictAudioGenerateRequest.model_validate(payload)
        except ValidationError as exc:
            return validation_error(body_errors(exc))
        except ValueError as exc:
            return validation_error([{"type": "json_invalid", "loc": ("body", getattr(exc, "pos", 0)),
                                      "msg": "JSON decode error", "input": {}, "ctx": {"error": str(exc)}}])
        if req.model is not None and req.model != served_model:
            return _handler_error(f"The model `{req.model}` does not exist.", "NotFoundError",
                                  HTTPStatus.NOT_FOUND, param="model")
        if (refusal := pipeline_refusal(req)) is not None:
            return _handler_error(refusal)
        app.state.seen.append(payload)
        if req.response_format == "opus":  # libsndfile's Opus writer takes 8/12/16/24/48 kHz only
            return _handler_error("Audio generation failed: Opus only supports sample rates of 8000, 12000, "
                                  "16000, 24000, and 48000.")
        frames = answer_frames(req.audio_length, req.audio_start, req.speed)
        tone = 0.1 * np.sin(2 * np.pi * 440 * np.arange(frames) / SOUND_SAMPLE_RATE)
        samples = np.round(np.repeat(tone[:, None], 2, axis=1) * 32767).astype(np.int16)
        return Response(encode(samples, req.response_format), media_type=SOUND_MEDIA_TYPES[req.response_format])

    return app
