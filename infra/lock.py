"""One writer per state file: an OS lock on `<state file>.lock`, held for a whole command.

Two `deploy`s on one new state file would each create a deployment and the file would keep only the
second; a `delete` while a `deploy` is still creating would leave the deploy adding alarms and scaling to
deleted endpoints. So every command that writes the state — deploy, resume, extend, delete, upgrade,
rollback, smoke (it records its result) — holds `fcntl.flock` on a sibling file from start to end. It is
not the state file itself: every save replaces that file (os.replace), so a lock on it would guard a file
that is no longer there. The kernel drops the lock when the process ends however it ends (SIGKILL too), so
a crash leaves no stale lock; the file's text (pid, host, command, start) only says who holds it.
`status` and `cost` only read (every save is an atomic replace) and take no lock.

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
from typing import Any, ParamSpec, TypeVar

from infra.errors import StateError, StateLocked

POLL_S = 0.2  # how often a waiting command tries again
CLI_HINT = "wait for it to end, or pass --wait-lock SECONDS to wait for it"
P = ParamSpec("P")
R = TypeVar("R")
_local = threading.local()  # .depth: {lock file path: how many holds this thread has on it}


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


def describe_holder(info: dict[str, Any]) -> str:
    """"`python -m infra deploy` (pid 1234, since 19:42:01)", from what the holder wrote into the lock file."""
    if not info.get("command"):
        return "another command (it has not written its name yet)"
    where = "" if info.get("host") in (None, socket.gethostname()) else f" on {info['host']}"
    via = f" from {info['via']}" if info.get("via") else ""
    return f"`{info['command']}`{via} (pid {info.get('pid', '?')}{where}, since {_since(info.get('started_at'))})"


class StateLock:
    """The lock on one state file. `acquire` takes it (waiting up to `wait_s`), `release` lets it go."""

    def __init__(self, state_file: Path, command: str, *, via: str | None = None, hint: str = CLI_HINT) -> None:
        self.state_file = Path(state_file)
        self.path = lock_path(self.state_file)
        self.command, self.via, self.hint = command, via, hint
        self._fd: int | None = None

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

    def acquire(self, wait_s: float = 0.0, on_wait: Callable[[str], None] | None = None) -> StateLock:
        """Take the lock, or raise StateLocked naming who holds it once `wait_s` seconds have passed.
        `on_wait(holder)` is called once when it starts waiting."""
        deadline = time.monotonic() + max(0.0, wait_s)
        told = False
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                left = deadline - time.monotonic()
                if left <= 0:
                    waited = f" (waited {wait_s:g} s)" if wait_s > 0 else ""
                    raise StateLocked(f"the state file {self.state_file} is in use{waited}: held by "
                                      f"{describe_holder(self.holder())}; {self.hint}") from None
                if on_wait is not None and not told:
                    told = True
                    on_wait(describe_holder(self.holder()))
                time.sleep(min(POLL_S, left))
                continue
            if not self._same_file(fd):
                os.close(fd)  # locked a file the last holder removed: take the one at the path instead
                continue
            self._fd = fd
            info = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command, "via": self.via,
                    "started_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
            return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
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
