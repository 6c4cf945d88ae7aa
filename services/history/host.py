"""The history's host: its one SQLite file and media folder, the connections (one per thread), the one write path
(`transaction`), the tables and their migrations, and who sees what (`visible`, `owns`, `set_shared`). The records
themselves are kept by one small store per kind over a host (jobs.py, voices.py, takes.py, transcripts.py,
load_reports.py, conversations.py); `History` (services/history/__init__.py) is the host with its stores."""

from __future__ import annotations

import copy
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Self

from protocol.errors import InvalidInput
from services.access import LOCAL, Forbidden, Principal, require
from services.history.base import (
    HistoryError,
    current_owner,
    damaged_message,
    is_damage,
    is_full,
    no_space_message,
    safe_name,
)
from services.history.schema import (
    ADDED_COLUMNS,
    MIGRATIONS,
    NAMED,
    OWNED_TABLES,
    OWNER_COLUMNS,
    OWNER_INDEX,
    SCHEMA,
    SCHEMA_VERSION,
    statements,
)

DB_NAME = "history.sqlite3"
MEDIA_DIR = "media"
Shareable = Literal["job", "voice", "load_report", "evaluation", "take", "transcript", "conversation"]
SHAREABLE: dict[str, str] = {"job": "jobs", "voice": "voices", "load_report": "load_reports",
                             "evaluation": "evaluations", "take": "speech_takes",
                             "transcript": "transcripts", "conversation": "conversations"}  # what set_shared takes → its table


