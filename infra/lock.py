"""One writer per state file: an OS lock on `<state file>.lock`, held for a whole command.

Two `deploy`s on one new state file would each create a deployment and the file would keep only the
second; a `delete` while a `deploy` is still creating would leave the deploy adding alarms and scaling to
deleted endpoints. So every command that writes the state — deploy, resume, extend, delete, upgrade,
rollback, smoke (it records its result) — holds `fcntl.flock` on a sibling file from start to end. It is
not the state file itself: every save replaces that file (os.replace), so a lock on it would guard a file
that is no longer there. The kernel drops the lock when the process ends however it ends (SIGKILL too), so
a crash leaves no stale lock; the file's text (pid, host, command, start) only says who holds it.
`status` and `cost` only read (every save is an atomic replace) and take no lock.

In a team studio (replicas on one PostgreSQL database, infra/shared_state.py) the lock is also the database's:
`StateLock(..., shared=...)` takes a session advisory lock after the flock, so replicas on different hosts
exclude each other too; the holder is read from the database then. Every save and removal made while such a lock
is held goes to the database (`mirror`), and the lock's first act is to bring this replica's copy up to date.

    with hold(path, "python -m infra deploy", wait_s=0):   # StateLocked (exit 2) names the holder
        ...

The lock is re-entrant per thread: the CLI holds it for the whole command (the smoke test after a deploy
included) and the library calls inside take it again for free. The endpoints page's runner (infra/actions.py)
takes it when an action starts, in the page's thread, and hands it to the action's thread (`adopt`).
"""

from __future__ import annotations

import fcntl
import functools
import inspect
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from infra.errors import StateError, StateLocked

if TYPE_CHECKING:
    from sqlalchemy import Connection

POLL_S = 0.2  # how often a waiting command tries again
CLI_HINT = "wait for it to end, or pass --wait-lock SECONDS to wait for it"
P = ParamSpec("P")
R = TypeVar("R")
_local = threading.local()  # .depth: {lock file path: how many holds this thread has on it}
_held: dict[str, StateLock] = {}  # lock file path -> the lock this process holds on it (any thread)
_held_guard = threading.Lock()


class Shared(Protocol):
    """What the lock needs of infra.shared_state.SharedState (the team's database)."""

    where: str

    def try_lock(self, name: str, holder: dict[str, Any]) -> Connection | None: ...
    def unlock(self, name: str, conn: Connection) -> None: ...
    def holder(self, name: str) -> dict[str, Any]: ...
    def pull(self, path: Path) -> bool: ...
    def push(self, path: Path, by: str) -> int: ...


def held_here(state_file: Path) -> StateLock | None:
    """The lock this process holds on `state_file` now, if any (its writer: its copy is the newest)."""
    with _held_guard:
        return _held.get(_key(state_file))


def mirror(state_file: Path) -> None:
    """After a save or removal of `state_file`: to the team's database, when this process holds a shared lock
    on it (infra/shared_state.py); nothing otherwise."""
    lock = held_here(state_file)
    if lock is not None and lock.shared is not None:
        lock.shared.push(lock.state_file, by=f"{lock.command} (pid {os.getpid()} on {socket.gethostname()})")


def lock_path(state_file: Path) -> Path:
    state_file = Path(state_file)
    return state_file.with_name(state_file.name + ".lock")


def _key(state_file: Path) -> str:
    return os.path.realpath(lock_path(state_file))


def _depths() -> dict[str, int]:
    if not hasattr(_local, "depth"):
        _local.depth = {}
    return _local.depth


def _since(started: str | None) -> str:
    try:
        moment = datetime.fromisoformat(str(started).replace("Z", "+00:00")).astimezone()
    except ValueError:
        return "an unknown time"
    return f"{moment:%H:%M:%S}" if moment.date() == datetime.now().astimezone().date() else f"{moment:%Y-%m-%d %H:%M:%S}"


def _named(read: Callable[[], dict[str, Any]], settle_s: float = 1.0) -> dict[str, Any]:
    """What the holder wrote — waiting up to `settle_s` for its name: a holder writes it just after it takes the
    lock (the file after flock, the row after the advisory lock), so one that has just taken it has not yet."""
    deadline = time.monotonic() + settle_s
    info = read()
    while not info.get("command") and time.monotonic() < deadline:
        time.sleep(0.05)
        info = read()
    return info


def describe_holder(info: dict[str, Any]) -> str:
    """"`python -m infra deploy` (pid 1234, since 19:42:01)", from what the holder wrote into the lock file."""
    if not info.get("command"):
        return "another command (it has not written its name yet)"
    where = "" if info.get("host") in (None, socket.gethostname()) else f" on {info['host']}"
    via = f" from {info['via']}" if info.get("via") else ""
    return f"`{info['command']}`{via} (pid {info.get('pid', '?')}{where}, since {_since(info.get('started_at'))})"


