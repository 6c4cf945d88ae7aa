"""The studio's history: every image and video job, in one SQLite file with the media files beside it, and the
record of every voice the studio saved for cloning (`record_voice`, `voice_records`: who, when, which consent), and
the reports of load sweeps (`save_load_report`, `load_reports`, `load_report`: services/load), and the Voice page's
speech takes (`record_take`, `takes`, `take`: the text, what spoke, the figures and the WAV, also of a take cut short).

    history = History(settings.data_dir)               # <data_dir>/history.sqlite3 and <data_dir>/media/<job id>/
    job = history.create("video", prompt, params, target="http://127.0.0.1:8091", inputs={"reference.jpg": b"…"})
    history.mark_running(job.id, handle={...})         # what a transport needs to poll the job again
    history.succeed(job.id, {"video.mp4": mp4}, timings={"model_s": 2.1, "wall_s": 2.2})
    history.fail(job.id, "the server said …")          # the record and its inputs stay
    history.jobs(kind="image")                         # newest first; a new History on the same folder sees them
    history.jobs("image", search="fox", offset=24, limit=24), history.count_jobs("image", search="fox")  # a page
    history.rename(job.id, "Harbour, take 2")          # a title of one's own, shown instead of the prompt
    history.delete(job.id)                             # the record and its media folder (own; an admin: anyone's)

Every record belongs to the person who made it (`user_id`: services.access.Principal.id) and is theirs alone
until they share it (`shared`, `set_shared`). A History acts for one person (`actor`):

    mine = history.acting_as(principal)               # a cheap view over the same database and connections
    mine.create(...)                                   # Forbidden unless the role may "generate"; stamped with their id
    mine.jobs()                                        # their own records and those others shared, newest first
    mine.set_shared("job", job.id, True)               # only the owner (or an admin) may, with "share"

Without sign-in (`LOCAL`, the command line: `Principal.signed_in` false) one person owns the studio and sees
every record, as before workspaces. A database made before workspaces is migrated when opened (the columns
added in one transaction; its rows belong to `local`).

Jobs survive page reloads and restarts. Each job records the process that runs it (`owner`); a job left
`queued`/`running` by a process that is gone is an orphan: `recover()` marks it `interrupted` with a
message, unless its transport said it can be polled again (`handle["resumable"]`), in which case a runner
for that target claims it (`claim`) and carries on. Every write is one transaction; files are written
(atomically, by rename) before the row that names them, so a record never points at a half-written file.
"""

from __future__ import annotations

import copy
import errno
import io
import json
import os
import re
import shutil
import socket
import sqlite3
import threading
import time
import uuid
import wave
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from protocol.errors import InvalidInput, StudioError
from services.access import LOCAL, Forbidden, Principal, require

JobKind = Literal["image", "video"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "interrupted"]
UNFINISHED: tuple[JobStatus, ...] = ("queued", "running")
DB_NAME = "history.sqlite3"
MEDIA_DIR = "media"
Shareable = Literal["job", "voice", "load_report", "evaluation", "take"]
SHAREABLE: dict[str, str] = {"job": "jobs", "voice": "voices", "load_report": "load_reports",
                             "evaluation": "evaluations", "take": "speech_takes"}  # what set_shared takes → its table
# Who owns a record, and whether the team sees it: added to each owned table (an old database's rows: local's).
OWNER_COLUMNS = {"user_id": f"TEXT NOT NULL DEFAULT '{LOCAL.id}'", "shared": "INTEGER NOT NULL DEFAULT 0"}
OWNED_TABLES = ("jobs", "voices", "load_reports", "speech_takes")
ADDED_COLUMNS = {"jobs": {"title": "TEXT"}}  # columns added after a table's first release: a database migrated
TITLE_MAX = 200  # characters of a job's title
TAKE_FILE = "take.wav"  # a speech take's audio, in media/<take id>/
TakeState = Literal["done", "failed", "cancelled"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('image', 'video')),
    status      TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'interrupted')),
    prompt      TEXT NOT NULL,
    params      TEXT NOT NULL,             -- JSON: the exact parameters of the request
    target      TEXT NOT NULL,             -- where it was sent (URL or endpoint), for display and resuming
    owner       TEXT NOT NULL,             -- host:pid:start of the process running it
    handle      TEXT,                      -- JSON: what the transport needs to poll it again
    inputs      TEXT NOT NULL DEFAULT '[]',-- JSON: file names (in media/<id>/) of inputs, e.g. the reference
    outputs     TEXT NOT NULL DEFAULT '[]',-- JSON: file names of results
    timings     TEXT NOT NULL DEFAULT '{}',-- JSON: model_s, wall_s, …
    meta        TEXT NOT NULL DEFAULT '{}',-- JSON: seed used, preview flag, request id, …
    error       TEXT,
    title       TEXT,                      -- a name its owner gave it (shown instead of the prompt); NULL: none
    created_at  REAL NOT NULL,
    started_at  REAL,
    finished_at REAL,
    updated_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_kind_created ON jobs (kind, created_at DESC);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status);
