"""The voices routes (docs/protocols.md, "Voices"): upload, list and delete the named voices used for cloning.

`POST /v1/audio/voices` (multipart: the text fields of `VoiceUploadForm` and one voice source), `GET` (a
`VoicesResponse`) and `DELETE /v1/audio/voices/{name}`. The studio's voice library, the offline engine and the
local SageMaker emulator all import these models. Field names, answers and rules follow vLLM-Omni 0.30.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

VOICES_PATH = "/v1/audio/voices"
VOICE_SAMPLE_FIELD = "audio_sample"  # the multipart file part of an upload
# The content types vLLM-Omni accepts for `audio_sample`; `application/octet-stream` is resolved from the
# file name's extension (.wav .mp3/.mpeg .flac .ogg .aac .webm .mp4; anything else counts as audio/wav).
VOICE_SAMPLE_MIME_TYPES = frozenset(
    {"audio/mpeg", "audio/wav", "audio/x-wav", "audio/ogg", "audio/aac", "audio/flac", "audio/webm", "audio/mp4"}
)
EmbeddingSource = Literal["audio", "direct"]  # an uploaded recording, or a speaker_embedding vector


def voice_path(name: str) -> str:
    """`DELETE` path of one uploaded voice (the name percent-encoded)."""
    from urllib.parse import quote

    return f"{VOICES_PATH}/{quote(name, safe='')}"


def _error_message(data: Any) -> str | None:
    """The words of an error in a voices answer: `{"error": "..."}` or `{"error": {"message": ...}}`."""
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err) if err else None


class _VoicesAnswer(BaseModel):
    """An answer of the voices routes: `success`, and the server's words in `error` when it failed."""

    model_config = ConfigDict(extra="allow")

    success: bool
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _error_body(cls, data: Any) -> Any:
        """An error-only body as `success=False`; an `error` object flattened to its message."""
        if isinstance(data, dict) and "success" not in data and (message := _error_message(data)) is not None:
            return {"success": False, "error": message}
        if isinstance(data, dict) and not isinstance(data.get("error"), str | None):
            return {**data, "error": _error_message(data)}
        return data


def voice_name_error(name: str) -> str | None:
    """Why vLLM-Omni refuses `name` for an uploaded voice (its words), or None. It trims the name first."""
    trimmed = (name or "").strip()
    if not trimmed or trimmed in (".", "..") or any(c in trimmed for c in "/\\\x00"):
        return f"Invalid voice name {name!r}: must be non-empty, no path separators or NUL"
    return None


class VoiceUploadForm(BaseModel):
    """The text fields of `POST /v1/audio/voices` (multipart/form-data).

    Exactly one voice source goes with them: the `audio_sample` file part (≤ VOICE_SAMPLE_MAX_BYTES, one of
    VOICE_SAMPLE_MIME_TYPES, 1–30 s on vLLM-Omni) or `speaker_embedding`, a JSON-encoded list of floats
    (1024 numbers for the 0.6B models, 2048 for 1.7B). `consent` — the id of the speaker's consent
    recording — is required, as is `name`.
    """

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    consent: str = Field(min_length=1)
    ref_text: str | None = None  # transcript of the sample: better clones (in-context learning)
    speaker_description: str | None = None  # free text, e.g. "warm narrator"
    speaker_embedding: str | None = None  # JSON list of floats; not together with an audio_sample

    def form_fields(self) -> dict[str, str]:
        """The text parts of the multipart body, in a stable order (unset ones left out)."""
        return {k: str(v) for k, v in self.model_dump(exclude_none=True).items()}


class UploadedVoice(BaseModel):
    """One uploaded voice: an item of `uploaded_voices` in `GET /v1/audio/voices`, and the `voice` of an upload answer.

    Tolerant: only `name` is required, unknown keys are kept, and a bare string (other servers) is taken as a name.
    """

    model_config = ConfigDict(extra="allow")

    name: str
    consent: str = ""
    created_at: int = 0  # Unix seconds
    file_size: int | None = None
    mime_type: str | None = None
    embedding_source: EmbeddingSource | str = "audio"
    embedding_dim: int | None = None  # set for embedding_source="direct"
    ref_text: str | None = None
    speaker_description: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else data

    def listed(self) -> dict[str, Any]:
        """This voice as vLLM-Omni lists it: the seven keys always, ref_text / speaker_description when set."""
        entry: dict[str, Any] = {
            "name": self.name,
            "consent": self.consent,
            "created_at": self.created_at,
            "file_size": self.file_size or 0,
            "mime_type": self.mime_type or "",
            "embedding_source": self.embedding_source,
            "embedding_dim": self.embedding_dim,
        }
        if self.ref_text:
            entry["ref_text"] = self.ref_text
        if self.speaker_description:
            entry["speaker_description"] = self.speaker_description
        return entry

    def uploaded(self) -> dict[str, Any]:
        """The `voice` object of vLLM-Omni's upload answer (its keys differ for a recording and an embedding)."""
        if self.embedding_source == "direct":
            return {
                "name": self.name,
                "consent": self.consent,
                "created_at": self.created_at,
                "embedding_source": "direct",
                "embedding_dim": self.embedding_dim,
            }
        answer: dict[str, Any] = {
            "name": self.name,
            "consent": self.consent,
            "created_at": self.created_at,
            "mime_type": self.mime_type or "",
            "file_size": self.file_size or 0,
        }
        if self.ref_text:
            answer["ref_text"] = self.ref_text
        if self.speaker_description:
            answer["speaker_description"] = self.speaker_description
        return answer


class VoicesResponse(BaseModel):
    """`GET /v1/audio/voices`: `voices` holds every speaker name (uploaded ones included, lower-case)."""

    model_config = ConfigDict(extra="ignore")

    voices: list[str]
    uploaded_voices: list[UploadedVoice] = Field(default_factory=list)

    def wire(self) -> dict[str, Any]:
        return {"voices": self.voices, "uploaded_voices": [v.listed() for v in self.uploaded_voices]}


class VoiceUploadResponse(_VoicesAnswer):
    """The answer to `POST /v1/audio/voices`: `{"success": true, "voice": {...}}`.

    vLLM-Omni answers a refused upload with HTTP **200** and an error body `{"error": {"message", ...}}`
    (its route returns the error object instead of raising); parsing either shape gives `success=False`
    and `error` holding the server's words, so a client checks `success`, never only the status.
    """

    voice: UploadedVoice | None = None

    def wire(self) -> dict[str, Any]:
        return {"success": self.success, "voice": self.voice.uploaded() if self.voice else None}


class VoiceDeleteResponse(_VoicesAnswer):
    """The answer to `DELETE /v1/audio/voices/{name}`.

    200 `{"success": true, "message": "Voice 'x' deleted successfully"}`; an unknown name is **404**
    `{"success": false, "error": "Voice 'x' not found"}`. An `{"error": {...}}` body parses as success=False.
    """

    message: str | None = None

    def wire(self) -> dict[str, Any]:
        if self.success:
            return {"success": True, "message": self.message or ""}
        return {"success": False, "error": self.error or ""}
