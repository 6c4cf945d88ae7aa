"""Image and video jobs in the history: each a row of `jobs` and its inputs and outputs in the media store
(services/media_store: <media>/<job id>/<name>, a folder or a bucket).

    job = history.jobs.create("video", prompt, params, target="http://127.0.0.1:8091", inputs={"reference.jpg": b"…"})
    history.jobs.mark_running(job.id, handle={...})     # what a transport needs to poll the job again
    history.jobs.succeed(job.id, {"video.mp4": mp4}, timings={"model_s": 2.1, "wall_s": 2.2})
    history.jobs.fail(job.id, "the server said …")      # the record and its inputs stay
    history.jobs.list(kind="image")                     # newest first; a new History on the same folder sees them
    history.jobs.list("image", search="fox", offset=24, limit=24), history.jobs.count("image", search="fox")
    history.jobs.rename(job.id, "Harbour, take 2")      # a title of one's own, shown instead of the prompt
    history.jobs.delete(job.id)                         # the record and its media folder (own; an admin: anyone's)

Each job records the process that runs it (`owner`: replica:pid:start) and a lease (`lease_until`) that process
renews while the job runs (`renew`, every third of JOB_LEASE_S). A job left `queued`/`running` by a process that is
gone — on this replica, its pid is gone; on any replica, its lease lapsed — is an orphan: `recover()` marks it
`interrupted` with a message, unless its transport said it can be polled again (`handle["resumable"]`), in which
case a runner for that target claims it (`claim`: one compare-and-set on the owner, so of two replicas that try,
one wins) and carries on. A runner whose renewal finds the job taken over stops polling it: no job is polled by
two replicas at once. Files are
written (atomically, by rename) before the row that names them, so a record never points at a half-written file.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from protocol.catalog import JOB_KINDS
from protocol.errors import InvalidInput, StudioError
from services.access import LOCAL, Forbidden, require
from services.history.base import DB_ERRORS, HistoryError, like_escaped, owner_alive

if TYPE_CHECKING:
    from services.media_store import MediaStore
    from services.history.db import Row
    from services.history.host import Host

JobKind = Literal[JOB_KINDS]  # type: ignore[valid-type]  # the catalog's families whose records are jobs
JobStatus = Literal["queued", "running", "succeeded", "failed", "interrupted"]
UNFINISHED: tuple[JobStatus, ...] = ("queued", "running")
TITLE_MAX = 200  # characters of a job's title


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
    media: MediaStore = field(repr=False, compare=False)
    user_id: str = LOCAL.id  # who made it (the person; `owner` is the process running it)
    shared: bool = False
    title: str | None = None  # a name its owner gave it
    lease_until: float | None = None  # until when `owner` holds it (None: made before leases)

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

    def read(self, name: str) -> bytes:
        """One of its files (an input or an output); HistoryError naming the file and the place when it is gone."""
        try:
            return self.media.get(self.id, name)
        except StudioError as exc:
            raise HistoryError(str(exc)) from None

    def has(self, name: str) -> bool:
        """Whether its file `name` is in the media store (a video's MP4 deleted by hand is not)."""
        try:
            return self.media.exists(self.id, name)
        except StudioError:
            return False

    def url(self, name: str, *, download_as: str | None = None) -> str | None:
        """A short-lived URL the browser fetches the file from when the media is a bucket (presigned, 5 minutes:
        the studio does not relay the bytes); None for a folder, or when none can be signed (the caller reads the
        bytes instead, which names what is wrong)."""
        try:
            return self.media.url(self.id, name, download_as=download_as)
        except StudioError:
            return None

    def file(self, name: str) -> bytes | None:
        """One of its files, or None when it is gone or unreadable (`read` says why)."""
        try:
            return self.media.get(self.id, name)
        except StudioError:
            return None

    def output_files(self) -> list[tuple[str, bytes | None]]:
        """Its outputs in order, each (name, bytes), the bytes None for one that is gone (a page shows it missing)."""
        return [(name, self.file(name)) for name in self.outputs]

    def input_file(self, name: str) -> bytes | None:
        """The input `name` kept with the job (e.g. "reference-1.png"), or None when it kept none by that name or
        it is gone."""
        return self.file(name) if name in self.inputs else None


def _job(row: Row, media: MediaStore) -> Job:
    return Job(
        id=row["id"], kind=row["kind"], status=row["status"], prompt=row["prompt"],
        params=json.loads(row["params"]), target=row["target"], owner=row["owner"],
        handle=json.loads(row["handle"]) if row["handle"] else None,
        inputs=json.loads(row["inputs"]), outputs=json.loads(row["outputs"]),
        timings=json.loads(row["timings"]), meta=json.loads(row["meta"]), error=row["error"],
        created_at=row["created_at"], started_at=row["started_at"], finished_at=row["finished_at"],
        media=media, user_id=row["user_id"], shared=bool(row["shared"]), title=row["title"],
        lease_until=row["lease_until"],
    )


def check_kind(kind: str) -> None:
    """InvalidInput unless `kind` is a family whose records are jobs (protocol.catalog.JOB_KINDS)."""
    if kind not in JOB_KINDS:
        raise InvalidInput(f"{kind!r} is not a kind of job the history keeps: one of {', '.join(JOB_KINDS)} "
                           "(the catalog's families whose records are jobs, protocol/catalog.py)")


class JobStore:
    """The jobs of `history`, acting for its actor (over its one connection and write path)."""

    def __init__(self, history: Host) -> None:
        self.history = history

    # -- writes ---------------------------------------------------------------------------------------
    def create(self, kind: JobKind, prompt: str, params: Mapping[str, Any], *, target: str,
               inputs: Mapping[str, bytes] | None = None, status: JobStatus = "queued",
               meta: Mapping[str, Any] | None = None) -> Job:
        """A new job of the actor's (Forbidden unless their role may generate), run by this process; `inputs`
        (e.g. the reference image) are saved with it."""
        history = self.history
        require(history.actor, "generate")
        check_kind(kind)
        job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        now = time.time()
        with history.new_record(job_id, f"{kind} job", inputs or {}) as (names, db):
            db.execute(
                "INSERT INTO jobs (id, kind, status, prompt, params, target, owner, lease_until, inputs, meta,"
                " created_at, started_at, updated_at, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job_id, kind, status, prompt, json.dumps(dict(params)), target, history.owner,
                 now + history.job_lease_s, json.dumps(names), json.dumps(dict(meta or {})), now,
                 now if status == "running" else None, now, history.actor.id),
            )
        return self.get(job_id)

    def mark_running(self, job_id: str, handle: Mapping[str, Any] | None = None) -> Job:
        self._own(job_id)
        sets: dict[str, Any] = {"status": "running", "started_at": time.time()}
        if handle is not None:
            sets["handle"] = json.dumps(dict(handle))
        self._update(job_id, sets, only_if=UNFINISHED)
        return self.get(job_id)

    def note(self, job_id: str, notice: str | None) -> None:
        """What a person should see while the job runs (meta["notice"], e.g. "starting an instance (about
        8 min)"); None removes it. Only while the job is unfinished."""
        meta = dict(self._own(job_id).meta)
        if notice is None:
            meta.pop("notice", None)
        else:
            meta["notice"] = notice
        self._update(job_id, {"meta": json.dumps(meta)}, only_if=UNFINISHED)

    def succeed(self, job_id: str, outputs: Mapping[str, bytes], *, timings: Mapping[str, float] | None = None,
                meta: Mapping[str, Any] | None = None) -> Job:
        """Save the result files, then mark the job succeeded with its timings (one transaction)."""
        old = self._own(job_id)
        try:
            names = self.history.write_files(job_id, outputs)
        except HistoryError as exc:  # e.g. a full disk: the record says so (the .part is gone, so it has room)
            try:
                self.fail(job_id, str(exc))
            except (StudioError, *DB_ERRORS):
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
        old = self._own(job_id)
        self._update(job_id, {"status": status, "error": error, "finished_at": time.time(),
                              "timings": json.dumps({**old.timings, **dict(timings or {})})}, only_if=UNFINISHED)
        return self.get(job_id)

    def claim(self, job: Job) -> bool:
        """Take over an orphaned job (of any user) for this process, with a fresh lease; False if another process
        claimed it first (the owner it had is the condition: one of two claims wins)."""
        now = time.time()
        with self.history.transaction() as db:
            cur = db.execute("UPDATE jobs SET owner = ?, lease_until = ?, updated_at = ? WHERE id = ? AND owner = ? "
                             "AND status IN ('queued', 'running')",
                             (self.history.owner, now + self.history.job_lease_s, now, job.id, job.owner))
            return cur.rowcount == 1

    def renew(self, job_id: str) -> bool:
        """Extend this process's lease on a job it runs; False when the job is no longer its own to run (another
        replica took it over after the lease lapsed, or it ended) — the caller stops polling it."""
        now = time.time()
        with self.history.transaction() as db:
            cur = db.execute("UPDATE jobs SET lease_until = ?, updated_at = ? WHERE id = ? AND owner = ? AND status "
                             "IN ('queued', 'running')", (now + self.history.job_lease_s, now, job_id,
                                                          self.history.owner))
            return cur.rowcount == 1

    def recover(self) -> list[Job]:
        """Deal with jobs (of every user) whose process is gone: mark the ones nobody can pick up again
        `interrupted`; return the resumable ones (their transport can poll them again), for a runner of their
        target to claim and carry on for their owner (`History.acting_for_owner`)."""
        resumable = []
        now = time.time()
        for job in self._select(None, UNFINISHED, None, everyone=True):  # HistoryError when damaged
            lapsed = job.lease_until is not None and job.lease_until < now
            if job.owner == self.history.owner or (owner_alive(job.owner) and not lapsed):
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

    def _update(self, job_id: str, sets: dict[str, Any], *, only_if: tuple[str, ...] | None = None) -> bool:
        sets = {**sets, "updated_at": time.time()}
        cols = ", ".join(f"{k} = ?" for k in sets)
        sql = f"UPDATE jobs SET {cols} WHERE id = ?"
        args: list[Any] = [*sets.values(), job_id]
        if only_if:
            sql += f" AND status IN ({', '.join('?' * len(only_if))})"
            args += list(only_if)
        with self.history.transaction() as db:
            return db.execute(sql, args).rowcount == 1

    def _own(self, job_id: str) -> Job:
        """The job, when the actor may carry it on: the one who made it (or anyone without sign-in)."""
        job = self.get(job_id)
        if not self.history.owns(job):
            raise Forbidden(f"job {job_id} is {job.user_id}'s: only their own runs change it")
        return job

    # -- reads ----------------------------------------------------------------------------------------
    def get(self, job_id: str) -> Job:
        """The job; someone else's unshared job is refused like a missing one."""
        with self.history.guard():
            row = self.history.reader().execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or not self.history.sees(row):
            raise InvalidInput(f"there is no job {job_id!r} in the history at {self.history.data_dir}")
        return _job(row, self.history.media)

    def list(self, kind: JobKind | None = None, *, statuses: tuple[JobStatus, ...] | None = None,
             limit: int | None = 100, offset: int = 0, search: str | None = None) -> list[Job]:
        """The actor's jobs and those others shared, newest first: `limit` of them from `offset` (a page), those
        whose prompt or title contains `search` (any case; `%` and `_` are plain characters) when given."""
        return self._select(kind, statuses, limit, everyone=False, offset=offset, search=search)

    def count(self, kind: JobKind | None = None, *, statuses: tuple[JobStatus, ...] | None = None,
              search: str | None = None) -> int:
        """How many jobs `list(...)` would give without a limit (a gallery's total, for its pages)."""
        where, args = self._filter(kind, statuses, everyone=False, search=search)
        with self.history.guard():
            return int(self.history.reader().execute(f"SELECT COUNT(*) FROM jobs WHERE {where}", args).fetchone()[0])

    def _filter(self, kind: JobKind | None, statuses: tuple[JobStatus, ...] | None, *, everyone: bool,
                search: str | None = None) -> tuple[str, list[Any]]:
        condition, args = ("1 = 1", []) if everyone else self.history.visible()
        where = [condition]
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        if statuses:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            args += list(statuses)
        if search and search.strip():
            pattern = "%" + like_escaped(search.strip()) + "%"  # any case: lower() both sides (PostgreSQL's LIKE heeds it)
            where.append("(lower(prompt) LIKE lower(?) ESCAPE '\\'"
                         " OR lower(coalesce(title, '')) LIKE lower(?) ESCAPE '\\')")
            args += [pattern, pattern]
        return " AND ".join(where), args

    def _select(self, kind: JobKind | None, statuses: tuple[JobStatus, ...] | None, limit: int | None, *,
                everyone: bool, offset: int = 0, search: str | None = None) -> list[Job]:
        where, args = self._filter(kind, statuses, everyone=everyone, search=search)
        sql = f"SELECT * FROM jobs WHERE {where} ORDER BY {self.history.newest_first}{self.history.page(limit, offset)}"
        with self.history.guard():
            rows = self.history.reader().execute(sql, args).fetchall()
        return [_job(r, self.history.media) for r in rows]

    # -- one's own items: rename, delete ----------------------------------------------------------------
    def _changeable(self, job_id: str, doing: str) -> Job:
        """The job, when the actor may rename or delete it: a role that may generate, and the job theirs (an
        admin: anyone's). Someone else's unshared job is refused like a missing one."""
        actor = self.history.actor
        require(actor, "generate")
        job = self.get(job_id)
        self.history.check_changeable(job, doing, f"{job.kind} {job_id}")
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
        with self.history.transaction() as db:  # the row first: a record never names a file that is gone
            db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
        self.history.remove_files(job_id, f"{job.kind} {job_id}")
