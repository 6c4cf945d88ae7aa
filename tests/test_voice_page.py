"""The voice page's logic with Streamlit's AppTest, against real local servers.

AppTest cannot play WebRTC (docs/testing.md): streamlit-webrtc's session lookups are patched to None so the
player renders inert; media is checked by tests/test_playback_aiortc.py and tests/test_browser_voice.py.
Faults (unknown voice, a stream cut mid-way, a long stream to stop) come from a small real WebSocket
server on loopback that speaks the vLLM-Omni protocol and misbehaves on cue.
"""

from __future__ import annotations

import asyncio
import http
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from protocol.errors import ServerError, StreamError
from services.speech.audio import read_wav
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "voice.py")


@pytest.fixture
def webrtc_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit_webrtc.component
    import streamlit_webrtc.shutdown

    monkeypatch.setattr(streamlit_webrtc.component, "get_this_session_info", lambda: None)
    monkeypatch.setattr(streamlit_webrtc.shutdown, "get_this_session_info", lambda: None)


def _page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")  # set empty: no studio.toml at all
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "omni")
    monkeypatch.setenv("OMNI_STUDIO_OMNI_URL", url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path / "data"))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(PAGE, default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    return at


def _button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def _speak(at: AppTest, text: str | None = None, voice: str | None = None) -> None:
    if text is not None:
        at.text_area(key="voice_text").input(text)
    if voice is not None:
        at.selectbox(key="voice_voice").select(voice)
    _button(at, "Speak").click().run()
    assert not at.exception, at.exception


def _until_finished(at: AppTest, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if at.session_state["voice_run"] is None:
            return at.session_state["voice_history"][0]
        time.sleep(0.1)
        at.run()
        assert not at.exception, at.exception
    raise AssertionError("the utterance did not finish")


def _metric(at: AppTest, label: str) -> str:
    values = [m.value for m in at.metric if m.label == label]
    assert values, f"no {label!r} metric on the page"
    return values[0]


# ---------------------------------------------------------------------------------------------------
# against the real offline engine
@pytest.fixture
def page(engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> AppTest:
    return _page(monkeypatch, tmp_path, engine_url)


def test_pickers_come_from_the_backend_and_the_sidebar_shows_its_health(page: AppTest, engine_url: str) -> None:
    assert page.selectbox(key="voice_voice").options == ["joe", "default"]
    assert page.selectbox(key="voice_language").options == ["Auto", "English"]
    assert any("healthy" in s.value for s in page.sidebar.success)
    assert any(engine_url in c.value for c in page.sidebar.caption)


def test_speak_streams_and_shows_figures_waveform_and_download(page: AppTest) -> None:
    _speak(page, "Speech plays while it is made. Then the figures stay on the page.")
    assert page.session_state["voice_run"] is not None
    assert any("Connect player" in i.value for i in page.info)  # the player is not connected: say how
    take = _until_finished(page)
    u = take.utterance
    assert u.ok, u.error
    assert u.voice == "joe" and u.language == "Auto"
    assert int(_metric(page, "Chunks")) == u.stats.chunks > 0
    assert _metric(page, "Audio bytes") == f"{u.stats.bytes:,}"
    assert _metric(page, "First audio").endswith(" ms")
    assert float(_metric(page, "RTF")) > 0
    pcm, rate, _ = read_wav(take.wav)
    assert rate == 24_000 and pcm == u.pcm and len(pcm) / 48_000 > 1.5
    assert np.abs(np.frombuffer(pcm, "<i2")).max() > 3000  # speech, not silence
    assert take.picture[:8] == b"\x89PNG\r\n\x1a\n"
    assert [d.label for d in page.get("download_button")] == ["Download WAV"]
    assert not page.error


def test_history_keeps_this_sessions_utterances_and_shows_text_as_text(page: AppTest) -> None:
    first = "<b>not bold</b> and **not markdown** either."
    _speak(page, first)
    _until_finished(page)
    _speak(page, "A second one.")
    _until_finished(page)
    history = page.session_state["voice_history"]
    assert [t.utterance.text for t in history] == ["A second one.", first]
    assert first in [t.value for t in page.text]  # st.text: shown exactly as typed
    assert len(page.get("download_button")) == 2


def test_empty_text_is_refused_and_nothing_is_sent(page: AppTest) -> None:
    _speak(page, "   \n  ")
    assert page.session_state["voice_run"] is None
    assert any("no text to speak" in e.value for e in page.error)


def test_unreachable_backend_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    at = _page(monkeypatch, tmp_path, url)
    # Server text is shown escaped (markdown-safe): compare with the escapes taken out.
    assert any(url in e.value.replace("\\", "") for e in at.error)
    assert any(url.removeprefix("http://").split(":")[0] in e.value.replace("\\", "") for e in at.sidebar.error)


# ---------------------------------------------------------------------------------------------------
# against a misbehaving vLLM-Omni-protocol server on loopback
def _tone(seconds: float) -> bytes:
    t = np.arange(int(seconds * 24_000)) / 24_000
    return (np.sin(2 * np.pi * 300 * t) * 6000).astype("<i2").tobytes()


@pytest.fixture(scope="module")
def fault_url() -> Iterator[str]:
    """voices joe and ghost (ghost fails like an unknown voice); text with "cut" drops the TCP connection
    after 3 chunks; text with "slow" streams for 10 s."""
    from websockets.asyncio.server import serve

    port = free_port()
    ready = threading.Event()
    stop: dict[str, asyncio.Future] = {}

    def http_routes(connection, request):
        bodies = {
            "/health": {"status": "healthy"},
            "/v1/audio/voices": {"voices": ["joe", "ghost"], "uploaded_voices": []},
            "/v1/models": {"object": "list", "data": [{"id": "fault-tts", "object": "model", "owned_by": "test"}]},
        }
        if request.path in bodies:
            return connection.respond(http.HTTPStatus.OK, json.dumps(bodies[request.path]))
        return None

    async def session(ws) -> None:
        config = json.loads(await ws.recv())
        text = ""
        async for raw in ws:
            msg = json.loads(raw)
            if msg["type"] == "session.config":
                config = msg
            elif msg["type"] == "input.text":
                text += msg["text"]
            elif msg["type"] == "input.done":
                await ws.send(json.dumps({"type": "audio.start", "utterance_index": 0, "sentence_index": 0,
                                          "sentence_text": text, "format": "pcm", "sample_rate": 24000}))
                if config.get("voice") == "ghost":
                    await ws.send(json.dumps({"type": "error", "message": "Generation failed for utterance 0, sentence 0: Invalid voice 'ghost'. Supported: joe"}))
                    await ws.send(json.dumps({"type": "audio.done", "total_bytes": 0, "error": True}))
                else:
                    n = 200 if "slow" in text else 3
                    for i in range(n):
                        await ws.send(_tone(0.1))
                        if "slow" in text:
                            await asyncio.sleep(0.05)
                        if "cut" in text and i == 2:
                            await asyncio.sleep(0.05)
                            ws.transport.abort()
                            return
                    await ws.send(json.dumps({"type": "audio.done", "total_bytes": n * 4800, "error": False}))
                await ws.send(json.dumps({"type": "session.done", "utterance_index": 0, "total_sentences": 1}))
                text = ""
            elif msg["type"] == "session.close":
                return

    async def main() -> None:
        stop["f"] = asyncio.get_running_loop().create_future()
        async with serve(session, "127.0.0.1", port, process_request=http_routes):
            ready.set()
            await stop["f"]

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield f"http://127.0.0.1:{port}"
    loop.call_soon_threadsafe(stop["f"].set_result, None)
    thread.join(5)


@pytest.fixture
def fault_page(fault_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> AppTest:
    return _page(monkeypatch, tmp_path, fault_url)


def test_unknown_voice_shows_the_server_error_and_the_next_speak_works(fault_page: AppTest) -> None:
    _speak(fault_page, "Hello.", voice="ghost")
    bad = _until_finished(fault_page)
    assert isinstance(bad.utterance.error, ServerError)
    assert any("Invalid voice" in e.value and "ghost" in e.value for e in fault_page.error)
    _speak(fault_page, "Hello again.", voice="joe")
    good = _until_finished(fault_page)
    assert good.utterance.ok and good.utterance.stats.chunks == 3
    assert not fault_page.error


def test_a_cut_stream_shows_the_error_and_keeps_the_audio(fault_page: AppTest) -> None:
    _speak(fault_page, "This one gets cut half way.")
    take = _until_finished(fault_page)
    assert isinstance(take.utterance.error, StreamError)
    assert any("cut" in e.value and "kept" in e.value for e in fault_page.error)
    pcm, rate, _ = read_wav(take.wav)
    assert len(pcm) == 3 * 4800 and rate == 24_000
    assert [d.label for d in fault_page.get("download_button")] == ["Download WAV"]


def test_stop_cancels_the_utterance_and_keeps_what_arrived(fault_page: AppTest) -> None:
    _speak(fault_page, "A slow and very long reading.")
    deadline = time.monotonic() + 10
    while fault_page.session_state["voice_run"].stats().chunks < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    _button(fault_page, "Stop").click().run()
    take = _until_finished(fault_page)
    assert take.utterance.stats.state == "cancelled" and take.utterance.error is None
    assert 3 <= take.utterance.stats.chunks < 200 and take.utterance.pcm


def test_a_run_whose_browser_session_is_gone_is_cancelled(fault_page: AppTest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reload or a closed tab ends the browser session, and its Stop button with it: the run is cancelled
    (ui/speech_runs.py asks Streamlit whether the session is active; here the test answers for it)."""
    import ui.speech_runs

    connected = {"now": True}
    monkeypatch.setattr(ui.speech_runs, "session_alive", lambda _session_id: connected["now"])
    monkeypatch.setattr(ui.speech_runs, "GRACE_S", 0.0)
    monkeypatch.setattr(ui.speech_runs, "SWEEP_S", 0.1)
    _speak(fault_page, "A slow and very long reading.")
    run = fault_page.session_state["voice_run"]
    deadline = time.monotonic() + 10
    while run.stats().chunks < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    connected["now"] = False  # the page is not run again: nobody is left to press Stop
    u = run.result(timeout=10)  # the slow stream alone takes 10 s
    assert u.stats.state == "cancelled" and u.error is None
    assert 3 <= u.stats.chunks < 200 and u.pcm