class Host:
    """The history in `data_dir`, acting for `actor` (LOCAL unless told: the single-user studio). Thread-safe and
    multi-process-safe (SQLite WAL, one connection per thread, every write one BEGIN IMMEDIATE transaction)."""

    def __init__(self, data_dir: Path | str, *, actor: Principal = LOCAL) -> None:
        self.data_dir = Path(data_dir)
        self.db_path = self.data_dir / DB_NAME
        self.media_dir = self.data_dir / MEDIA_DIR
        self.owner = current_owner()
        self.actor = actor
        self._local = threading.local()
        try:
            self.media_dir.mkdir(parents=True, exist_ok=True)
            self._ensure(SCHEMA, owned=OWNED_TABLES)
            self._add_columns()
            self._migrate()
            self._check()
        except (OSError, sqlite3.Error) as exc:
            if is_damage(exc):
                raise HistoryError(damaged_message(self.db_path, exc)) from None
            if is_full(exc):
                raise HistoryError(no_space_message(self.db_path, self.data_dir)) from None
            raise HistoryError(f"cannot open the history in {self.data_dir} ({exc}); check the data_dir setting "
                               "(OMNI_STUDIO_DATA_DIR) points at a writable folder") from None

    # -- who acts -------------------------------------------------------------------------------------
    def acting_as(self, actor: Principal) -> Self:
        """This history acting for `actor`: a cheap view sharing the database, its connections and the process."""
        if actor == self.actor:
            return self
        view = copy.copy(self)
        view.actor = actor
        return view

    @property
    def sees_everything(self) -> bool:
        """Without sign-in (LOCAL, the command line) one person owns the studio: every record is theirs."""
        return not self.actor.signed_in

    def owns(self, record: Any) -> bool:
        """Whether `record` (a Job, VoiceRecord, LoadReportRecord, SpeechTake, Evaluation) is the actor's to change."""
        return self.sees_everything or record.user_id == self.actor.id

    def mine(self) -> tuple[str, ...]:
        """Whose records the actor sees as their own: theirs, and for an admin also `local`'s (made before sign-in
        was turned on, which nobody else could see or share)."""
        return (self.actor.id, LOCAL.id) if self.actor.role == "admin" else (self.actor.id,)

    def visible(self) -> tuple[str, list[Any]]:
        """The SQL condition (and its arguments) of the records the actor sees: their own and the shared ones."""
        if self.sees_everything:
            return "1", []
        mine = self.mine()
        return f"(user_id IN ({', '.join('?' * len(mine))}) OR shared = 1)", list(mine)

    def sees(self, row: sqlite3.Row) -> bool:
        """Whether the actor sees the record in `row` (a row of an owned table): theirs, or shared."""
        return self.sees_everything or row["user_id"] in self.mine() or bool(row["shared"])

    def visible_rows(self, table: str, limit: int | None) -> list[sqlite3.Row]:
        """The rows of the owned `table` the actor sees (their own and the shared ones), newest first."""
        condition, args = self.visible()
        sql = f"SELECT * FROM {table} WHERE {condition} ORDER BY created_at DESC, rowid DESC" + \
            (f" LIMIT {int(limit)}" if limit is not None else "")
        return self.reader().execute(sql, args).fetchall()

    def visible_row(self, table: str, record_id: str, noun: str) -> sqlite3.Row:
        """One row of the owned `table`; someone else's unshared record is refused like a missing one."""
        row = self.reader().execute(f"SELECT * FROM {table} WHERE id = ?", (record_id,)).fetchone()
        if row is None or not self.sees(row):
            raise InvalidInput(f"there is no {noun} {record_id!r} in the history at {self.data_dir}")
        return row

    def set_shared(self, kind: Shareable, record_id: str | int, shared: bool) -> None:
        """Share a record with the team, or stop sharing it: only its owner (or an admin), whose role may share."""
        table = SHAREABLE.get(kind)
        if table is None:
            raise InvalidInput(f"{kind!r} cannot be shared: one of {', '.join(SHAREABLE)}")
        require(self.actor, "share")
        what = kind.replace("_", " ")
        try:
            with self._tx() as db:
                row = db.execute(f"SELECT user_id, shared FROM {table} WHERE id = ?", (record_id,)).fetchone()
                if row is None or not self.sees(row):
                    raise InvalidInput(f"there is no {what} {record_id!r} in the history at {self.data_dir}")
                if row["user_id"] != self.actor.id and not self.sees_everything and self.actor.role != "admin":
                    raise Forbidden(f"{self.actor.label} may not change the sharing of {row['user_id']}'s {what}: "
                                    "only the one who made it (or an admin) may")
                db.execute(f"UPDATE {table} SET shared = ? WHERE id = ?", (int(bool(shared)), record_id))
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot share the {what} in {self.data_dir} ({exc})") from None

    # -- connections and the one write path -------------------------------------------------------------
    def _check(self) -> None:
        """Refuse a damaged database when it is opened (one line, naming it), not with a traceback from the first
        read that meets the damage: PRAGMA quick_check reads every page, without the slower index checks."""
        problems = [r[0] for r in self._connect().execute("PRAGMA quick_check(3)").fetchall()]
        if problems != ["ok"]:
            raise HistoryError(damaged_message(self.db_path, " ".join("; ".join(problems).split())))  # one line

    @contextmanager
    def guard(self) -> Iterator[None]:
        """SQLite's damage and full-disk errors as one HistoryError line naming the file and what to do."""
        try:
            yield
        except sqlite3.Error as exc:
            if is_damage(exc):
                raise HistoryError(damaged_message(self.db_path, exc)) from None
            if is_full(exc):
                raise HistoryError(no_space_message(self.db_path, self.data_dir)) from None
            raise

    def _connect(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.db_path, timeout=10.0, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # durable across app crashes in WAL mode
            db.execute("PRAGMA busy_timeout=10000")
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self.guard():
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                if db.in_transaction:  # SQLite may have rolled back by itself (a full disk, a damaged page)
                    db.execute("ROLLBACK")
                raise
            else:
                db.execute("COMMIT")

    def transaction(self) -> Any:
        """One write transaction (BEGIN IMMEDIATE: writers queue instead of failing mid-way), a context manager
        yielding the connection. Every write of the history, its stores and the packages that keep tables in it
        (services/eval, services/audit.py, services/targets.py) goes through here: the one writer path."""
        return self._tx()

    def reader(self) -> sqlite3.Connection:
        """This thread's connection, for reads (writes go through `transaction`)."""
        return self._connect()

    def write_files(self, folder_id: str, files: Mapping[str, bytes]) -> list[str]:
        """Write `files` into media/<folder_id>/, each atomically; HistoryError naming the file when one cannot be
        written (its partial .part removed: a full disk gets its space back, and the next write its chance)."""
        folder = self.media_dir / folder_id
        names = []
        for name, data in files.items():
            name = safe_name(name)
            tmp = folder / f".{name}.{uuid.uuid4().hex[:8]}.part"
            try:
                folder.mkdir(parents=True, exist_ok=True)
                tmp.write_bytes(data)
                os.replace(tmp, folder / name)  # atomic: a reader sees the whole file or none
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                if is_full(exc):
                    raise HistoryError(no_space_message(folder / name, self.media_dir)) from None
                raise HistoryError(f"cannot write {folder / name} ({exc.strerror or exc}); check that {self.media_dir} "
                                   "is a writable folder") from None
            names.append(name)
        return names

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    # -- tables and migrations ------------------------------------------------------------------------
    def add_tables(self, schema: str, *, owned: Sequence[str] = (), stamped: Sequence[str] = ()) -> None:
        """Create another package's tables (`CREATE TABLE IF NOT EXISTS …` statements); the `owned` ones get
        `user_id` and `shared`, the `stamped` ones `user_id` (an old database is migrated: rows `local`'s)."""
        try:
            self._ensure(schema, owned=owned, stamped=stamped)
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot create tables in the history at {self.data_dir} ({exc})") from None

    def _ensure(self, schema: str, *, owned: Sequence[str] = (), stamped: Sequence[str] = ()) -> None:
        """Create `schema`'s tables and indexes where missing, and give the `owned` tables OWNER_COLUMNS (the
        `stamped` ones `user_id` only): an old database is migrated in place, its rows `local`'s and unshared.
        One transaction; nothing is written when everything is there already."""
        columns = {t: tuple(OWNER_COLUMNS) for t in owned} | {t: ("user_id",) for t in stamped}
        wanted = set(NAMED.findall(schema)) | {f"{t}_user" for t in columns}  # the index comes after its column
        if wanted <= {r[0] for r in self._connect().execute("SELECT name FROM sqlite_master")}:
            return
        with self._tx() as db:
            for statement in statements(schema):
                db.execute(statement)
            for table, cols in columns.items():
                present = {r["name"] for r in db.execute(f"PRAGMA table_info({table})")}
                for col in cols:
                    if col not in present:
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {col} {OWNER_COLUMNS[col]}")
                db.execute(OWNER_INDEX.format(table=table))

    def _add_columns(self) -> None:
        """Give an older database's tables the ADDED_COLUMNS they lack (one transaction; none when all are there)."""
        db = self._connect()
        missing = {t: {c: d for c, d in cols.items()
                       if c not in {r["name"] for r in db.execute(f"PRAGMA table_info({t})")}}
                   for t, cols in ADDED_COLUMNS.items()}
        if not any(missing.values()):
            return
        with self._tx() as tx:
            for table, cols in missing.items():
                present = {r["name"] for r in tx.execute(f"PRAGMA table_info({table})")}  # another process's
                for col, decl in cols.items():
                    if col not in present:
                        tx.execute(f"ALTER TABLE {table} ADD COLUMN {col} {decl}")

    def _migrate(self) -> None:
        """Run the MIGRATIONS steps the database has not had (by its `PRAGMA user_version`), then record the new
        version: one transaction, so a step that fails leaves the database as it was; none when it is current."""
        if self._connect().execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return
        with self._tx() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]  # another process may have just migrated it
            for number, step in MIGRATIONS:
                if number > version:
                    step(db)
            db.execute(f"PRAGMA user_version = {max(version, SCHEMA_VERSION)}")
