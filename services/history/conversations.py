"""Converse's conversations in the history: the timeline (the CLI's `--json` object: the turns and voice-to-voice),
the settings it ran with (mode, targets, voice, the script or system prompt, the silence window, barge-in) and —
as takes keep their WAV — the stereo recording (person left, agent right) in media/<conversation id>/.

    record = history.conversations.record(conv.as_json(), settings={...}, audio=conv.stereo_wav())
    history.conversations.list(limit=10), history.conversations.get(record.id).audio_bytes()

A live call is kept as it goes (services/converse/kept.py drives this): `open_live` makes its row (`status`
live, this process as its `owner`, a lease as a job's), `keep_live` writes the turns so far and renews the lease,
`close_live` writes the stereo WAV and ends it. When the process holding a call dies — a restart, or a replica of
a team studio that went away — `cut_orphans` (the Converse page calls it on every run, on any replica) marks its
conversation `cut`, keeping the turns written before (the recording was not: it is written at the end), and says
where and when in the timeline (`timeline["cut"]`); one that had no turn yet is removed. Lists show live calls
to nobody; cut ones are kept like the others, and say so.
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
from services.history.base import owner_alive, read_kept

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

    status: str | None = None  # None: ended; "cut": its process died during the call (what was kept stays)

    @property
    def cut(self) -> dict[str, Any] | None:
        """Where and when a cut conversation was cut ({"replica", "at", "turns"}), else None."""
        return self.timeline.get("cut") if self.status == "cut" else None

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


def _new_id() -> str:
    return f"conversation-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"


def _record(row: Row, media: MediaStore) -> ConversationRecord:
    return ConversationRecord(
        id=row["id"], mode=row["mode"], title=row["title"], timeline=json.loads(row["timeline"]),
        settings=json.loads(row["settings"]), audio=row["audio"], created_at=row["created_at"],
        media=media, user_id=row["user_id"], shared=bool(row["shared"]), status=row["status"])


def _title(turns: list[Mapping[str, Any]]) -> str:
    return " ".join(str((turns[0] if turns else {}).get("user_text") or "").split())[:120] or "(no words)"


def _mode(timeline: Mapping[str, Any]) -> str:
    mode = timeline.get("mode")
    if mode not in MODES:
        raise InvalidInput(f"a conversation's mode is pipeline or native, not {mode!r}")
    return str(mode)


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
        mode, turns = _mode(timeline), timeline.get("turns") or []
        if not turns:
            raise InvalidInput("this conversation has no turns, so it is not kept")
        title = _title(turns)
        record_id = _new_id()
        with history.new_record(record_id, "conversation", {AUDIO_NAME: audio} if audio else {}) as (names, db):
            db.execute(
                "INSERT INTO conversations (id, mode, title, timeline, settings, audio, created_at, user_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (record_id, mode, title, json.dumps(dict(timeline), ensure_ascii=False),
                 json.dumps(dict(settings), ensure_ascii=False), names[0] if names else None,
                 float(created_at or time.time()), history.actor.id))
        return self.get(record_id)

    def list(self, *, limit: int | None = 50) -> list[ConversationRecord]:
        """The actor's conversations and those others shared, newest first (not the calls going on now)."""
        rows = self.history.visible_rows("conversations", limit, also="status IS NULL OR status <> 'live'")
        return [_record(r, self.history.media) for r in rows]

    # -- a live call, kept as it goes --------------------------------------------------------------------
    def open_live(self, mode: str, *, settings: Mapping[str, Any]) -> str:
        """A row for a call that begins now, the actor's (Forbidden unless their role may generate), held by this
        process with a lease (the history's job_lease_s): its id."""
        history = self.history
        require(history.actor, "generate")
        _mode({"mode": mode})
        record_id, now = _new_id(), time.time()
        with history.transaction() as db:
            db.execute("INSERT INTO conversations (id, mode, title, timeline, settings, created_at, user_id, status, "
                       "owner, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, 'live', ?, ?)",
                       (record_id, mode, "(no words yet)", json.dumps({"mode": mode, "turns": []}),
                        json.dumps(dict(settings), ensure_ascii=False), now, history.actor.id, history.owner,
                        now + history.job_lease_s))
        return record_id

    def keep_live(self, record_id: str, timeline: Mapping[str, Any] | None = None) -> bool:
        """Renew this process's hold on a live call and, given, write its timeline so far; False when it is no
        longer held here (another replica marked it cut while this one could not renew)."""
        h = self.history
        sets, args = "lease_until = ?", [time.time() + h.job_lease_s]
        if timeline is not None:
            sets += ", timeline = ?, title = ?"
            args += [json.dumps(dict(timeline), ensure_ascii=False), _title(timeline.get("turns") or [])]
        with h.transaction() as db:
            return db.execute(f"UPDATE conversations SET {sets} WHERE id = ? AND owner = ? AND status = 'live'",
                              (*args, record_id, h.owner)).rowcount == 1

    def close_live(self, record_id: str, timeline: Mapping[str, Any], *, settings: Mapping[str, Any],
                   audio: bytes | None = None) -> ConversationRecord | None:
        """The call ended: its whole timeline, settings and stereo WAV (written first) kept, `status` ended — also
        when it was marked cut meanwhile (this process lived: it has it all). A call without turns is removed:
        None."""
        h = self.history
        turns = timeline.get("turns") or []
        if not turns:
            with h.transaction() as db:
                db.execute("DELETE FROM conversations WHERE id = ? AND user_id = ?", (record_id, h.actor.id))
            return None
        with h.new_record(record_id, "conversation", {AUDIO_NAME: audio} if audio else {}) as (names, db):
            db.execute("UPDATE conversations SET status = NULL, owner = NULL, lease_until = NULL, timeline = ?, "
                       "title = ?, settings = ?, audio = ? WHERE id = ? AND user_id = ?",
                       (json.dumps(dict(timeline), ensure_ascii=False), _title(turns),
                        json.dumps(dict(settings), ensure_ascii=False), names[0] if names else None, record_id,
                        h.actor.id))
        return self.get(record_id)

    def cut_orphans(self) -> list[ConversationRecord]:
        """Calls (anyone's) whose process is gone — its pid on this replica, its lease anywhere — marked `cut` with
        the turns kept before (`timeline["cut"]`: the replica, when, how many turns); one with no turn is removed.
        The actor's newly cut ones are returned, for the page to say so."""
        h, now = self.history, time.time()
        rows = h.reader().execute("SELECT * FROM conversations WHERE status = 'live'").fetchall()
        cut = []
        for row in rows:
            owner, until = row["owner"] or "", row["lease_until"]
            if owner == h.owner or (owner_alive(owner) and until is not None and until >= now):
                continue
            timeline = json.loads(row["timeline"])
            turns = timeline.get("turns") or []
            with h.transaction() as db:  # the owner it had is the condition: of two pages that look, one cuts it
                if not turns:
                    db.execute("DELETE FROM conversations WHERE id = ? AND owner = ? AND status = 'live'",
                               (row["id"], owner))
                    continue
                timeline["cut"] = {"replica": owner.partition(":")[0], "at": now, "turns": len(turns)}
                done = db.execute("UPDATE conversations SET status = 'cut', owner = NULL, lease_until = NULL, "
                                  "timeline = ? WHERE id = ? AND owner = ? AND status = 'live'",
                                  (json.dumps(timeline, ensure_ascii=False), row["id"], owner)).rowcount == 1
            if done and (h.sees_everything or row["user_id"] == h.actor.id):
                cut.append(self.get(row["id"]))
        return cut

    def recently_cut(self, within_s: float = 3600.0) -> list[ConversationRecord]:
        """The actor's own conversations cut within the last `within_s` seconds (the page says so after a
        reconnect, whichever page or replica marked them)."""
        h = self.history
        mine = h.mine()
        sql = "SELECT * FROM conversations WHERE status = 'cut'"
        if not h.sees_everything:
            sql += f" AND user_id IN ({', '.join('?' * len(mine))})"
        since = time.time() - within_s
        records = [_record(row, h.media) for row in h.reader().execute(sql, () if h.sees_everything else mine)]
        return sorted((r for r in records if (r.cut or {}).get("at", 0) > since), key=lambda r: -r.created_at)

    def get(self, record_id: str) -> ConversationRecord:
        """The conversation; someone else's unshared one is refused like a missing one."""
        return _record(self.history.visible_row("conversations", record_id, "conversation"), self.history.media)
