"""The offline engine's `POST /v1/audio/generate` (docs/protocols.md, "Sound"), answering as vLLM-Omni 0.30 does
for Stable Audio Open 1.0, with a labelled procedural preview (offline/soundscape.py) instead of the model.

What a client can observe follows vLLM-Omni's code (protocol/audio.py `OpenAICreateAudioGenerateRequest`,
serving_audio_generate.py, api_server.py, audio_utils_mixin.py, the Stable Audio pipeline):
- the answer is the raw file with its media type (wav `audio/wav`, pcm `audio/pcm`, flac `audio/flac`, mp3
  `audio/mpeg`), 44.1 kHz stereo, 16-bit where the format has a sample width, as many frames as vLLM-Omni's cut
  of the model's window gives (protocol.sound.answer_frames), stretched by `speed`;
- a body that is not JSON, or a field out of bounds, is a **400** with vLLM's "N validation error(s):" message
  and `param` naming the field (`body.audio_length`, …); a `model` other than the one served is a 404
  NotFoundError "The model `x` does not exist." (vLLM's `_check_model`).
Additions, each labelled: the `X-Offline-Preview` header says what this is (never the model), and `X-Seed` the
seed used — drawn when the request has none (vLLM-Omni then uses torch's global generator and reports nothing),
so the studio can make the same sound again. Deliberate differences: `input` and `negative_prompt` are capped at
PROMPT_MAX_CHARS; audio_length > 47.55 s and audio_start + audio_length past the window are refused up front
(vLLM-Omni's pipeline refuses the first and silently shortens the second); `opus` is refused naming the formats
that work (Opus cannot carry 44.1 kHz; vLLM-Omni fails writing it).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from offline import soundscape
from offline.decoding import encode_pcm
from offline.guards import render_unless_disconnected
from offline.media_answers import body_errors, random_seed, validation_error
from protocol.audio import wav_bytes
from protocol.common import ErrorInfo, ErrorResponse, loads
from protocol.limits import SOUND_CHANNELS, SOUND_SAMPLE_RATE
from protocol.sound import (
    DEFAULT_GUIDANCE,
    DEFAULT_STEPS,
    OPUS_RATES,
    PREVIEW_HEADER,
    SEED_HEADER,
    SOUND_MEDIA_TYPES,
    SOUND_MODEL,
    SOUND_PATH,
    SOUND_SERVED_FORMATS,
    AudioGenerateRequest,
)

_AV_FORMATS = {"flac": ("flac", "flac"), "mp3": ("mp3", "libmp3lame")}
# What /v1/models says about the stand-in (offline/server.py puts it on the model's card).
PREVIEW_NOTE = (
    "Offline preview: not Stable Audio Open. A procedural 44.1 kHz stereo sound made from the prompt's words - "
    "rain, wind, ocean, fire, thunder, birds, city: shaped noise; drum, beat, techno: drums at a tempo (a 'bpm' in "
    "the prompt sets it); piano, bell, synth, guitar, strings: a chord progression; otherwise a gentle pad. The "
    "same request (seed included) gives the same bytes; fewer steps leave more hiss, more guidance drives it "
    "harder. Each answer says what it played in X-Offline-Preview and its seed in X-Seed."
)

router = APIRouter()


# ---------------------------------------------------------------------------------------------------------
# vLLM-shaped refusals (validation errors as the image routes answer them: offline/media_answers.py)
def _handler_error(message: str, kind: str, status: int = HTTPStatus.BAD_REQUEST,
                   param: str | None = None) -> JSONResponse:
    """An error the serving handler makes with create_error_response: `kind` ("BadRequestError",
    "NotFoundError") is its type, where vLLM's exception handlers write the status phrase."""
    info = ErrorInfo(message=message, type=kind, param=param, code=int(status))
    return JSONResponse(ErrorResponse(error=info).model_dump(), status_code=int(status))


