"""Speech takes in the history: each finished take of the Voice page is kept (text, what spoke, the config sent,
the figures, the WAV in media/<id>/take.wav) for the person who made it, theirs alone until they share it — so
takes survive reloads and restarts, and the team sees the shared ones.

Services first (Alice and Bob creators, Vic a viewer, Ada an admin), then the Voice page with AppTest against the
real offline engine (and test_voice_page's misbehaving server for a cut stream), who is signed in set by
monkeypatching `ui.auth.principal` and `ui.auth.guard`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from protocol.errors import InvalidInput
from services.access import LOCAL, Forbidden, Principal
from services.history import History
from services.speech import wav_bytes
from services.speech.audio import read_wav
from tests.test_voice_page import _button, _page, _speak, _until_finished, fault_url, webrtc_inert  # noqa: F401
from tests.test_workspaces import ADA, ALICE, BOB, VIC
from ui import auth


def _pcm(seconds: float) -> bytes:
    t = np.arange(int(seconds * 24_000)) / 24_000
    return (np.sin(2 * np.pi * 220 * t) * 6000).astype("<i2").tobytes()


def _keep(history: History, text: str, pcm: bytes, **kw) -> str:
    return history.takes.record(text, wav_bytes(pcm, 24_000, 1), target="http://127.0.0.1:1", **kw).id


# -- services ---------------------------------------------------------------------------------------------------
def test_a_take_is_its_makers_until_shared_and_kept_with_its_wav(tmp_path: Path, history_url: str | None) -> None:
    pcm = _pcm(0.5)
    alice = History(tmp_path, actor=ALICE, database_url=history_url)
    take_id = _keep(alice, "Alice says hello.", pcm, voice_label="voice joe", config={"voice": "joe"},
                    figures={"ttfa_ms": 41.5, "rtf": 0.2, "audio_seconds": 0.5, "chunks": 3})
    _keep(History(tmp_path, actor=BOB, database_url=history_url), "Bob's own.", _pcm(0.2))

    again = History(tmp_path, actor=ALICE, database_url=history_url)  # a new History on the folder: a restart
    [take] = again.takes.list()
    assert (take.id, take.text, take.voice_label, take.config, take.user_id, take.shared, take.state) == (
        take_id, "Alice says hello.", "voice joe", {"voice": "joe"}, ALICE.id, False, "done")
    assert take.figures["ttfa_ms"] == 41.5 and take.audio == "take.wav"
    got, rate, channels = read_wav(take.wav())
    assert (got, rate, channels) == (pcm, 24_000, 1)
    folder = tmp_path / "media" / take_id  # the media folder (media_url empty): <data_dir>/media/<take id>/
    assert [p.name for p in folder.iterdir()] == ["take.wav"]  # written by rename: no part file left

    bob = History(tmp_path, actor=BOB, database_url=history_url)
    assert [t.text for t in bob.takes.list()] == ["Bob's own."]
    with pytest.raises(InvalidInput, match=f"there is no take '{take_id}'"):  # refused like a missing one
        bob.takes.get(take_id)
    with pytest.raises(InvalidInput, match="there is no take"):
        bob.set_shared("take", take_id, True)
    alice.set_shared("take", take_id, True)
    assert [t.text for t in bob.takes.list()] == ["Bob's own.", "Alice says hello."]  # newest first
    assert bob.takes.get(take_id).shared
    with pytest.raises(Forbidden, match="only the one who made it"):
        bob.set_shared("take", take_id, False)
    History(tmp_path, actor=ADA, database_url=history_url).set_shared("take", take_id, False)  # an admin may
    assert [t.text for t in bob.takes.list()] == ["Bob's own."]
    assert len(History(tmp_path, actor=LOCAL, database_url=history_url).takes.list()) == 2  # without sign-in: everything


def test_takes_are_listed_newest_first(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, actor=ALICE, database_url=history_url)
    for i, at in enumerate((100.0, 300.0, 200.0)):
        _keep(h, f"take {i}", _pcm(0.1), created_at=at)
    assert [t.text for t in h.takes.list()] == ["take 1", "take 2", "take 0"]
    assert [t.text for t in h.takes.list(limit=1)] == ["take 1"]


def test_a_viewer_cannot_keep_a_take_and_nothing_is_written(tmp_path: Path, history_url: str | None) -> None:
    vic = History(tmp_path, actor=VIC, database_url=history_url)
    with pytest.raises(Forbidden, match="Vic \\(viewer\\) may not generate"):
        _keep(vic, "not mine to make", _pcm(0.2))
    assert History(tmp_path, database_url=history_url).takes.list() == [] and list((tmp_path / "media").iterdir()) == []
    with pytest.raises(Forbidden, match="may not share"):
        vic.set_shared("take", "take-x", True)


def test_a_take_cut_short_keeps_the_audio_that_arrived_and_an_empty_one_is_not_kept(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, actor=ALICE, database_url=history_url)
    arrived = _pcm(0.3)
    take_id = _keep(h, "Cut half way.", arrived, state="failed", error="the stream was cut after 3 chunks")
    stopped = _keep(h, "Stopped.", _pcm(0.1), state="cancelled")
    take = h.takes.get(take_id)
    assert (take.state, take.error, take.ok) == ("failed", "the stream was cut after 3 chunks", False)
    assert read_wav(take.wav())[0] == arrived
    assert h.takes.get(stopped).state == "cancelled"
    with pytest.raises(InvalidInput, match="no audio"):
        _keep(h, "Nothing arrived.", b"")
    with pytest.raises(InvalidInput, match="must be a WAV"):
        h.takes.record("Not audio.", b"RIFF nonsense", target="t")
    assert {t.text for t in h.takes.list()} == {"Cut half way.", "Stopped."}
    assert len(list((tmp_path / "media").iterdir())) == 2


def test_a_history_from_before_takes_gains_the_table_with_owner_columns(tmp_path: Path) -> None:
    History(tmp_path, actor=ALICE).jobs.create("image", "old", {}, target="t")
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    db.execute("DROP TABLE speech_takes")  # as a database made before takes were kept (and before Alembic)
    db.execute("DROP TABLE alembic_version")
    db.commit()
    db.close()
    h = History(tmp_path, actor=ALICE)
    columns = [r[1] for r in sqlite3.connect(tmp_path / "history.sqlite3").execute("PRAGMA table_info(speech_takes)")]
    assert "user_id" in columns and "shared" in columns
    take_id = _keep(h, "after the upgrade", _pcm(0.1))
    assert h.takes.get(take_id).user_id == ALICE.id and [j.prompt for j in h.jobs.list()] == ["old"]


# -- the Voice page ---------------------------------------------------------------------------------------------
def _as(monkeypatch: pytest.MonkeyPatch, who: Principal, tmp_path: Path, url: str) -> AppTest:
    monkeypatch.setattr(auth, "guard", lambda policy: who)
    monkeypatch.setattr(auth, "principal", lambda: who)
    return _page(monkeypatch, tmp_path, url)  # a new AppTest: a new browser session (a reload)


def _texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def _by(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if c.value.startswith("by ")]


def test_a_take_survives_a_reload_and_the_team_sees_it_once_shared(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:  # noqa: F811
    data = tmp_path / "data"
    at = _as(monkeypatch, ALICE, tmp_path, engine_url)
    _speak(at, "Kept across reloads, with its figures.")
    take = _until_finished(at)
    assert take.utterance.ok, take.utterance.error
    [kept] = History(data, actor=ALICE).takes.list()
    assert (kept.id, kept.text, kept.user_id, kept.shared) == (take.record_id, take.utterance.text, ALICE.id, False)
    assert kept.voice_label == "voice joe" and kept.config["voice"] == "joe" and kept.target == engine_url
    assert kept.figures["chunks"] == take.utterance.stats.chunks > 0 and kept.figures["ttfa_ms"] > 0
    pcm, rate, _ = read_wav(kept.wav())
    assert pcm == take.utterance.pcm and rate == 24_000 and len(pcm) > 24_000
    assert at.toggle(key=f"share-take-{kept.id}").value is False  # on the last take, hers

    again = _as(monkeypatch, ALICE, tmp_path, engine_url)  # reloaded: the session's takes are gone, the history's not
    assert again.session_state["voice_history"] == []
    assert "Kept across reloads, with its figures." in _texts(again) and not _by(again)
    assert [d.label for d in again.get("download_button")][:2] == ["Download WAV", "Download Python"]  # its code
    assert again.get("audio")  # playable again

    bob = _as(monkeypatch, BOB, tmp_path, engine_url)
    assert "Kept across reloads, with its figures." not in _texts(bob)

    again = _as(monkeypatch, ALICE, tmp_path, engine_url)
    again.toggle(key=f"share-take-{kept.id}").set_value(True).run()
    assert not again.exception and not again.error
    assert History(data).takes.get(kept.id).shared

    bob = _as(monkeypatch, BOB, tmp_path, engine_url)
    assert "Kept across reloads, with its figures." in _texts(bob)
    assert _by(bob) == ["by `alice@example.com`"] and _shares(bob) == []  # hers: his to hear, not to unshare
    vic = _as(monkeypatch, VIC, tmp_path, engine_url)
    assert "Kept across reloads, with its figures." in _texts(vic) and _by(vic) == ["by `alice@example.com`"]
    assert _button(vic, "Speak").disabled and not vic.toggle  # nor the intelligibility opt-in: no Speak


def _shares(at: AppTest) -> list[str]:
    return [t.key for t in at.toggle if t.key.startswith("share-")]


def test_the_latest_take_is_not_listed_twice_and_earlier_ones_are(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:  # noqa: F811
    at = _as(monkeypatch, ALICE, tmp_path, engine_url)
    _speak(at, "The first one.")
    _until_finished(at)
    _speak(at, "The second one.")
    second = _until_finished(at)
    assert _texts(at).count("The second one.") == 1 and _texts(at).count("The first one.") == 1
    assert len(History(tmp_path / "data").takes.list()) == 2 and second.record_id is not None
    assert sorted(_shares(at)) == sorted(f"share-take-{t.id}" for t in History(tmp_path / "data").takes.list())


def test_a_cut_stream_is_kept_with_the_audio_that_arrived(
        fault_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:  # noqa: F811
    at = _as(monkeypatch, ALICE, tmp_path, fault_url)
    _speak(at, "This one gets cut half way.")
    take = _until_finished(at)
    assert take.utterance.error is not None
    [kept] = History(tmp_path / "data").takes.list()
    assert kept.state == "failed" and "cut" in kept.error
    pcm, rate, _ = read_wav(kept.wav())
    assert len(pcm) == 3 * 4800 and rate == 24_000 and pcm == take.utterance.pcm
    _speak(at, "Hello.", voice="ghost")  # nothing arrives: nothing to keep
    _until_finished(at)
    assert len(History(tmp_path / "data").takes.list()) == 1
    assert any("Invalid voice" in e.value for e in at.error)
    assert not any("could not be kept" in e.value for e in at.error)


def test_a_cloned_take_keeps_what_spoke_and_not_the_recording(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:  # noqa: F811
    from tests.test_voice_page import _clone_with, _reference_wav

    at = _as(monkeypatch, ALICE, tmp_path, engine_url)
    _clone_with(at, _reference_wav())
    at.checkbox(key="voice_consent").check()
    at.text_input(key="voice_consent_id").input("consent-0412")
    _speak(at, "Cloned words, kept.")
    assert _until_finished(at).utterance.ok
    [kept] = History(tmp_path / "data").takes.list()
    assert kept.voice_label == "clone of a recording (used once)" and kept.config["task_type"] == "Base"
    [(row,)] = sqlite3.connect(tmp_path / "data" / "history.sqlite3").execute("SELECT config FROM speech_takes")
    assert "ref_audio" not in kept.config and "data:" not in row and "base64" not in row
