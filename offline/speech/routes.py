"""The speech routes, declared as vLLM-Omni declares its own. Each reaches the app's voice (`app.state.voice`, a
VoiceEngine), the uploaded voices (`app.state.voices`) and the WebSocket's timeouts (`app.state.speech_stream`)
through its request; `offline.server.create_app` puts them there."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from offline import voices
from offline.guards import unless_disconnected
from offline.speech.checks import SpeechAsk, SpeechInputError, check_model, check_speech, resolve_style
from offline.speech.rest import error_response, raw_audio, speech_file, sse_events
from offline.voice import MEDIA_TYPES, VoiceEngine
from protocol.speech import SPEECH_STREAM_PATH, SpeechRequest

log = logging.getLogger(__name__)

PREVIEW_HEADER = "X-Offline-Preview"  # what a REST answer's style preview did (offline.styles)
STREAMING_FORMATS = ("pcm", "wav")

router = APIRouter()


@router.websocket(SPEECH_STREAM_PATH)
async def speech_stream(websocket: WebSocket) -> None:
    await websocket.app.state.speech_stream.handle(websocket)


def _streaming_error(req: SpeechRequest, raw_stream: bool) -> str | None:
    """Why this streamed request cannot be served (vLLM-Omni's texts), None when it can."""
    if req.response_format not in STREAMING_FORMATS:
        return ("Streaming (stream=true, stream_format='audio', or stream_format='sse') requires "
                f"response_format='pcm' or 'wav'. Got response_format='{req.response_format}'.")
    if req.speed != 1.0:
        label = "Streaming" if raw_stream else "SSE streaming"
        return (f"{label} is not supported with speed adjustment. "
                "Use a non-streaming request or remove the speed parameter.")
    return None


@router.post("/v1/audio/speech")
async def create_speech(request: Request) -> Response:
    try:
        req = SpeechRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        return error_response(str(exc))
    if (error := check_model(req.model)) is not None:
        return error_response(error, 404, "NotFoundError")
    raw_stream = req.stream_format == "audio"
    sse = (req.stream or req.stream_format == "sse") and not raw_stream
    if (raw_stream or sse) and (error := _streaming_error(req, raw_stream)) is not None:
        return error_response(error)
    ask = SpeechAsk.of(req)
    store = voices.store_of(request.app)
    if (error := check_speech(ask, req.input, store)) is not None:
        return error_response(error)
    engine: VoiceEngine = request.app.state.voice
    try:
        style = await resolve_style(ask, store, engine)
    except SpeechInputError as exc:
        return error_response(str(exc))
    headers = {PREVIEW_HEADER: style.label()} if style is not None and style.source else None

    if raw_stream:
        return StreamingResponse(raw_audio(engine, req.input, req.response_format, style),
                                 media_type=MEDIA_TYPES[req.response_format], headers=headers)
    if sse:
        return StreamingResponse(sse_events(engine, req.input, req.response_format, style),
                                 media_type="text/event-stream", headers=headers)
    try:
        data = await unless_disconnected(request.receive,
                                         speech_file(engine, req.input, req.speed, req.response_format, style))
    except Exception as exc:  # an error body, as vLLM-Omni answers, never a bare 500 with a traceback
        log.exception("speech generation failed")
        return error_response(f"Speech generation failed: {exc}", 500, "InternalServerError")
    if data is None:
        log.info("speech request: client disconnected; its synthesis is cancelled")
        return Response(status_code=499)  # nobody reads it
    return Response(content=data, media_type=MEDIA_TYPES[req.response_format], headers=headers)
