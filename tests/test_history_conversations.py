"""The history's conversations store: kept across a reopen, newest first, owned and shareable like takes, the stereo
WAV beside them; a database from before the store (user_version 2) gains its table when opened."""

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
TURN = {"user_text": "what time do you open", "reply_text": "We open at nine,", "user_speech_end_s": 1.12,
        "transcript_final_s": 2.19, "reply_first_token_s": 2.2, "first_audio_s": 2.4, "voice_to_voice_ms": 1280.0,
        "interrupted": True, "error": None, "barge_in_stop_ms": 108.6, "agent_stop_s": 2.87}
TIMELINE = {"mode": "pipeline", "turns": [TURN], "voice_to_voice_ms": {"n": 1, "p50": 1280.0, "p95": 1280.0}}
SETTINGS = {"mode": "pipeline", "listen": "http://x", "reply": "a scripted reply (shop.txt), not a model",
            "script": "time open => We open at nine, every day.", "speak": "http://x", "voice": None,
            "silence_ms": 500, "barge_in_at": 0.3}


def _keep(h: History, **over) -> str:  # type: ignore[no-untyped-def]
    args = dict(settings=SETTINGS, audio=b"RIFF-stereo")
    return h.conversations.record(over.pop("timeline", TIMELINE), **{**args, **over}).id


def test_conversations_survive_a_reopen_newest_first_with_their_wav(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    first = _keep(h, created_at=1000.0)
    second = _keep(h, audio=None, created_at=2000.0)
    h.close()
    again = History(tmp_path, database_url=history_url)
    assert [c.id for c in again.conversations.list()] == [second, first]
    c = again.conversations.get(first)
    assert (c.mode, c.title, c.timeline, c.settings) == ("pipeline", "what time do you open", TIMELINE, SETTINGS)
    assert c.turns[0]["interrupted"] is True and c.turns[0]["barge_in_stop_ms"] == 108.6
    assert c.audio == "conversation.wav" and c.audio_bytes() == b"RIFF-stereo"
    assert (tmp_path / "media" / first / "conversation.wav").read_bytes() == b"RIFF-stereo"
    assert again.conversations.get(second).audio_bytes() is None


def test_no_turns_and_a_bad_mode_are_refused(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    with pytest.raises(InvalidInput, match="no turns, so it is not kept"):
        _keep(h, timeline={**TIMELINE, "turns": []})
    with pytest.raises(InvalidInput, match="pipeline or native, not 'duplex'"):
        _keep(h, timeline={**TIMELINE, "mode": "duplex"})
    assert h.conversations.list() == [] and not any((tmp_path / "media").iterdir())


def test_conversations_are_their_makers_until_shared(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    alices = h.acting_as(ALICE)
    kept = _keep(alices)
    assert alices.conversations.get(kept).user_id == ALICE.id
    bobs = h.acting_as(BOB)
    assert bobs.conversations.list() == []
    with pytest.raises(InvalidInput, match="there is no conversation"):
        bobs.conversations.get(kept)
    with pytest.raises(InvalidInput, match="there is no conversation"):
        bobs.set_shared("conversation", kept, True)
    alices.set_shared("conversation", kept, True)
    assert [c.id for c in bobs.conversations.list()] == [kept] and bobs.conversations.get(kept).shared
    with pytest.raises(Forbidden):
        _keep(h.acting_as(VIEWER))
    assert [c.id for c in h.acting_as(VIEWER).conversations.list()] == [kept]


def test_a_database_from_before_conversations_gains_the_table_once(tmp_path: Path) -> None:
    h = History(tmp_path)
    transcript = h.transcripts.record("hello", source="a.wav", route="file", model="m", backend="offline",
                                      target="t").id
    h.close()
    db = sqlite3.connect(tmp_path / "history.sqlite3")  # as the studio left it before this store: version 2
    db.execute("DROP TABLE conversations")
    db.execute("DROP TABLE alembic_version")  # a file from before Alembic: its PRAGMA user_version said where it was
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()

    again = History(tmp_path)
    check = sqlite3.connect(tmp_path / "history.sqlite3")
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3
    names = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'conversations'")}
    assert {"conversations", "conversations_created", "conversations_user"} <= names
    assert again.transcripts.get(transcript).text == "hello"  # nothing else touched
    kept = _keep(again)
    again.close()
    assert [c.id for c in History(tmp_path).conversations.list()] == [kept]
