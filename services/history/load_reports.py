"""Load sweeps' reports (services/load) kept in the history: the whole report as JSON, samples included, with
what a list shows beside it (modality, backend, target, instance type, title).

    history.load_reports.save(report.to_dict())        # the Capacity page lists, reopens and overlays them
    history.load_reports.list(modality="voice"), history.load_reports.get(report_id)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.errors import InvalidInput
from services.access import LOCAL, Forbidden, require
from services.history.base import DB_ERRORS, HistoryError, reason
from services.kinds import backend_name

if TYPE_CHECKING:
    from services.history.db import Row
    from services.history.host import Host


@dataclass(frozen=True)
class LoadReportRecord:
    """A saved load sweep: what lists show, and the whole report (`services.load.LoadReport.from_dict`)."""

    id: str
    modality: str
    backend: str  # offline | server | sagemaker (a report kept as "omni", the server's former name, reads as server)
    target: str
    instance_type: str | None
    title: str | None
    created_at: float
    report: dict[str, Any]
    user_id: str = LOCAL.id
    shared: bool = False


def _load_report(row: Row) -> LoadReportRecord:
    return LoadReportRecord(id=row["id"], modality=row["modality"], backend=backend_name(row["backend"]),
                            target=row["target"], instance_type=row["instance_type"], title=row["title"],
                            created_at=row["created_at"], report=json.loads(row["report"]), user_id=row["user_id"],
                            shared=bool(row["shared"]))


class LoadReportStore:
    """The load reports in `history`, acting for its actor (over its one connection and write path)."""

    def __init__(self, history: Host) -> None:
        self.history = history

    def save(self, report: Mapping[str, Any]) -> str:
        """Keep a load sweep's report (its JSON, samples included), the actor's (Forbidden unless their role may
        run load sweeps); its id. Saving the same id again replaces it (only its owner may), sharing kept."""
        history = self.history
        actor = history.actor
        require(actor, "load_test")
        try:
            with history.transaction() as db:
                old = db.execute("SELECT user_id FROM load_reports WHERE id = ?", (str(report["id"]),)).fetchone()
                if old is not None and old["user_id"] != actor.id and not history.sees_everything:
                    raise Forbidden(f"{actor.label} may not replace load report {report['id']}: it is "
                                    f"{old['user_id']}'s")
                db.execute(
                    "INSERT INTO load_reports (id, modality, backend, target, instance_type, title, report, created_at,"
                    " user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
                    " modality = excluded.modality, backend = excluded.backend, target = excluded.target,"
                    " instance_type = excluded.instance_type, title = excluded.title, report = excluded.report,"
                    " created_at = excluded.created_at",
                    (str(report["id"]), str(report["modality"]), str(report["backend"]), str(report["target"]),
                     report.get("instance_type"), report.get("title"), json.dumps(dict(report)),
                     float(report.get("created_at") or time.time()), actor.id))
        except (*DB_ERRORS, KeyError, TypeError, ValueError) as exc:
            raise HistoryError(f"cannot record the load report in {history.data_dir} ({reason(exc)})") from None
        return str(report["id"])

    def list(self, *, modality: str | None = None, limit: int | None = 50) -> list[LoadReportRecord]:
        """The actor's saved load reports and those others shared, newest first (their JSON in `report`)."""
        condition, args = self.history.visible()
        if modality:
            condition += " AND modality = ?"
            args.append(modality)
        sql = f"SELECT * FROM load_reports WHERE {condition} ORDER BY {self.history.newest_first}" + \
            self.history.page(limit)
        return [_load_report(r) for r in self.history.reader().execute(sql, args).fetchall()]

    def get(self, report_id: str) -> LoadReportRecord:
        row = self.history.reader().execute("SELECT * FROM load_reports WHERE id = ?", (report_id,)).fetchone()
        if row is None or not self.history.sees(row):
            raise InvalidInput(f"there is no load report {report_id!r} in the history at {self.history.data_dir}")
        return _load_report(row)
