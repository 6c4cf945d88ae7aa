"""The history's transcripts store: kept across a reopen, newest first, owned and shareable like takes, the
recording beside them; a database from before the store (user_version 1) gains its table when opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from protocol.errors import InvalidInput
from services.access import Forbidden, Principal
from services.history import History
from services.history.schema import SCHEMA_VERSION

ALICE = Principal(id="alice@example.com", name="Alice", role="creator", signed_in=True)
BOB = Principal(id="bob@example.com", name="Bob", role="creator", signed_in=True)
VIEWER = Principal(id="vera@example.com", name="Vera", role="viewer", signed_in=True)
FIGURES = {"audio_s": 2.5, "rtf": 0.11, "wer": 0.2, "model": "m", "backend": "offline", "target": "http://x"}


def _keep(h: History, text: str = "please call me back", **over) -> str:  # type: ignore[no-untyped-def]
    args = dict(source="talk.M4A", route="file", model="m", backend="offline", target="http://x",
                segments=[{"start": 0.2, "end": 2.1, "text": text}], figures=FIGURES, audio=b"RIFF-bytes")
    return h.transcripts.record(text, **{**args, **over}).id


def test_transcripts_survive_a_reopen_newest_first_with_their_recording(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    first = _keep(h, "first words", reference="first word", created_at=1000.0)
    second = _keep(h, "from the microphone", source="microphone", route="stream", audio=None, created_at=2000.0)
    h.close()
    again = History(tmp_path, database_url=history_url)
    assert [t.id for t in again.transcripts.list()] == [second, first]
    t = again.transcripts.get(first)
    assert (t.text, t.source, t.route, t.model, t.backend, t.target) == \
        ("first words", "talk.M4A", "file", "m", "offline", "http://x")
    assert t.segments == [{"start": 0.2, "end": 2.1, "text": "first words"}] and t.figures == FIGURES
    assert t.reference == "first word" and t.audio == "recording.m4a" and t.audio_bytes() == b"RIFF-bytes"
    assert (tmp_path / "media" / first / "recording.m4a").read_bytes() == b"RIFF-bytes"
    mic = again.transcripts.get(second)
    assert mic.route == "stream" and mic.audio is None and mic.audio_bytes() is None


def test_empty_text_and_a_bad_route_are_refused(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    with pytest.raises(InvalidInput, match="no words, so it is not kept"):
        _keep(h, "  ")
    with pytest.raises(InvalidInput, match="route is file or stream, not 'upload'"):
        _keep(h, route="upload")
    assert h.transcripts.list() == [] and not any((tmp_path / "media").iterdir())


def test_transcripts_are_their_makers_until_shared(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    alices = h.acting_as(ALICE)
    kept = _keep(alices)
    assert alices.transcripts.get(kept).user_id == ALICE.id
    bobs = h.acting_as(BOB)
    assert bobs.transcripts.list() == []
    with pytest.raises(InvalidInput, match="there is no transcript"):
        bobs.transcripts.get(kept)
    with pytest.raises(InvalidInput, match="there is no transcript"):  # unseen: as if it were not there
        bobs.set_shared("transcript", kept, True)
    alices.set_shared("transcript", kept, True)
    assert [t.id for t in bobs.transcripts.list()] == [kept] and bobs.transcripts.get(kept).shared
    with pytest.raises(Forbidden):
        _keep(h.acting_as(VIEWER))  # a viewer reads what is shared, and keeps nothing
    assert [t.id for t in h.acting_as(VIEWER).transcripts.list()] == [kept]


def test_a_database_from_before_transcripts_gains_the_table_once(tmp_path: Path) -> None:
    h = History(tmp_path)
    job = h.jobs.create("image", "a lighthouse", {}, target="t")
    h.close()
    db = sqlite3.connect(tmp_path / "history.sqlite3")  # as the studio left it before this store: version 1
    db.execute("DROP TABLE transcripts")
    db.execute("PRAGMA user_version = 1")
    db.execute("DROP TABLE alembic_version")  # a file from before Alembic: its PRAGMA user_version said where it was
    db.commit()
    db.close()

    again = History(tmp_path)
    check = sqlite3.connect(tmp_path / "history.sqlite3")
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION  # and later steps after it
    indexes = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'transcripts'")}
    assert {"transcripts", "transcripts_created", "transcripts_user"} <= indexes
    assert again.jobs.get(job.id).prompt == "a lighthouse"  # nothing else touched
    kept = _keep(again)
    again.close()
    assert [t.id for t in History(tmp_path).transcripts.list()] == [kept]  # opened again: not migrated twice
