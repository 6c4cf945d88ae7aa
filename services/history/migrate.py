"""The history's migrations, by Alembic: the revisions are services/history/migrations/versions/ (0001: today's
schema, which also converts a SQLite file made before Alembic: schema.py says how).

The host runs `upgrade` whenever it opens a history (`python -m services history migrate` runs it on its
own): nothing but one read when the database is at the newest revision; else every missing revision in one
write transaction of the host's (SQLite: BEGIN IMMEDIATE; PostgreSQL: the writers' advisory lock), so two
processes starting at once migrate once, and a migration that fails or is interrupted leaves the database as
it was — the next start (or `migrate`) runs it again, whole.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Connection, Engine, inspect, text

from services.history.base import HistoryError

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).with_name("migrations")
# The newest revision (tests/test_history_migrate.py checks it is Alembic's head): opening a current database
# reads one row and never imports Alembic, which costs every process that opens the history a third of a second.
HEAD = "0004"


class Host(Protocol):
    """What migrating needs of services.history.host.Host (which imports this module)."""

    engine: Engine
    where: str

    def transaction(self) -> Any: ...


def config() -> Config:
    from alembic.config import Config

    made = Config()
    made.set_main_option("script_location", str(MIGRATIONS))
    return made


@functools.cache
def script() -> ScriptDirectory:
    """The revisions (read once per process)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(config())


def head() -> str:
    return HEAD


def current(conn: Connection) -> str | None:
    """The revision the database is at (None: new, or a SQLite file from before Alembic)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def revision(host: Host) -> str | None:
    with host.engine.connect() as conn:
        try:
            return current(conn)
        finally:
            conn.rollback()


def upgrade(host: Host) -> list[str]:
    """Bring the host's database to the newest revision; the revisions it ran (none when it was current)."""
    if revision(host) == head():
        return []
    with host.transaction() as db:
        at = current(db.connection)  # read under the lock: another process may have just migrated it
        if at == head():
            return []
        known = [r.revision for r in script().walk_revisions()]  # newest first
        if at is not None and at not in known:
            raise HistoryError(f"the history at {host.where} is at revision {at}, which this version of the studio "
                               "does not know: a newer studio migrated it — run that version")
        from alembic import command

        run = config()
        run.attributes["connection"] = db.connection  # env.py runs on it: the same transaction
        command.upgrade(run, "head")
    return list(reversed(known[:known.index(at)] if at else known))
