"""The voice studio in a real browser: Debian Chromium (Playwright) and the studio on the offline engine,
both inside a loopback-only network namespace (tests/browser_support.py).

The scenario opens the studio, goes to the voice page, connects the player, speaks a sentence, and
reads the browser's own WebRTC statistics inside the player's iframe: inbound-rtp audio packets and
total audio energy must rise while the speech plays, and the page must show the figures.
"""

from __future__ import annotations

import time

from tests.browser_support import poll

SCREENSHOT = "/tmp/omni-studio-voice-browser.png"
SENTENCE = "Hello from a real browser. This speech travels over WebRTC while it is generated."


def _total(stats: list[dict], key: str) -> float:
    return sum(s[key] for s in stats)


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    page = studio.page
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    page.get_by_role("link", name="Voice").first.click()  # from the home page, as a user would
    page.wait_for_url("**/voice")
    page.get_by_role("button", name="Speak").wait_for(timeout=60_000)  # engine started, voices listed
    timings["voice_page_s"] = time.monotonic() - t0

    player = studio.frame("webrtc")
    player.get_by_role("button", name="Connect player").click()
    t1 = time.monotonic()
    connected = poll(lambda: studio.stats(player), lambda s: s and _total(s, "packetsReceived") > 0, 20)
    timings["connect_s"] = time.monotonic() - t1
    page.get_by_text("Connected: speech plays here").wait_for(timeout=10_000)
    before = studio.stats(player)

    box = page.get_by_role("textbox", name="Text")
    box.fill(SENTENCE)
    box.press("Control+Enter")  # commit the text area before pressing Speak
    page.wait_for_timeout(300)
    page.get_by_role("button", name="Speak").click()
    t2 = time.monotonic()
    # Energy rises while the speech plays (silence padding before it carries none).
    during = poll(lambda: studio.stats(player),
                   lambda s: _total(s, "totalAudioEnergy") > _total(before, "totalAudioEnergy") + 1e-3, 20)
    timings["speak_to_energy_s"] = time.monotonic() - t2
    page.get_by_text("Last utterance").wait_for(timeout=30_000)
    page.get_by_role("button", name="Download WAV").first.wait_for(timeout=10_000)
    page.wait_for_timeout(2500)  # let most of the utterance play
    after = studio.stats(player)
    metrics = {}
    for m in page.locator('[data-testid="stMetric"]').all():
        label = m.locator('[data-testid="stMetricLabel"]').inner_text().strip()
        value = m.locator('[data-testid="stMetricValue"]').inner_text().strip()
        metrics.setdefault(label, value)
    page.screenshot(path=SCREENSHOT, full_page=True)
    return {
        "connected": connected, "before": before, "during": during, "after": after, "metrics": metrics,
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "page_text": page.locator('[data-testid="stMain"]').inner_text()[:3000],
    }


def test_voice_page_plays_speech_in_chromium() -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_voice:scenario", timeout=90)
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
