"""The history as a whole, for the command line (`python -m services history list|copy`): every record of every
kind in one listing, and every row and media file copied to another database and media store — a team moving
its studio's history from the SQLite file and the media folder to a shared PostgreSQL and an S3 bucket.

    records(history, kind="image")       # [Record(id, kind, owner, created, media)], newest first
    copy_media(source, media_to, on_file=…)  # Copied(copied, present): every record's files, idempotent
    copy_rows(source, to, on_table=…)    # {table: Copied(copied, present)}: idempotent and resumable

The media goes first and the rows after, the history's own rule (services/media_store): a copied row never names a
file the destination does not have. A file the destination has already is left as it is (a store writes a file
whole or not at all, so one that is there is complete).

A copy reads every table of tables.py from the source, in primary-key order and batches of BATCH rows, and
inserts each batch into the destination in one of its write transactions, skipping rows it already has (by
primary key): run it again after an interruption and it carries on, having lost nothing and doubled nothing.
Nothing is deleted at the source.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Integer, Table, func, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite

from protocol.catalog import JOB_KINDS
from services.history import tables
from services.media_store import MediaMissing

if TYPE_CHECKING:
    from services.history.host import Host
    from services.media_store import MediaStore

BATCH = 500
# a record's kind → its table (a job's kind is its family: image, video)
KINDS: dict[str, str] = {**{k: "jobs" for k in JOB_KINDS}, "voice": "voices", "take": "speech_takes",
                         "transcript": "transcripts", "conversation": "conversations", "load_report": "load_reports",
                         "evaluation": "evaluations"}


@dataclass(frozen=True)
class Record:
    id: str
    kind: str
    owner: str  # the person who made it (user_id)
    created: float
    media: list[str]  # its files in the media store, each "<media record>/<name>"

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "owner": self.owner, "created": self.created, "media": self.media}


@dataclass(frozen=True)
class Copied:
    copied: int  # rows inserted by this run
    present: int  # rows the destination had already (an earlier run's, or its own)


def records(history: Host, kind: str | None = None) -> list[Record]:
    """Every record of `kind` (all kinds: None) in the history, whoever's, newest first."""
    out: list[Record] = []
    read = history.reader()
    for table in dict.fromkeys(KINDS[k] for k in ([kind] if kind else KINDS)):
        for row in read.execute(f"SELECT * FROM {table}").fetchall():
            made = row["kind"] if table == "jobs" else next(k for k, t in KINDS.items() if t == table)
            if kind is None or made == kind:
                out.append(Record(str(row["id"]), made, row["user_id"], row["created_at"], _media(history, table, row)))
    return sorted(out, key=lambda r: (r.created, r.id), reverse=True)


def _media(history: Host, table: str, row: Any) -> list[str]:
    if table == "jobs":
        return [f"{row['id']}/{name}" for name in json.loads(row["inputs"]) + json.loads(row["outputs"])]
    if table in ("speech_takes", "transcripts", "conversations"):
        return [f"{row['id']}/{row['audio']}"] if row["audio"] else []
    if table == "evaluations":
        items = history.reader().execute("SELECT media FROM eval_items WHERE evaluation_id = ? AND media IS NOT NULL"
                                         " ORDER BY id", (row["id"],)).fetchall()
        recordings = f"eval-{row['id']}-audio"  # a listen evaluation's recordings, copied in when it was made
        return ([f"eval-{row['id']}/{item[0]}" for item in items]
                + [f"{recordings}/{name}" for name in history.media.list_record(recordings)])
    return []


def copy_media(source: Host, media_to: MediaStore, *, on_file: Callable[[str, bool], None] | None = None) -> Copied:
    """Every file every record of `source` names, copied to `media_to` (a file there already is kept: a rerun after
    an interruption carries on). `on_file(key, copied)` after each. A file the source has lost
    is skipped and reported by `on_file(key, False)` too — what `history list` names is what the copy tried."""
    copied = present = 0
    for record in records(source):
        for key in record.media:
            record_id, name = key.split("/", 1)
            try:
                data = source.media.get(record_id, name)
            except MediaMissing:
                if on_file is not None:
                    on_file(f"{key} (missing at the source)", False)
                continue
            if media_to.exists(record_id, name):  # a store's writes are whole: one that is there is complete
                present += 1
                done = False
            else:
                media_to.put(record_id, name, data)
                copied += 1
                done = True
            if on_file is not None:
                on_file(key, done)
    return Copied(copied, present)


def copy_rows(source: Host, to: Host, *, on_table: Callable[[str, Copied], None] | None = None) -> dict[str, Copied]:
    """Every row of every table from `source` to `to` (both migrated already), rows `to` has kept as they are."""
    done = {}
    for table in tables.metadata.sorted_tables:
        copied = present = 0
        key = list(table.primary_key.columns)
        last: tuple[Any, ...] | None = None
        while True:
            query = select(table).order_by(*key).limit(BATCH)
            if last is not None:
                query = query.where(_after(key, last))
            rows = source.reader().execute(query).mappings()
            if not rows:
                break
            with to.transaction() as db:
                statement = _insert(table, to.dialect).values(rows).on_conflict_do_nothing().returning(*key)
                inserted = len(db.execute(statement).fetchall())  # the rows it inserted (rowcount: -1 on psycopg)
            copied += inserted
            present += len(rows) - inserted
            last = tuple(rows[-1][c.name] for c in key)
        if to.dialect == "postgresql" and copied:
            _bump_sequence(to, table)
        done[table.name] = Copied(copied, present)
        if on_table is not None:
            on_table(table.name, done[table.name])
    return done


def _after(key: list[Any], last: tuple[Any, ...]) -> Any:
    return tuple_(*key) > tuple_(*last) if len(key) > 1 else key[0] > last[0]


def _insert(table: Table, dialect: str) -> Any:
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def _bump_sequence(to: Host, table: Table) -> None:
    """A table with a serial id (voices, eval_ratings, audit): its sequence past the copied ids, so the next
    insert does not collide with them."""
    (column,) = table.primary_key.columns
    if not isinstance(column.type, Integer):
        return
    with to.transaction() as db:
        db.execute(select(func.setval(func.pg_get_serial_sequence(table.name, column.name),
                                      select(func.max(column)).scalar_subquery())))
