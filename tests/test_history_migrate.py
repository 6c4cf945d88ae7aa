"""The history's migrations (Alembic, services/history/migrate.py) on SQLite and PostgreSQL: a new database is
made at the newest revision when the studio opens it, `python -m services history migrate` does the same and
says what it did, and a migration that is interrupted — the process killed half-way — is completed by the next
start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect

from services.cli import main
from services.history import History, HistoryError
from services.history import tables
from services.history.migrate import head, revision

ROOT = Path(__file__).resolve().parent.parent


def _cli(monkeypatch: pytest.MonkeyPatch, data: Path, url: str | None, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(data))
    monkeypatch.setenv("OMNI_STUDIO_DATABASE_URL", url or "")
    assert main(["history", "migrate"]) == 0
    return capsys.readouterr().out


def test_migrate_makes_a_new_database_and_then_has_nothing_to_do(
        tmp_path: Path, new_history_url: str | None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli(monkeypatch, tmp_path, new_history_url, capsys)
    assert f"migrated from no revision to {head()} (ran 0001, 0002, 0003, 0004)" in out
    assert "secret" not in out and ("history.sqlite3" in out if new_history_url is None else "postgresql" in out)
    assert _cli(monkeypatch, tmp_path, new_history_url, capsys).endswith(f"at revision {head()}, nothing to do\n")
    h = History(tmp_path, database_url=new_history_url)
    assert revision(h) == head() and h.migrated == []
    assert h.jobs.create("image", "after migrate", {}, target="t").prompt == "after migrate"


def test_a_migration_that_fails_leaves_nothing_and_the_next_start_completes_it(
        tmp_path: Path, new_history_url: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    made = tables.metadata.create_all

    def then_fail(bind, **kwargs):  # every table made, then the migration breaks off
        made(bind, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tables.metadata, "create_all", then_fail)
    with pytest.raises(HistoryError):
        History(tmp_path, database_url=new_history_url)
    monkeypatch.undo()
    h = History(tmp_path, database_url=new_history_url, migrate=False)
    assert revision(h) is None and not inspect(h.engine).has_table("jobs")  # rolled back whole: nothing made
    again = History(tmp_path, database_url=new_history_url)
    assert again.migrated == ["0001", "0002", "0003", "0004"] and again.jobs.list() == []


_KILLED_HALF_WAY = """
import sys, time
from services.history import History, tables
made = tables.metadata.create_all
def then_wait(bind, **kwargs):
    made(bind, **kwargs)
    print("tables made", flush=True)
    time.sleep(60)
tables.metadata.create_all = then_wait
History(sys.argv[1], database_url=sys.argv[2] or None)
"""


def test_a_migration_killed_half_way_is_completed_by_the_next_start(tmp_path: Path, new_history_url: str | None) -> None:
    child = subprocess.Popen([sys.executable, "-c", _KILLED_HALF_WAY, str(tmp_path), new_history_url or ""],
                             cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout.readline().strip() == "tables made"
    finally:
        child.kill()
        child.wait()
    h = History(tmp_path, database_url=new_history_url)
    assert h.migrated == ["0001", "0002", "0003", "0004"] and revision(h) == head()
    job = h.jobs.create("video", "after the kill", {}, target="t")
    assert [j.id for j in History(tmp_path, database_url=new_history_url).jobs.list()] == [job.id]


def test_a_database_a_newer_studio_migrated_is_refused(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    with h.transaction() as db:
        db.execute("UPDATE alembic_version SET version_num = 'f00d'")
    with pytest.raises(HistoryError, match="is at revision f00d, which this version of the studio does not know"):
        History(tmp_path, database_url=history_url)


def test_a_migrated_database_matches_the_tables_module(tmp_path: Path, new_history_url: str | None) -> None:
    """What the revisions make is what services/history/tables.py says (Alembic's own comparison: tables,
    columns, types, indexes), so a change to tables.py without its revision fails here."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    h = History(tmp_path, database_url=new_history_url)
    with h.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), tables.metadata)
    assert diff == []


def test_the_newest_revision_is_alembics_head() -> None:
    """migrate.HEAD spares a current database the import of Alembic; it must name the newest revision."""
    from services.history import migrate

    assert migrate.HEAD == migrate.script().get_current_head()


