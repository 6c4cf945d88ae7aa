"""The history's host: its database (one SQLite file in the data_dir, or a PostgreSQL server: db.py) and its
media (a folder, or an S3 bucket: services/media_store, the `media_url` setting), the one write path (`transaction`), the tables' migrations (migrate.py), and who sees what (`visible`,
`owns`, `set_shared`). The records
themselves are kept by one small store per kind over a host (jobs.py, voices.py, takes.py, transcripts.py,
load_reports.py, conversations.py); `History` (services/history/__init__.py) is the host with its stores."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from protocol.errors import InvalidInput, StudioError
from services.access import LOCAL, Forbidden, Principal, require
from services.history.base import (
    DB_ERRORS,
    JOB_LEASE_S,
    HistoryError,
    current_owner,
    damaged_message,
    is_damage,
    is_full,
    no_space_message,
    reason,
    safe_name,
)
from services.history.db import DB_NAME, Db, Result, Row, engine, run, shown
from services.history.migrate import upgrade
from services.media_store import MEDIA_DIR, FolderMediaStore, MediaStore, open_media_store

if TYPE_CHECKING:
    from services.settings import Settings

Shareable = Literal["job", "voice", "load_report", "evaluation", "take", "transcript", "conversation"]
SHAREABLE: dict[str, str] = {"job": "jobs", "voice": "voices", "load_report": "load_reports",
                             "evaluation": "evaluations", "take": "speech_takes",
                             "transcript": "transcripts", "conversation": "conversations"}  # what set_shared takes → its table


class Host:
    """The history in `data_dir` (its database unless `database_url` names a PostgreSQL server; its media unless
    `media` is another store than the folder <data_dir>/media), acting for `actor` (LOCAL unless told: the single-user studio). Thread-safe and multi-process-safe: a pool
    of connections, every write one transaction that queues behind the others (SQLite: BEGIN IMMEDIATE in WAL
    mode; PostgreSQL: the history's advisory lock), reads each seeing the latest commit."""

    def __init__(self, data_dir: Path | str, *, actor: Principal = LOCAL, database_url: str | None = None,
                 migrate: bool = True, media: MediaStore | None = None, job_lease_s: float = JOB_LEASE_S) -> None:
        self.data_dir = Path(data_dir)
        self.database_url = database_url or None
        # Every record's files: written before the row that names them commits, removed after its deletion does.
        self.media = media or FolderMediaStore(self.data_dir / MEDIA_DIR)
        self.owner = current_owner()
        self.job_lease_s = job_lease_s  # how long a job's runner holds it without renewing (jobs.py)
        self.actor = actor
        try:
            self.engine = engine(self.database_url, self.data_dir)
        except ValueError as exc:
            raise HistoryError(f"the database_url setting (OMNI_STUDIO_DATABASE_URL): {exc}") from None
        self.dialect = self.engine.dialect.name
        self.where = shown(self.engine)  # the SQLite file, or the server's URL without its password
        self.db_path = self.data_dir / DB_NAME  # the SQLite file (unused on PostgreSQL)
        if isinstance(self.media, FolderMediaStore) and self.media.root != self.data_dir / MEDIA_DIR:
            try:  # a media folder of its own (media_url) that cannot be made says so now, not at a write
                self.media.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self.engine.dispose()
                raise HistoryError(f"cannot use the media folder {self.media.root} ({exc.strerror or exc}); point "
                                   "media_url (OMNI_STUDIO_MEDIA_URL) at a writable folder, or leave it empty for "
                                   "<data_dir>/media") from None
        try:
            if self.dialect == "sqlite":  # its file's folder (with media in a bucket, nothing else makes it)
                self.data_dir.mkdir(parents=True, exist_ok=True)
            if isinstance(self.media, FolderMediaStore) and self.media.root == self.data_dir / MEDIA_DIR:
                self.media.root.mkdir(parents=True, exist_ok=True)  # the default: a data_dir problem, named so
            self.migrated = upgrade(self) if migrate else []  # the revisions this opening ran (migrate.py)
            self._check()
        except (OSError, *DB_ERRORS) as exc:
            self.engine.dispose()
            if is_damage(exc):
                raise HistoryError(damaged_message(self.db_path, reason(exc))) from None
            if is_full(exc):
                raise HistoryError(no_space_message(self.db_path, self.data_dir)) from None
            if self.dialect != "sqlite" and not isinstance(exc, OSError):
                raise HistoryError(f"cannot open the history at {self.where} ({reason(exc)}); check the database_url "
                                   "setting (OMNI_STUDIO_DATABASE_URL) and that the server is up") from None
            raise HistoryError(f"cannot open the history in {self.data_dir} ({reason(exc)}); check the data_dir "
                               "setting (OMNI_STUDIO_DATA_DIR) points at a writable folder") from None

    @classmethod
    def of(cls, settings: Settings, *, actor: Principal = LOCAL, migrate: bool = True) -> Self:
        """The history the settings name: the database at `database_url` (empty: SQLite in `data_dir`), the media at
        `media_url` (empty: the folder <data_dir>/media)."""
        return cls(settings.data_dir, actor=actor, database_url=settings.database_url, migrate=migrate,
                   media=open_media_store(settings), job_lease_s=settings.job_lease_s)

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

    def check_changeable(self, record: Any, doing: str, what: str) -> None:
        """Forbidden unless the actor may change `record` (a Job, TranscriptRecord, Evaluation…): it is theirs, or
        they are an admin. `doing` and `what` name the change and the record in the refusal."""
        if not self.owns(record) and self.actor.role != "admin":
            raise Forbidden(f"{self.actor.label} may not {doing} {record.user_id}'s {what}: only the one who made it "
                            "(or an admin) may")

    def mine(self) -> tuple[str, ...]:
        """Whose records the actor sees as their own: theirs, and for an admin also `local`'s (made before sign-in
        was turned on, which nobody else could see or share)."""
        return (self.actor.id, LOCAL.id) if self.actor.role == "admin" else (self.actor.id,)

    def visible(self) -> tuple[str, list[Any]]:
        """The SQL condition (and its arguments) of the records the actor sees: their own and the shared ones."""
        if self.sees_everything:
            return "1 = 1", []
        mine = self.mine()
        return f"(user_id IN ({', '.join('?' * len(mine))}) OR shared = 1)", list(mine)

    def sees(self, row: Row) -> bool:
        """Whether the actor sees the record in `row` (a row of an owned table): theirs, or shared."""
        return self.sees_everything or row["user_id"] in self.mine() or bool(row["shared"])

    @property
    def newest_first(self) -> str:
        """ORDER BY of a table with `created_at` and `id`: newest first; of equal times the later row first
        (SQLite: its rowid, the order rows were written; PostgreSQL has none: the greater id)."""
        return "created_at DESC, " + ("rowid DESC" if self.dialect == "sqlite" else "id DESC")

    def page(self, limit: int | None, offset: int = 0) -> str:
        """LIMIT/OFFSET text: `limit` rows (None: all) from `offset`."""
        offset = max(0, int(offset))
        if limit is None:
            return "" if not offset else (" LIMIT -1" if self.dialect == "sqlite" else "") + f" OFFSET {offset}"
        return f" LIMIT {int(limit)}" + (f" OFFSET {offset}" if offset else "")

    def visible_rows(self, table: str, limit: int | None, *, also: str = "") -> list[Row]:
        """The rows of the owned `table` the actor sees (their own and the shared ones), newest first; `also`: a
        further SQL condition of the table's own (no arguments)."""
        condition, args = self.visible()
        if also:
            condition = f"{condition} AND ({also})"
        sql = f"SELECT * FROM {table} WHERE {condition} ORDER BY {self.newest_first}{self.page(limit)}"
        return self.reader().execute(sql, args).fetchall()

    def visible_row(self, table: str, record_id: str, noun: str) -> Row:
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
        except DB_ERRORS as exc:
            raise HistoryError(f"cannot share the {what} in {self.data_dir} ({reason(exc)})") from None

    # -- connections and the one write path -------------------------------------------------------------
    def _check(self) -> None:
        """Refuse a damaged SQLite file when it is opened (one line, naming it), not with a traceback from the
        first read that meets the damage: PRAGMA quick_check reads every page, without the slower index checks."""
        if self.dialect != "sqlite":
            return
        problems = [r[0] for r in self.reader().execute("PRAGMA quick_check(3)").fetchall()]
        if problems != ["ok"]:
            raise HistoryError(damaged_message(self.db_path, " ".join("; ".join(problems).split())))  # one line

    @contextmanager
    def guard(self) -> Iterator[None]:
        """SQLite's damage and full-disk errors as one HistoryError line naming the file and what to do."""
        try:
            yield
        except DB_ERRORS as exc:
            if is_damage(exc):
                raise HistoryError(damaged_message(self.db_path, reason(exc))) from None
            if is_full(exc):
                raise HistoryError(no_space_message(self.db_path, self.data_dir)) from None
            raise

    @contextmanager
    def _tx(self) -> Iterator[Db]:
        with self.guard(), self.engine.connect() as conn:
            if self.dialect == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # the driver begins nothing itself (db.py)
            else:
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")  # held until the commit
            try:
                yield Db(conn)
            except BaseException:
                conn.rollback()  # a no-op where SQLite rolled back by itself (a full disk, a damaged page)
                raise
            else:
                conn.commit()

    def transaction(self) -> Any:
        """One write transaction, a context manager yielding the connection (`Db`: `execute(sql, params)`), that
        queues behind the others instead of failing mid-way (SQLite: BEGIN IMMEDIATE; PostgreSQL: the history's
        advisory lock, taken first). Every write of the history, its stores and the packages that keep tables in
        it (services/eval, services/audit.py, services/targets.py) goes through here: the one writer path."""
        return self._tx()

    def reader(self) -> Reader:
        """For reads (writes go through `transaction`): each `execute` sees the latest commit."""
        return Reader(self)

    def write_files(self, record_id: str, files: Mapping[str, bytes]) -> list[str]:
        """Write `files` as the record's media (each whole or not at all), before the row naming them commits;
        HistoryError naming the file and the place when one cannot be written (a full disk, a bucket that refuses)."""
        names = []
        for name, data in files.items():
            name = safe_name(name)
            try:
                self.media.put(record_id, name, data)
            except StudioError as exc:  # MediaError; a bucket's ConfigError (missing), ServerError (denied), unreachable
                raise HistoryError(str(exc)) from None
            names.append(name)
        return names

    @contextmanager
    def new_record(self, record_id: str, what: str, files: Mapping[str, bytes]) -> Iterator[tuple[list[str], Db]]:
        """`with history.new_record(id, "speech take", files) as (names, db): db.execute("INSERT …")`: a new
        record's files written first (`write_files`), then its row in one write transaction. When the row cannot be
        written — the database gone mid-write, or refusing writes (a read-only failover) — the files written for it
        are removed again, so nothing is left half-written, and HistoryError names the record, where the history is
        and why."""
        names = self.write_files(record_id, files)
        try:
            with self.transaction() as db:
                yield names, db
        except (OSError, *DB_ERRORS, TypeError, ValueError) as exc:
            if names:
                try:
                    self.media.delete_record(record_id)
                except StudioError:
                    pass  # the files stay unnamed by any record: never a record naming nothing
            raise HistoryError(f"cannot record the {what} in {self.where} ({reason(exc)})") from None

    def remove_files(self, record_id: str, what: str) -> None:
        """Remove the media of a record whose row is already deleted (`what` names it in the message: "video
        20261206-…"); HistoryError saying the record is gone but its files are not."""
        try:
            self.media.delete_record(record_id)
        except StudioError as exc:
            raise HistoryError(f"{what} is deleted from the history, but its files could not be removed: {exc}") from None

    def close(self) -> None:
        """Close the connections the pool keeps (a later call opens new ones)."""
        self.engine.dispose()


class Reader:
    """Reads of a host's database: each statement on a connection from the pool, its rows fetched whole."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def execute(self, sql: Any, params: Any = None) -> Result:
        with self.host.guard(), self.host.engine.connect() as conn:
            try:
                return run(conn, sql, params)
            finally:
                conn.rollback()


WRITE_LOCK = 0x6F6D6E69  # "omni": PostgreSQL's advisory lock key of the history's writers
