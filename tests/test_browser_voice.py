"""The voice studio in a real browser: Debian Chromium (Playwright) and the studio on the offline engine,
both inside a loopback-only network namespace (tests/browser_support.py).

The scenario opens the studio, goes to the voice page, connects the player, speaks a sentence, and
reads the browser's own WebRTC statistics inside the player's iframe: inbound-rtp audio packets and
total audio energy must rise while the speech plays, and the page must show the figures.

A second scenario presses Speak on a fresh visit without connecting first (Speak connects the player), and
checks that Stop stays live after generation ended while the speech still plays, that it greys out once played,
and that the page shows the first audio heard in the browser beside the studio's.
"""

from __future__ import annotations

import time

from bench.page_waits import metrics, poll

SCREENSHOT = "/tmp/omni-studio-voice-browser.png"
SENTENCE = "Hello from a real browser. This speech travels over WebRTC while it is generated."


LONG = ("Speak connects the player by itself. The engine makes this paragraph much faster than it is spoken, "
        "so the studio has finished generating while the browser still plays it. Stop must stay live until "
        "the last word has been heard, and then it greys out. Three sentences are enough for that.")


SPEECH_ENERGY = 1e-3  # totalAudioEnergy a spoken sentence adds at the least (silence adds ~0)


def _total(stats: list[dict], key: str) -> float:
    return sum(s[key] for s in stats)


def _energy(stats: list[dict]) -> float:
    return _total(stats, "totalAudioEnergy")


def _played_most(before: list[dict], after: list[dict]) -> bool:
    """What the test asserts of a played utterance: at least 1 s of 20 ms packets and the energy of speech (more
    than tenfold what came before it, the silence)."""
    energy_before = _total(before, "totalAudioEnergy")
    gain = _total(after, "totalAudioEnergy") - energy_before
    return (_total(after, "packetsReceived") > _total(before, "packetsReceived") + 50
            and gain > 1e-3 and gain > 10 * energy_before)


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    from playwright.sync_api import expect

    page = studio.page
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    studio.open_page("Voice", "voice")  # from the home page, as a user would
    expect(page.get_by_role("button", name="Speak")).to_be_visible(timeout=90_000)  # engine started, voices listed
    timings["voice_page_s"] = time.monotonic() - t0

    player = studio.frame("webrtc")
    player.get_by_role("button", name="Connect player").click()
    t1 = time.monotonic()
    connected = poll(lambda: studio.stats(player), lambda s: s and _total(s, "packetsReceived") > 0, 60,
                     what="the player's first packets after Connect")
    timings["connect_s"] = time.monotonic() - t1
    expect(page.get_by_text("Connected: speech plays here")).to_be_visible()
    before = studio.stats(player)

    box = page.get_by_role("textbox", name="Text")
    box.fill(SENTENCE)
    with studio.rerun("the rerun that takes the text"):
        box.press("Control+Enter")  # commit the text area before pressing Speak
    page.get_by_role("button", name="Speak").click()
    t2 = time.monotonic()
    # Energy rises while the speech plays (silence padding before it carries none).
    during = poll(lambda: studio.stats(player),
                  lambda s: _total(s, "totalAudioEnergy") > _total(before, "totalAudioEnergy") + 1e-3, 90,
                  what="audio energy received in the player after Speak")
    timings["speak_to_energy_s"] = time.monotonic() - t2  # for information: load decides it
    expect(page.get_by_text("Last utterance")).to_be_visible(timeout=90_000)
    expect(page.get_by_role("button", name="Download WAV").first).to_be_visible()
    # Most of the utterance has played: read the player's counters until they show it (no sleep).
    after = poll(lambda: studio.stats(player), lambda s: _played_most(before, s), 90,
                 what="most of the utterance played: 50 more packets and the energy gain of speech after silence")
    figures = metrics(page, "Chunks", "Audio bytes", "First audio", "RTF")
    page.screenshot(path=SCREENSHOT, full_page=True)
    return {
        "connected": connected, "before": before, "during": during, "after": after, "metrics": figures,
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "page_text": page.locator('[data-testid="stMain"]').inner_text()[:3000],
    }


def test_voice_page_plays_speech_in_chromium() -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_voice:scenario", timeout=300)
    print({k: r[k] for k in ("timings", "metrics")})
    before, after = r["before"], r["after"]
    assert all(s["connectionState"] == "connected" for s in after)
    assert _total(after, "packetsReceived") > _total(before, "packetsReceived") + 50  # ≥ 1 s of 20 ms packets
    assert _total(after, "totalSamplesReceived") > _total(before, "totalSamplesReceived")
    energy_before = _total(before, "totalAudioEnergy")
    energy_gain = _total(after, "totalAudioEnergy") - energy_before
    assert energy_gain > 1e-3 and energy_gain > 10 * energy_before  # speech, after silence
    m = r["metrics"]
    assert int(m["Chunks"]) > 0
    assert int(m["Audio bytes"].replace(",", "")) > 24_000
    assert m["First audio"].endswith(" ms")
    assert float(m["RTF"]) > 0
    assert "Last utterance" in r["page_text"] and "Hello from a real browser." in r["page_text"]


