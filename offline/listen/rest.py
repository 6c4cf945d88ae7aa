"""`POST /v1/audio/transcriptions` (multipart/form-data), as vLLM serves it (OpenAI's shapes, docs/listen.md).

Fields: `file` (required), `model`, `language`, `prompt`, `response_format` (json | verbose_json | text | srt |
vtt) and `timestamp_granularities[]`. Answers: json `{"text", "usage": {"type": "duration", "seconds"}}`;
verbose_json `{"task", "language", "duration" (a string, as vLLM sends it), "text", "segments": [...]}`; text,
srt and vtt as text/plain. Errors are vLLM's `{"error": {"message", "type", "param", "code"}}`: a file over
25 MB is "Maximum file size exceeded", bytes that are not audio "Invalid or unsupported audio file.", another
model a 404 "The model `X` does not exist.", a missing file a 400 "1 validation error: …".

The engine's own bounds (offline.listen.limits; vLLM sets neither): a file longer than the engine's maximum
duration is a 400 naming that maximum and the file's length, decoded no further than the maximum; a request that
finds every decoder busy for the engine's lease wait is a 503 saying so.

Deliberate differences: segments are the VAD's regions of speech, each recognized on its own (vLLM's come from
the model's timestamp tokens); `tokens` is empty and `no_speech_prob` is 1 − the region's mean VAD score; a
language other than English is refused; every answer carries `X-Offline-Preview` (what answered, its measured
WER). Audio without speech answers an empty text, with no segments.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from http import HTTPStatus
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException

from offline.decoding import TooLong, decode_mono
from offline.guards import unless_disconnected
from offline.listen.engine import Busy, ListenEngine
from offline.listen.models import language_error, listen_model_error
from offline.listen.recognizer import Cancelled, FileTranscript
from protocol.common import ErrorInfo, ErrorResponse
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from protocol.listen import (
    FILE_FIELD,
    GRANULARITIES_FIELD,
    INVALID_FILE_TEXT,
    MAX_FILE_TEXT,
    DurationUsage,
    TranscriptionForm,
    TranscriptionResponse,
    TranscriptionSegment,
    TranscriptionVerbose,
    srt,
    vtt,
)

log = logging.getLogger(__name__)

PREVIEW_HEADER = "X-Offline-Preview"
MAX_FORM_FIELD_BYTES = 1024 * 1024  # starlette's per-field cap (FastAPI's Form default), as vLLM keeps it


def error(message: str, status: int = HTTPStatus.BAD_REQUEST, error_type: str = "BadRequestError",
          param: str | None = None) -> JSONResponse:
    body = ErrorResponse(error=ErrorInfo(message=message, type=error_type, param=param, code=int(status)))
    return JSONResponse(body.model_dump(), status_code=int(status))


def validation_error(errors: list[dict[str, Any]]) -> JSONResponse:
    """vLLM's answer to a request its form model refuses: 400, "N validation error(s):" then each error."""
    label = "error" if len(errors) == 1 else "errors"
    message = (f"{len(errors)} validation {label}:\n" + "".join(f"  {e}\n" for e in errors)).rstrip()
    param = ".".join(str(p) for p in errors[0]["loc"]) if errors else None
    return error(message, param=param)


def _form_errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [{"type": e["type"], "loc": ("body", *e["loc"]), "msg": e["msg"], "input": e.get("input")}
            for e in exc.errors(include_url=False)]


def read_form(form: Any) -> tuple[TranscriptionForm, UploadFile] | JSONResponse:
    """The form's fields and its file part, or the answer refusing them."""
    upload = form.get(FILE_FIELD)
    fields: dict[str, Any] = {k: v for k, v in form.multi_items()
                              if isinstance(v, str) and v != "" and k not in (FILE_FIELD, GRANULARITIES_FIELD)}
    fields[GRANULARITIES_FIELD] = [g for g in form.getlist(GRANULARITIES_FIELD) if isinstance(g, str)]
    errors: list[dict[str, Any]] = []
    if not isinstance(upload, UploadFile):
        msg = "Field required" if upload is None else "Expected UploadFile, received: <class 'str'>"
        errors.append({"type": "missing" if upload is None else "value_error", "loc": ("body", FILE_FIELD),
                       "msg": msg, "input": None})
    try:
        req = TranscriptionForm.model_validate(fields)
    except ValidationError as exc:
        return validation_error(errors + _form_errors(exc))
    if errors:
        return validation_error(errors)
    assert isinstance(upload, UploadFile)
    return req, upload


def answer(req: TranscriptionForm, result: FileTranscript, note: str) -> Response:
    """The transcript in the asked format, labelled as the offline preview (`note`: the engine's recognizer's)."""
    headers = {PREVIEW_HEADER: note}
    segments = [TranscriptionSegment(id=i, seek=0, start=s.start, end=s.end, text=s.text,
                                     compression_ratio=round(s.compression_ratio, 3), no_speech_prob=s.no_speech_prob)
                for i, s in enumerate(result.segments)]
    fmt = req.response_format
    if fmt == "json":
        usage = DurationUsage(seconds=math.ceil(result.duration_s))
        return JSONResponse(TranscriptionResponse(text=result.text, usage=usage).model_dump(), headers=headers)
    if fmt == "verbose_json":
        body = TranscriptionVerbose(language=req.language or "en", duration=str(round(result.duration_s, 3)),
                                    text=result.text, segments=segments)
        return JSONResponse(body.model_dump(exclude_none=True), headers=headers)
    text = {"text": result.text + "\n", "srt": srt(segments), "vtt": vtt(segments)}[fmt]
    return PlainTextResponse(text, headers=headers)


async def transcribe(request: Request, engine: ListenEngine) -> Response:
    try:
        form = await request.form(max_part_size=MAX_FORM_FIELD_BYTES)
    except (StarletteHTTPException, MultiPartException) as exc:
        return error(str(getattr(exc, "detail", None) or getattr(exc, "message", None) or exc))
    try:
        parsed = read_form(form)
        if isinstance(parsed, Response):
            return parsed
        req, upload = parsed
        if (problem := listen_model_error(req.model)) is not None:
            return error(problem, HTTPStatus.NOT_FOUND, "NotFoundError", "model")
        if (problem := language_error(req.language)) is not None:
            return error(problem, param="language")
        data = await upload.read(TRANSCRIPTION_FILE_MAX_BYTES + 1)
    finally:
        await form.close()
    if len(data) > TRANSCRIPTION_FILE_MAX_BYTES:
        return error(MAX_FILE_TEXT, param="audio_filesize_mb")
    try:
        samples, duration = await asyncio.to_thread(decode_mono, data, max_s=engine.limits.file_max_s)
    except TooLong as exc:
        return error(engine.limits.file_text(exc.duration_s), param="file")
    except ValueError:
        return error(INVALID_FILE_TEXT)
    del data
    cancel = threading.Event()
    try:
        result = await unless_disconnected(request.receive, engine.transcribe(samples, duration, cancel),
                                           on_gone=cancel.set)
    except Busy as exc:
        return error(str(exc), HTTPStatus.SERVICE_UNAVAILABLE, "ServiceUnavailableError")
    except Cancelled as exc:
        log.info("transcription cancelled after %s: the client disconnected", exc)
        result = None
    if result is None:
        return Response(status_code=499)  # nobody reads it
    return answer(req, result, engine.preview_note)
