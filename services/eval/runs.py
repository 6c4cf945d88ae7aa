"""Evaluation runs that outlive the page, the process and the replica that started them: `EvalRuns`.

    runs = EvalRuns(history, settings)         # one per process: carries on runs whose process is gone
    runs.start(store, eval_id)                 # claims the run (RunBusy while a live process runs it); a worker thread
    runs.state(store, eval_id)                 # RunState: running where and since when, stop asked, the last run's note
    runs.stop(store, eval_id)                  # whichever replica runs it stops before its next item
    runs.run_here(store, eval_id, on_progress=...)  # the command line: the same claim, the run in the foreground

A run is a claim on the evaluation's row (services/history/tables.py: `run_owner` — the process, replica:pid:start —
and `run_lease_until`), taken by one compare-and-set so that of two processes that try, one wins. The process
renews the lease every third of the history's `job_lease_s` while it runs (an item may take minutes: a video);
a process that finds its claim gone stops before its next item. A claim whose process is gone — on this replica
its pid is gone, on any replica its lease lapsed — is taken over by the next process that looks (every runner
looks as often as it renews), which carries the run on from the items not yet `succeeded`, for its owner
(the item the dead process was making is made again; one that finished in the meantime is kept, not redone).

The end of a run (all made, stopped, or an error) releases the claim and leaves a note on the row (`run_note`,
JSON): how many items it made and how many failed, whether it was stopped, and — when it moved — which replica
it was taken over from, so the page says so. `stop` is a flag on the row, so a Stop pressed on any replica
reaches the one running it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.errors import StudioError
from services.eval.runner import Progress, RunOutcome, run_items
from services.eval.store import EvalStore
from services.history import History, owner_alive
from services.settings import Settings

log = logging.getLogger(__name__)


class RunBusy(StudioError):
    """The evaluation is being run by a live process already (the message says where and since when)."""


def replica_of(owner: str | None) -> str:
    """The replica part of a process's owner string (replica:pid:start)."""
    return (owner or "").partition(":")[0]


@dataclass(frozen=True)
class RunState:
    running: bool
    replica: str | None = None  # where it runs now
    since: float | None = None  # when this process claimed it
    stop_asked: bool = False
    note: dict[str, Any] | None = None  # the last run's end (or, while running, where it was taken over from)


class _Stop:
    """What run_items checks before each item (`is_set`): the process closing, the claim lost, or a Stop pressed on
    any replica (read from the row)."""

    def __init__(self, runs: EvalRuns, eval_id: str, lost: threading.Event) -> None:
        self.runs, self.eval_id, self.lost = runs, eval_id, lost

    def is_set(self) -> bool:
        if self.runs._closed.is_set() or self.lost.is_set():
            return True
        try:
            row = self.runs.history.reader().execute("SELECT run_owner, run_stop FROM evaluations WHERE id = ?",
                                                     (self.eval_id,)).fetchone()
        except Exception as exc:  # noqa: BLE001 — a database away for a moment: go on, the claim's renewal decides
            log.warning("could not read whether evaluation %s was asked to stop: %s", self.eval_id, exc)
            return False
        return row is None or row["run_owner"] != self.runs.history.owner or bool(row["run_stop"])


