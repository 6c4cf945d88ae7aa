"""A team studio's deployment state in its PostgreSQL database: one deployment for every replica, one lock.

On one machine the state file and its `flock` (infra/lock.py) are the deployment's record and its guard. Replicas
of a team studio share a database and no disk, so there the database holds both:
- the state: table `infra_state`, one row per state file name — the file's JSON (`body`, NULL once the deployment
  was deleted), a `version` every write raises, who wrote it last. Each replica keeps working on its own copy at
  its `state_file` path: everything that reads or writes a state file works unchanged. A replica's copy is
  brought up to date (`pull`) at each page run, unless this process is the one writing it; every save and removal
  made under the lock goes to the database at once (`push`, from DeploymentState.save/remove), so a replica that
  dies mid-deploy leaves every planned name where the next one (resume, delete) finds it.
- the lock: a PostgreSQL session advisory lock (`pg_try_advisory_lock`), held on a connection of its own for the
  whole command, beside the file's flock. The server drops it when that connection ends, however the replica
  ended — no stale lock. Who holds it is written in the row (`holder`), so the refused replica names the holder.
A row that does not exist yet means the deployment was never shared: a replica's existing file stays as it is,
and its first write under the lock shares it. `python -m infra state export|import` moves the state between
the database and a file, for the CLI on one machine.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text

from infra.errors import StateError
from infra.state import write_atomically

LOCK_SPACE = b"omni-studio infra state:"


def lock_key(name: str) -> int:
    """PostgreSQL's advisory lock key (a signed 64-bit integer) of the state named `name`."""
    digest = hashlib.blake2b(LOCK_SPACE + name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]


class SharedState:
    """The deployment state named after a state file, in the database `engine` names (PostgreSQL)."""

    def __init__(self, engine: Engine, where: str) -> None:
        self.engine = engine
        self.where = where  # the database, for messages (no password)
        self._seen: dict[str, int] = {}  # state name -> the version this process's copy has
        self._read_at: dict[str, float] = {}  # state name -> when `pull` last read it (time.monotonic)
        self._lock = threading.Lock()

    # -- the lock ----------------------------------------------------------------------------------
    def try_lock(self, name: str, holder: dict[str, Any]) -> Connection | None:
        """Take the lock of state `name` on a connection of its own (returned: hold it until `unlock`), and write
        `holder` into the row; None when another session holds it."""
        try:
            conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        except Exception as exc:  # noqa: BLE001 — any driver error: the database is away
            raise StateError(f"cannot reach the team's database {self.where} to lock the deployment state "
                             f"({_reason(exc)}); nothing was started") from None
        try:
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_key(name)}).scalar()
            if not got:
                conn.close()
                return None
            conn.execute(text("INSERT INTO infra_state (name, body, version, holder) VALUES (:n, NULL, 0, :h) "
                              "ON CONFLICT (name) DO UPDATE SET holder = :h"), {"n": name, "h": json.dumps(holder)})
            return conn
        except Exception:
            conn.invalidate()  # the server drops a session lock with its connection
            raise

    def unlock(self, name: str, conn: Connection) -> None:
        try:
            conn.execute(text("UPDATE infra_state SET holder = NULL WHERE name = :n"), {"n": name})
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_key(name)})
            conn.close()
        except Exception:  # noqa: BLE001 — closing the connection lets the lock go whatever happened
            conn.invalidate()

    def holder(self, name: str) -> dict[str, Any]:
        """What the lock's holder wrote ({} when nothing could be read)."""
        try:
            with self.engine.connect() as conn:
                raw = conn.execute(text("SELECT holder FROM infra_state WHERE name = :n"), {"n": name}).scalar()
            info = json.loads(raw or "{}")
        except Exception:  # noqa: BLE001 — a description only
            return {}
        return info if isinstance(info, dict) else {}

    # -- the state ---------------------------------------------------------------------------------
    def read(self, name: str) -> tuple[int, str | None] | None:
        """(version, body) of state `name`; None when it was never shared."""
        with self.engine.connect() as conn:
            row = conn.execute(text("SELECT version, body FROM infra_state WHERE name = :n"), {"n": name}).first()
        return None if row is None or (row[0] == 0 and row[1] is None) else (int(row[0]), row[1])

    def push(self, path: Path, by: str) -> int:
        """The database's copy of state `path.name` becomes the file at `path` (or none, when it is gone); its
        new version."""
        path = Path(path)
        body = path.read_text(encoding="utf-8") if path.exists() else None
        try:
            with self.engine.begin() as conn:
                version = conn.execute(text(
                    "INSERT INTO infra_state (name, body, version, updated_at, updated_by) VALUES (:n, :b, 1, :t, :by) "
                    "ON CONFLICT (name) DO UPDATE SET body = :b, version = infra_state.version + 1, updated_at = :t, "
                    "updated_by = :by RETURNING version"),
                    {"n": path.name, "b": body, "t": time.time(), "by": by}).scalar_one()
        except Exception as exc:  # noqa: BLE001 — any driver error
            raise StateError(f"the deployment state was saved in {path} but not in the team's database "
                             f"{self.where} ({_reason(exc)}): other replicas do not see this change; run "
                             f"`python -m infra state import --state-file {path}` once the database answers") from None
        with self._lock:
            self._seen[path.name] = int(version)
        return int(version)

    def pull(self, path: Path, *, fresh_for_s: float = 0.0) -> bool:
        """Bring this replica's copy at `path` up to the database's; True when it changed. A state never shared
        leaves the file as it is. `fresh_for_s`: a copy brought up to date that recently is left alone (a page run
        asks several times; the lock asks with 0: always read)."""
        path = Path(path)
        with self._lock:
            if time.monotonic() - self._read_at.get(path.name, float("-inf")) < fresh_for_s:
                return False
            self._read_at[path.name] = time.monotonic()
        shared = self.read(path.name)
        if shared is None:
            return False
        version, body = shared
        with self._lock:
            current = self._seen.get(path.name) == version
        if current and path.exists() == (body is not None):
            return False
        write_copy(path, body)
        with self._lock:
            self._seen[path.name] = version
        return True


def write_copy(path: Path, body: str | None) -> None:
    """This replica's copy: `body` written whole (infra.state.write_atomically), or the file removed."""
    try:
        if body is None:
            path.unlink(missing_ok=True)
        else:
            write_atomically(path, body)
    except OSError as exc:
        raise StateError(f"cannot write this replica's copy of the deployment state at {path}: {exc.strerror}; "
                         "point state_file at a writable path") from None
