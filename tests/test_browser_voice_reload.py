"""Reloading the voice page while it speaks a long text ends that speech (a real Streamlit server and Chromium,
in the loopback-only namespace of tests/browser_support.py).

The defect: a reload is a new Streamlit session, so the old run lost its Stop button and streamed on for
minutes, the engine busy and the studio growing. Now a run belongs to its session (ui/speech_runs.py): once
Streamlit no longer has the old session, the run is cancelled and its stream to the engine closes. The
scenario reads the engine's side of that stream from the namespace's /proc/net/tcp.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from bench.page_waits import poll

LONG_TEXT = " ".join(f"Sentence {i} of a long reading that is still going when the page reloads." for i in range(150))
OPEN_STATES = {"01", "08"}  # ESTABLISHED, CLOSE_WAIT


def _open_streams(port: int) -> set[int]:
    """Client ports of the connections the engine (listening on `port`) still holds open."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote, state = line.split()[1:4]
        if int(local.rsplit(":", 1)[1], 16) == port and state in OPEN_STATES:
            out.add(int(remote.rsplit(":", 1)[1], 16))
    return out


def _speak(studio, text: str) -> None:
    page = studio.page
    box = page.get_by_role("textbox", name="Text")
    box.fill(text)
    with studio.rerun("the rerun that takes the text"):
        box.press("Control+Enter")  # commit the text area before pressing Speak
    page.get_by_role("button", name="Speak").click()


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    page = studio.page
    studio.goto("voice")
    page.get_by_role("button", name="Speak").wait_for(timeout=60_000)
    sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
    port = int(re.search(r"http://127\.0\.0\.1:(\d+)", sidebar).group(1))  # the engine the studio started
    before = _open_streams(port)

    _speak(studio, LONG_TEXT)
    page.get_by_text("Now speaking — streaming").wait_for(timeout=30_000)
    streams = poll(lambda: _open_streams(port) - before, bool, 60,  # the run's WebSocket to the engine
                   what="a new connection from the studio to the engine")

    page.reload()
    page.get_by_role("button", name="Speak").wait_for(timeout=30_000)
    t0 = time.monotonic()
    # Without the fix the abandoned run holds its stream for minutes (the length of the speech it makes); the bound
    # is generous for a loaded machine and still far below that.
    poll(lambda: _open_streams(port) & streams, lambda still: not still, 60,
         what="the reloaded-away run's connection to the engine closed")
    ended_after_s = time.monotonic() - t0

    _speak(studio, "The reloaded page speaks at once.")
    page.get_by_text("Last utterance").wait_for(timeout=90_000)
    return {"ended_after_s": round(ended_after_s, 2), "page_text": page.locator('[data-testid="stMain"]').inner_text()[:2000]}


def test_reloading_the_voice_page_ends_the_speech_it_was_making() -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_voice_reload:scenario", timeout=300)
    print({"ended_after_s": r["ended_after_s"]})
    assert "The reloaded page speaks at once." in r["page_text"]