class EvalRuns:
    """The process's evaluation runner: claims, runs on worker threads, renews, takes over, releases."""

    def __init__(self, history: History, base: Settings, *, backend_factory: Callable[[Settings], Any] | None = None,
                 recover: bool = True) -> None:
        self.history = history  # the process's (acting for nobody in particular: it carries runs on for their owners)
        self.base = base
        self.backend_factory = backend_factory
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}
        self._lost: dict[str, threading.Event] = {}
        self.taken_over: list[str] = []
        if recover:
            self.taken_over = self.recover()
        self._keeper = threading.Thread(target=self._keep, args=(recover,), name="eval-run-leases", daemon=True)
        self._keeper.start()

    # -- public -----------------------------------------------------------------------------------------
    def start(self, store: EvalStore, eval_id: str) -> None:
        """Run the evaluation's missing items on a worker thread, as `store`'s person (only its owner may: Forbidden
        before anything is claimed). RunBusy when a live process runs it already."""
        store.check_runner(eval_id)
        self._claim(eval_id)
        self._spawn(eval_id, lambda: self._run(store, eval_id, None))

    def run_here(self, store: EvalStore, eval_id: str, *, on_progress: Progress | None = None) -> RunOutcome:
        """The same run in the foreground (the command line): claimed, renewed while it runs, released at the end —
        Ctrl-C included."""
        store.check_runner(eval_id)
        self._claim(eval_id)
        lost = self._track(eval_id)
        try:
            return self._run(store, eval_id, on_progress, lost=lost)
        finally:
            with self._lock:
                self._lost.pop(eval_id, None)

    def stop(self, store: EvalStore, eval_id: str) -> bool:
        """Ask the process running the evaluation (on any replica) to stop before its next item; False when none
        runs it. Its owner only (Forbidden otherwise)."""
        store.check_runner(eval_id)
        with self.history.transaction() as db:
            return db.execute("UPDATE evaluations SET run_stop = 1 WHERE id = ? AND run_owner IS NOT NULL",
                              (eval_id,)).rowcount == 1

    def state(self, store: EvalStore, eval_id: str) -> RunState:
        """The evaluation's run as the row says (any replica's): running where, since when, and the last note."""
        store.get(eval_id)  # one the person may see
        row = self.history.reader().execute(
            "SELECT run_owner, run_lease_until, run_stop, run_note FROM evaluations WHERE id = ?", (eval_id,)).fetchone()
        note = json.loads(row["run_note"]) if row and row["run_note"] else None
        if row is None or not row["run_owner"]:
            return RunState(False, note=note)
        since = (note or {}).get("claimed_at")
        return RunState(True, replica_of(row["run_owner"]), since, bool(row["run_stop"]), note)

    @property
    def replica(self) -> str:
        """The replica this runner is on."""
        return replica_of(self.history.owner)

    def wait(self, eval_id: str, timeout: float | None = None) -> None:
        """Block until this process's worker for the evaluation is done."""
        with self._lock:
            thread = self._threads.get(eval_id)
        if thread is not None:
            thread.join(timeout)

    def running(self) -> list[str]:
        """The evaluations this process runs now."""
        with self._lock:
            return list(self._lost)

    def close(self) -> None:
        """Stop before each run's next item; the claims lapse, and another process carries the runs on."""
        self._closed.set()

    def recover(self) -> list[str]:
        """Take over the runs whose process is gone (here: its pid; anywhere: its lease lapsed), for their owners."""
        now = time.time()
        rows = self.history.reader().execute(
            "SELECT id, run_owner, run_lease_until FROM evaluations WHERE run_owner IS NOT NULL").fetchall()
        taken = []
        for row in rows:
            owner, until = row["run_owner"], row["run_lease_until"]
            if owner == self.history.owner or (owner_alive(owner) and until is not None and until >= now):
                continue
            if self._claim(row["id"], were=owner):
                taken.append(row["id"])
                # the process's own history acts for nobody: it runs the owner's items as they were claimed
                self._spawn(row["id"], lambda e=row["id"]: self._run(EvalStore(self.history), e, None))
        return taken

    # -- the claim --------------------------------------------------------------------------------------
    def _claim(self, eval_id: str, *, were: str | None = None) -> bool:
        """Claim the run for this process: from nobody (`start`: RunBusy when a live process holds it, a dead one's
        is taken) or from `were` (a takeover: False when another process was quicker)."""
        now = time.time()
        lease = now + self.history.job_lease_s
        with self.history.transaction() as db:
            row = db.execute("SELECT run_owner, run_lease_until FROM evaluations WHERE id = ?", (eval_id,)).fetchone()
            if row is None:
                return False
            held = row["run_owner"]
            if were is not None and held != were:
                return False
            if were is None and held:
                lapsed = row["run_lease_until"] is not None and row["run_lease_until"] < now
                if held == self.history.owner or (owner_alive(held) and not lapsed):
                    raise RunBusy(f"evaluation {eval_id} is being run already (on {replica_of(held)}): wait for it, or "
                                  "press Stop")
            note: dict[str, Any] = {"claimed_at": now, "replica": replica_of(self.history.owner)}
            if held:
                note["taken_over_from"] = replica_of(held)
            cur = db.execute("UPDATE evaluations SET run_owner = ?, run_lease_until = ?, run_stop = 0, run_note = ? "
                             "WHERE id = ? AND " + ("run_owner = ?" if held else "run_owner IS NULL"),
                             (self.history.owner, lease, json.dumps(note), eval_id, *([held] if held else [])))
            return cur.rowcount == 1

    def _renew(self, eval_id: str) -> bool:
        with self.history.transaction() as db:
            return db.execute("UPDATE evaluations SET run_lease_until = ? WHERE id = ? AND run_owner = ?",
                              (time.time() + self.history.job_lease_s, eval_id, self.history.owner)).rowcount == 1

    def _release(self, eval_id: str, note: dict[str, Any]) -> None:
        with self.history.transaction() as db:
            row = db.execute("SELECT run_note FROM evaluations WHERE id = ? AND run_owner = ?",
                             (eval_id, self.history.owner)).fetchone()
            if row is None:
                return  # taken over meanwhile: the note is the new holder's to write
            began = json.loads(row["run_note"] or "{}")
            note = {**{k: began[k] for k in ("taken_over_from", "claimed_at") if k in began}, **note,
                    "replica": replica_of(self.history.owner), "ended_at": time.time()}
            db.execute("UPDATE evaluations SET run_owner = NULL, run_lease_until = NULL, run_stop = 0, run_note = ? "
                       "WHERE id = ? AND run_owner = ?", (json.dumps(note), eval_id, self.history.owner))

    # -- workers ----------------------------------------------------------------------------------------
    def _track(self, eval_id: str) -> threading.Event:
        lost = threading.Event()
        with self._lock:
            self._lost[eval_id] = lost
        return lost

    def _spawn(self, eval_id: str, work: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                work()
            except BaseException as exc:  # released with its reason by _run; said here for the log
                log.warning("the run of evaluation %s ended with an error: %s", eval_id, exc)

        self._track(eval_id)
        thread = threading.Thread(target=run, name=f"eval-run-{eval_id}", daemon=True)
        with self._lock:
            self._threads = {e: t for e, t in self._threads.items() if t.is_alive()}
            self._threads[eval_id] = thread
        thread.start()

    def _run(self, store: EvalStore, eval_id: str, on_progress: Progress | None, *,
             lost: threading.Event | None = None) -> RunOutcome:
        with self._lock:
            lost = lost or self._lost[eval_id]
        stop = _Stop(self, eval_id, lost)
        try:
            outcome = run_items(store, eval_id, base=self.base, on_progress=on_progress,
                                backend_factory=self.backend_factory, stop=stop)
        except KeyboardInterrupt:
            self._safely_release(eval_id, {"stopped": True, "error": "interrupted (Ctrl-C)"})
            raise
        except BaseException as exc:  # a refusal, a database away: the claim is released with why
            why = str(exc) if isinstance(exc, StudioError) else f"{type(exc).__name__}: {exc}"
            self._safely_release(eval_id, {"stopped": True, "error": why})
            raise
        finally:
            with self._lock:
                if threading.current_thread() is self._threads.get(eval_id):
                    self._lost.pop(eval_id, None)
        if not lost.is_set() and not self._closed.is_set():  # closing: the claim lapses, another process goes on
            self._safely_release(eval_id, {"generated": outcome.generated, "failed": len(outcome.failed),
                                           "items": outcome.items, "stopped": outcome.stopped})
        return outcome

    def _safely_release(self, eval_id: str, note: dict[str, Any]) -> None:
        try:
            self._release(eval_id, note)
        except Exception as exc:  # noqa: BLE001 — the claim lapses by itself; another process takes it over
            log.warning("could not release the run of evaluation %s (its lease lapses by itself): %s", eval_id, exc)

    def _keep(self, sweep: bool) -> None:
        """Every third of the lease: renew each run's claim (one taken over elsewhere is let go) and, for a runner
        that recovers, take over runs whose process is gone."""
        every = max(0.2, self.history.job_lease_s / 3)
        while not self._closed.wait(every):
            with self._lock:
                mine = dict(self._lost)
            for eval_id, lost in mine.items():
                try:
                    if not self._renew(eval_id):
                        lost.set()
                except Exception as exc:  # noqa: BLE001 — the keeper outlives a database that is away
                    log.warning("could not renew the run of evaluation %s (tried again in %.0f s): %s", eval_id,
                                every, exc)
            if sweep:
                try:
                    self.taken_over += self.recover()
                except Exception as exc:  # noqa: BLE001 — as above: the next round looks again
                    log.warning("could not look for evaluation runs whose process is gone: %s", exc)
