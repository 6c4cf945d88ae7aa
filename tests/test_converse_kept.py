"""A live call kept as it goes (services/converse/kept.py, services/history/conversations.py), on SQLite and
PostgreSQL: a call held by another replica stays out of the lists while its lease runs, is marked cut with its
turns when the lease lapses (one with no turn is removed), and a holder that was only slow still closes it whole;
a real live call on the offline engine, in a process SIGKILLed after its first turn, leaves that turn kept and cut;
the Converse page says so once, until dismissed, and lists it as cut."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from services.access import Principal
from services.history import History
from services.history.base import replica
from tests.test_converse_page import _open, webrtc_inert  # noqa: F401 — the page's WebRTC made inert for AppTest
from tests.test_history_conversations import SETTINGS, TIMELINE

ROOT = Path(__file__).resolve().parents[1]
LEASE_S = 1.0
ALICE = Principal(id="alice@example.com", name="Alice", role="creator", signed_in=True)


def other_replica(tmp_path: Path, url: str | None, actor: Principal | None = None) -> History:
    """The history as a replica that is not this one sees it (its own process name), with a short lease."""
    h = History(tmp_path, database_url=url, job_lease_s=LEASE_S)
    h.owner = "replica-a:4242:1"
    return h.acting_as(actor) if actor else h


def test_a_call_held_elsewhere_is_cut_with_its_turns_when_its_lease_lapses(tmp_path: Path,
                                                                          history_url: str | None) -> None:
    a = other_replica(tmp_path, history_url)
    held = a.conversations.open_live("pipeline", settings=SETTINGS)
    empty = a.conversations.open_live("pipeline", settings=SETTINGS)
    alices = other_replica(tmp_path, history_url, ALICE).conversations.open_live("native", settings=SETTINGS)
    assert a.conversations.keep_live(held, TIMELINE)
    assert other_replica(tmp_path, history_url, ALICE).conversations.keep_live(alices, {**TIMELINE, "mode": "native"})
    b = History(tmp_path, database_url=history_url)
    assert b.conversations.list() == []  # calls going on are nobody's list
    assert b.conversations.cut_orphans() == []  # the leases run

    time.sleep(LEASE_S + 0.2)
    cut = b.conversations.cut_orphans()
    assert sorted(c.id for c in cut) == sorted([held, alices])  # B acts for the one studio user: sees everyone's
    record = b.conversations.get(held)
    assert record.status == "cut" and record.turns == TIMELINE["turns"] and record.title == "what time do you open"
    assert record.cut["replica"] == "replica-a" and record.cut["turns"] == 1 and record.audio_bytes() is None
    assert {c.id for c in b.conversations.list()} == {held, alices}
    assert empty not in {c.id for c in b.conversations.list()}  # no turn: nothing to keep
    assert b.reader().execute("SELECT COUNT(*) FROM conversations WHERE id = ?", (empty,)).fetchone()[0] == 0
    assert b.conversations.cut_orphans() == []  # cut once
    assert [c.id for c in b.acting_as(ALICE).conversations.recently_cut()] == [alices]  # hers, for her page

    # replica A was only slow (its database away past the lease): it learns the call is no longer held there, and
    # still closes it whole — it has all of it
    assert not a.conversations.keep_live(held, TIMELINE)
    whole = a.conversations.close_live(held, TIMELINE, settings={**SETTINGS, "inputs": ["microphone"]},
                                       audio=b"RIFF-stereo")
    assert whole.status is None and whole.cut is None and whole.audio_bytes() == b"RIFF-stereo"


CHILD = """
import sys, time
from services.converse.kept import KeptCall
from services.history import History
from tests.test_converse_live import PIECE, speak, start, turns_done
from services.listen import load_audio
from services.listen.sample import spoken_sample_at
from services.runtime import BackgroundLoop
data, url, db = sys.argv[1:4]
history = History(data, database_url=db or None, job_lease_s=1.0)
turn = load_audio(spoken_sample_at(url, "What time do you open?")).pcm
loop = BackgroundLoop("child")
live, track, playback = start(url, loop)
kept = KeptCall(history.conversations, live, settings={"mode": "pipeline"}, look_every_s=0.2)
print(kept.id, flush=True)
speak(live, bytes(PIECE * 15) + turn)
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    speak(live, bytes(PIECE * 5))
    row = history.reader().execute("SELECT timeline FROM conversations WHERE id = ?", (kept.id,)).fetchone()
    if '"user_text"' in row[0]:
        print("kept", flush=True)
        break
time.sleep(600)  # the test kills this process here, mid-call
"""


def test_a_live_call_whose_process_is_killed_keeps_its_first_turn(engine_url: str, tmp_path: Path,
                                                                  history_url: str | None) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), engine_url, history_url or ""], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        record_id = child.stdout.readline().strip()
        assert child.stdout.readline().strip() == "kept", "the first turn was never written"
    finally:
        child.kill()  # SIGKILL, mid-call: nothing of the dead process runs again
        child.wait()
    h = History(tmp_path, database_url=history_url)  # the studio again, on this replica: the pid is gone
    [cut] = h.conversations.cut_orphans()
    assert cut.id == record_id and cut.status == "cut" and cut.cut["replica"] == replica()
    assert "open" in cut.turns[0]["user_text"].lower() and cut.turns[0]["reply_text"]


@pytest.mark.usefixtures("webrtc_inert")
def test_the_converse_page_says_a_call_was_cut_until_dismissed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                              engine_url: str) -> None:
    a = other_replica(tmp_path / "data", None)
    held = a.conversations.open_live("pipeline", settings=SETTINGS)
    a.conversations.keep_live(held, TIMELINE)
    time.sleep(LEASE_S + 0.2)
    at: AppTest = _open(monkeypatch, tmp_path / "data", engine_url)  # the browser reconnects, to this replica
    warnings = [w.value.replace("\\", "") for w in at.warning]
    assert any("ended early" in w and "when the studio serving it (replica-a) stopped: the 1 turn said before is "
               "kept; the recording was not" in w for w in warnings), warnings
    assert any("when the studio serving it (replica-a) stopped" in c.value.replace("\\", "") for c in at.caption)
    next(b for b in at.button if b.label == "Dismiss").click().run()
    assert not any("ended early" in w.value for w in at.warning)
    assert any("when the studio serving it (replica-a) stopped" in c.value.replace("\\", "") for c in at.caption)
