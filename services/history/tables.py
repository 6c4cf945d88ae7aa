"""Every table of the studio's history, once, for SQLite and PostgreSQL alike (SQLAlchemy Core: no ORM).

The history's own tables (jobs, voices, load_reports, speech_takes, transcripts, conversations) and those other
packages keep in it (services/eval: evaluations, eval_items, eval_ratings; services/audit.py: audit;
services/targets.py: servers). Alembic makes them (services/history/migrations: revision 0001 is this schema as
it stood when the history moved to SQLAlchemy). Revision 0001 makes the tables from this module as it is, so
the first change to a table here must freeze it first — copy today's definitions into 0001 (op.create_table) —
and come with a revision that makes the change on existing databases; tests/test_history_migrate.py checks
that a migrated database matches this module.

Types: text is Text, times are seconds since the epoch as Double (REAL in SQLite, double precision in
PostgreSQL: a float4 would round them to minutes), JSON is kept as text. An owned table (a person's records)
has `user_id` and `shared`; `stamped` ones `user_id` only. The record kinds are not written here: a job's kind
is checked in Python against the catalog (protocol.catalog.JOB_KINDS), so a new family needs no migration.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from services.access import LOCAL

metadata = MetaData()


def _json(name: str, empty: str) -> Column:
    return Column(name, Text, nullable=False, server_default=text(f"'{empty}'"))


def _owner(*, shared: bool = True) -> list[Column]:
    """Who owns a record (an old database's rows: local's), and whether the team sees it."""
    cols = [Column("user_id", Text, nullable=False, server_default=text(f"'{LOCAL.id}'"))]
    if shared:
        cols.append(Column("shared", Integer, nullable=False, server_default=text("0")))
    return cols


def _t(name: str) -> Column:
    return Column(name, Double, nullable=False)


jobs = Table(
    "jobs", metadata,
    Column("id", Text, primary_key=True),
    Column("kind", Text, nullable=False),  # one of protocol.catalog.JOB_KINDS (checked by the jobs store)
    Column("status", Text, CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed', 'interrupted')"),
           nullable=False),
    Column("prompt", Text, nullable=False),
    Column("params", Text, nullable=False),  # JSON: the exact parameters of the request
    Column("target", Text, nullable=False),  # where it was sent (URL or endpoint), for display and resuming
    Column("owner", Text, nullable=False),  # replica-or-host:pid:start of the process running it
    Column("lease_until", Double),  # until when `owner` holds it (renewed while it polls); lapsed: others take it
    Column("handle", Text),  # JSON: what the transport needs to poll it again
    _json("inputs", "[]"), _json("outputs", "[]"), _json("timings", "{}"), _json("meta", "{}"),
    Column("error", Text),
    Column("title", Text),  # a name its owner gave it (shown instead of the prompt); NULL: none
    _t("created_at"), Column("started_at", Double), Column("finished_at", Double), _t("updated_at"),
    *_owner(),
)
Index("jobs_kind_created", jobs.c.kind, jobs.c.created_at.desc())
Index("jobs_status", jobs.c.status)

voices = Table(
    "voices", metadata,
    Column("id", Integer, primary_key=True),
    Column("target", Text, nullable=False),  # the server URL, or the SageMaker endpoint it was uploaded to
    Column("name", Text, nullable=False),
    Column("consent_id", Text, CheckConstraint("length(trim(consent_id)) > 0"), nullable=False),
    Column("who", Text, nullable=False),  # who saved it
    Column("ref_text", Text), Column("speaker_description", Text),
    _t("created_at"),
    Column("removed_at", Double),  # set when deleted from the server, or forgotten (SageMaker)
    Column("removal", Text),  # 'deleted' or 'forgotten'
    *_owner(),
    sqlite_autoincrement=True,
)
Index("voices_target_name", voices.c.target, voices.c.name)

load_reports = Table(
    "load_reports", metadata,
    Column("id", Text, primary_key=True),
    Column("modality", Text, nullable=False),  # a family of protocol.catalog
    Column("backend", Text, nullable=False), Column("target", Text, nullable=False),
    Column("instance_type", Text), Column("title", Text),
    Column("report", Text, nullable=False),  # JSON: the whole report, samples included (services/load/report.py)
    _t("created_at"),
    *_owner(),
)
Index("load_reports_created", load_reports.c.created_at.desc())

speech_takes = Table(
    "speech_takes", metadata,
    Column("id", Text, primary_key=True),
    Column("text", Text, nullable=False),
    Column("voice_label", Text),  # what spoke, as the page says it ("voice joe, style …"); never audio
    _json("config", "{}"),  # the session.config sent, without a reference recording
    Column("target", Text, nullable=False),
    _json("figures", "{}"),  # SessionStats.figures() — ttfa_ms, rtf, audio_seconds, chunks, …
    Column("state", Text, CheckConstraint("state IN ('done', 'failed', 'cancelled')"), nullable=False),
    Column("error", Text),  # why it stopped early (its audio until then is kept)
    Column("audio", Text, nullable=False),  # file name (in media/<id>/) of the WAV
    _t("created_at"),
    *_owner(),
)
Index("speech_takes_created", speech_takes.c.created_at.desc())

transcripts = Table(
    "transcripts", metadata,
    Column("id", Text, primary_key=True),
    Column("text", Text, nullable=False),
    Column("source", Text, nullable=False),  # the file's name, or 'microphone'
    Column("route", Text, CheckConstraint("route IN ('file', 'stream')"), nullable=False),
    Column("model", Text, nullable=False),
    Column("backend", Text, nullable=False),  # offline, server or sagemaker (older rows: omni, read as server)
    Column("target", Text, nullable=False),
    _json("segments", "[]"),  # [{start, end, text}]
    _json("figures", "{}"),  # Transcript.figures() without text and segments (audio_s, rtf, wer …)
    Column("reference", Text),  # the text that is spoken, when one was given for the word error rate
    Column("preview", Text),  # the target's note when its answers are a stand-in (the offline engine)
    Column("audio", Text),  # file name (in media/<id>/) of the recording; NULL: not kept
    _t("created_at"),
    *_owner(),
)
Index("transcripts_created", transcripts.c.created_at.desc())

conversations = Table(
    "conversations", metadata,
    Column("id", Text, primary_key=True),
    Column("mode", Text, CheckConstraint("mode IN ('pipeline', 'native')"), nullable=False),
    Column("title", Text, nullable=False),  # the person's first words, for lists
    Column("timeline", Text, nullable=False),  # JSON: the turns and voice-to-voice (the converse CLI's --json)
    _json("settings", "{}"),  # mode, targets, voice, script or system prompt, silence window, …
    Column("audio", Text),  # file name (in media/<id>/) of the stereo WAV; NULL: not kept
    _t("created_at"),
    # A live one is kept turn by turn by the process holding its call (conversations.py): `live` while it goes on,
    # `cut` when that process died (what was kept stays), NULL once it ended; `owner` and `lease_until` as a job's.
    Column("status", Text), Column("owner", Text), Column("lease_until", Double),
    *_owner(),
)
Index("conversations_created", conversations.c.created_at.desc())

# services/eval/store.py
evaluations = Table(
    "evaluations", metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False), Column("modality", Text, nullable=False),
    Column("spec", Text, nullable=False),  # JSON: the checked SPEC (services/eval/spec.py)
    _t("created_at"),
    # Its run (services/eval/runs.py): the process running it (replica:pid:start; NULL when none), until when it
    # holds it, a Stop asked from any replica, and the last run's note (JSON: made, failed, stopped, moved from).
    Column("run_owner", Text), Column("run_lease_until", Double), Column("run_stop", Integer),
    Column("run_note", Text),
    *_owner(),
)
eval_items = Table(
    "eval_items", metadata,
    Column("id", Text, primary_key=True),
    Column("evaluation_id", Text, nullable=False),
    Column("variant", Text, nullable=False),  # the variant's label
    Column("prompt_index", Integer, nullable=False), Column("repeat", Integer, nullable=False),
    Column("prompt", Text, nullable=False),
    Column("settings", Text, nullable=False),  # JSON: the variant's settings
    Column("status", Text, CheckConstraint("status IN ('pending', 'succeeded', 'failed')"), nullable=False),
    Column("media", Text),  # file name in media/eval-<evaluation id>/
    _json("figures", "{}"),  # latency_s, ttfa_ms, rtf, model_s, cost_usd, …
    Column("error", Text),
    _t("updated_at"),
    UniqueConstraint("evaluation_id", "variant", "prompt_index", "repeat"),
)
Index("eval_items_eval", eval_items.c.evaluation_id)
eval_ratings = Table(
    "eval_ratings", metadata,
    Column("id", Integer, primary_key=True),
    Column("evaluation_id", Text, nullable=False),
    Column("item_a", Text, nullable=False), Column("item_b", Text, nullable=False),
    Column("winner", Text, CheckConstraint("winner IN ('a', 'b', 'tie')"), nullable=False),
    Column("rater", Text, nullable=False),
    _t("created_at"),
    *_owner(shared=False),  # who rated (the signed-in person; `rater` is the name they gave)
    sqlite_autoincrement=True,
)
Index("eval_ratings_eval", eval_ratings.c.evaluation_id)

# services/audit.py
audit = Table(
    "audit", metadata,
    Column("id", Integer, primary_key=True),
    _t("at"),
    Column("who", Text, nullable=False),  # the principal's id: an e-mail, local, cli:<user>
    Column("role", Text, nullable=False),
    Column("action", Text, nullable=False),  # deploy | resume | smoke | delete | upgrade | rollback | extend | stop
    Column("target", Text, nullable=False),  # the deployment (its state file) or endpoint
    _json("detail", "{}"),  # the equivalent command, options
    Column("outcome", Text, CheckConstraint("outcome IN ('started', 'ok', 'failed', 'refused')"), nullable=False),
    Column("summary", Text),
    Column("finished_at", Double),
    sqlite_autoincrement=True,
)
Index("audit_at", audit.c.at.desc())

# services/targets.py
servers = Table(
    "servers", metadata,
    Column("url", Text, primary_key=True),  # normalised by check_server_url
    Column("name", Text, nullable=False),
    Column("added_by", Text, nullable=False),  # the admin's id
    _t("added_at"),
)

# infra/shared_state.py: a team studio's deployment state (the JSON of its state file) and who holds its lock
infra_state = Table(
    "infra_state", metadata,
    Column("name", Text, primary_key=True),  # the state file's name: every replica's copy of it
    Column("body", Text),  # the file's text; NULL: the deployment was deleted (the copies are removed)
    Column("version", Integer, nullable=False),  # raised by every write: a replica's copy is current or not
    Column("updated_at", Double),
    Column("updated_by", Text),  # "<command> (pid P on host H)"
    Column("holder", Text),  # JSON of who holds the lock now (pid, host, command, via, started_at)
)

# Tables of people's records: `user_id` and `shared` (what History.set_shared changes); `user_id` only (who rated).
OWNED = ("jobs", "voices", "load_reports", "speech_takes", "transcripts", "conversations", "evaluations")
STAMPED = ("eval_ratings",)
for _name in (*OWNED, *STAMPED):
    Index(f"{_name}_user", metadata.tables[_name].c.user_id)
