"""Saved voices for cloning: one voice library per target, `backend.client("voices")`.

    ref = load_reference(recording)                         # checked, mono 24 kHz WAV (services/speech/reference.py)
    saved = backend.client("voices").add("anna", ref, consent_id="consent-0412", ref_text="What she says in it.")
    backend.client("voices").list()                                   # [SavedVoice]
    backend.client("voice") ... speech_config(voice="anna", task_type="Base")   # speak with it
    backend.client("voices").delete("anna")                           # what was done, in words

Cloning someone's voice needs their consent: every `add` takes the id of the speaker's consent recording
(refused when empty) and is recorded in the studio's history (services/history, `history.voices`: target, name,
consent id, who, when, transcript) before anything is uploaded. A name the target already has is refused
before the upload (vLLM-Omni would silently replace that voice).

The records are a person's (services/history): `backend.client("voices").acting(history)` is the library as the
person that history acts for — saving needs a role that may clone voices (Forbidden before anything is
uploaded), the list shows their voices, the shared ones and those no studio record names, and removing a voice
is for the one who saved it (or an admin).

- OmniVoices (the offline engine, a vLLM-Omni URL): multipart `POST /v1/audio/voices`, `GET` lists,
  `DELETE /v1/audio/voices/{name}` removes (docs/protocols.md, "Voices").
- SageMakerVoices: the upload goes through `invoke_endpoint` with `CustomAttributes=route=/v1/audio/voices`
  and the same multipart body. SageMaker forwards only POSTs, so a voice cannot be listed or deleted there:
  `list()` is the studio's own record of what it uploaded to that endpoint, and `delete()` only forgets the
  record — the voice stays on the endpoint until the endpoint is replaced (`notice` says so for the UI).
"""

from __future__ import annotations

import copy
import getpass
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import ValidationError
from urllib3 import encode_multipart_formdata

from protocol.common import error_text
from protocol.errors import BackendUnreachable, InvalidInput, ServerError
from protocol.limits import INSTRUCTIONS_MAX_CHARS
from protocol.sagemaker import route_attribute
from protocol.voices import (
    VOICE_SAMPLE_FIELD,
    VOICES_PATH,
    VoiceDeleteResponse,
    VoicesResponse,
    VoiceUploadForm,
    VoiceUploadResponse,
    voice_name_error,
    voice_path,
)
from services.access import require
from services.speech.reference import ReferenceAudio, load_reference

if TYPE_CHECKING:
    from services.aws import AwsSession
    from services.history import History, VoiceRecord

SAMPLE_FILE_NAME = "reference.wav"


@dataclass(frozen=True)
class SavedVoice:
    """A voice saved for cloning on one target. `source` says where it is known from: the server's own list,
    or only the studio's record (SageMaker, where nothing can be listed)."""

    name: str
    consent_id: str | None = None
    created_at: float | None = None  # Unix seconds
    who: str | None = None  # from the studio's record; None when another client saved it
    ref_text: str | None = None
    speaker_description: str | None = None
    source: Literal["server", "record"] = "server"
    user_id: str | None = None  # whose it is (the studio's record); None when another client saved it
    shared: bool = False
    record_id: int | None = None  # the studio's record (History.set_shared("voice", record_id, …))

    def figures(self) -> dict[str, Any]:
        """Plain JSON-able values (the CLI's --json)."""
        return {"name": self.name, "consent_id": self.consent_id, "created_at": self.created_at, "who": self.who,
                "ref_text": self.ref_text, "speaker_description": self.speaker_description, "source": self.source,
                "user_id": self.user_id, "shared": self.shared}


def current_user() -> str:
    """Who is saving a voice, when the caller does not say: the OS user."""
    try:
        return getpass.getuser()
    except Exception:  # no login name (some containers)
        return "unknown"


def _clean(text: str | None) -> str | None:
    return (text or "").strip() or None


