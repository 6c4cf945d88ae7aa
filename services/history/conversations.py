"""Converse's conversations in the history: the timeline (the CLI's `--json` object: the turns and voice-to-voice),
the settings it ran with (mode, targets, voice, the script or system prompt, the silence window, barge-in) and —
as takes keep their WAV — the stereo recording (person left, agent right) in media/<conversation id>/.

    record = history.conversations.record(conv.as_json(), settings={...}, audio=conv.stereo_wav())
    history.conversations.list(limit=10), history.conversations.get(record.id).audio_bytes()
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.errors import InvalidInput
from services.access import LOCAL, require
from services.history.base import read_kept

if TYPE_CHECKING:
    from services.media_store import MediaStore
    from services.history.db import Row
    from services.history.host import Host

MODES = ("pipeline", "native")
AUDIO_NAME = "conversation.wav"


@dataclass(frozen=True)
class ConversationRecord:
    """One kept conversation: its timeline, its settings and its stereo WAV (`audio_bytes()`)."""

    id: str
    mode: str
    title: str  # the person's first words, for lists
    timeline: dict[str, Any]
    settings: dict[str, Any]
    audio: str | None
    created_at: float
    media: MediaStore = field(repr=False, compare=False)
    user_id: str = LOCAL.id
    shared: bool = False

    @property
    def text(self) -> str:
        """The person's first words, as lists show a record's text."""
        return self.title

    @property
    def turns(self) -> list[dict[str, Any]]:
        return list(self.timeline.get("turns", []))

    def audio_bytes(self) -> bytes | None:
        """The stereo WAV as kept (None when none was); HistoryError naming the file when it is gone."""
        return read_kept(self.media, self.id, self.audio, f"conversation {self.id}")


def _record(row: Row, media: MediaStore) -> ConversationRecord:
    return ConversationRecord(
        id=row["id"], mode=row["mode"], title=row["title"], timeline=json.loads(row["timeline"]),
        settings=json.loads(row["settings"]), audio=row["audio"], created_at=row["created_at"],
        media=media, user_id=row["user_id"], shared=bool(row["shared"]))


class ConversationStore:
    """The conversations in `history`, acting for its actor (over its one connection and write path)."""

    def __init__(self, history: Host) -> None:
        self.history = history

    def record(self, timeline: Mapping[str, Any], *, settings: Mapping[str, Any], audio: bytes | None = None,
               created_at: float | None = None) -> ConversationRecord:
        """Keep a conversation, the actor's (Forbidden unless their role may generate): its WAV, if given, in
        media/<id>/conversation.wav (written, atomically, before the row). One without turns is refused
        (InvalidInput): nothing was said to keep."""
        history = self.history
        require(history.actor, "generate")
        mode, turns = timeline.get("mode"), timeline.get("turns") or []
        if mode not in MODES:
            raise InvalidInput(f"a conversation's mode is pipeline or native, not {mode!r}")
        if not turns:
            raise InvalidInput("this conversation has no turns, so it is not kept")
        title = " ".join(str(turns[0].get("user_text") or "").split())[:120] or "(no words)"
        record_id = f"conversation-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        with history.new_record(record_id, "conversation", {AUDIO_NAME: audio} if audio else {}) as (names, db):
            db.execute(
                "INSERT INTO conversations (id, mode, title, timeline, settings, audio, created_at, user_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record_id, mode, title, json.dumps(dict(timeline), ensure_ascii=False),
                 json.dumps(dict(settings), ensure_ascii=False), names[0] if names else None,
                 float(created_at or time.time()), history.actor.id))
        return self.get(record_id)

    def list(self, *, limit: int | None = 50) -> list[ConversationRecord]:
        """The actor's conversations and those others shared, newest first."""
        return [_record(r, self.history.media) for r in self.history.visible_rows("conversations", limit)]

    def get(self, record_id: str) -> ConversationRecord:
        """The conversation; someone else's unshared one is refused like a missing one."""
        return _record(self.history.visible_row("conversations", record_id, "conversation"), self.history.media)
