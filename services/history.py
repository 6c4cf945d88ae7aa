"""The studio's history: every image and video job, in one SQLite file with the media files beside it, and the
record of every voice the studio saved for cloning (`record_voice`, `voice_records`: who, when, which consent), and
the reports of load sweeps (`save_load_report`, `load_reports`, `load_report`: services/load).

    history = History(settings.data_dir)               # <data_dir>/history.sqlite3 and <data_dir>/media/<job id>/
    job = history.create("video", prompt, params, target="http://127.0.0.1:8091", inputs={"reference.jpg": b"…"})
    history.mark_running(job.id, handle={...})         # what a transport needs to poll the job again
    history.succeed(job.id, {"video.mp4": mp4}, timings={"model_s": 2.1, "wall_s": 2.2})
    history.fail(job.id, "the server said …")          # the record and its inputs stay
    history.jobs(kind="image")                         # newest first; a new History on the same folder sees them

Jobs survive page reloads and restarts. Each job records the process that runs it (`owner`); a job left
`queued`/`running` by a process that is gone is an orphan: `recover()` marks it `interrupted` with a
message, unless its transport said it can be polled again (`handle["resumable"]`), in which case a runner
for that target claims it (`claim`) and carries on. Every write is one transaction; files are written
(atomically, by rename) before the row that names them, so a record never points at a half-written file.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from protocol.errors import InvalidInput, StudioError

JobKind = Literal["image", "video"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "interrupted"]
UNFINISHED: tuple[JobStatus, ...] = ("queued", "running")
DB_NAME = "history.sqlite3"
MEDIA_DIR = "media"

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
"""


class HistoryError(StudioError):
    """The history database or its folder cannot be used; the message names the path."""


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


def _load_report(row: sqlite3.Row) -> LoadReportRecord:
    return LoadReportRecord(id=row["id"], modality=row["modality"], backend=row["backend"], target=row["target"],
                            instance_type=row["instance_type"], title=row["title"], created_at=row["created_at"],
                            report=json.loads(row["report"]))


def _voice(row: sqlite3.Row) -> VoiceRecord:
    return VoiceRecord(**{k: row[k] for k in row.keys()})


def _job(row: sqlite3.Row, media: Path) -> Job:
    return Job(
        id=row["id"], kind=row["kind"], status=row["status"], prompt=row["prompt"],
        params=json.loads(row["params"]), target=row["target"], owner=row["owner"],
        handle=json.loads(row["handle"]) if row["handle"] else None,
        inputs=json.loads(row["inputs"]), outputs=json.loads(row["outputs"]),
        timings=json.loads(row["timings"]), meta=json.loads(row["meta"]), error=row["error"],
        created_at=row["created_at"], started_at=row["started_at"], finished_at=row["finished_at"],
        folder=media / row["id"],
    )


def _safe_name(name: str) -> str:
    if not name or "/" in name or "\\" in name or name in (".", "..") or name.startswith("."):
        raise InvalidInput(f"not a plain file name for the history: {name!r}")
    return name


