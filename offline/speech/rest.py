"""`POST /v1/audio/speech`'s answers: a whole file (wav, pcm, flac, mp3, opus), raw streamed audio, or SSE events.

Starlette cancels a streamed response when its client disconnects; closing the voice's stream then drops its
queued work.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from offline.styles import Style
from offline.voice import VoiceEngine, encode_audio
from protocol.audio import wav_stream_header
from protocol.common import ErrorInfo, ErrorResponse, dumps
from protocol.speech import SpeechAudioDelta, SpeechAudioDone, SpeechAudioError

log = logging.getLogger(__name__)


def error_response(message: str, status: int = 400, error_type: str = "BadRequestError") -> JSONResponse:
    body = ErrorResponse(error=ErrorInfo(message=message, type=error_type, code=status))
    return JSONResponse(body.model_dump(), status_code=status)


async def speech_file(engine: VoiceEngine, text: str, speed: float, response_format: str,
                      style: Style | None) -> bytes:
    pcm = bytearray()
    async with contextlib.aclosing(engine.stream_pcm(text, speed=speed, fast_start=False, style=style)) as stream:
        async for chunk in stream:
            pcm += chunk
    return encode_audio(bytes(pcm), response_format)


async def raw_audio(engine: VoiceEngine, text: str, response_format: str, style: Style | None) -> AsyncIterator[bytes]:
    if response_format == "wav":
        yield wav_stream_header()
    async with contextlib.aclosing(engine.stream_pcm(text, fast_start=True, style=style)) as stream:
        async for chunk in stream:
            yield chunk


async def sse_events(engine: VoiceEngine, text: str, response_format: str, style: Style | None) -> AsyncIterator[str]:
    def event(message: BaseModel) -> str:
        return f"event: {message.type}\ndata: {dumps(message)}\n\n"  # type: ignore[attr-defined]

    emitted = False
    try:
        async with contextlib.aclosing(raw_audio(engine, text, response_format, style)) as audio:
            async for chunk in audio:
                emitted = True
                yield event(SpeechAudioDelta(audio=base64.b64encode(chunk).decode("ascii"), response_format=response_format))
        yield event(SpeechAudioDone())
    except Exception as exc:
        log.exception("SSE speech generation failed")
        extra = {"partial_audio": True, "action": "discard"} if emitted else {}
        yield event(SpeechAudioError(error=ErrorInfo(message=str(exc), type="server_error", code=500, **extra)))
