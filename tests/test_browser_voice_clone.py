"""Cloning a voice in a real browser: Debian Chromium (Playwright) with a fake microphone, the studio on the
offline engine, both inside a loopback-only network namespace (tests/browser_support.py).

Chromium's fake capture device plays a WAV this test writes (about 6 s of a voiced, harmonic tone shaped like
syllables, so the reference passes the silence and clipping checks), and the microphone permission is granted.
The scenario chooses *Clone a voice*, records with `st.audio_input`, ticks the consent and enters its id, speaks
once with the recording inline and hears it (the player iframe's inbound-rtp audio statistics, as in
tests/test_browser_voice.py), then saves it as a named voice and sees it listed under *A saved voice*.
"""

from __future__ import annotations

import time
import wave
from pathlib import Path

import numpy as np

from bench.page_waits import metrics, poll

SCREENSHOT = "/tmp/omni-studio-voice-clone-browser.png"
SCREENSHOT_NEW = "/tmp/omni-studio-voice-clone-recorded.png"  # the new recording with its consent, before Speak
SENTENCE = "This is a cloned voice, recorded a moment ago in this browser."
CONSENT_ID = "consent-browser-0412"
VOICE_NAME = "browser-anna"
RECORD_S = 6.0
MIC_RATE = 48_000


def voiced_tone(seconds: float = RECORD_S, rate: int = MIC_RATE) -> np.ndarray:
    """A 150 Hz voiced tone with its harmonics, amplitude-modulated like syllables (about four a second)."""
    t = np.arange(int(seconds * rate)) / rate
    f0 = 150 + 12 * np.sin(2 * np.pi * 0.5 * t)  # a little intonation
    phase = 2 * np.pi * np.cumsum(f0) / rate
    signal = sum(np.sin(k * phase) / k for k in range(1, 16))
    syllables = 0.15 + 0.85 * np.clip(np.sin(2 * np.pi * 2.0 * t), 0, None) ** 0.7
    signal = signal * syllables
    return 0.5 * signal / np.max(np.abs(signal))  # peaks at -6 dBFS: neither silent nor clipped


def _fake_microphone(tmp: Path) -> list[str]:
    """Chromium's flags for a fake microphone playing the tone (written into the scenario's temp dir)."""
    path = tmp / "microphone.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(MIC_RATE)
        w.writeframes((voiced_tone() * 32767).astype("<i2").tobytes())
    return ["--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={path}"]


def _total(stats: list[dict], key: str) -> float:
    return sum(s[key] for s in stats)


def _commit(box) -> None:
    box.press("Enter")  # a text input takes its value on Enter (or blur)