def scenario_late_run_ends(studio) -> dict:
    """The voice scenario on a studio whose server reports each run's end late (tests/late_run_ends.py), as a
    loaded machine can: the connected player plays what Speak makes, plays out, and the same connection plays
    the next Speak too (it once dropped when a rerun read a stale run count, ui/webrtc_runs.py)."""
    from playwright.sync_api import expect

    first = scenario(studio)
    page, player = studio.page, studio.frame("webrtc")
    stop = page.get_by_role("button", name="Stop")
    poll(stop.is_disabled, bool, 120, what="Stop greyed out once the speech has played")  # the drain's rerun
    studio.settled("the run after the speech played out")
    before = studio.stats(player)
    with studio.rerun("the second Speak"):
        page.get_by_role("button", name="Speak").click()
    after = poll(lambda: studio.stats(player), lambda s: _energy(s) > _energy(before) + SPEECH_ENERGY, 90,
                 what="the second utterance's energy on the same connection")
    expect(page.get_by_text("Connected: speech plays here")).to_be_visible()
    return {**first, "again_before": before, "again_after": after,
            "peer_connections": player.evaluate("() => (window.__pcs || []).length")}


scenario_late_run_ends.studio_module = "tests.late_run_ends"


def test_the_player_stays_connected_when_the_server_reports_runs_late() -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_voice:scenario_late_run_ends", timeout=300)
    assert _played_most(r["before"], r["after"])
    assert _energy(r["again_after"]) > _energy(r["again_before"]) + SPEECH_ENERGY
    assert r["peer_connections"] == 1, "the player reconnected (or was dropped) between two utterances"
    assert all(s["connectionState"] == "connected" for s in r["again_after"])


def scenario_speak_first(studio) -> dict:
    """Runs inside the namespace: Speak on a fresh visit, no Connect click."""
    from playwright.sync_api import expect

    page = studio.page
    studio.goto("voice")
    expect(page.get_by_role("button", name="Speak")).to_be_visible(timeout=90_000)
    player = studio.frame("webrtc")
    before = studio.stats(player)  # no peer connection yet: nothing connected the player
    box = page.get_by_role("textbox", name="Text")
    box.fill(LONG)
    with studio.rerun("the rerun that takes the text"):
        box.press("Control+Enter")  # commit the text area before pressing Speak
    page.get_by_role("button", name="Speak").click()
    during = poll(lambda: studio.stats(player), lambda s: s and _total(s, "totalAudioEnergy") > 1e-3, 120,
                  what="audio energy in the player that Speak connected")
    expect(page.get_by_text("Last utterance")).to_be_visible(timeout=120_000)  # generation ended
    stop = page.get_by_role("button", name="Stop")
    at_end = {"stop_enabled": stop.is_enabled(), "stats": studio.stats(player)}
    still = poll(lambda: studio.stats(player),  # the speech goes on playing after generation ended
                 lambda s: _total(s, "totalAudioEnergy") > _total(at_end["stats"], "totalAudioEnergy") + 1e-3, 60,
                 what="more audio energy after generation ended")
    stop_while_playing = stop.is_enabled()
    figures = poll(lambda: metrics(page, "First audio", "First audio heard"),
                   lambda m: m["First audio heard"].endswith(" ms"), 120, what="the 'First audio heard' figure in ms")
    poll(stop.is_disabled, bool, 120, what="Stop greyed out once the speech has played")  # by itself
    return {"before": before, "during": during, "at_end": at_end, "still": still,
            "stop_while_playing": stop_while_playing, "metrics": figures, "after": studio.stats(player)}


def test_speak_without_connecting_plays_and_stop_stays_live_until_the_speech_has_played() -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_voice:scenario_speak_first", timeout=300)
    print(r["metrics"])
    assert r["before"] == []  # the player was not connected before Speak
    assert _total(r["during"], "packetsReceived") > 0 and _total(r["during"], "totalAudioEnergy") > 1e-3
    assert r["at_end"]["stop_enabled"] and r["stop_while_playing"]  # generation over, speech still playing
    assert _total(r["still"], "totalAudioEnergy") > _total(r["at_end"]["stats"], "totalAudioEnergy")
    m = r["metrics"]
    studio_ms, heard_ms = float(m["First audio"].removesuffix(" ms")), float(m["First audio heard"].removesuffix(" ms"))
    assert heard_ms > studio_ms  # heard: click to sound played, which holds the studio's text-to-audio time
