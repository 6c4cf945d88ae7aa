"""The offline engine's named voices and voice references (`/v1/audio/voices`, `ref_audio`), as vLLM-Omni has them.

- `POST /v1/audio/voices` (multipart): `name`, `consent` (both required), `ref_text`, `speaker_description`, and
  one voice source — an `audio_sample` file or `speaker_embedding` (a JSON list of numbers). The answer is
  `{"success": true, "voice": {...}}`. A refused upload is answered as vLLM-Omni's route answers it: HTTP 200
  with an error body `{"error": {"message", "type": "BadRequestError", "param": null, "code": 400}}`; a missing
  `name`/`consent` is a 400 "N validation error(s)" body.
- `GET /v1/audio/voices`: `voices` (built-in names, then uploaded names lower-cased) and `uploaded_voices`.
- `DELETE /v1/audio/voices/{name}`: 200 `{"success": true, "message": "Voice 'x' deleted successfully"}`, or
  404 `{"success": false, "error": "Voice 'x' not found"}`.

Texts and checks follow vllm_omni/entrypoints/openai (api_server.py's voice routes, serving_speech.py's
upload_voice / upload_voice_embedding / delete_voice): names are trimmed and must not be empty, `.`/`..`, or
hold `/`, `\\` or NUL; samples are at most 10 MB, of an audio MIME type (a generic
`application/octet-stream` is resolved from the file name), 1–30 s long once decoded; embeddings are a
non-empty JSON list of at most 4096 finite numbers (those two checks: offline/voice_sources.py); names match
case-insensitively; uploading a name again replaces that voice.

Deliberate differences: the engine keeps voices in memory (and, when `OMNI_ENGINE_VOICES_DIR` names a folder,
also there, so they survive a restart); a re-upload that fails keeps the voice it would have replaced
(vLLM-Omni drops it before decoding the new sample); embeddings of 1024 (0.6B) and 2048 (1.7B) numbers are
both accepted, since the engine stands in for every Qwen3-TTS size; decoding uses PyAV (wav, mp3, flac,
ogg/opus, aac/mp4, webm). A voice is heard as a preview (offline.styles): a recording's median pitch is
measured at upload and the Piper voice is shifted to it.

`ref_audio` in a speech request must be a data URL (`data:audio/wav;base64,...`): the engine fetches nothing,
so http(s) and file URLs are refused with a message saying so (offline/voice_sources.py reads it).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import MultiPartException

from offline import styles
from offline.voice import DEFAULT_VOICE, VOICE_NAMES
from offline.voice_sources import VoiceError, embedding_error, measure
from protocol.common import ErrorInfo, ErrorResponse
from protocol.limits import VOICE_SAMPLE_MAX_BYTES
from protocol.voices import (
    VOICE_SAMPLE_FIELD,
    VOICE_SAMPLE_MIME_TYPES,
    VOICES_PATH,
    UploadedVoice,
    VoiceDeleteResponse,
    VoiceUploadResponse,
    voice_name_error,
)

log = logging.getLogger(__name__)

VOICES_DIR_ENV = "OMNI_ENGINE_VOICES_DIR"
MAX_UPLOADED_ENV = "SPEAKER_MAX_UPLOADED"  # vLLM-Omni's variable for the cap
DEFAULT_MAX_UPLOADED = 1000
_EXTENSION_MIME = (
    (".wav", "audio/wav"), (".mp3", "audio/mpeg"), (".mpeg", "audio/mpeg"), (".flac", "audio/flac"),
    (".ogg", "audio/ogg"), (".aac", "audio/aac"), (".webm", "audio/webm"), (".mp4", "audio/mp4"),
)
_ALLOWED_TEXT = "{" + ", ".join(repr(m) for m in sorted(VOICE_SAMPLE_MIME_TYPES)) + "}"


# ---------------------------------------------------------------------------------------------------------
# The store
@dataclass
class StoredVoice:
    info: UploadedVoice
    median_f0: float | None = None  # a recording's measured pitch
    embedding_style: styles.Style | None = None  # an embedding's fixed preview pitch


class VoiceStore:
    """Uploaded voices by lower-cased name; optionally mirrored in a folder so they survive a restart."""

    def __init__(self, folder: Path | None = None, *, max_voices: int = DEFAULT_MAX_UPLOADED) -> None:
        self.folder = folder
        self.max_voices = max_voices
        self._voices: dict[str, StoredVoice] = {}
        self._last_ts = 0
        self.lock = asyncio.Lock()
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            self._restore()

    @classmethod
    def from_env(cls) -> VoiceStore:
        folder = os.environ.get(VOICES_DIR_ENV, "").strip()
        raw_cap = os.environ.get(MAX_UPLOADED_ENV, "").strip()
        try:
            cap = int(raw_cap) if raw_cap else DEFAULT_MAX_UPLOADED
        except ValueError:
            log.warning("Invalid %s=%r; using default %d", MAX_UPLOADED_ENV, raw_cap, DEFAULT_MAX_UPLOADED)
            cap = DEFAULT_MAX_UPLOADED
        return cls(Path(folder).expanduser() if folder else None, max_voices=cap)

    # -- reading -------------------------------------------------------------------------------------------
    def get(self, name: str | None) -> StoredVoice | None:
        return self._voices.get(name.lower()) if name else None

    def names(self) -> list[str]:
        return sorted(self._voices)

    def listed(self) -> list[UploadedVoice]:
        return [v.info for v in self._voices.values()]

    # -- changing --------------------------------------------------------------------------------------------
    def _timestamp(self) -> int:
        self._last_ts = max(int(time.time()), self._last_ts + 1)
        return self._last_ts

    def _check_cap(self, key: str) -> None:
        if key not in self._voices and len(self._voices) >= self.max_voices:
            raise VoiceError(
                f"Uploaded voice limit reached ({self.max_voices}). Delete an existing voice before registering a "
                f"new one, or raise the cap via {MAX_UPLOADED_ENV}."
            )

    def put(self, voice: StoredVoice, *, sample: bytes | None = None, embedding: list[float] | None = None) -> None:
        key = voice.info.name.lower()
        self._check_cap(key)
        self._voices[key] = voice
        if self.folder is not None:
            self._save(key, voice, sample, embedding)

    def delete(self, name: str) -> bool:
        key = name.lower()
        if self._voices.pop(key, None) is None:
            return False
        if self.folder is not None:
            for path in self._files(key):
                path.unlink(missing_ok=True)
        return True

    # -- the folder --------------------------------------------------------------------------------------------
    def _stem(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def _files(self, key: str) -> list[Path]:
        stem = self._stem(key)
        return [stem.with_suffix(".json"), stem.with_suffix(".sample")]

    def _save(self, key: str, voice: StoredVoice, sample: bytes | None, embedding: list[float] | None) -> None:
        meta, sample_path = self._files(key)
        record = {"info": voice.info.model_dump(), "median_f0": voice.median_f0, "embedding": embedding}
        try:
            if sample is not None:
                sample_path.write_bytes(sample)
            else:
                sample_path.unlink(missing_ok=True)
            tmp = meta.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(record), encoding="utf-8")
            tmp.replace(meta)
        except OSError as exc:  # the voice is still usable from memory
            log.warning("could not save voice %r in %s: %s", voice.info.name, self.folder, exc)

    def _restore(self) -> None:
        assert self.folder is not None
        for path in sorted(self.folder.glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                info = UploadedVoice.model_validate(record["info"])
                embedding = record.get("embedding")
                voice = StoredVoice(
                    info=info,
                    median_f0=record.get("median_f0"),
                    embedding_style=styles.style_for_embedding(embedding) if embedding else None,
                )
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("skipping voice file %s: %s", path, exc)
                continue
            self._voices[info.name.lower()] = voice
            self._last_ts = max(self._last_ts, info.created_at)
        if self._voices:
            log.info("restored %d uploaded voice(s) from %s", len(self._voices), self.folder)


def store_of(app: Any) -> VoiceStore:
    """The app's voice store (created on first use when the app was built without one)."""
    store = getattr(app.state, "voices", None)
    if store is None:
        store = app.state.voices = VoiceStore.from_env()
    return store