def _parse(request_type: str, raw: bytes) -> AudioGenerateRequest | JSONResponse:
    """The request, or the 400 vLLM-Omni answers for it (validate_json_request, then the request model)."""
    if request_type != "application/json":
        return validation_error(["Unsupported Media Type: Only 'application/json' is allowed"])
    try:
        payload = loads(raw)
    except ValueError as exc:  # FastAPI's json_invalid error
        pos, msg = getattr(exc, "pos", 0), getattr(exc, "msg", str(exc))
        return validation_error([{"type": "json_invalid", "loc": ("body", pos), "msg": "JSON decode error",
                                   "input": {}, "ctx": {"error": msg}}])
    try:
        return AudioGenerateRequest.model_validate(payload)
    except ValidationError as exc:
        return validation_error(body_errors(exc))


# ---------------------------------------------------------------------------------------------------------
# files
def encode(samples: np.ndarray, response_format: str) -> bytes:
    """(frames, 2) int16 at 44.1 kHz as a whole file of `response_format` (wav, pcm, flac or mp3)."""
    pcm = np.ascontiguousarray(samples, dtype="<i2")
    if response_format == "pcm":
        return pcm.tobytes()
    if response_format == "wav":
        return wav_bytes(pcm.tobytes(), rate=SOUND_SAMPLE_RATE, channels=SOUND_CHANNELS, width=2)
    if response_format not in _AV_FORMATS:
        raise ValueError(f"response_format '{response_format}' cannot be written at {SOUND_SAMPLE_RATE} Hz; "
                         f"use one of: {', '.join(SOUND_SERVED_FORMATS)}")
    container, codec = _AV_FORMATS[response_format]
    return encode_pcm(pcm, rate=SOUND_SAMPLE_RATE, channels=SOUND_CHANNELS, container=container, codec=codec)


# ---------------------------------------------------------------------------------------------------------
@router.post(SOUND_PATH)
async def audio_generate(request: Request) -> Response:
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    req = _parse(content_type, await request.body())
    if isinstance(req, JSONResponse):
        return req
    if req.model is not None and req.model != SOUND_MODEL:  # vLLM's _check_model
        return _handler_error(f"The model `{req.model}` does not exist.", "NotFoundError", HTTPStatus.NOT_FOUND,
                              param="model")
    if req.response_format not in SOUND_SERVED_FORMATS:
        rates = ", ".join(f"{r // 1000}" for r in OPUS_RATES)
        return _handler_error(f"response_format '{req.response_format}' cannot hold Stable Audio Open's "
                              f"{SOUND_SAMPLE_RATE} Hz audio (Opus carries {rates} kHz only); use one of: "
                              f"{', '.join(SOUND_SERVED_FORMATS)}", "BadRequestError", param="response_format")
    seed = random_seed(req.seed)  # drawn as the image routes draw theirs, in [0, 2**32 - 1]
    scene = soundscape.plan(req.input, req.negative_prompt, seed)
    frames = req.frames()
    steps = req.num_inference_steps if req.num_inference_steps is not None else DEFAULT_STEPS
    guidance = req.guidance_scale if req.guidance_scale is not None else DEFAULT_GUIDANCE

    def make(cancel: Any) -> bytes:
        samples = soundscape.render(scene, frames, prompt=req.input, negative_prompt=req.negative_prompt,
                                    seed=seed, steps=steps, guidance=guidance, speed=req.speed or 1.0,
                                    cancel=cancel)
        return encode(samples, req.response_format)

    try:
        audio = await render_unless_disconnected(request.receive, f"sound ({frames} frames)", make)
    except Exception as exc:  # noqa: BLE001 - vLLM-Omni answers any generation failure with its text
        return _handler_error(f"Audio generation failed: {exc}", "BadRequestError")
    if audio is None:
        return Response(status_code=499)  # the client has gone: nobody reads this
    headers = {SEED_HEADER: str(seed), PREVIEW_HEADER: scene.label(seed)}
    return Response(audio, media_type=SOUND_MEDIA_TYPES[req.response_format], headers=headers)
