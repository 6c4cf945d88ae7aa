"""The record of every voice the studio saved for cloning: who saved it, when, under which consent. A record is
kept after its voice is removed from the server (`removed_at`, `removal`): the consent trail stays.

    record = history.voices.record(target, "anna", consent_id, who="me")   # before the upload: no voice unrecorded
    history.voices.list(target)                                            # the actor's and the shared ones
    history.voices.remove(target, "anna", "deleted")                       # kept, marked removed
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from protocol.errors import InvalidInput
from services.access import LOCAL, Forbidden, require
from services.history.base import DB_ERRORS, HistoryError, reason

if TYPE_CHECKING:
    from services.history.db import Row
    from services.history.host import Host


@dataclass(frozen=True)
class VoiceRecord:
    """The studio's record of one voice it saved on a target: who saved it, when, under which consent.

    Kept after the voice is removed (`removed_at`, `removal`): the consent trail stays."""

    id: int
    target: str
    name: str
    consent_id: str
    who: str
    ref_text: str | None
    speaker_description: str | None
    created_at: float
    removed_at: float | None = None
    removal: Literal["deleted", "forgotten"] | None = None
    user_id: str = LOCAL.id
    shared: bool = False

    @property
    def active(self) -> bool:
        return self.removed_at is None


def _voice(row: Row) -> VoiceRecord:
    return VoiceRecord(**{k: row[k] for k in row.keys()} | {"shared": bool(row["shared"])})


class VoiceStore:
    """The saved voices' records in `history`, acting for its actor (over its one connection and write path)."""

    def __init__(self, history: Host) -> None:
        self.history = history

    def record(self, target: str, name: str, consent_id: str, *, who: str, ref_text: str | None = None,
               speaker_description: str | None = None) -> VoiceRecord:
        """Record a voice saved on `target` under the speaker's consent (before it is uploaded: no voice without
        its record), the actor's (Forbidden unless their role may clone voices). InvalidInput when the consent id
        is empty or `target` already has a voice of that name (anyone's: a target has one set of names)."""
        history = self.history
        require(history.actor, "clone_voice")
        if not (consent_id or "").strip():
            raise InvalidInput("a saved voice needs the speaker's consent: give the id of their consent recording")
        try:
            with history.transaction() as db:
                if db.execute("SELECT 1 FROM voices WHERE target = ? AND lower(name) = lower(?) AND removed_at IS NULL",
                              (target, name)).fetchone():
                    raise InvalidInput(f"a voice named {name!r} is already saved on {target}: pick another name, or "
                                       "delete that voice first")
                row_id = db.execute(
                    "INSERT INTO voices (target, name, consent_id, who, ref_text, speaker_description, created_at,"
                    " user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (target, name, consent_id.strip(), who, ref_text, speaker_description, time.time(),
                     history.actor.id)).fetchone()[0]
        except DB_ERRORS as exc:
            raise HistoryError(f"cannot record the voice in {history.data_dir} ({reason(exc)})") from None
        return self.get(int(row_id or 0))

    def get(self, record_id: int) -> VoiceRecord:
        row = self.history.reader().execute("SELECT * FROM voices WHERE id = ?", (record_id,)).fetchone()
        if row is None or not self.history.sees(row):
            raise InvalidInput(f"there is no voice record {record_id} in the history at {self.history.data_dir}")
        return _voice(row)

    def list(self, target: str | None = None, *, name: str | None = None,
             include_removed: bool = False) -> list[VoiceRecord]:
        """The voices the studio saved (on `target`; named `name`, any case) that the actor sees (their own and
        the shared ones), newest first."""
        condition, args = self.history.visible()
        where = [condition]
        if target is not None:
            where.append("target = ?")
            args.append(target)
        if name is not None:
            where.append("lower(name) = lower(?)")
            args.append(name)
        if not include_removed:
            where.append("removed_at IS NULL")
        sql = f"SELECT * FROM voices WHERE {' AND '.join(where)} ORDER BY created_at DESC, id DESC"
        return [_voice(r) for r in self.history.reader().execute(sql, args).fetchall()]

    def unseen_names(self, target: str) -> set[str]:
        """Names (lower case) of the voices on `target` that others saved and did not share: a server's own list
        (which names every voice) leaves them out for this actor."""
        if self.history.sees_everything:
            return set()
        mine = self.history.mine()
        rows = self.history.reader().execute(
            f"SELECT lower(name) FROM voices WHERE target = ? AND removed_at IS NULL AND shared = 0 AND user_id NOT IN "
            f"({', '.join('?' * len(mine))})", (target, *mine)).fetchall()
        return {r[0] for r in rows}

    def check_removal(self, target: str, name: str) -> None:
        """Forbidden unless the actor may remove the voice `name` on `target`: a role that may clone voices, and
        the voice theirs (or they an admin, or the voice without a record)."""
        actor = self.history.actor
        require(actor, "clone_voice")
        if self.history.sees_everything or actor.role == "admin":
            return
        others = self.history.reader().execute(
            "SELECT DISTINCT user_id FROM voices WHERE target = ? AND lower(name) = lower(?) AND removed_at IS NULL"
            " AND user_id != ?", (target, name, actor.id)).fetchall()
        if others:
            raise Forbidden(f"{actor.label} may not remove the voice {name!r}: {others[0][0]} saved it, and only "
                            "they (or an admin) may remove it")

    def remove(self, target: str, name: str, removal: Literal["deleted", "forgotten"], *, gone: bool = False) -> int:
        """Mark the active record(s) of `name` on `target` removed (kept, with when and how); how many were.
        Only by whom `check_removal` allows, unless the target no longer has the voice (`gone`: a fact about the
        server that any user may record)."""
        if not gone:
            self.check_removal(target, name)
        with self.history.transaction() as db:
            return db.execute("UPDATE voices SET removed_at = ?, removal = ? WHERE target = ? AND lower(name) = lower(?)"
                              " AND removed_at IS NULL", (time.time(), removal, target, name)).rowcount

    def drop(self, record_id: int) -> None:
        """Drop the actor's record of an upload that did not happen (the server refused it, or could not be
        reached)."""
        condition, args = ("1 = 1", []) if self.history.sees_everything else ("user_id = ?", [self.history.actor.id])
        with self.history.transaction() as db:
            db.execute(f"DELETE FROM voices WHERE id = ? AND {condition}", (record_id, *args))