@pytest.mark.parametrize("script", ["before workspaces", "jobs that checked the kinds"])
def test_a_converted_pre_alembic_file_matches_the_tables_module(tmp_path: Path, script: str) -> None:
    """A SQLite file from before Alembic, converted in place, has every table, column and index of tables.py.
    What may differ is what SQLite ignores: its old REAL columns (Double: the same REAL affinity) and the NULL its
    old TEXT/INTEGER primary keys allowed by a quirk of SQLite's."""
    import sqlite3

    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import REAL

    from tests.test_history import CHECKED_JOBS
    from tests.test_workspaces import OLD_SCHEMA

    db = sqlite3.connect(tmp_path / "history.sqlite3")
    db.executescript(OLD_SCHEMA if script == "before workspaces" else CHECKED_JOBS)
    db.commit()
    db.close()
    h = History(tmp_path)
    with h.engine.connect() as conn:
        diff = [d[0] for d in compare_metadata(MigrationContext.configure(conn), tables.metadata)]
    ignorable = [d for d in diff if d[0] == "modify_type" and isinstance(d[5], REAL)
                 or d[0] == "modify_nullable" and d[3] == "id"]
    assert [d for d in diff if d not in ignorable] == []


def test_a_database_at_the_first_revision_gains_the_job_leases(tmp_path: Path, history_url: str | None) -> None:
    """A database revision 0001 made before leases existed (no jobs.lease_until): 0002 adds the column and keeps
    the jobs."""
    h = History(tmp_path, database_url=history_url)
    job = h.jobs.create("video", "before leases", {}, target="t")
    with h.transaction() as db:  # as 0001 left it before this version
        db.execute("ALTER TABLE jobs DROP COLUMN lease_until")
        db.execute("UPDATE alembic_version SET version_num = '0001'")
    again = History(tmp_path, database_url=history_url)
    assert again.migrated == ["0002", "0003", "0004"] and revision(again) == head()
    assert "lease_until" in {c["name"] for c in inspect(again.engine).get_columns("jobs")}
    assert again.jobs.get(job.id).prompt == "before leases"


def test_a_database_at_the_second_revision_gains_the_shared_deployment_state(tmp_path: Path,
                                                                             history_url: str | None) -> None:
    """A database revision 0002 made before the team studio kept its deployment state there: 0003 makes the
    table, and the rest is kept."""
    h = History(tmp_path, database_url=history_url)
    job = h.jobs.create("video", "before shared state", {}, target="t")
    with h.transaction() as db:  # as 0002 left it before this version
        db.execute("DROP TABLE infra_state")
        db.execute("UPDATE alembic_version SET version_num = '0002'")
    again = History(tmp_path, database_url=history_url)
    assert again.migrated == ["0003", "0004"] and revision(again) == head()
    assert "infra_state" in inspect(again.engine).get_table_names()
    assert again.jobs.get(job.id).prompt == "before shared state"


def test_a_database_at_the_third_revision_gains_evaluation_runs_and_live_conversations(tmp_path: Path, history_url: str | None) -> None:
    """A database revision 0003 made before evaluation runs were claimed on their row and live conversations kept
    as they went: 0004 adds the columns, and the evaluations are kept."""
    h = History(tmp_path, database_url=history_url)
    with h.transaction() as db:  # as 0003 left it before this version
        db.execute("INSERT INTO evaluations (id, name, modality, spec, created_at, user_id) VALUES "
                   "('ev-old', 'before runs', 'voice', '{}', 1.0, 'local')")
        for column in ("run_owner", "run_lease_until", "run_stop", "run_note"):
            db.execute(f"ALTER TABLE evaluations DROP COLUMN {column}")
        for column in ("status", "owner", "lease_until"):
            db.execute(f"ALTER TABLE conversations DROP COLUMN {column}")
        db.execute("UPDATE alembic_version SET version_num = '0003'")
    again = History(tmp_path, database_url=history_url)
    assert again.migrated == ["0004"] and revision(again) == head()
    assert {"run_owner", "run_lease_until", "run_stop", "run_note"} <= {
        c["name"] for c in inspect(again.engine).get_columns("evaluations")}
    assert {"status", "owner", "lease_until"} <= {c["name"] for c in inspect(again.engine).get_columns("conversations")}
    assert again.reader().execute("SELECT name FROM evaluations WHERE id = 'ev-old'").fetchone()[0] == "before runs"