class VoiceLibrary(ABC):
    """What every target's library does; subclasses upload, list and delete."""

    #: False where the server cannot list or delete voices (SageMaker): the UI says `notice`.
    server_lists: bool = True
    notice: str | None = None

    def __init__(self, target: str, history: History | Any, *, record_target: str | None = None) -> None:
        """`history` is the History, or a function making it (opened on first use)."""
        self.target = target  # for messages: a URL or "SageMaker endpoint x (region)"
        self.record_target = record_target or target  # the key of the studio's records
        self._history_source = history
        self._history: History | None = None
        self._lock = threading.Lock()

    # -- the studio's records ---------------------------------------------------------------------------
    @property
    def history(self) -> History:
        with self._lock:
            if self._history is None:
                source = self._history_source
                self._history = source() if callable(source) else source
            return self._history

    def acting(self, history: History) -> VoiceLibrary:
        """This library recording in `history` (a History acting for one person): a cheap copy, same target."""
        view = copy.copy(self)
        view._history_source, view._history, view._lock = history, history, threading.Lock()
        return view

    def records(self, *, include_removed: bool = False) -> list[VoiceRecord]:
        """The studio's records of the voices saved on this target that its person sees (their own and the shared
        ones, with consent id, who, when), newest first."""
        return self.history.voices.list(self.record_target, include_removed=include_removed)

    # -- add --------------------------------------------------------------------------------------------
    def add(self, name: str, reference_wav: ReferenceAudio | bytes, consent_id: str, ref_text: str | None = None,
            speaker_description: str | None = None, who: str | None = None) -> SavedVoice:
        """Save `reference_wav` (a ReferenceAudio, or recording bytes, checked by load_reference) as voice `name`
        under the speaker's consent; InvalidInput for what to fix, ServerError with the server's words, Forbidden
        (before anything is checked or uploaded) when the history's person may not clone voices."""
        history = self.history
        require(history.actor, "clone_voice")
        if (problem := voice_name_error(name)) is not None:
            raise InvalidInput(f"{problem}; pick another name")
        name = name.strip()
        consent_id = (consent_id or "").strip() if isinstance(consent_id, str) else ""
        if not consent_id:
            raise InvalidInput("cloning a voice needs the speaker's consent: give the id of their consent recording "
                               "(the consent id); nothing was uploaded")
        ref_text, speaker_description = _clean(ref_text), _clean(speaker_description)
        if speaker_description and len(speaker_description) > INSTRUCTIONS_MAX_CHARS:
            raise InvalidInput(f"the description is {len(speaker_description)} characters; the limit is "
                               f"{INSTRUCTIONS_MAX_CHARS}: shorten it")
        reference = reference_wav if isinstance(reference_wav, ReferenceAudio) else load_reference(reference_wav)
        self._check_free(name)
        who = _clean(who) or (history.actor.name if history.actor.signed_in else current_user())
        record = history.voices.record(self.record_target, name, consent_id, who=who, ref_text=ref_text,
                                           speaker_description=speaker_description)
        form = VoiceUploadForm(name=name, consent=consent_id, ref_text=ref_text,
                               speaker_description=speaker_description)
        fields: list[tuple[str, Any]] = list(form.form_fields().items())
        fields.append((VOICE_SAMPLE_FIELD, (SAMPLE_FILE_NAME, reference.wav, "audio/wav")))
        body, content_type = encode_multipart_formdata(fields)
        try:
            answer = self._upload(body, content_type)
        except BaseException:
            history.voices.drop(record.id)  # nothing was saved: no record of it either
            raise
        voice = answer.voice
        return SavedVoice(name=voice.name if voice else name, consent_id=consent_id, created_at=record.created_at,
                          who=who, ref_text=ref_text, speaker_description=speaker_description,
                          source="server" if self.server_lists else "record", user_id=record.user_id,
                          shared=record.shared, record_id=record.id)

    def _answer(self, status: int, raw: bytes, doing: str) -> VoiceUploadResponse:
        """The upload answer, or ServerError with the server's words (vLLM-Omni may refuse with HTTP 200)."""
        try:
            answer = VoiceUploadResponse.model_validate_json(raw)
        except ValidationError:
            text = error_text(raw.decode("utf-8", "replace"))
            raise ServerError(f"{doing}: HTTP {status}" + (f": {text}" if text else "") if status >= 400 else
                              f"{doing}: the answer is not a voice upload result" + (f": {text}" if text else ""),
                              status=status) from None
        if not answer.success or status >= 400:
            raise ServerError(f"{doing}: {answer.error or f'HTTP {status}'}", status=status)
        return answer

    # -- subclasses -------------------------------------------------------------------------------------
    @abstractmethod
    def _check_free(self, name: str) -> None:
        ...

    @abstractmethod
    def _upload(self, body: bytes, content_type: str) -> VoiceUploadResponse:
        ...

    @abstractmethod
    def list(self) -> list[SavedVoice]:
        ...

    @abstractmethod
    def delete(self, name: str) -> str:
        ...


