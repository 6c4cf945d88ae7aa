"""What the history's host and its stores share: its errors and their one-line messages, which process runs a job
(`current_owner`, `owner_alive`), and the small checks on names and search text."""

from __future__ import annotations

import errno
import logging
import os
import socket
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from protocol.errors import StudioError
from services.media_store.base import MediaMissing, plain_name

if TYPE_CHECKING:
    from services.media_store import MediaStore

log = logging.getLogger(__name__)


class HistoryError(StudioError):
    """The history database or its folder cannot be used; the message names the path (a record's kept file: not
    its path, which a viewer could read, `read_kept`)."""


# What a database call may raise: SQLAlchemy's errors (a driver's error wrapped, its own in `.orig`), and the
# sqlite3 driver's own where a raw connection is used (the pre-Alembic conversion, schema.py).
DB_ERRORS = (SQLAlchemyError, sqlite3.Error)
_SQLITE_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB: the file is not (or no longer) a SQLite database
_SQLITE_FULL = 13


def damaged_message(db_path: Path, exc: BaseException | str) -> str:
    """One line naming a damaged history database and what to do about it."""
    return (f"the history database {db_path} is damaged ({exc}): move it aside — the studio starts a new one "
            "(the media files beside it are kept)")


def no_space_message(path: Path, folder: Path) -> str:
    return f"No space left on device writing {path}: free space on {folder} and run it again"


def driver_error(exc: BaseException) -> BaseException:
    """The driver's own error behind a SQLAlchemy one (sqlite3's, psycopg's), else `exc` itself."""
    return getattr(exc, "orig", None) or exc


def reason(exc: BaseException) -> str:
    """What went wrong, in one line, without SQLAlchemy's statement dump and link: the driver's words."""
    return " ".join(str(driver_error(exc)).split())


def is_damage(exc: BaseException) -> bool:
    exc = driver_error(exc)
    return isinstance(exc, sqlite3.DatabaseError) and (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in \
        _SQLITE_DAMAGED


def is_full(exc: BaseException) -> bool:
    exc = driver_error(exc)
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


JOB_LEASE_S = 60.0  # how long a job's runner holds it without renewing (Host.job_lease_s; jobs.py; tests shorten it)
REPLICA_ENV = "OMNI_STUDIO_REPLICA"  # a team studio's replica name (e.g. its ECS task id); else the host name


def replica() -> str:
    """The name of this replica of the studio: OMNI_STUDIO_REPLICA, else the host's name (one per container)."""
    return (os.environ.get(REPLICA_ENV) or "").strip().replace(":", "-") or socket.gethostname()


def current_owner() -> str:
    """This process, as a job's `owner`: replica:pid:start (the start tells a reused pid from the old process)."""
    pid = os.getpid()
    return f"{replica()}:{pid}:{_process_start(pid)}"


def owner_alive(owner: str) -> bool:
    """Whether the process that wrote `owner` still runs — only knowable on this replica; of another, assume so
    (its job's lease says when it stopped renewing: services/history/jobs.py)."""
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != replica():
        return True
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    return start in ("", "?") or _process_start(pid) in ("?", start)


def like_escaped(text: str) -> str:
    """`text` for a LIKE pattern with ESCAPE '\\': its own %, _ and backslashes match themselves."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def safe_name(name: str) -> str:
    """`name` as one plain path segment (the media store's rule, services/media_store/base.py); InvalidInput if not."""
    return plain_name(name)


def read_kept(media: MediaStore, record_id: str, name: str | None, what: str) -> bytes | None:
    """A record's kept file (None when it kept none); HistoryError naming `what` when it is gone — not the file:
    whoever reads the message (a viewer of a shared record) is not shown the server's folder or bucket, which goes
    to the server's log."""
    if name is None:
        return None
    try:
        return media.get(record_id, name)
    except StudioError as exc:  # MediaError; a bucket's ConfigError, ServerError, BackendUnreachable
        log.warning("the recording of %s cannot be read: %s", what, exc)
        state = "missing from" if isinstance(exc, MediaMissing) else "unreadable in"
        raise HistoryError(f"the recording of {what} is {state} the studio's media (the server's log says "
                           "where); the rest of it is kept") from None