class StateLock:
    """The lock on one state file. `acquire` takes it (waiting up to `wait_s`), `release` lets it go."""

    def __init__(self, state_file: Path, command: str, *, via: str | None = None, hint: str = CLI_HINT,
                 shared: Shared | None = None) -> None:
        self.state_file = Path(state_file)
        self.path = lock_path(self.state_file)
        self.command, self.via, self.hint = command, via, hint
        self.shared = shared  # the team's database (infra/shared_state.py), or None: this machine only
        self._fd: int | None = None
        self._conn: Connection | None = None  # the shared lock's own connection while held

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _open(self) -> int:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StateError(f"cannot open the lock file {self.path} of the state file {self.state_file}: "
                             f"{exc.strerror}; pass --state-file with a writable path") from None

    def _same_file(self, fd: int) -> bool:
        """The file still at the path: a holder that ended may have removed the one we opened."""
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)

    def holder(self) -> dict[str, Any]:
        """What the current holder wrote ({} when nothing could be read)."""
        try:
            info = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def acquire(self, wait_s: float = 0.0, on_wait: Callable[[str], None] | None = None, *,
                sync: bool = True) -> StateLock:
        """Take the lock, or raise StateLocked naming who holds it once `wait_s` seconds have passed.
        `on_wait(holder)` is called once when it starts waiting. A shared lock then brings this copy of the state
        up to the database's, unless `sync` is False (`python -m infra state import`: this copy is the one)."""
        deadline = time.monotonic() + max(0.0, wait_s)
        told = False
        while True:
            fd = self._open()
            info = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command, "via": self.via,
                    "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                holder = None
            except BlockingIOError:
                os.close(fd)
                holder = _named(self.holder)
            if holder is None and not self._same_file(fd):
                os.close(fd)  # locked a file the last holder removed: take the one at the path instead
                continue
            if holder is None and self.shared is not None:
                self._conn = self.shared.try_lock(self.state_file.name, info)
                if self._conn is None:  # another replica holds the team's lock
                    os.close(fd)
                    holder = _named(lambda: self.shared.holder(self.state_file.name))
            if holder is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    waited = f" (waited {wait_s:g} s)" if wait_s > 0 else ""
                    raise StateLocked(f"the {self._what()} is in use{waited}: held by "
                                      f"{describe_holder(holder)}; {self.hint}") from None
                if on_wait is not None and not told:
                    told = True
                    on_wait(describe_holder(holder))
                time.sleep(min(POLL_S, left))
                continue
            self._fd = fd
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
            with _held_guard:
                _held[_key(self.state_file)] = self
            if self.shared is not None and sync:
                try:
                    self.shared.pull(self.state_file)  # the deployment as the last writer, any replica, left it
                except BaseException:
                    self.release()
                    raise
            return self

    def _what(self) -> str:
        shared = f" (shared in {self.shared.where})" if self.shared is not None else ""
        return f"deployment state {self.state_file.name}{shared}" if shared else f"state file {self.state_file}"

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with _held_guard:
            if _held.get(_key(self.state_file)) is self:
                del _held[_key(self.state_file)]
        conn, self._conn = self._conn, None
        if conn is not None and self.shared is not None:
            self.shared.unlock(self.state_file.name, conn)
        try:
            if self.state_file.exists():
                os.ftruncate(fd, 0)  # nobody holds it now
            else:  # nothing left to guard (delete removed it, or nothing was written): no lock file left behind
                self.path.unlink(missing_ok=True)
        except OSError:
            pass  # the lock goes with the descriptor either way
        finally:
            os.close(fd)


@contextmanager
def adopt(lock: StateLock) -> Iterator[StateLock]:
    """This thread holds `lock` (taken, maybe in another thread) for the block, then releases it."""
    depths = _depths()
    key = _key(lock.state_file)
    depths[key] = depths.get(key, 0) + 1
    try:
        yield lock
    finally:
        depths.pop(key, None)
        lock.release()


@contextmanager
def hold(state_file: Path, command: str, *, wait_s: float = 0.0, via: str | None = None, hint: str = CLI_HINT,
         on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the state file's lock for the block: at once when this thread holds it already, else taken now."""
    depths = _depths()
    key = _key(state_file)
    if depths.get(key):
        depths[key] += 1
        try:
            yield
        finally:
            depths[key] -= 1
        return
    with adopt(StateLock(state_file, command, via=via, hint=hint).acquire(wait_s, on_wait)):
        yield


def locked(command: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a library call with a `state_file` parameter: it holds that file's lock while it runs."""
    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            with hold(bound.arguments["state_file"], command):
                return fn(*args, **kwargs)
        return run
    return decorate