def _seconds(time_code: str) -> float:
    """Seconds from the recorder's time code: "00:06" or "01:00:06"; -1 when it shows none."""
    try:
        return float(sum(int(part) * 60 ** i for i, part in enumerate(reversed(time_code.strip().split(":")))))
    except ValueError:
        return -1.0


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    from playwright.sync_api import expect

    page = studio.page
    out: dict = {}
    page.set_viewport_size({"width": 1400, "height": 2000})  # the whole page in each picture
    studio.goto("voice")
    expect(page.get_by_role("button", name="Speak", exact=True)).to_be_visible(timeout=90_000)  # engine started

    player = studio.frame("webrtc")
    player.get_by_role("button", name="Connect player").click()
    poll(lambda: studio.stats(player), lambda s: s and _total(s, "packetsReceived") > 0, 60,
         what="the player's first packets after Connect")

    page.get_by_text("Clone a voice", exact=True).click()
    recorder = page.locator('[data-testid="stAudioInput"]')
    expect(recorder).to_be_visible()
    recorder.get_by_role("button", name="Record").click()
    # The recorder's own clock (its time code, mm:ss) says when RECORD_S seconds are recorded: no sleep.
    clock = recorder.get_by_test_id("stAudioInputWaveformTimeCode")
    out["recorded_clock"] = poll(lambda: clock.inner_text(), lambda t: _seconds(t) >= RECORD_S, 90,
                                 what=f"the recorder's time code to reach {RECORD_S:.0f} s")
    recorder.get_by_role("button", name="Stop recording").click()
    ready = page.get_by_text("Reference ready:")
    expect(ready).to_be_visible()
    out["reference"] = ready.inner_text()

    # Speak before consent: refused, with the message naming it.
    page.get_by_role("button", name="Speak", exact=True).click()
    expect(page.locator('[data-testid="stAlertContentError"]').filter(has_text="needs the speaker's consent").first
           ).to_be_visible()

    page.get_by_test_id("stCheckbox").filter(has_text="The speaker agreed to have their voice cloned").click()
    consent = page.get_by_label("Consent id")
    consent.fill(CONSENT_ID)
    _commit(consent)
    expect(page.get_by_text("⚠️ Cloning a voice needs")).to_have_count(0)  # the caption goes

    page.screenshot(path=SCREENSHOT_NEW, full_page=True)
    before = studio.stats(player)
    box = page.get_by_role("textbox", name="Text")
    box.fill(SENTENCE)
    with studio.rerun("the rerun that takes the text"):
        box.press("Control+Enter")
    page.get_by_role("button", name="Speak", exact=True).click()
    t0 = time.monotonic()
    poll(lambda: studio.stats(player),
         lambda s: _total(s, "totalAudioEnergy") > _total(before, "totalAudioEnergy") + 1e-3, 90,
         what="audio energy of the clone in the player")
    out["speak_to_energy_s"] = round(time.monotonic() - t0, 2)  # for information: load decides it
    expect(page.get_by_text("Spoken by: clone of a recording (used once)")).to_be_visible(timeout=90_000)
    # Most of the utterance has played: the player's counters show at least 1 s of packets since Speak (no sleep).
    out["before"], out["after"] = before, poll(
        lambda: studio.stats(player), lambda s: _total(s, "packetsReceived") > _total(before, "packetsReceived") + 50,
        60, what="50 more packets (1 s of audio) in the player since Speak")
    # The utterance's panel redraws while the take plays out: read its figures until they are all drawn.
    out["metrics"] = metrics(page, "First audio", "RTF")

    name = page.get_by_label("Name for the saved voice")
    name.fill(VOICE_NAME)
    _commit(name)
    page.get_by_role("button", name="Save voice").click()
    expect(page.get_by_text(f"Saved the voice '{VOICE_NAME}'")).to_be_visible()
    with studio.rerun("the rerun that shows the saved voices"):
        page.get_by_text("A saved voice", exact=True).click()
    saved = page.locator('[data-testid="stSelectbox"]').filter(has_text="Saved voices")
    expect(saved).to_be_visible()
    saved.click()  # open the choice: the saved voice is listed in it
    out["saved_options"] = poll(lambda: page.get_by_role("option").all_inner_texts(), bool, 60,
                                what="the options of the 'Saved voices' choice")
    page.keyboard.press("Escape")
    page.screenshot(path=SCREENSHOT, full_page=True)
    out["page_text"] = page.locator('[data-testid="stMain"]').inner_text()[:5000]
    return out


scenario.chromium_args = _fake_microphone
scenario.permissions = ["microphone"]


def test_a_voice_recorded_in_chromium_is_cloned_heard_and_saved(tmp_path: Path) -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_voice_clone:scenario", timeout=300,
                             env={"OMNI_STUDIO_DATA_DIR": str(tmp_path / "data")})
    print({k: r[k] for k in ("reference", "speak_to_energy_s", "metrics", "saved_options")})
    seconds = float(r["reference"].split("Reference ready:")[1].split(" s")[0])
    assert 5.0 <= seconds <= 8.0  # the recording made in the browser, checked and converted
    before, after = r["before"], r["after"]
    assert all(s["connectionState"] == "connected" for s in after)
    assert _total(after, "packetsReceived") > _total(before, "packetsReceived") + 50  # ≥ 1 s of 20 ms packets
    assert _total(after, "totalAudioEnergy") - _total(before, "totalAudioEnergy") > 1e-3  # the clone was heard
    m = r["metrics"]
    assert m["First audio"].endswith(" ms") and float(m["RTF"]) > 0
    assert r["saved_options"] == [VOICE_NAME]
    assert f"consent id {CONSENT_ID}" in r["page_text"] and "saved by studio user" in r["page_text"]

    from services.history import History

    [record] = History(tmp_path / "data").voices.list()
    assert (record.name, record.consent_id, record.who) == (VOICE_NAME, CONSENT_ID, "studio user")