def _from_record(r: VoiceRecord) -> SavedVoice:
    return SavedVoice(name=r.name, consent_id=r.consent_id, created_at=r.created_at, who=r.who, ref_text=r.ref_text,
                      speaker_description=r.speaker_description, source="record", user_id=r.user_id, shared=r.shared,
                      record_id=r.id)


class OmniVoices(VoiceLibrary):
    """The voices routes of a vLLM-Omni server (or the offline engine) at `url`."""

    def __init__(self, url: str, history: Any, *, record_target: str | None = None, timeout: float = 120.0,
                 connect_timeout: float = 10.0) -> None:
        url = url.rstrip("/")
        super().__init__(url, history, record_target=record_target)
        self.url = url
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)

    def _request(self, method: str, path: str, doing: str, **kwargs: Any) -> httpx.Response:
        try:
            return httpx.request(method, f"{self.url}{path}", timeout=self.timeout, **kwargs)
        except httpx.HTTPError as exc:
            raise BackendUnreachable(f"{doing}: cannot reach {self.url} ({type(exc).__name__}: {exc}); is the server "
                                     "running?") from None

    def _server_voices(self) -> VoicesResponse:
        doing = f"listing the voices of {self.url}"
        resp = self._request("GET", VOICES_PATH, doing)
        if resp.status_code != 200:
            text = error_text(resp.text)
            raise ServerError(f"{doing}: HTTP {resp.status_code}" + (f": {text}" if text else ""), status=resp.status_code)
        try:
            return VoicesResponse.model_validate_json(resp.content)
        except ValidationError:
            raise ServerError(f"{doing}: the answer is not a voice list (HTTP {resp.status_code}, "
                              f"{resp.headers.get('content-type') or 'no content type'})") from None

    def _check_free(self, name: str) -> None:
        listed = self._server_voices()
        uploaded = {v.name.lower() for v in listed.uploaded_voices}
        if name.lower() in uploaded:
            raise InvalidInput(f"a voice named {name!r} already exists on {self.url}: pick another name, or delete it "
                               "first (`python -m services voices delete`)")
        if name.lower() in {v.lower() for v in listed.voices}:
            raise InvalidInput(f"{name!r} is a preset voice of {self.url}: pick another name")
        # A record the server no longer has (deleted by another client, or the server's storage was reset).
        self.history.voices.remove(self.record_target, name, "deleted", gone=True)

    def _upload(self, body: bytes, content_type: str) -> VoiceUploadResponse:
        doing = f"saving the voice on {self.url}"
        resp = self._request("POST", VOICES_PATH, doing, content=body, headers={"Content-Type": content_type})
        return self._answer(resp.status_code, resp.content, doing)

    def list(self) -> list[SavedVoice]:
        """The server's uploaded voices, with who saved them and when from the studio's records where it has one;
        without the ones others saved in the studio and did not share."""
        records = {r.name.lower(): r for r in reversed(self.records())}  # the newest record per name wins
        unseen = self.history.voices.unseen_names(self.record_target) - set(records)
        voices = []
        for v in self._server_voices().uploaded_voices:
            if v.name.lower() in unseen:
                continue
            r = records.get(v.name.lower())
            voices.append(SavedVoice(
                name=v.name, consent_id=v.consent or (r.consent_id if r else None),
                created_at=float(v.created_at) if v.created_at else (r.created_at if r else None),
                who=r.who if r else None, ref_text=v.ref_text or (r.ref_text if r else None),
                speaker_description=v.speaker_description or (r.speaker_description if r else None),
                user_id=r.user_id if r else None, shared=r.shared if r else False, record_id=r.id if r else None))
        return voices

    def delete(self, name: str) -> str:
        doing = f"deleting the voice {name!r} on {self.url}"
        if (problem := voice_name_error(name)) is not None:
            raise InvalidInput(problem)
        self.history.voices.check_removal(self.record_target, name)  # Forbidden before the server is asked
        resp = self._request("DELETE", voice_path(name.strip()), doing)
        try:
            answer = VoiceDeleteResponse.model_validate_json(resp.content)
        except ValidationError:
            answer = VoiceDeleteResponse(success=False, error=error_text(resp.text) or f"HTTP {resp.status_code}")
        if resp.status_code == 404:
            self.history.voices.remove(self.record_target, name, "deleted", gone=True)
            raise InvalidInput(f"there is no saved voice {name!r} on {self.url} (the server said: "
                               f"{answer.error or 'not found'}); `python -m services voices list` shows them")
        if resp.status_code >= 400 or not answer.success:
            raise ServerError(f"{doing}: {answer.error or f'HTTP {resp.status_code}'}", status=resp.status_code)
        self.history.voices.remove(self.record_target, name, "deleted")
        return f"deleted the voice {name!r} from {self.url}"