CREATE TABLE IF NOT EXISTS voices (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    target      TEXT NOT NULL,             -- the server URL, or the SageMaker endpoint it was uploaded to
    name        TEXT NOT NULL,
    consent_id  TEXT NOT NULL CHECK (length(trim(consent_id)) > 0),  -- the speaker's consent recording
    who         TEXT NOT NULL,             -- who saved it
    ref_text    TEXT,
    speaker_description TEXT,
    created_at  REAL NOT NULL,
    removed_at  REAL,                      -- set when deleted from the server, or forgotten (SageMaker)
    removal     TEXT                       -- 'deleted' or 'forgotten'
);
CREATE INDEX IF NOT EXISTS voices_target_name ON voices (target, name);
CREATE TABLE IF NOT EXISTS load_reports (
    id          TEXT PRIMARY KEY,
    modality    TEXT NOT NULL,             -- voice | image | video
    backend     TEXT NOT NULL,
    target      TEXT NOT NULL,
    instance_type TEXT,
    title       TEXT,
    report      TEXT NOT NULL,             -- JSON: the whole report, samples included (services/load/report.py)
    created_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS load_reports_created ON load_reports (created_at DESC);
CREATE TABLE IF NOT EXISTS speech_takes (
    id          TEXT PRIMARY KEY,
    text        TEXT NOT NULL,
    voice_label TEXT,                      -- what spoke, as the page says it ("voice joe, style …"); never audio
    config      TEXT NOT NULL DEFAULT '{}',-- JSON: the session.config sent, without a reference recording
    target      TEXT NOT NULL,             -- where it was spoken (URL or endpoint)
    figures     TEXT NOT NULL DEFAULT '{}',-- JSON: SessionStats.figures() — ttfa_ms, rtf, audio_seconds, chunks, …
    state       TEXT NOT NULL CHECK (state IN ('done', 'failed', 'cancelled')),
    error       TEXT,                      -- why it stopped early (its audio until then is kept)
    audio       TEXT NOT NULL,             -- file name (in media/<id>/) of the WAV
    created_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS speech_takes_created ON speech_takes (created_at DESC);
"""
# Every table above also has OWNER_COLUMNS (user_id, shared): added by `_ensure`, for new and old databases alike.
_NAMED = re.compile(r"CREATE\s+(?:TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)


def _statements(script: str) -> list[str]:
    """The SQL statements of `script`, one by one (to run them inside one transaction)."""
    out, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    return out + ([pending.strip()] if pending.strip() else [])


class HistoryError(StudioError):
    """The history database or its folder cannot be used; the message names the path."""


_SQLITE_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB: the file is not (or no longer) a SQLite database
_SQLITE_FULL = 13


def damaged_message(db_path: Path, exc: BaseException) -> str:
    """One line naming a damaged history database and what to do about it."""
    return (f"the history database {db_path} is damaged ({exc}): move it aside — the studio starts a new one "
            "(the media files beside it are kept)")


def no_space_message(path: Path, folder: Path) -> str:
    return f"No space left on device writing {path}: free space on {folder} and run it again"


def _is_damage(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in \
        _SQLITE_DAMAGED


def _is_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_FULL


def _process_start(pid: int) -> str:
    """The kernel's start time of `pid` (clock ticks since boot): tells a live process from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def current_owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_process_start(pid)}"


def owner_alive(owner: str) -> bool:
    """Whether the process that wrote `owner` still runs (only knowable on this host; elsewhere: assume so)."""
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname():
        return True
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return start in ("", "?") or _process_start(pid) in ("?", start)


@dataclass(frozen=True)
class Job:
    """One row of the history, as plain values."""

    id: str
    kind: JobKind
    status: JobStatus
    prompt: str
    params: dict[str, Any]
    target: str
    owner: str
    handle: dict[str, Any] | None
    inputs: list[str]
    outputs: list[str]
    timings: dict[str, float]
    meta: dict[str, Any]
    error: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    folder: Path = field(repr=False)
    user_id: str = LOCAL.id  # who made it (the person; `owner` is the process running it)
    shared: bool = False
    title: str | None = None  # a name its owner gave it

    @property
    def name(self) -> str:
        """What a list shows it as: its title, else its prompt."""
        return self.title or self.prompt

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    def elapsed_s(self, now: float | None = None) -> float:
        """Seconds since it was created, up to when it finished."""
        end = self.finished_at if self.finished_at is not None else (now or time.time())
        return max(0.0, end - self.created_at)

    def path(self, name: str) -> Path:
        return self.folder / name

    def output_paths(self) -> list[Path]:
        return [self.folder / n for n in self.outputs]

    def input_path(self, name: str) -> Path | None:
        return self.folder / name if name in self.inputs else None


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


@dataclass(frozen=True)
class LoadReportRecord:
    """A saved load sweep: what lists show, and the whole report (`services.load.LoadReport.from_dict`)."""

    id: str
    modality: str
    backend: str
    target: str
    instance_type: str | None
    title: str | None
    created_at: float
    report: dict[str, Any]
    user_id: str = LOCAL.id
    shared: bool = False


@dataclass(frozen=True)
class SpeechTake:
    """One take of the Voice page: what was said, by which voice, where, its figures and its WAV (`wav()`)."""

    id: str
    text: str
    voice_label: str | None
    config: dict[str, Any]
    target: str
    figures: dict[str, Any]
    state: TakeState
    error: str | None
    audio: str
    created_at: float
    folder: Path = field(repr=False)
    user_id: str = LOCAL.id
    shared: bool = False

    @property
    def ok(self) -> bool:
        return self.state == "done" and self.error is None

    @property
    def path(self) -> Path:
        return self.folder / self.audio

    def wav(self) -> bytes:
        """The WAV bytes; HistoryError naming the file when it is gone."""
        try:
            return self.path.read_bytes()
        except OSError as exc:
            raise HistoryError(f"the audio of take {self.id} cannot be read at {self.path} ({exc})") from None


def _take(row: sqlite3.Row, media: Path) -> SpeechTake:
    return SpeechTake(id=row["id"], text=row["text"], voice_label=row["voice_label"], config=json.loads(row["config"]),
                      target=row["target"], figures=json.loads(row["figures"]), state=row["state"], error=row["error"],
                      audio=row["audio"], created_at=row["created_at"], folder=media / row["id"],
                      user_id=row["user_id"], shared=bool(row["shared"]))


def _wav_frames(wav: bytes) -> int:
    """The audio frames in `wav`; InvalidInput when it is not a WAV."""
    try:
        with wave.open(io.BytesIO(wav)) as w:
            return w.getnframes()
    except (wave.Error, EOFError) as exc:
        raise InvalidInput(f"a speech take's audio must be a WAV file ({exc})") from None


def _load_report(row: sqlite3.Row) -> LoadReportRecord:
    return LoadReportRecord(id=row["id"], modality=row["modality"], backend=row["backend"], target=row["target"],
                            instance_type=row["instance_type"], title=row["title"], created_at=row["created_at"],
                            report=json.loads(row["report"]), user_id=row["user_id"], shared=bool(row["shared"]))


def _voice(row: sqlite3.Row) -> VoiceRecord:
    return VoiceRecord(**{k: row[k] for k in row.keys()} | {"shared": bool(row["shared"])})


def _job(row: sqlite3.Row, media: Path) -> Job:
    return Job(
        id=row["id"], kind=row["kind"], status=row["status"], prompt=row["prompt"],
        params=json.loads(row["params"]), target=row["target"], owner=row["owner"],
        handle=json.loads(row["handle"]) if row["handle"] else None,
        inputs=json.loads(row["inputs"]), outputs=json.loads(row["outputs"]),
        timings=json.loads(row["timings"]), meta=json.loads(row["meta"]), error=row["error"],
        created_at=row["created_at"], started_at=row["started_at"], finished_at=row["finished_at"],
        folder=media / row["id"], user_id=row["user_id"], shared=bool(row["shared"]), title=row["title"],
    )


def _like_escaped(text: str) -> str:
    """`text` for a LIKE pattern with ESCAPE '\\': its own %, _ and backslashes match themselves."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _safe_name(name: str) -> str:
    if not name or "/" in name or "\\" in name or name in (".", "..") or name.startswith("."):
        raise InvalidInput(f"not a plain file name for the history: {name!r}")
    return name


class History:
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
            self._ensure(_SCHEMA, owned=OWNED_TABLES)
            self._add_columns()
            self._check()
        except (OSError, sqlite3.Error) as exc:
            if _is_damage(exc):
                raise HistoryError(damaged_message(self.db_path, exc)) from None
            if _is_full(exc):
                raise HistoryError(no_space_message(self.db_path, self.data_dir)) from None
            raise HistoryError(f"cannot open the history in {self.data_dir} ({exc}); check the data_dir setting "
                               "(OMNI_STUDIO_DATA_DIR) points at a writable folder") from None

    # -- who acts -------------------------------------------------------------------------------------
    def acting_as(self, actor: Principal) -> History:
        """This history acting for `actor`: a cheap view sharing the database, its connections and the process."""
        if actor == self.actor:
            return self
        view = copy.copy(self)
        view.actor = actor
        return view

    def acting_for_owner(self, job: Job) -> History:
        """A view acting for the person who made `job`, for a background runner carrying it on (a resumed or
        claimed job of any user). It may change that person's jobs, and do nothing that needs a role."""
        if self.owns(job):
            return self
        return self.acting_as(Principal(id=job.user_id, name=job.user_id, role="viewer", signed_in=True))

    @property
    def sees_everything(self) -> bool:
        """Without sign-in (LOCAL, the command line) one person owns the studio: every record is theirs."""
        return not self.actor.signed_in

    def owns(self, record: Any) -> bool:
        """Whether `record` (a Job, VoiceRecord, LoadReportRecord, SpeechTake, Evaluation) is the actor's to change."""
        return self.sees_everything or record.user_id == self.actor.id

    def _mine(self) -> tuple[str, ...]:
        """Whose records the actor sees as their own: theirs, and for an admin also `local`'s (made before sign-in
        was turned on, which nobody else could see or share)."""
        return (self.actor.id, LOCAL.id) if self.actor.role == "admin" else (self.actor.id,)

    def visible(self) -> tuple[str, list[Any]]:
        """The SQL condition (and its arguments) of the records the actor sees: their own and the shared ones."""
        if self.sees_everything:
            return "1", []
        mine = self._mine()
        return f"(user_id IN ({', '.join('?' * len(mine))}) OR shared = 1)", list(mine)

    def _sees(self, row: sqlite3.Row) -> bool:
        return self.sees_everything or row["user_id"] in self._mine() or bool(row["shared"])

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
                if row is None or not self._sees(row):
                    raise InvalidInput(f"there is no {what} {record_id!r} in the history at {self.data_dir}")
                if row["user_id"] != self.actor.id and not self.sees_everything and self.actor.role != "admin":
                    raise Forbidden(f"{self.actor.label} may not change the sharing of {row['user_id']}'s {what}: "
                                    "only the one who made it (or an admin) may")
                db.execute(f"UPDATE {table} SET shared = ? WHERE id = ?", (int(bool(shared)), record_id))
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot share the {what} in {self.data_dir} ({exc})") from None

    # -- plumbing -------------------------------------------------------------------------------------
    def _check(self) -> None:
        """Refuse a damaged database when it is opened (one line, naming it), not with a traceback from the first
        read that meets the damage: PRAGMA quick_check reads every page, without the slower index checks."""
        problems = [r[0] for r in self._connect().execute("PRAGMA quick_check(3)").fetchall()]
        if problems != ["ok"]:
            raise HistoryError(damaged_message(self.db_path, " ".join("; ".join(problems).split())))  # one line

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """SQLite's damage and full-disk errors as one HistoryError line naming the file and what to do."""
        try:
            yield
        except sqlite3.Error as exc:
            if _is_damage(exc):
                raise HistoryError(damaged_message(self.db_path, exc)) from None
            if _is_full(exc):
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
        """One write transaction (BEGIN IMMEDIATE: writers queue instead of failing mid-way). Every write of the
        history, and of the packages that keep tables in it (services/eval), goes through here."""
        with self._guard():
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

    def _ensure(self, schema: str, *, owned: Sequence[str] = (), stamped: Sequence[str] = ()) -> None:
        """Create `schema`'s tables and indexes where missing, and give the `owned` tables OWNER_COLUMNS (the
        `stamped` ones `user_id` only): an old database is migrated in place, its rows `local`'s and unshared.
        One transaction; nothing is written when everything is there already."""
        columns = {t: tuple(OWNER_COLUMNS) for t in owned} | {t: ("user_id",) for t in stamped}
        wanted = set(_NAMED.findall(schema)) | {f"{t}_user" for t in columns}  # the index comes after its column
        if wanted <= {r[0] for r in self._connect().execute("SELECT name FROM sqlite_master")}:
            return
        with self._tx() as db:
            for statement in _statements(schema):
                db.execute(statement)
            for table, cols in columns.items():
                present = {r["name"] for r in db.execute(f"PRAGMA table_info({table})")}
                for col in cols:
                    if col not in present:
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {col} {OWNER_COLUMNS[col]}")
                db.execute(f"CREATE INDEX IF NOT EXISTS {table}_user ON {table} (user_id)")

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

    def _write_files(self, job_id: str, files: Mapping[str, bytes]) -> list[str]:
        """Write `files` into media/<job_id>/, each atomically; HistoryError naming the file when one cannot be
        written (its partial .part removed: a full disk gets its space back, and the next write its chance)."""
        folder = self.media_dir / job_id
        names = []
        for name, data in files.items():
            name = _safe_name(name)
            tmp = folder / f".{name}.{uuid.uuid4().hex[:8]}.part"
            try:
                folder.mkdir(parents=True, exist_ok=True)
                tmp.write_bytes(data)
                os.replace(tmp, folder / name)  # atomic: a reader sees the whole file or none
            except OSError as exc:
                tmp.unlink(missing_ok=True)
                if _is_full(exc):
                    raise HistoryError(no_space_message(folder / name, self.media_dir)) from None
                raise HistoryError(f"cannot write {folder / name} ({exc.strerror or exc}); check that {self.media_dir} "
                                   "is a writable folder") from None
            names.append(name)
        return names

    def _update(self, job_id: str, sets: dict[str, Any], *, only_if: tuple[str, ...] | None = None) -> bool:
        sets = {**sets, "updated_at": time.time()}
        cols = ", ".join(f"{k} = ?" for k in sets)
        sql = f"UPDATE jobs SET {cols} WHERE id = ?"
        args: list[Any] = [*sets.values(), job_id]
        if only_if:
            sql += f" AND status IN ({', '.join('?' * len(only_if))})"
            args += list(only_if)
        with self._tx() as db:
            return db.execute(sql, args).rowcount == 1

    def _own_job(self, job_id: str) -> Job:
        """The job, when the actor may carry it on: the one who made it (or anyone without sign-in)."""
        job = self.get(job_id)
        if not self.owns(job):
            raise Forbidden(f"job {job_id} is {job.user_id}'s: only their own runs change it")
        return job

    # -- writes ---------------------------------------------------------------------------------------
    def create(self, kind: JobKind, prompt: str, params: Mapping[str, Any], *, target: str,
               inputs: Mapping[str, bytes] | None = None, status: JobStatus = "queued",
               meta: Mapping[str, Any] | None = None) -> Job:
        """A new job of the actor's (Forbidden unless their role may generate), run by this process; `inputs`
        (e.g. the reference image) are saved with it."""
        require(self.actor, "generate")
        job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        now = time.time()
        try:
            names = self._write_files(job_id, inputs or {})
            with self._tx() as db:
                db.execute(
                    "INSERT INTO jobs (id, kind, status, prompt, params, target, owner, inputs, meta, created_at,"
                    " started_at, updated_at, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (job_id, kind, status, prompt, json.dumps(dict(params)), target, self.owner, json.dumps(names),
                     json.dumps(dict(meta or {})), now, now if status == "running" else None, now, self.actor.id),
                )
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"cannot record the job in {self.data_dir} ({exc})") from None
        return self.get(job_id)

    def mark_running(self, job_id: str, handle: Mapping[str, Any] | None = None) -> Job:
        self._own_job(job_id)
        sets: dict[str, Any] = {"status": "running", "started_at": time.time()}
        if handle is not None:
            sets["handle"] = json.dumps(dict(handle))
        self._update(job_id, sets, only_if=UNFINISHED)
        return self.get(job_id)

    def note(self, job_id: str, notice: str | None) -> None:
        """What a person should see while the job runs (meta["notice"], e.g. "starting an instance (about
        8 min)"); None removes it. Only while the job is unfinished."""
        meta = dict(self._own_job(job_id).meta)
        if notice is None:
            meta.pop("notice", None)
        else:
            meta["notice"] = notice
        self._update(job_id, {"meta": json.dumps(meta)}, only_if=UNFINISHED)

    def succeed(self, job_id: str, outputs: Mapping[str, bytes], *, timings: Mapping[str, float] | None = None,
                meta: Mapping[str, Any] | None = None) -> Job:
        """Save the result files, then mark the job succeeded with its timings (one transaction)."""
        old = self._own_job(job_id)
        try:
            names = self._write_files(job_id, outputs)
        except HistoryError as exc:  # e.g. a full disk: the record says so (the .part is gone, so it has room)
            try:
                self.fail(job_id, str(exc))
            except (StudioError, sqlite3.Error):
                pass  # left unfinished: recover() in a later process resumes it or marks it interrupted
            raise
        self._update(job_id, {
            "status": "succeeded", "outputs": json.dumps(names), "finished_at": time.time(), "error": None,
            "timings": json.dumps({**old.timings, **dict(timings or {})}),
            "meta": json.dumps({**old.meta, **dict(meta or {})}),
        })
        return self.get(job_id)

    def fail(self, job_id: str, error: str, *, status: Literal["failed", "interrupted"] = "failed",
             timings: Mapping[str, float] | None = None) -> Job:
        """Mark an unfinished job failed (or interrupted) with the error text; everything else stays."""
        old = self._own_job(job_id)
        self._update(job_id, {"status": status, "error": error, "finished_at": time.time(),
                              "timings": json.dumps({**old.timings, **dict(timings or {})})}, only_if=UNFINISHED)
        return self.get(job_id)

    def claim(self, job: Job) -> bool:
        """Take over an orphaned job (of any user) for this process; False if another process claimed it first."""
        with self._tx() as db:
            cur = db.execute("UPDATE jobs SET owner = ?, updated_at = ? WHERE id = ? AND owner = ? AND status IN "
                             "('queued', 'running')", (self.owner, time.time(), job.id, job.owner))
            return cur.rowcount == 1

    def recover(self) -> list[Job]:
        """Deal with jobs (of every user) whose process is gone: mark the ones nobody can pick up again
        `interrupted`; return the resumable ones (their transport can poll them again), for a runner of their
        target to claim and carry on for their owner (`acting_for_owner`)."""
        resumable = []
        for job in self._select_jobs(None, UNFINISHED, None, everyone=True):  # HistoryError when damaged
            if job.owner == self.owner or owner_alive(job.owner):
                continue
            if job.status == "running" and job.handle and job.handle.get("resumable"):
                resumable.append(job)
                continue
            if job.status == "queued":
                why = "the studio stopped before this job was sent to the server; generate it again"
            else:
                why = (f"the studio stopped while this job ran on {job.target}; that server call cannot be "
                       "picked up again, so the result was lost — generate it again (its settings are kept)")
            self._update(job.id, {"status": "interrupted", "error": why, "finished_at": time.time()},
                         only_if=UNFINISHED)
        return resumable

    # -- reads ----------------------------------------------------------------------------------------
    def get(self, job_id: str) -> Job:
        """The job; someone else's unshared job is refused like a missing one."""
        with self._guard():
            row = self._connect().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or not self._sees(row):
            raise InvalidInput(f"there is no job {job_id!r} in the history at {self.data_dir}")
        return _job(row, self.media_dir)

    def jobs(self, kind: JobKind | None = None, *, statuses: tuple[JobStatus, ...] | None = None,
             limit: int | None = 100, offset: int = 0, search: str | None = None) -> list[Job]:
        """The actor's jobs and those others shared, newest first: `limit` of them from `offset` (a page), those
        whose prompt or title contains `search` (any case; `%` and `_` are plain characters) when given."""
        return self._select_jobs(kind, statuses, limit, everyone=False, offset=offset, search=search)

    def count_jobs(self, kind: JobKind | None = None, *, statuses: tuple[JobStatus, ...] | None = None,
                   search: str | None = None) -> int:
        """How many jobs `jobs(...)` would list without a limit (a gallery's total, for its pages)."""
        where, args = self._job_filter(kind, statuses, everyone=False, search=search)
        with self._guard():
            return int(self._connect().execute(f"SELECT COUNT(*) FROM jobs WHERE {where}", args).fetchone()[0])

    def _job_filter(self, kind: JobKind | None, statuses: tuple[JobStatus, ...] | None, *, everyone: bool,
                    search: str | None = None) -> tuple[str, list[Any]]:
        condition, args = ("1", []) if everyone else self.visible()
        where = [condition]
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if statuses:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            args += list(statuses)
        if search and search.strip():
            pattern = "%" + _like_escaped(search.strip()) + "%"
            where.append("(prompt LIKE ? ESCAPE '\\' OR coalesce(title, '') LIKE ? ESCAPE '\\')")
            args += [pattern, pattern]
        return " AND ".join(where), args

    def _select_jobs(self, kind: JobKind | None, statuses: tuple[JobStatus, ...] | None, limit: int | None, *,
                     everyone: bool, offset: int = 0, search: str | None = None) -> list[Job]:
        where, args = self._job_filter(kind, statuses, everyone=everyone, search=search)
        sql = f"SELECT * FROM jobs WHERE {where} ORDER BY created_at DESC, rowid DESC"
        if limit is not None or offset:
            sql += f" LIMIT {-1 if limit is None else int(limit)} OFFSET {max(0, int(offset))}"
        with self._guard():
            rows = self._connect().execute(sql, args).fetchall()
        return [_job(r, self.media_dir) for r in rows]

    # -- one's own items: rename, delete ----------------------------------------------------------------
    def _changeable(self, job_id: str, doing: str) -> Job:
        """The job, when the actor may rename or delete it: a role that may generate, and the job theirs (an
        admin: anyone's). Someone else's unshared job is refused like a missing one."""
        require(self.actor, "generate")
        job = self.get(job_id)
        if not self.owns(job) and self.actor.role != "admin":
            raise Forbidden(f"{self.actor.label} may not {doing} {job.user_id}'s {job.kind} {job_id}: only the one "
                            "who made it (or an admin) may")
        return job

    def rename(self, job_id: str, title: str | None) -> Job:
        """Give the job a title (shown instead of its prompt; the prompt is kept); blank removes it."""
        self._changeable(job_id, "rename")
        text = " ".join(str(title or "").split()) or None  # one line
        if text is not None and len(text) > TITLE_MAX:
            raise InvalidInput(f"a title is at most {TITLE_MAX} characters; this one has {len(text)}: shorten it")
        self._update(job_id, {"title": text})
        return self.get(job_id)

    def delete(self, job_id: str) -> None:
        """Delete the job: its record, then its media folder (inputs and outputs). Refused while it runs (its
        runner still writes to it): InvalidInput saying to wait."""
        job = self._changeable(job_id, "delete")
        if not job.finished:
            raise InvalidInput(f"{job.kind} {job_id} is still {job.status}: wait until it ends, then delete it")
        with self._tx() as db:  # the row first: a record never names a file that is gone
            db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        try:
            shutil.rmtree(job.folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise HistoryError(f"{job.kind} {job_id} is deleted from the history, but its files in {job.folder} "
                               f"could not be removed ({exc.strerror or exc}): remove that folder by hand") from None

    # -- saved voices ---------------------------------------------------------------------------------
    def record_voice(self, target: str, name: str, consent_id: str, *, who: str, ref_text: str | None = None,
                     speaker_description: str | None = None) -> VoiceRecord:
        """Record a voice saved on `target` under the speaker's consent (before it is uploaded: no voice without
        its record), the actor's (Forbidden unless their role may clone voices). InvalidInput when the consent id
        is empty or `target` already has a voice of that name (anyone's: a target has one set of names)."""
        require(self.actor, "clone_voice")
        if not (consent_id or "").strip():
            raise InvalidInput("a saved voice needs the speaker's consent: give the id of their consent recording")
        try:
            with self._tx() as db:
                if db.execute("SELECT 1 FROM voices WHERE target = ? AND lower(name) = lower(?) AND removed_at IS NULL",
                              (target, name)).fetchone():
                    raise InvalidInput(f"a voice named {name!r} is already saved on {target}: pick another name, or "
                                       "delete that voice first")
                cur = db.execute(
                    "INSERT INTO voices (target, name, consent_id, who, ref_text, speaker_description, created_at,"
                    " user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (target, name, consent_id.strip(), who, ref_text, speaker_description, time.time(), self.actor.id))
                row_id = cur.lastrowid
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot record the voice in {self.data_dir} ({exc})") from None
        return self.voice_record(int(row_id or 0))

    def voice_record(self, record_id: int) -> VoiceRecord:
        row = self._connect().execute("SELECT * FROM voices WHERE id = ?", (record_id,)).fetchone()
        if row is None or not self._sees(row):
            raise InvalidInput(f"there is no voice record {record_id} in the history at {self.data_dir}")
        return _voice(row)

    def voice_records(self, target: str | None = None, *, name: str | None = None,
                      include_removed: bool = False) -> list[VoiceRecord]:
        """The voices the studio saved (on `target`; named `name`, any case) that the actor sees (their own and
        the shared ones), newest first."""
        condition, args = self.visible()
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
        return [_voice(r) for r in self._connect().execute(sql, args).fetchall()]

    def unseen_voice_names(self, target: str) -> set[str]:
        """Names (lower case) of the voices on `target` that others saved and did not share: a server's own list
        (which names every voice) leaves them out for this actor."""
        if self.sees_everything:
            return set()
        mine = self._mine()
        rows = self._connect().execute(
            f"SELECT lower(name) FROM voices WHERE target = ? AND removed_at IS NULL AND shared = 0 AND user_id NOT IN "
            f"({', '.join('?' * len(mine))})", (target, *mine)).fetchall()
        return {r[0] for r in rows}

    def check_voice_removal(self, target: str, name: str) -> None:
        """Forbidden unless the actor may remove the voice `name` on `target`: a role that may clone voices, and
        the voice theirs (or they an admin, or the voice without a record)."""
        require(self.actor, "clone_voice")
        if self.sees_everything or self.actor.role == "admin":
            return
        others = self._connect().execute(
            "SELECT DISTINCT user_id FROM voices WHERE target = ? AND lower(name) = lower(?) AND removed_at IS NULL"
            " AND user_id != ?", (target, name, self.actor.id)).fetchall()
        if others:
            raise Forbidden(f"{self.actor.label} may not remove the voice {name!r}: {others[0][0]} saved it, and only "
                            "they (or an admin) may remove it")

    def remove_voice_record(self, target: str, name: str, removal: Literal["deleted", "forgotten"], *,
                            gone: bool = False) -> int:
        """Mark the active record(s) of `name` on `target` removed (kept, with when and how); how many were.
        Only by whom `check_voice_removal` allows, unless the target no longer has the voice (`gone`: a fact
        about the server that any user may record)."""
        if not gone:
            self.check_voice_removal(target, name)
        with self._tx() as db:
            return db.execute("UPDATE voices SET removed_at = ?, removal = ? WHERE target = ? AND lower(name) = lower(?)"
                              " AND removed_at IS NULL", (time.time(), removal, target, name)).rowcount

    def drop_voice_record(self, record_id: int) -> None:
        """Drop the actor's record of an upload that did not happen (the server refused it, or could not be
        reached)."""
        condition, args = ("1", []) if self.sees_everything else ("user_id = ?", [self.actor.id])
        with self._tx() as db:
            db.execute(f"DELETE FROM voices WHERE id = ? AND {condition}", (record_id, *args))

    # -- load sweep reports (services/load) ------------------------------------------------------------
    def save_load_report(self, report: Mapping[str, Any]) -> str:
        """Keep a load sweep's report (its JSON, samples included), the actor's (Forbidden unless their role may
        run load sweeps); its id. Saving the same id again replaces it (only its owner may), sharing kept."""
        require(self.actor, "load_test")
        try:
            with self._tx() as db:
                old = db.execute("SELECT user_id FROM load_reports WHERE id = ?", (str(report["id"]),)).fetchone()
                if old is not None and old["user_id"] != self.actor.id and not self.sees_everything:
                    raise Forbidden(f"{self.actor.label} may not replace load report {report['id']}: it is "
                                    f"{old['user_id']}'s")
                db.execute(
                    "INSERT INTO load_reports (id, modality, backend, target, instance_type, title, report, created_at,"
                    " user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
                    " modality = excluded.modality, backend = excluded.backend, target = excluded.target,"
                    " instance_type = excluded.instance_type, title = excluded.title, report = excluded.report,"
                    " created_at = excluded.created_at",
                    (str(report["id"]), str(report["modality"]), str(report["backend"]), str(report["target"]),
                     report.get("instance_type"), report.get("title"), json.dumps(dict(report)),
                     float(report.get("created_at") or time.time()), self.actor.id))
        except (sqlite3.Error, KeyError, TypeError, ValueError) as exc:
            raise HistoryError(f"cannot record the load report in {self.data_dir} ({exc})") from None
        return str(report["id"])

    def load_reports(self, *, modality: str | None = None, limit: int | None = 50) -> list[LoadReportRecord]:
        """The actor's saved load reports and those others shared, newest first (their JSON in `report`)."""
        condition, args = self.visible()
        if modality:
            condition += " AND modality = ?"
            args.append(modality)
        sql = f"SELECT * FROM load_reports WHERE {condition} ORDER BY created_at DESC, rowid DESC" + \
              (f" LIMIT {int(limit)}" if limit is not None else "")
        return [_load_report(r) for r in self._connect().execute(sql, args).fetchall()]

    def load_report(self, report_id: str) -> LoadReportRecord:
        row = self._connect().execute("SELECT * FROM load_reports WHERE id = ?", (report_id,)).fetchone()
        if row is None or not self._sees(row):
            raise InvalidInput(f"there is no load report {report_id!r} in the history at {self.data_dir}")
        return _load_report(row)

    # -- speech takes (the Voice page) ------------------------------------------------------------------
    def record_take(self, text: str, wav: bytes, *, target: str, state: TakeState = "done", error: str | None = None,
                    voice_label: str | None = None, config: Mapping[str, Any] | None = None,
                    figures: Mapping[str, Any] | None = None, created_at: float | None = None) -> SpeechTake:
        """Keep a finished take, the actor's (Forbidden unless their role may generate): its WAV in
        media/<id>/take.wav (written, atomically, before the row), the text, what spoke, the config sent (keep a
        reference recording out of it), the figures. A take that failed or was stopped keeps the audio that
        arrived (`state`, `error`); one with no audio at all is refused (InvalidInput): nothing to keep."""
        require(self.actor, "generate")
        if _wav_frames(wav) == 0:
            raise InvalidInput("this take has no audio: nothing arrived before it ended, so it is not kept")
        take_id = f"take-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        try:
            [name] = self._write_files(take_id, {TAKE_FILE: wav})
            with self._tx() as db:
                db.execute(
                    "INSERT INTO speech_takes (id, text, voice_label, config, target, figures, state, error, audio,"
                    " created_at, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (take_id, text, voice_label, json.dumps(dict(config or {})), target,
                     json.dumps(dict(figures or {})), state, error, name, float(created_at or time.time()),
                     self.actor.id))
        except (OSError, sqlite3.Error, TypeError, ValueError) as exc:
            raise HistoryError(f"cannot record the speech take in {self.data_dir} ({exc})") from None
        return self.take(take_id)

    def takes(self, *, limit: int | None = 50) -> list[SpeechTake]:
        """The actor's speech takes and those others shared, newest first."""
        condition, args = self.visible()
        sql = f"SELECT * FROM speech_takes WHERE {condition} ORDER BY created_at DESC, rowid DESC" + \
              (f" LIMIT {int(limit)}" if limit is not None else "")
        return [_take(r, self.media_dir) for r in self._connect().execute(sql, args).fetchall()]

    def take(self, take_id: str) -> SpeechTake:
        """The take; someone else's unshared take is refused like a missing one."""
        row = self._connect().execute("SELECT * FROM speech_takes WHERE id = ?", (take_id,)).fetchone()
        if row is None or not self._sees(row):
            raise InvalidInput(f"there is no take {take_id!r} in the history at {self.data_dir}")
        return _take(row, self.media_dir)

    # -- other packages' tables (services/eval): additive, in the same file --------------------------------
    def add_tables(self, schema: str, *, owned: Sequence[str] = (), stamped: Sequence[str] = ()) -> None:
        """Create another package's tables (`CREATE TABLE IF NOT EXISTS …` statements); the `owned` ones get
        `user_id` and `shared`, the `stamped` ones `user_id` (an old database is migrated: rows `local`'s)."""
        try:
            self._ensure(schema, owned=owned, stamped=stamped)
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot create tables in the history at {self.data_dir} ({exc})") from None

    def transaction(self) -> Any:
        """One write transaction on the history (a context manager yielding the connection): the one writer path."""
        return self._tx()

    def reader(self) -> sqlite3.Connection:
        """This thread's connection, for reads (writes go through `transaction`)."""
        return self._connect()

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