class History:
    """The history in `data_dir`. Thread-safe and multi-process-safe (SQLite WAL, one connection per call)."""

    def __init__(self, data_dir: Path | str) -> None:
        self.data_dir = Path(data_dir)
        self.db_path = self.data_dir / DB_NAME
        self.media_dir = self.data_dir / MEDIA_DIR
        self.owner = current_owner()
        self._local = threading.local()
        try:
            self.media_dir.mkdir(parents=True, exist_ok=True)
            self._connect().executescript(_SCHEMA)  # idempotent; executescript manages its own transaction
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"cannot open the history in {self.data_dir} ({exc}); check the data_dir setting "
                               "(OMNI_STUDIO_DATA_DIR) points at a writable folder") from None

    # -- plumbing -------------------------------------------------------------------------------------
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
        """One write transaction (BEGIN IMMEDIATE: writers queue instead of failing mid-way)."""
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        else:
            db.execute("COMMIT")

    def _write_files(self, job_id: str, files: Mapping[str, bytes]) -> list[str]:
        folder = self.media_dir / job_id
        folder.mkdir(parents=True, exist_ok=True)
        names = []
        for name, data in files.items():
            name = _safe_name(name)
            tmp = folder / f".{name}.{uuid.uuid4().hex[:8]}.part"
            tmp.write_bytes(data)
            os.replace(tmp, folder / name)  # atomic: a reader sees the whole file or none
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

    # -- writes ---------------------------------------------------------------------------------------
    def create(self, kind: JobKind, prompt: str, params: Mapping[str, Any], *, target: str,
               inputs: Mapping[str, bytes] | None = None, status: JobStatus = "queued",
               meta: Mapping[str, Any] | None = None) -> Job:
        """A new job, owned by this process; `inputs` (e.g. the reference image) are saved with it."""
        job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        now = time.time()
        try:
            names = self._write_files(job_id, inputs or {})
            with self._tx() as db:
                db.execute(
                    "INSERT INTO jobs (id, kind, status, prompt, params, target, owner, inputs, meta, created_at,"
                    " started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (job_id, kind, status, prompt, json.dumps(dict(params)), target, self.owner, json.dumps(names),
                     json.dumps(dict(meta or {})), now, now if status == "running" else None, now),
                )
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"cannot record the job in {self.data_dir} ({exc})") from None
        return self.get(job_id)

    def mark_running(self, job_id: str, handle: Mapping[str, Any] | None = None) -> Job:
        sets: dict[str, Any] = {"status": "running", "started_at": time.time()}
        if handle is not None:
            sets["handle"] = json.dumps(dict(handle))
        self._update(job_id, sets, only_if=UNFINISHED)
        return self.get(job_id)

    def note(self, job_id: str, notice: str | None) -> None:
        """What a person should see while the job runs (meta["notice"], e.g. "starting an instance (about
        8 min)"); None removes it. Only while the job is unfinished."""
        meta = dict(self.get(job_id).meta)
        if notice is None:
            meta.pop("notice", None)
        else:
            meta["notice"] = notice
        self._update(job_id, {"meta": json.dumps(meta)}, only_if=UNFINISHED)

    def succeed(self, job_id: str, outputs: Mapping[str, bytes], *, timings: Mapping[str, float] | None = None,
                meta: Mapping[str, Any] | None = None) -> Job:
        """Save the result files, then mark the job succeeded with its timings (one transaction)."""
        try:
            names = self._write_files(job_id, outputs)
        except OSError as exc:
            self.fail(job_id, f"the result could not be saved in {self.data_dir} ({exc})")
            raise HistoryError(f"cannot save the result of job {job_id} in {self.data_dir} ({exc})") from None
        old = self.get(job_id)
        self._update(job_id, {
            "status": "succeeded", "outputs": json.dumps(names), "finished_at": time.time(), "error": None,
            "timings": json.dumps({**old.timings, **dict(timings or {})}),
            "meta": json.dumps({**old.meta, **dict(meta or {})}),
        })
        return self.get(job_id)

    def fail(self, job_id: str, error: str, *, status: Literal["failed", "interrupted"] = "failed",
             timings: Mapping[str, float] | None = None) -> Job:
        """Mark an unfinished job failed (or interrupted) with the error text; everything else stays."""
        old = self.get(job_id)
        self._update(job_id, {"status": status, "error": error, "finished_at": time.time(),
                              "timings": json.dumps({**old.timings, **dict(timings or {})})}, only_if=UNFINISHED)
        return self.get(job_id)

    def claim(self, job: Job) -> bool:
        """Take over an orphaned job for this process; False if another process claimed it first."""
        with self._tx() as db:
            cur = db.execute("UPDATE jobs SET owner = ?, updated_at = ? WHERE id = ? AND owner = ? AND status IN "
                             "('queued', 'running')", (self.owner, time.time(), job.id, job.owner))
            return cur.rowcount == 1

    def recover(self) -> list[Job]:
        """Deal with jobs whose process is gone: mark the ones nobody can pick up again `interrupted`; return
        the resumable ones (their transport can poll them again), for a runner of their target to claim."""
        resumable = []
        for job in self.jobs(statuses=UNFINISHED, limit=None):
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
        row = self._connect().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise InvalidInput(f"there is no job {job_id!r} in the history at {self.data_dir}")
        return _job(row, self.media_dir)

    def jobs(self, kind: JobKind | None = None, *, statuses: tuple[JobStatus, ...] | None = None,
             limit: int | None = 100) -> list[Job]:
        """Newest first."""
        where, args = [], []
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if statuses:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            args += list(statuses)
        sql = "SELECT * FROM jobs" + (f" WHERE {' AND '.join(where)}" if where else "") + \
              " ORDER BY created_at DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_job(r, self.media_dir) for r in self._connect().execute(sql, args).fetchall()]

    # -- saved voices ---------------------------------------------------------------------------------
    def record_voice(self, target: str, name: str, consent_id: str, *, who: str, ref_text: str | None = None,
                     speaker_description: str | None = None) -> VoiceRecord:
        """Record a voice saved on `target` under the speaker's consent (before it is uploaded: no voice without
        its record). InvalidInput when the consent id is empty or `target` already has a voice of that name."""
        if not (consent_id or "").strip():
            raise InvalidInput("a saved voice needs the speaker's consent: give the id of their consent recording")
        try:
            with self._tx() as db:
                if db.execute("SELECT 1 FROM voices WHERE target = ? AND lower(name) = lower(?) AND removed_at IS NULL",
                              (target, name)).fetchone():
                    raise InvalidInput(f"a voice named {name!r} is already saved on {target}: pick another name, or "
                                       "delete that voice first")
                cur = db.execute(
                    "INSERT INTO voices (target, name, consent_id, who, ref_text, speaker_description, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (target, name, consent_id.strip(), who, ref_text, speaker_description, time.time()))
                row_id = cur.lastrowid
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot record the voice in {self.data_dir} ({exc})") from None
        return self.voice_record(int(row_id or 0))

    def voice_record(self, record_id: int) -> VoiceRecord:
        row = self._connect().execute("SELECT * FROM voices WHERE id = ?", (record_id,)).fetchone()
        if row is None:
            raise InvalidInput(f"there is no voice record {record_id} in the history at {self.data_dir}")
        return _voice(row)

    def voice_records(self, target: str | None = None, *, name: str | None = None,
                      include_removed: bool = False) -> list[VoiceRecord]:
        """The voices the studio saved (on `target`; named `name`, any case), newest first."""
        where, args = [], []
        if target is not None:
            where.append("target = ?")
            args.append(target)
        if name is not None:
            where.append("lower(name) = lower(?)")
            args.append(name)
        if not include_removed:
            where.append("removed_at IS NULL")
        sql = "SELECT * FROM voices" + (f" WHERE {' AND '.join(where)}" if where else "") + \
              " ORDER BY created_at DESC, id DESC"
        return [_voice(r) for r in self._connect().execute(sql, args).fetchall()]

    def remove_voice_record(self, target: str, name: str, removal: Literal["deleted", "forgotten"]) -> int:
        """Mark the active record(s) of `name` on `target` removed (kept, with when and how); how many were."""
        with self._tx() as db:
            return db.execute("UPDATE voices SET removed_at = ?, removal = ? WHERE target = ? AND lower(name) = lower(?)"
                              " AND removed_at IS NULL", (time.time(), removal, target, name)).rowcount

    def drop_voice_record(self, record_id: int) -> None:
        """Drop the record of an upload that did not happen (the server refused it, or could not be reached)."""
        with self._tx() as db:
            db.execute("DELETE FROM voices WHERE id = ?", (record_id,))

    # -- load sweep reports (services/load) ------------------------------------------------------------
    def save_load_report(self, report: Mapping[str, Any]) -> str:
        """Keep a load sweep's report (its JSON, samples included); its id. Saving the same id again replaces it."""
        try:
            with self._tx() as db:
                db.execute(
                    "INSERT OR REPLACE INTO load_reports (id, modality, backend, target, instance_type, title, report,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (str(report["id"]), str(report["modality"]), str(report["backend"]), str(report["target"]),
                     report.get("instance_type"), report.get("title"), json.dumps(dict(report)),
                     float(report.get("created_at") or time.time())))
        except (sqlite3.Error, KeyError, TypeError, ValueError) as exc:
            raise HistoryError(f"cannot record the load report in {self.data_dir} ({exc})") from None
        return str(report["id"])

    def load_reports(self, *, modality: str | None = None, limit: int | None = 50) -> list[LoadReportRecord]:
        """Saved load reports, newest first (their JSON in `report`)."""
        sql = "SELECT * FROM load_reports" + (" WHERE modality = ?" if modality else "") + \
              " ORDER BY created_at DESC, rowid DESC" + (f" LIMIT {int(limit)}" if limit is not None else "")
        rows = self._connect().execute(sql, (modality,) if modality else ()).fetchall()
        return [_load_report(r) for r in rows]

    def load_report(self, report_id: str) -> LoadReportRecord:
        row = self._connect().execute("SELECT * FROM load_reports WHERE id = ?", (report_id,)).fetchone()
        if row is None:
            raise InvalidInput(f"there is no load report {report_id!r} in the history at {self.data_dir}")
        return _load_report(row)

    # -- other packages' tables (services/eval): additive, in the same file --------------------------------
    def add_tables(self, schema: str) -> None:
        """Create another package's tables (idempotent `CREATE TABLE IF NOT EXISTS …` statements)."""
        try:
            self._connect().executescript(schema)
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot create tables in the history at {self.data_dir} ({exc})") from None

    def transaction(self) -> Any:
        """One write transaction on the history (a context manager yielding the connection)."""
        return self._tx()

    def reader(self) -> sqlite3.Connection:
        """This thread's connection, for reads."""
        return self._connect()

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None