# ---------------------------------------------------------------------------------------------------------
# Routes
def _error_body(message: str) -> JSONResponse:
    """How vLLM-Omni's voice routes refuse: the error object returned as the route's value, so HTTP 200."""
    return JSONResponse(ErrorResponse(error=ErrorInfo(message=message)).model_dump(), status_code=HTTPStatus.OK)


def _validation_error(errors: list[dict[str, Any]]) -> JSONResponse:
    """vLLM's RequestValidationError answer: 400, "N validation error(s):" then each error."""
    label = "error" if len(errors) == 1 else "errors"
    message = (f"{len(errors)} validation {label}:\n" + "".join(f"  {e}\n" for e in errors)).rstrip()
    param = ".".join(str(p) for p in errors[0]["loc"]) if errors else None
    info = ErrorInfo(message=message, type=HTTPStatus.BAD_REQUEST.phrase, param=param, code=HTTPStatus.BAD_REQUEST)
    return JSONResponse(ErrorResponse(error=info).model_dump(), status_code=HTTPStatus.BAD_REQUEST)


def _missing(field: str) -> dict[str, Any]:
    return {"type": "missing", "loc": ("body", field), "msg": "Field required", "input": None}


def _mime_type(upload: UploadFile) -> str | None:
    mime = upload.content_type
    if mime == "application/octet-stream":
        filename = (upload.filename or "").lower()
        mime = next((m for ext, m in _EXTENSION_MIME if filename.endswith(ext)), "audio/wav")
    return mime


def _text_field(form: Any, name: str) -> str | None:
    """A text form field as FastAPI reads one: absent or empty is None."""
    value = form.get(name)
    if isinstance(value, UploadFile):
        return None
    return value if value else None


