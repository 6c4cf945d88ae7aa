"""A speech run ends with the browser session that started it (services.speech.client.SpeechRuns), against
the real offline engine.

The defect: reloading the voice page while it spoke a long text left the run streaming to nobody — the new
page had no Stop, the engine stayed busy for minutes and the studio's memory grew with the recording. Here
a session is "gone" when the test says so (the studio asks Streamlit, see ui/speech_runs.py); the engine's
side of the run's WebSocket is read from /proc/net/tcp, so "the engine stopped" is seen where it happens.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from services.access import LOCAL, Forbidden, Principal
from services.runtime import BackgroundLoop
from services.speech import omni_client, speech_config
from services.speech.client import SpeechRuns

LONG_TEXT = " ".join(f"Sentence {i} of a very long reading that nobody is left to hear." for i in range(400))
MakeRuns = Callable[..., SpeechRuns]
OPEN_STATES = {"01", "08"}  # ESTABLISHED, CLOSE_WAIT: the engine still holds its side of the stream


@pytest.fixture
def make_runs() -> Iterator[MakeRuns]:
    """SpeechRuns on a loop of its own; closed (runs cancelled, sweeping stopped) after the test."""
    loop = BackgroundLoop("test-speech-runs")
    made: list[SpeechRuns] = []

    def make(is_alive: Callable[[str], bool], **timing: float) -> SpeechRuns:
        made.append(SpeechRuns(loop, is_alive, **timing))
        return made[-1]

    yield make
    for runs in made:
        for run in runs.close():
            run.result(timeout=10)
    loop.run(asyncio.sleep(0))  # the cancelled sweepers end
    loop.stop()


def _engine_side(port: int) -> dict[int, str]:
    """The engine's TCP connections on loopback, by client port: their state (as /proc/net/tcp writes it)."""
    out = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state = fields[1], fields[2], fields[3]
        if int(local.rsplit(":", 1)[1], 16) == port and state != "0A":  # not the listening socket
            out[int(remote.rsplit(":", 1)[1], 16)] = state
    return out


def _until(what: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _streaming_from(port: int, before: set[int], run) -> int:
    """Wait until `run` streams; the client port of its WebSocket (the engine's one new connection)."""
    _until(lambda: run.stats().chunks >= 3)
    new = {p for p, state in _engine_side(port).items() if state == "01"} - before
    assert len(new) == 1, f"expected one new stream to the engine, found {new}"
    return new.pop()


def test_a_run_whose_session_is_gone_is_cancelled_and_the_engine_stops(engine_url: str, make_runs: MakeRuns) -> None:
    alive = {"A", "B"}
    runs = make_runs(alive.__contains__, sweep_s=0.1, grace_s=0.0)
    client = omni_client(engine_url)
    port = urlparse(engine_url).port
    before = set(_engine_side(port))

    a = runs.start("A", client, speech_config(), LONG_TEXT, actor=LOCAL)
    a_port = _streaming_from(port, before, a)
    assert runs.get("A") is a
    alive.discard("A")  # the tab closed or reloaded: Streamlit no longer has session A

    u = a.result(timeout=30)  # without the registry, this run would stream for minutes
    assert u.stats.state == "cancelled" and u.error is None
    assert u.pcm and u.stats.chunks >= 3  # what arrived is kept
    assert runs.get("A") is None
    _until(lambda: _engine_side(port).get(a_port) not in OPEN_STATES)  # the engine ended its side: no more synthesis

    b = runs.start("B", client, speech_config(), "The engine is free for the next one.", actor=LOCAL)
    ub = b.result(timeout=30)
    assert ub.ok and ub.stats.state == "done" and ub.stats.chunks > 0  # a live session's run is left alone
    _until(lambda: len(runs) == 0)  # finished runs are forgotten
    assert not {p for p, state in _engine_side(port).items() if state in OPEN_STATES} - before


def test_a_session_back_within_the_grace_keeps_its_run(engine_url: str, make_runs: MakeRuns) -> None:
    alive = {"A"}
    runs = make_runs(alive.__contains__, sweep_s=3600, grace_s=3600)  # swept by hand below
    a = runs.start("A", omni_client(engine_url), speech_config(), "A connection that drops for a moment.", actor=LOCAL)
    alive.discard("A")
    assert runs.sweep() == []  # gone, but not for the grace yet
    alive.add("A")  # reconnected
    assert runs.sweep() == []
    assert a.result(timeout=30).ok
    runs.grace_s = 0.0
    b = runs.start("A", omni_client(engine_url), speech_config(), LONG_TEXT, actor=LOCAL)
    alive.discard("A")
    assert runs.sweep() == ["A"]
    assert b.result(timeout=30).stats.state == "cancelled"


def test_a_new_run_replaces_the_sessions_running_one(engine_url: str, make_runs: MakeRuns) -> None:
    runs = make_runs(lambda _: True, sweep_s=0.1)
    client = omni_client(engine_url)
    first = runs.start("A", client, speech_config(), LONG_TEXT, actor=LOCAL)
    _until(lambda: first.stats().chunks >= 1)
    second = runs.start("A", client, speech_config(), "Only this one is heard.", actor=LOCAL)
    assert first.result(timeout=30).stats.state == "cancelled"
    assert second.result(timeout=30).ok and runs.get("A") in (second, None)


def test_a_viewer_cannot_start_speech_and_nothing_reaches_the_engine(engine_url: str, make_runs: MakeRuns) -> None:
    runs = make_runs(lambda _: True)
    port = urlparse(engine_url).port
    before = set(_engine_side(port))
    viewer = Principal(id="vic@example.com", name="Vic", role="viewer", signed_in=True)
    with pytest.raises(Forbidden, match="Vic \\(viewer\\) may not generate"):
        runs.start("V", omni_client(engine_url), speech_config(), "Not for viewers.", actor=viewer)
    assert runs.get("V") is None and len(runs) == 0
    assert not set(_engine_side(port)) - before  # no connection was opened
