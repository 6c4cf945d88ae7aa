"""`python -m services history list` and `copy`: every record of the history listed with its media, and the whole
history copied from the studio's SQLite file to a PostgreSQL server — again after an interruption, or twice,
without losing or doubling a row, nothing deleted at the source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.pg_cluster import Cluster
from services.access import Principal
from services.audit import AuditLog
from services.cli import main
from services.eval.spec import parse_spec
from services.eval.store import EvalStore
from services.history import History
from services.history import transfer
from services.history.transfer import records
from tests.test_eval import spec_dict

ALICE = Principal(id="alice@example.com", name="Alice", role="creator", signed_in=True)
WAV = (b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80>\x00\x00\x00}\x00\x00\x02\x00\x10\x00"
       b"data\x00\x00\x00\x00")


def _studio(data: Path) -> History:
    """A history with a record of most kinds, some Alice's, with media."""
    h = History(data)
    image = h.jobs.create("image", "a harbour", {}, target="t", inputs={"reference.png": b"png"})
    h.jobs.succeed(image.id, {"image-0.png": b"png"})
    h.acting_as(ALICE).jobs.create("video", "waves", {}, target="t")
    h.voices.record("offline engine", "anna", "consent-1", who="me")
    h.transcripts.record("hello there", source="a.wav", route="file", model="m", backend="offline", target="t",
                         audio=b"wav", audio_name="a.wav")
    h.load_reports.save({"id": "lr-1", "modality": "voice", "backend": "omni", "target": "t", "created_at": 5.0})
    EvalStore(h).create(parse_spec(spec_dict()))
    AuditLog(h).record(ALICE, "deploy", target="studio.json")
    return h


def _env(monkeypatch: pytest.MonkeyPatch, data: Path) -> None:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(data))
    monkeypatch.delenv("OMNI_STUDIO_DATABASE_URL", raising=False)


def test_list_names_every_record_with_its_kind_owner_and_media(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    h = _studio(tmp_path)
    _env(monkeypatch, tmp_path)
    assert main(["history", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    kinds = sorted(r["kind"] for r in listed)
    assert kinds == ["evaluation", "image", "load_report", "transcript", "video", "voice"]
    (image,) = [r for r in listed if r["kind"] == "image"]
    assert image["owner"] == "local" and sorted(image["media"]) == [f"{image['id']}/image-0.png",
                                                                    f"{image['id']}/reference.png"]
    assert all((tmp_path / "media" / key).is_file() for r in listed for key in r["media"])
    assert [r["owner"] for r in listed if r["kind"] == "video"] == [ALICE.id]
    assert main(["history", "list", "--kind", "video"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.split("\t")[1:3] == ["video", ALICE.id]
    assert len(records(h)) == len(listed)


def test_list_of_an_empty_history_says_so_on_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _env(monkeypatch, tmp_path)
    assert main(["history", "list", "--kind", "video"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == f"no video records in the history at {tmp_path / 'history.sqlite3'}\n"
    assert main(["history", "list", "--json"]) == 0 and capsys.readouterr().out.strip() == "[]"


def test_copy_moves_every_row_to_postgresql_again_without_doubling_and_after_an_interruption(
        tmp_path: Path, pg_cluster: Cluster, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    source = _studio(tmp_path)
    name = pg_cluster.database("template1")
    url = pg_cluster.url(name)
    _env(monkeypatch, tmp_path)
    try:
        # the first run breaks off after its first batch of jobs
        monkeypatch.setattr(transfer, "BATCH", 1)
        real, jobs_batches = transfer._insert, []

        def breaks(table, dialect):  # type: ignore[no-untyped-def]
            jobs_batches.extend([table.name] if table.name == "jobs" else [])
            if len(jobs_batches) == 2:
                raise OSError("the connection dropped")
            return real(table, dialect)

        monkeypatch.setattr(transfer, "_insert", breaks)
        assert main(["history", "copy", "--to", url]) == 1
        monkeypatch.setattr(transfer, "_insert", real)
        assert "the connection dropped" in capsys.readouterr().err

        assert main(["history", "copy", "--to", url]) == 0  # carries on
        out = capsys.readouterr().out
        assert "jobs: 1 copied, 1 there already" in out and "voices: 1 copied, 0 there already" in out
        assert "nothing deleted at the source" in out
        assert main(["history", "copy", "--to", url]) == 0  # twice: nothing doubles
        assert "rows: 0 copied" in capsys.readouterr().out

        copy = History(tmp_path, database_url=url)
        assert [r.as_json() for r in records(copy)] == [r.as_json() for r in records(source)]
        assert [j.prompt for j in copy.jobs.list()] == [j.prompt for j in source.jobs.list()]
        assert copy.jobs.list()[-1].output_files()[0][1] == b"png"  # the media, where they were
        assert source.jobs.list() and source.voices.list()  # nothing deleted at the source
        # the serial ids go on after the copied ones
        assert copy.voices.record("offline engine", "bea", "consent-2", who="me").id == 2
        assert AuditLog(copy).record(ALICE, "delete", target="studio.json") == 2
    finally:
        pg_cluster.drop(name)