async def _upload_sample(store: VoiceStore, upload: UploadFile, consent: str, name: str,
                         ref_text: str | None, speaker_description: str | None) -> UploadedVoice:
    name = name.strip()
    ref_text = (ref_text or "").strip() or None
    speaker_description = (speaker_description or "").strip() or None
    upload.file.seek(0, 2)
    file_size = upload.file.tell()
    upload.file.seek(0)
    if file_size > VOICE_SAMPLE_MAX_BYTES:
        raise VoiceError(f"File size exceeds maximum limit of 10MB. Got {file_size} bytes.")
    mime = _mime_type(upload)
    if mime not in VOICE_SAMPLE_MIME_TYPES:
        raise VoiceError(f"Unsupported MIME type: {mime}. Allowed: {_ALLOWED_TEXT}")
    content = await upload.read()
    # Decoded before anything is replaced: a failed re-upload keeps the voice it would have replaced.
    reference = await asyncio.to_thread(measure, content, what="audio file")
    async with store.lock:
        info = UploadedVoice(
            name=name, consent=consent, created_at=store._timestamp(), file_size=file_size, mime_type=mime,
            embedding_source="audio", embedding_dim=None, ref_text=ref_text, speaker_description=speaker_description,
        )
        store.put(StoredVoice(info=info, median_f0=reference.median_f0), sample=content)
    log.info("uploaded voice %r with consent id %r", name, consent)
    return info


async def _upload_embedding(store: VoiceStore, raw: str, consent: str, name: str) -> UploadedVoice:
    name = name.strip()
    try:
        embedding = json.loads(raw)
    except (json.JSONDecodeError, TypeError) as exc:
        raise VoiceError(f"'speaker_embedding' must be valid JSON: {exc}") from None
    if (error := embedding_error(embedding)) is not None:
        raise VoiceError(error)
    values = [float(x) for x in embedding]
    async with store.lock:
        info = UploadedVoice(
            name=name, consent=consent, created_at=store._timestamp(), file_size=4 * len(values),
            mime_type="application/x-safetensors", embedding_source="direct", embedding_dim=len(values),
        )
        store.put(StoredVoice(info=info, embedding_style=styles.style_for_embedding(values)), embedding=values)
    log.info("uploaded voice %r from a %d-number speaker embedding", name, len(values))
    return info


router = APIRouter()


@router.get(VOICES_PATH)
async def list_voices(request: Request) -> JSONResponse:
    store = store_of(request.app)
    body = {
        "voices": [*VOICE_NAMES, DEFAULT_VOICE, *store.names()],
        "uploaded_voices": [v.listed() for v in store.listed()],
    }
    return JSONResponse(body)


@router.post(VOICES_PATH)
async def upload_voice(request: Request) -> JSONResponse:
    store = store_of(request.app)
    try:
        form = await request.form()
    except (StarletteHTTPException, MultiPartException) as exc:
        detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc)
        return _validation_error([{"type": "value_error", "loc": ("body",), "msg": str(detail), "input": None}])
    try:
        sample = form.get(VOICE_SAMPLE_FIELD)
        if sample is not None and not isinstance(sample, UploadFile):
            if sample == "":
                sample = None  # an empty text part is FastAPI's "absent"
            else:
                return _validation_error([{
                    "type": "value_error", "loc": ("body", VOICE_SAMPLE_FIELD),
                    "msg": f"Value error, Expected UploadFile, received: {type(sample)}", "input": sample,
                }])
        embedding = _text_field(form, "speaker_embedding")
        consent, name = _text_field(form, "consent"), _text_field(form, "name")
        missing = [_missing(f) for f, v in (("consent", consent), ("name", name)) if v is None]
        if missing:
            return _validation_error(missing)
        assert consent is not None and name is not None
        # vLLM-Omni's order: the route checks the sources, then the handler checks the name.
        if embedding is not None and sample is not None:
            return _error_body("'audio_sample' and 'speaker_embedding' are mutually exclusive")
        if embedding is None and sample is None:
            return _error_body("Either 'audio_sample' or 'speaker_embedding' must be provided")
        if (error := voice_name_error(name)) is not None:
            return _error_body(error)
        if embedding is not None:
            info = await _upload_embedding(store, embedding, consent, name)
        else:
            assert isinstance(sample, UploadFile)
            info = await _upload_sample(store, sample, consent, name, _text_field(form, "ref_text"),
                                        _text_field(form, "speaker_description"))
    except VoiceError as exc:
        return _error_body(str(exc))
    except Exception as exc:  # vLLM-Omni's catch-all wording
        log.exception("failed to upload voice")
        return _error_body(f"Failed to upload voice: {exc}")
    finally:
        await form.close()
    return JSONResponse(VoiceUploadResponse(success=True, voice=info).wire())


@router.delete(VOICES_PATH + "/{name}")
async def delete_voice(name: str, request: Request) -> JSONResponse:
    store = store_of(request.app)
    async with store.lock:
        deleted = store.delete(name)
    if not deleted:
        body = VoiceDeleteResponse(success=False, error=f"Voice '{name}' not found")
        return JSONResponse(body.wire(), status_code=HTTPStatus.NOT_FOUND)
    log.info("deleted voice %r", name)
    return JSONResponse(VoiceDeleteResponse(success=True, message=f"Voice '{name}' deleted successfully").wire())
