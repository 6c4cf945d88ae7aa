"""Today's SQLite files, made before the history moved to Alembic (services/history/migrations), brought up to
the schema of revision 0001 in place — the one time such a file is opened by this version.

Before Alembic the history kept its own steps: tables made with `CREATE TABLE IF NOT EXISTS`, columns a table
gained later added when missing (the owner columns of workspaces, a job's title), and numbered steps counted in
`PRAGMA user_version` (1: the jobs table without its CHECK on the kinds, 2: transcripts, 3: conversations).
A file from any of those times is recognised by having tables but no `alembic_version`. Revision 0001 then
runs `convert` (below) before it makes what is missing (tables, indexes), all in the one transaction of the
upgrade: the columns added, the jobs table rebuilt if it still checks the kinds, PRAGMA user_version set to
the last version it had (3, no longer read). Alembic then stamps the file 0001. A file whose conversion fails
(or is interrupted) is left as it was, and converted on the next start.
"""

from __future__ import annotations

import re
import sqlite3

from sqlalchemy import MetaData
from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateTable

from services.access import LOCAL
from services.history import tables

SCHEMA_VERSION = 3  # the last PRAGMA user_version of the steps before Alembic
OWNER = {"user_id": f"TEXT NOT NULL DEFAULT '{LOCAL.id}'", "shared": "INTEGER NOT NULL DEFAULT 0"}
# Columns tables gained after their first release (an older file lacks them): workspaces' owner columns, titles.
ADDED: dict[str, dict[str, str]] = {
    **{t: OWNER for t in ("jobs", "voices", "load_reports", "speech_takes", "transcripts", "conversations",
                          "evaluations")},
    "eval_ratings": {"user_id": OWNER["user_id"]},
}
ADDED["jobs"] = {**OWNER, "title": "TEXT"}
KIND_CHECK = re.compile(r"CHECK\s*\(\s*kind\s+IN\b", re.IGNORECASE)


def convert(db: sqlite3.Connection) -> None:
    """Bring a pre-Alembic file's existing tables up to revision 0001 (missing tables and indexes are made by
    the revision after this), inside the caller's transaction. A new, empty file: nothing to do."""
    found = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    if not found:
        return
    for table, columns in ADDED.items():
        if table in found:
            present = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
            for column, declared in columns.items():
                if column not in present:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declared}")
    if "jobs" in found and KIND_CHECK.search(found["jobs"] or ""):
        jobs_without_kind_check(db)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def jobs_without_kind_check(db: sqlite3.Connection) -> None:
    """Step 1 of the old scheme: the jobs table without its CHECK on `kind` (which named the kinds; the catalog
    names them now). SQLite cannot drop a constraint: a new table, every row copied (rowid too: the order of
    equal times stays), the old table dropped and the new one renamed; its indexes are made again after."""
    rebuilt = tables.jobs.to_metadata(MetaData(), name="jobs_rebuilt")
    db.execute(str(CreateTable(rebuilt).compile(dialect=sqlite.dialect())))
    new = {c.name for c in rebuilt.columns}
    cols = ", ".join(r[1] for r in db.execute("PRAGMA table_info(jobs)") if r[1] in new)
    db.execute(f"INSERT INTO jobs_rebuilt (rowid, {cols}) SELECT rowid, {cols} FROM jobs")
    db.execute("DROP TABLE jobs")
    db.execute("ALTER TABLE jobs_rebuilt RENAME TO jobs")
