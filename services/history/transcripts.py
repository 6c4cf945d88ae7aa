"""The Listen page's transcripts in the history: the text, its segments, the figures, the model, backend and
target, where the speech came from (a file's name, or "microphone") and — as takes keep their WAV — the recording
in media/<transcript id>/ (a file as it was given; the microphone as a 16 kHz WAV).

    record = history.transcripts.record(text, source="talk.m4a", route="file", model=m, backend="offline",
                                        target=url, segments=[...], figures={...}, audio=data, audio_name="talk.m4a")
    history.transcripts.list(limit=10), history.transcripts.get(record.id).audio_bytes()
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from protocol.errors import InvalidInput
from services.access import LOCAL, require
from services.history.base import DB_ERRORS, HistoryError, read_kept, reason
from services.kinds import backend_name

if TYPE_CHECKING:
    from services.media_store import MediaStore
    from services.history.db import Row
    from services.history.host import Host

Route = Literal["file", "stream"]
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,8}$")


@dataclass(frozen=True)
class TranscriptRecord:
    """One kept transcript: what lists show, its segments and figures, and its recording (`audio_bytes()`)."""

    id: str
    text: str
    source: str
    route: Route
    model: str
    backend: str  # offline | server | sagemaker (one kept as "omni", the server's former name, reads as server)
    target: str
    segments: list[dict[str, Any]]
    figures: dict[str, Any]
    reference: str | None
    preview: str | None
    audio: str | None
    created_at: float
    media: MediaStore = field(repr=False, compare=False)
    user_id: str = LOCAL.id
    shared: bool = False

    def audio_bytes(self) -> bytes | None:
        """The recording as kept (None when none was); HistoryError naming the file when it is gone."""
        return read_kept(self.media, self.id, self.audio, f"transcript {self.id}")


def _record(row: Row, media: MediaStore) -> TranscriptRecord:
    return TranscriptRecord(
        id=row["id"], text=row["text"], source=row["source"], route=row["route"], model=row["model"],
        backend=backend_name(row["backend"]), target=row["target"], segments=json.loads(row["segments"]),
        figures=json.loads(row["figures"]), reference=row["reference"], preview=row["preview"], audio=row["audio"],
        created_at=row["created_at"], media=media, user_id=row["user_id"], shared=bool(row["shared"]))


def audio_file_name(source_name: str) -> str:
    """The name a recording is kept under: "recording" with the suffix of the name it came with (if any)."""
    suffix = _SUFFIX.search(source_name.rsplit("/", 1)[-1])
    return "recording" + (suffix.group(0).lower() if suffix else "")


class TranscriptStore:
    """The transcripts in `history`, acting for its actor (over its one connection and write path)."""

    def __init__(self, history: Host) -> None:
        self.history = history

    def record(self, text: str, *, source: str, route: Route, model: str, backend: str, target: str,
               segments: Sequence[Mapping[str, Any]] = (), figures: Mapping[str, Any] | None = None,
               reference: str | None = None, preview: str | None = None, audio: bytes | None = None,
               audio_name: str | None = None, created_at: float | None = None) -> TranscriptRecord:
        """Keep a transcript, the actor's (Forbidden unless their role may generate): its recording, if given, in
        media/<id>/recording.<suffix of audio_name> (written, atomically, before the row). An empty text is refused
        (InvalidInput): a transcript with no words is not kept."""
        history = self.history
        require(history.actor, "generate")
        if not text.strip():
            raise InvalidInput("this transcript has no words, so it is not kept")
        if route not in ("file", "stream"):
            raise InvalidInput(f"a transcript's route is file or stream, not {route!r}")
        record_id = f"transcript-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        files = {audio_file_name(audio_name or source): audio} if audio else {}
        with history.new_record(record_id, "transcript", files) as (names, db):
            db.execute(
                "INSERT INTO transcripts (id, text, source, route, model, backend, target, segments, figures,"
                " reference, preview, audio, created_at, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record_id, text, source, route, model, backend, target, json.dumps([dict(s) for s in segments]),
                 json.dumps(dict(figures or {})), reference, preview, names[0] if names else None,
                 float(created_at or time.time()), history.actor.id))
        return self.get(record_id)

    def time_segments(self, record_id: str, segments: Sequence[Mapping[str, Any]]) -> TranscriptRecord:
        """Keep cue times for a streamed transcript — a realtime stream gives words, not when they were said, so
        the Listen page hears the kept recording again as a file for them ("Time for subtitles"). Its figures say
        so (`segments_from: "file"`: the cues' words are the file route's). Only its owner, or an admin, may."""
        history = self.history
        require(history.actor, "generate")
        if not segments:
            raise InvalidInput("no speech was timed in the recording, so there are no subtitles to keep")
        record = self.get(record_id)
        history.check_changeable(record, "change", f"transcript {record_id}")
        figures = {**record.figures, "segments_from": "file"}
        try:
            with history.transaction() as db:
                db.execute("UPDATE transcripts SET segments = ?, figures = ? WHERE id = ?",
                           (json.dumps([dict(s) for s in segments]), json.dumps(figures), record_id))
        except DB_ERRORS as exc:
            raise HistoryError(f"cannot keep the subtitles' times in {history.where} ({reason(exc)})") from None
        return self.get(record_id)

    def list(self, *, limit: int | None = 50) -> list[TranscriptRecord]:
        """The actor's transcripts and those others shared, newest first."""
        return [_record(r, self.history.media) for r in self.history.visible_rows("transcripts", limit)]

    def get(self, record_id: str) -> TranscriptRecord:
        """The transcript; someone else's unshared one is refused like a missing one."""
        return _record(self.history.visible_row("transcripts", record_id, "transcript"), self.history.media)