class SageMakerVoices(VoiceLibrary):
    """Voice uploads to the realtime voice endpoint through `invoke_endpoint`; list and delete from the
    studio's own records (SageMaker forwards only POSTs to the container)."""

    server_lists = False

    def __init__(self, aws: AwsSession, endpoint: str | None, history: Any) -> None:
        target = f"SageMaker endpoint {endpoint} ({aws.region})" if endpoint else "SageMaker (no voice endpoint)"
        super().__init__(target, history, record_target=f"sagemaker:{aws.region}/{endpoint}")
        self.aws = aws
        self.endpoint = endpoint
        self.notice = (f"SageMaker forwards only uploads to the endpoint: these are the voices this studio saved on "
                       f"{endpoint} (its own records, with each consent id); a voice cannot be deleted there — "
                       "removing one forgets the record, and the voice stays on the endpoint until it is replaced")

    def _endpoint(self) -> str:
        if self.endpoint is None:
            from services.aws import missing_endpoint

            raise missing_endpoint("voice")
        return self.endpoint

    def _check_free(self, name: str) -> None:
        self._endpoint()
        if self.history.voices.list(self.record_target, name=name):
            raise InvalidInput(f"a voice named {name!r} was already saved on {self.target}: pick another name (a "
                               "voice on SageMaker cannot be replaced or deleted)")

    def _upload(self, body: bytes, content_type: str) -> VoiceUploadResponse:
        import botocore.exceptions as bx

        from services.aws import aws_error

        endpoint = self._endpoint()
        doing = f"saving the voice on voice endpoint {endpoint}"
        try:
            resp = self.aws.client("sagemaker-runtime").invoke_endpoint(
                EndpointName=endpoint, Body=body, ContentType=content_type, Accept="application/json",
                CustomAttributes=route_attribute(VOICES_PATH),
            )
            raw = resp["Body"].read()
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, doing, profile=self.aws.profile) from None
        return self._answer(200, raw, doing)

    def list(self) -> list[SavedVoice]:
        return [_from_record(r) for r in self.records()]

    def delete(self, name: str) -> str:
        if not self.history.voices.list(self.record_target, name=name):
            raise InvalidInput(f"the studio has no record of a voice {name!r} on {self.target}; "
                               "`python -m services voices list` shows the ones it saved")
        self.history.voices.remove(self.record_target, name, "forgotten")
        return (f"SageMaker cannot delete a voice from an endpoint: the studio forgot its record of {name!r}, but the "
                f"voice stays on {self.target} until that endpoint is replaced (e.g. redeployed)")
