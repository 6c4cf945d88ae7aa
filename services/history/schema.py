"""The history's own tables, and the migrations that bring an older database up to them (History runs both).

Each table that holds someone's records also has OWNER_COLUMNS (`user_id`, `shared`), added by `History._ensure`
for new and old databases alike; ADDED_COLUMNS are columns a table gained after its first release. A change no
ALTER can make is a numbered step of MIGRATIONS, run in one transaction when the database's `PRAGMA user_version`
is below it. The record kinds are not written here: a job's kind is checked in Python against the catalog
(protocol.catalog.JOB_KINDS), so a new family needs no migration.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

from services.access import LOCAL

JOBS_TABLE = """
CREATE TABLE IF NOT EXISTS jobs (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,             -- one of protocol.catalog.JOB_KINDS (checked by the jobs store)
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
"""
JOBS_INDEXES = """
CREATE INDEX IF NOT EXISTS jobs_kind_created ON jobs (kind, created_at DESC);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status);
"""
SCHEMA = JOBS_TABLE + JOBS_INDEXES + """
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
    modality    TEXT NOT NULL,             -- a family of protocol.catalog
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
# Who owns a record, and whether the team sees it: added to each owned table (an old database's rows: local's).
OWNER_COLUMNS = {"user_id": f"TEXT NOT NULL DEFAULT '{LOCAL.id}'", "shared": "INTEGER NOT NULL DEFAULT 0"}
OWNER_INDEX = "CREATE INDEX IF NOT EXISTS {table}_user ON {table} (user_id)"
OWNED_TABLES = ("jobs", "voices", "load_reports", "speech_takes")
ADDED_COLUMNS = {"jobs": {"title": "TEXT"}}  # columns added after a table's first release: a database migrated
NAMED = re.compile(r"CREATE\s+(?:TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.IGNORECASE)


def statements(script: str) -> list[str]:
    """The SQL statements of `script`, one by one (to run them inside one transaction)."""
    out, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    return out + ([pending.strip()] if pending.strip() else [])


def jobs_without_kind_check(db: sqlite3.Connection) -> None:
    """Version 1: the jobs table without its CHECK on `kind` (which named the kinds; the catalog names them now).
    SQLite cannot drop a constraint: a new table, every row copied (rowid too: the order of equal times stays),
    the old table dropped and the new one renamed, its indexes made again — inside the caller's transaction."""
    db.execute(JOBS_TABLE.replace("IF NOT EXISTS jobs", "jobs_rebuilt", 1))
    for col, decl in OWNER_COLUMNS.items():
        db.execute(f"ALTER TABLE jobs_rebuilt ADD COLUMN {col} {decl}")
    new = {r[1] for r in db.execute("PRAGMA table_info(jobs_rebuilt)")}
    cols = ", ".join(r[1] for r in db.execute("PRAGMA table_info(jobs)") if r[1] in new)
    db.execute(f"INSERT INTO jobs_rebuilt (rowid, {cols}) SELECT rowid, {cols} FROM jobs")
    db.execute("DROP TABLE jobs")
    db.execute("ALTER TABLE jobs_rebuilt RENAME TO jobs")
    for statement in statements(JOBS_INDEXES):
        db.execute(statement)
    db.execute(OWNER_INDEX.format(table="jobs"))


TRANSCRIPTS_TABLE = f"""
CREATE TABLE IF NOT EXISTS transcripts (
    id          TEXT PRIMARY KEY,
    text        TEXT NOT NULL,
    source      TEXT NOT NULL,             -- the file's name, or 'microphone'
    route       TEXT NOT NULL CHECK (route IN ('file', 'stream')),
    model       TEXT NOT NULL,
    backend     TEXT NOT NULL,             -- offline, omni or sagemaker
    target      TEXT NOT NULL,             -- where it was transcribed (URL or endpoint)
    segments    TEXT NOT NULL DEFAULT '[]',-- JSON: [{{start, end, text}}]
    figures     TEXT NOT NULL DEFAULT '{{}}',-- JSON: Transcript.figures() without text and segments (audio_s, rtf, wer …)
    reference   TEXT,                      -- the text that is spoken, when one was given for the word error rate
    preview     TEXT,                      -- the target's note when its answers are a stand-in (the offline engine)
    audio       TEXT,                      -- file name (in media/<id>/) of the recording; NULL: not kept
    created_at  REAL NOT NULL,
    user_id     TEXT NOT NULL DEFAULT '{LOCAL.id}',
    shared      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS transcripts_created ON transcripts (created_at DESC);
CREATE INDEX IF NOT EXISTS transcripts_user ON transcripts (user_id);
"""


def transcripts_table(db: sqlite3.Connection) -> None:
    """Version 2: the Listen page's transcripts (services/history/transcripts.py), owned and shareable like takes."""
    for statement in statements(TRANSCRIPTS_TABLE):
        db.execute(statement)


CONVERSATIONS_TABLE = f"""
CREATE TABLE IF NOT EXISTS conversations (
    id          TEXT PRIMARY KEY,
    mode        TEXT NOT NULL CHECK (mode IN ('pipeline', 'native')),
    title       TEXT NOT NULL,             -- the person's first words, for lists
    timeline    TEXT NOT NULL,             -- JSON: the turns and voice-to-voice (the converse CLI's --json object)
    settings    TEXT NOT NULL DEFAULT '{{}}',-- JSON: mode, targets, voice, script or system prompt, silence window, …
    audio       TEXT,                      -- file name (in media/<id>/) of the stereo WAV; NULL: not kept
    created_at  REAL NOT NULL,
    user_id     TEXT NOT NULL DEFAULT '{LOCAL.id}',
    shared      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS conversations_created ON conversations (created_at DESC);
CREATE INDEX IF NOT EXISTS conversations_user ON conversations (user_id);
"""


def conversations_table(db: sqlite3.Connection) -> None:
    """Version 3: Converse's conversations (services/history/conversations.py), owned and shareable like takes."""
    for statement in statements(CONVERSATIONS_TABLE):
        db.execute(statement)


# (version, step): a database whose user_version is below a step's version gets that step, in order.
MIGRATIONS: tuple[tuple[int, Callable[[sqlite3.Connection], None]], ...] = (
    (1, jobs_without_kind_check), (2, transcripts_table), (3, conversations_table))
SCHEMA_VERSION = MIGRATIONS[-1][0]
