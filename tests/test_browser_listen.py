"""Listening to a microphone in a real browser: Debian Chromium (Playwright) with a fake microphone, the studio on
the offline engine, both inside a loopback-only network namespace (tests/browser_support.py).

The fake capture device plays a WAV this test writes: the offline engine's own voice saying a known sentence
(seeded, 48 kHz), after 3 s of quiet (while the WebRTC connection is made) and followed by 9 s of it (Chromium loops
the file; the quiet keeps the second pass out of the utterance). The scenario opens the Listen page, starts the
microphone (streamlit-webrtc, send-only), watches the partial transcript appear while the page is still hearing
(before Stop, no final yet), presses Stop once the studio has received the whole sentence (its own count of seconds
heard), reads the final text, and reloads the page to find the transcript kept in the history. Nothing is asserted
on seconds: under load they say how busy the machine was.
"""

from __future__ import annotations

import os
import re
import wave
from pathlib import Path

import httpx
import numpy as np
import soxr

from bench.page_waits import metrics, poll

SENTENCE = "Please call me back when you get home tonight."
MIC_RATE = 48_000
LEAD_S, TAIL_S = 3.0, 9.0
WAV_ENV = "OMNI_TEST_LISTEN_MIC_WAV"  # the recording, written by the test before the scenario starts
SPEECH_ENV = "OMNI_TEST_LISTEN_SPEECH_S"  # how long the sentence lasts in it
SCREENSHOT = "/tmp/omni-studio-listen-browser.png"


def _fake_microphone(tmp: Path) -> list[str]:
    return ["--use-fake-device-for-media-stream", f"--use-file-for-fake-audio-capture={os.environ[WAV_ENV]}"]


def _main_text(page) -> str:  # type: ignore[no-untyped-def]
    return page.locator('[data-testid="stMain"]').inner_text()


def _captured_s(caption: str) -> float:
    """The seconds of microphone audio the studio has received, from "4.2 s of audio sent so far; …"."""
    match = re.match(r"([0-9.]+) s of audio sent so far", caption)
    return float(match.group(1)) if match else -1.0


def scenario(studio) -> dict:  # type: ignore[no-untyped-def]
    """Runs inside the namespace (see tests/browser_support.py)."""
    from playwright.sync_api import expect

    page = studio.page
    out: dict = {}
    speech_ends_by_s = LEAD_S + float(os.environ[SPEECH_ENV])
    studio.goto("listen")
    page.get_by_role("tab", name="From the microphone").click()
    mic = studio.frame("webrtc", timeout_s=60)
    mic.get_by_role("button", name="Start listening").click()
    hearing, final_heading = page.get_by_text("Hearing…"), page.get_by_text("Transcript — microphone")
    expect(hearing).to_be_visible(timeout=60_000)
    partial = page.locator('[data-testid="stText"]').first
    sent = page.get_by_text("s of audio sent so far").first
    out["partial"] = poll(lambda: partial.inner_text().strip(), lambda t: t not in ("", "…"), 90, step=0.1,
                          what="the partial transcript under 'Hearing…' (before Stop)")
    # The order of events, read at once: the partial text is shown while the page is still hearing the microphone,
    # before Stop, with no final transcript yet.
    out["partial_while_hearing"] = hearing.is_visible() and final_heading.count() == 0
    out["partial_at_captured_s"] = _captured_s(sent.inner_text())  # for information: load decides it
    out["speech_ends_by_s"] = speech_ends_by_s
    # Stop once the studio has received the whole sentence (its own count of seconds heard: a media clock, not a
    # sleep); the fake microphone sends the sentence's end by speech_ends_by_s and quiet after it.
    out["stopped_at_captured_s"] = poll(lambda: _captured_s(sent.inner_text()), lambda s: s >= speech_ends_by_s + 1.0,
                                        120, step=0.2, what=f"{speech_ends_by_s + 1.0:.1f} s of microphone audio "
                                                            "received by the studio")
    out["final_before_stop"] = final_heading.count()
    mic.get_by_role("button", name="Stop").click()
    expect(final_heading).to_be_visible(timeout=90_000)
    expect(page.locator('[data-testid="stMetric"]').filter(has_text="First partial")).to_be_visible()
    out["final"] = page.locator('[data-testid="stText"]').first.inner_text().strip()
    out["metrics"] = metrics(page, "First partial", "Final")
    page.screenshot(path=SCREENSHOT, full_page=True)
    studio.goto("listen")  # a reload: a new session, the history lists it
    expect(page.get_by_text("Transcripts", exact=True)).to_be_visible()
    # The heading is drawn before the list under it: wait for the list to hold the transcript (or time out).
    out["after_reload"] = poll(lambda: _main_text(page), lambda t: out["final"] in t, 60,
                               what="the transcript listed under Transcripts after the reload")[:4000]
    return out


scenario.chromium_args = _fake_microphone
scenario.permissions = ["microphone"]


def test_the_microphone_is_heard_while_speaking_and_its_transcript_kept(tmp_path: Path, engine_url: str) -> None:
    from services.history import History
    from services.listen import word_error_rate
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = httpx.post(f"{engine_url}/v1/audio/speech", json={"input": SENTENCE, "voice": "joe", "seed": 7}, timeout=60,
                   trust_env=False)
    assert r.status_code == 200, r.text
    speech = np.frombuffer(r.content[44:], "<i2").astype(np.float32)
    speech = soxr.resample(speech, 24_000, MIC_RATE)
    pcm = np.concatenate([np.zeros(int(LEAD_S * MIC_RATE)), speech, np.zeros(int(TAIL_S * MIC_RATE))])
    path = tmp_path / "microphone.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(MIC_RATE)
        w.writeframes(np.clip(pcm, -32768, 32767).astype("<i2").tobytes())

    out = run_browser_scenario("tests.test_browser_listen:scenario", timeout=240, env={
        "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), WAV_ENV: str(path),
        SPEECH_ENV: f"{speech.size / MIC_RATE:.3f}"})
    print({k: out.get(k) for k in ("partial", "partial_at_captured_s", "speech_ends_by_s", "stopped_at_captured_s",
                                   "final", "metrics")})  # the seconds for information: load decides them
    assert "error" not in out, out
    # Streamed: the partial text was shown while the page was still hearing, before Stop; the final only after it.
    assert out["partial"] and out["partial_while_hearing"], out
    assert out["final_before_stop"] == 0, out
    assert word_error_rate(SENTENCE, out["final"]) <= 0.3, out["final"]
    assert out["metrics"]["First partial"].endswith(" ms") and out["metrics"]["Final"].endswith(" ms")
    assert out["final"] in out["after_reload"]  # listed again after the reload
    [kept] = History(tmp_path / "data").transcripts.list()
    assert (kept.text, kept.source, kept.route) == (out["final"], "microphone", "stream")
    assert kept.audio == "recording.wav" and kept.audio_bytes()[:4] == b"RIFF"
