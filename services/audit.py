"""The audit log: who deployed, resumed, upgraded, extended, rolled back or deleted endpoints (and who was
refused), and who cloned which voice with which consent — in the history database, never edited.

    audit = AuditLog(history)
    entry = audit.record(actor, "deploy", target="studio.json", detail={"command": "python -m infra deploy …"})
    audit.finish(entry, ok=True, summary="all endpoints InService")
    audit.entries(limit=50)     # newest first: endpoint actions and voice clones together

Endpoint actions are rows of their own (`audit`), written when an action starts (or is refused) and given
their outcome when it ends. Cloned voices are already recorded where they are saved (the history's `voices`
rows: who, name, target, consent id, and when a voice was deleted or forgotten); the log reads them from there
rather than keeping a second copy that could disagree.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from services.access import Principal
from services.history import History, HistoryError
from services.history.base import DB_ERRORS, reason

Outcome = Literal["started", "ok", "failed", "refused"]



@dataclass(frozen=True)
class AuditEntry:
    at: float
    who: str
    role: str | None  # None for voice clones (the voices table records who, not their role)
    action: str
    target: str
    outcome: str
    summary: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    finished_at: float | None = None


class AuditLog:
    """The audit table of one history database (any process may write; the history serializes writers)."""

    def __init__(self, history: History) -> None:
        self.history = history

    def record(self, actor: Principal, action: str, *, target: str, detail: Mapping[str, Any] | None = None,
               outcome: Outcome = "started", summary: str | None = None) -> int:
        """A new entry; returns its id for `finish`. A refusal is recorded finished."""
        now = time.time()
        try:
            return self._insert(now, actor, action, target, detail, outcome, summary)
        except DB_ERRORS as exc:
            raise HistoryError(f"cannot write the audit log in {self.history.data_dir} ({reason(exc)})") from None

    def _insert(self, now: float, actor: Principal, action: str, target: str, detail: Mapping[str, Any] | None,
                outcome: Outcome, summary: str | None) -> int:
        with self.history.transaction() as db:
            return int(db.execute(
                "INSERT INTO audit (at, who, role, action, target, detail, outcome, summary, finished_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (now, actor.id, actor.role, action, target, json.dumps(dict(detail or {})), outcome, summary,
                 None if outcome == "started" else now)).fetchone()[0])

    def finish(self, entry_id: int, *, ok: bool, summary: str | None = None) -> None:
        try:
            self._finish(entry_id, ok, summary)
        except DB_ERRORS as exc:
            raise HistoryError(f"cannot write the audit log in {self.history.data_dir} ({reason(exc)})") from None

    def _finish(self, entry_id: int, ok: bool, summary: str | None) -> None:
        with self.history.transaction() as db:
            db.execute("UPDATE audit SET outcome = ?, summary = ?, finished_at = ? WHERE id = ? AND outcome = 'started'",
                       ("ok" if ok else "failed", summary, time.time(), entry_id))

    def entries(self, *, limit: int = 100, who: str | None = None) -> list[AuditEntry]:
        """Endpoint actions and voice clones, newest first."""
        db = self.history.reader()
        args: list[Any] = [] if who is None else [who]
        where = "" if who is None else " WHERE who = ?"
        rows = [AuditEntry(at=r["at"], who=r["who"], role=r["role"], action=r["action"], target=r["target"],
                           outcome=r["outcome"], summary=r["summary"], detail=json.loads(r["detail"] or "{}"),
                           finished_at=r["finished_at"])
                for r in db.execute(f"SELECT * FROM audit{where} ORDER BY at DESC, id DESC LIMIT ?", (*args, limit))]
        for r in db.execute("SELECT * FROM voices ORDER BY created_at DESC LIMIT ?", (limit,)):
            by = r["user_id"] if "user_id" in r.keys() else r["who"]  # the owner once workspaces exist
            if who is not None and by != who:
                continue
            removed = f"; {r['removal']} {_when(r['removed_at'])}" if r["removed_at"] else ""
            rows.append(AuditEntry(at=r["created_at"], who=by, role=None, action="clone_voice",
                                   target=r["target"], outcome="ok",
                                   summary=f"saved voice {r['name']!r} with consent {r['consent_id']!r}{removed}",
                                   detail={"voice": r["name"], "consent_id": r["consent_id"]}))
        rows.sort(key=lambda e: e.at, reverse=True)
        return rows[:limit]


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)) if t else ""
