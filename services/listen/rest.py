"""`POST /v1/audio/transcriptions` on a vLLM-protocol server: the file goes as it was given, as multipart.

verbose_json is asked first, for the segments; a server whose model cannot time its text (vLLM answers
"Currently do not support verbose_json for …") is asked again for json, and the transcript has no segments.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from pydantic import ValidationError

from protocol.common import error_text, plain_excerpt
from protocol.errors import BackendUnreachable, ServerError
from protocol.listen import (
    FILE_FIELD,
    TRANSCRIPTIONS_PATH,
    TranscriptionForm,
    TranscriptionFormat,
    TranscriptionVerbose,
)
from services.listen.audio import ListenAudio
from services.listen.transcript import Segment

VERBOSE_REFUSED = "verbose_json"  # the word vLLM's refusal of verbose_json names


def unreachable(url: str, exc: BaseException) -> BackendUnreachable:
    """One line naming the target and what failed."""
    why = plain_excerpt(str(exc) or type(exc).__name__, 120)
    return BackendUnreachable(f"cannot reach {url} ({type(exc).__name__}: {why}); is the server running, and is "
                              "the URL right?")


async def post_file(http: httpx.AsyncClient, url: str, audio: ListenAudio, form: TranscriptionForm) -> httpx.Response:
    files = {FILE_FIELD: (audio.name.rsplit("/", 1)[-1] or "audio", audio.data, "application/octet-stream")}
    try:
        return await http.post(url + TRANSCRIPTIONS_PATH, data=form.form_fields(), files=files)
    except httpx.HTTPError as exc:
        raise unreachable(url, exc) from None


def _refused(resp: httpx.Response, url: str) -> ServerError:
    said = error_text(resp.text)
    return ServerError(f"{url}{TRANSCRIPTIONS_PATH} answered HTTP {resp.status_code}" + (f": {said}" if said else ""),
                       status=resp.status_code)


async def transcribe_file(http: httpx.AsyncClient, url: str, audio: ListenAudio, *, model: str | None,
                          language: str | None) -> tuple[str, list[Segment], float, str | None]:
    """(text, segments, elapsed seconds, the X-Offline-Preview note) of one upload."""
    started = time.perf_counter()
    fmt: TranscriptionFormat = "verbose_json"
    resp = await post_file(http, url, audio, TranscriptionForm(model=model, language=language, response_format=fmt))
    if resp.status_code == 400 and VERBOSE_REFUSED in error_text(resp.text):
        fmt = "json"
        resp = await post_file(http, url, audio, TranscriptionForm(model=model, language=language, response_format=fmt))
    elapsed = time.perf_counter() - started
    if resp.status_code != 200:
        raise _refused(resp, url)
    try:
        body: Any = resp.json()
        answer = TranscriptionVerbose.model_validate(body)
    except (ValueError, ValidationError):
        raise ServerError(f"{url}{TRANSCRIPTIONS_PATH} answered something that is not a transcription: "
                          f"{plain_excerpt(resp.text, 200)!r}") from None
    segments = [Segment(round(s.start, 3), round(s.end, 3), s.text.strip()) for s in answer.segments or []]
    return answer.text.strip(), segments, elapsed, resp.headers.get("X-Offline-Preview")
