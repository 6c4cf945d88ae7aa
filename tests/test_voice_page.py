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
from protocol.speech import QWEN3_TTS_LANGUAGES, QWEN3_TTS_SPEAKERS
from services.speech.audio import read_wav
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
PAGE = "pages/voice.py"  # opened through app.py's navigation, as a browser does (its page links resolve there)
APP = str(ROOT / "app.py")


@pytest.fixture
def webrtc_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit_webrtc.component
    import streamlit_webrtc.shutdown

    monkeypatch.setattr(streamlit_webrtc.component, "get_this_session_info", lambda: None)
    monkeypatch.setattr(streamlit_webrtc.shutdown, "get_this_session_info", lambda: None)


def _page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")  # set empty: no studio.toml at all
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path / "data"))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page(PAGE)
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
    assert page.selectbox(key="voice_voice").options == ["joe", *QWEN3_TTS_SPEAKERS, "default"]
    language = page.selectbox(key="voice_language")
    assert language.options == QWEN3_TTS_LANGUAGES
    assert "speaks them all with its one English voice" in language.help  # said where the languages are picked
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
    assert [d.label for d in page.get("download_button")] == ["Download WAV", "Download Python", "Download curl",
                                                             "Download CLI",
                                                             "Download all three (and the reference files)"]  # + code
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
    assert [d.label for d in page.get("download_button")].count("Download WAV") == 2  # beside each, its code's


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
    assert [d.label for d in fault_page.get("download_button")][0] == "Download WAV"  # then its code's


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
    u = run.result(timeout=60)  # a bound only: the chunks below say whether it was cut (the whole slow stream is 200)
    assert u.stats.state == "cancelled" and u.error is None
    assert 3 <= u.stats.chunks < 200 and u.pcm


# ---------------------------------------------------------------------------------------------------
# the models' full range: modes per task type, style, design, cloning with consent, saved voices
def _reference_wav(seconds: float = 6.0) -> bytes:
    from services.smoke.voice import smoke_reference_wav

    return smoke_reference_wav(seconds)  # voiced and speech-like: passes the silence and clipping checks


def _mode_page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, task_types: tuple[str, ...]) -> AppTest:
    from services.speech import SpeechClient

    monkeypatch.setattr(SpeechClient, "task_types", lambda self: task_types)
    return _page(monkeypatch, tmp_path, url)


def _captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)  # as shown: Markdown's specials escaped (ui.text.plain)


def _errors(at: AppTest) -> str:
    return "\n".join(e.value for e in at.error)


def _clone_with(at: AppTest, wav: bytes, name: str = "voice.wav") -> None:
    at.radio(key="voice_mode").set_value("Base").run()
    at.audio_input(key="voice_recording").set_value((name, wav, "audio/wav")).run()
    assert not at.exception, at.exception


@pytest.mark.parametrize(("task_types", "offered", "named"), [
    (("CustomVoice",), ["Preset voice"], ["Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign", "Qwen/Qwen3-TTS-12Hz-1.7B-Base"]),
    (("Base",), ["Clone a voice"], ["Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"]),
    (("CustomVoice", "VoiceDesign", "Base"), ["Preset voice", "Design a voice", "Clone a voice"], []),
])
def test_only_the_modes_the_model_has_are_offered_and_one_caption_names_what_to_deploy(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None,
        task_types: tuple[str, ...], offered: list[str], named: list[str]) -> None:
    at = _mode_page(monkeypatch, tmp_path, engine_url, task_types)
    assert at.radio(key="voice_mode").options == offered
    assert at.radio(key="voice_mode").value == task_types[0]
    assert "Offline preview" not in _captions(at)  # a vLLM-Omni URL runs the real model
    deploy = [c.value for c in at.caption if "Not offered" in c.value]
    assert len(deploy) == (1 if named else 0)
    for model in named:
        assert model in deploy[0]
    if task_types == ("Base",):  # cloning only: the clone's fields, no preset voice picker
        assert at.audio_input(key="voice_recording") is not None
        assert not [s for s in at.selectbox if s.key == "voice_voice"]


def test_the_mode_chosen_before_is_replaced_when_the_target_lacks_it(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:
    from services.speech import SpeechClient

    at = _page(monkeypatch, tmp_path, engine_url)
    at.radio(key="voice_mode").set_value("VoiceDesign").run()
    monkeypatch.setattr(SpeechClient, "task_types", lambda self: ("CustomVoice",))
    st.cache_data.clear()
    at.run()
    assert not at.exception, at.exception
    assert at.radio(key="voice_mode").value == "CustomVoice"


def test_a_preset_voice_speaks_with_a_style_and_says_so(page: AppTest) -> None:
    page.text_input(key="voice_style").input("warm, slow, smiling")
    _speak(page, "A styled sentence.")
    take = _until_finished(page)
    assert take.utterance.ok, take.utterance.error
    assert take.voice == "voice joe, style “warm, slow, smiling”"
    assert any("warm, slow, smiling" in c.value for c in page.caption)


def test_a_design_without_a_description_is_refused_and_the_text_is_kept(page: AppTest) -> None:
    page.radio(key="voice_mode").set_value("VoiceDesign").run()
    _speak(page, "Text that must not be lost.")
    assert page.session_state["voice_run"] is None
    assert "description" in _errors(page)
    assert page.text_area(key="voice_text").value == "Text that must not be lost."
    page.text_area(key="voice_description").input("a calm, low voice, slightly hoarse")
    _speak(page)
    take = _until_finished(page)
    assert take.utterance.ok, take.utterance.error
    assert take.voice == "designed voice “a calm, low voice, slightly hoarse”"


def test_a_clone_needs_consent_before_it_speaks_or_is_saved(page: AppTest, tmp_path: Path) -> None:
    from services.history import History

    _clone_with(page, _reference_wav())
    assert any("Reference ready: 6.0 s" in s.value for s in page.success)
    for consent, consent_id in ((False, ""), (True, ""), (False, "consent-0412")):
        page.checkbox(key="voice_consent").set_value(consent)
        page.text_input(key="voice_consent_id").input(consent_id)
        _speak(page, "Cloned words.")
        assert page.session_state["voice_run"] is None
        assert "needs the speaker's consent" in _errors(page)
        page.text_input(key="voice_save_name").input("anna")
        _button(page, "Save voice").click().run()  # refused too (Speak's message was shown once, and went)
        assert sum("needs the speaker's consent" in e.value for e in page.error) == 1
    assert History(tmp_path / "data").voices.list(include_removed=True) == []  # nothing was saved
    page.checkbox(key="voice_consent").check()
    page.text_input(key="voice_consent_id").input("consent-0412")
    _speak(page, "Cloned words.")
    take = _until_finished(page)
    assert take.utterance.ok, take.utterance.error
    assert take.voice == "clone of a recording (used once)"
    assert "consent" not in _errors(page)


def test_a_saved_voice_is_listed_after_saving_speaks_and_can_be_deleted(page: AppTest, tmp_path: Path) -> None:
    from services.history import History

    _clone_with(page, _reference_wav())
    page.text_input(key="voice_ref_text").input("What the speaker says.")
    page.checkbox(key="voice_consent").check()
    page.text_input(key="voice_consent_id").input("consent-0412")
    page.text_input(key="voice_save_name").input("anna")
    _button(page, "Save voice").click().run()
    assert not page.exception, page.exception
    assert not page.error
    assert page.radio(key="voice_clone_source").value == "new"  # the page stays where it was (ui/voice_modes.py)
    assert any("Saved the voice 'anna'" in s.value and "A saved voice" in s.value for s in page.success)
    page.radio(key="voice_clone_source").set_value("saved").run()
    # the engine is shared by the whole run: other tests' voices may be listed too
    assert "anna" in page.selectbox(key="voice_saved").options
    assert page.selectbox(key="voice_saved").value == "anna"  # chosen there
    assert "consent id consent-0412 · saved by studio user" in _captions(page).replace("\\", "")
    [record] = History(tmp_path / "data").voices.list()
    assert (record.name, record.consent_id, record.who) == ("anna", "consent-0412", "studio user")
    page.radio(key="voice_mode").set_value("CustomVoice").run()
    assert "anna" not in page.selectbox(key="voice_voice").options  # saved voices are not presets
    page.radio(key="voice_mode").set_value("Base").run()
    _speak(page, "The saved voice speaks.")
    take = _until_finished(page)
    assert take.utterance.ok, take.utterance.error
    assert take.voice == "saved voice anna"
    # the same name again is refused, and what was typed stays
    page.radio(key="voice_clone_source").set_value("new").run()
    _button(page, "Save voice").click().run()
    assert "already exists" in _errors(page)
    assert page.text_input(key="voice_save_name").value == "anna"
    assert page.text_input(key="voice_ref_text").value == "What the speaker says."
    page.radio(key="voice_clone_source").set_value("saved").run()
    page.selectbox(key="voice_saved").set_value("anna").run()
    _button(page, "Delete").click().run()
    assert any("Deleted the voice 'anna'" in s.value for s in page.success)
    assert not [s for s in page.selectbox if s.key == "voice_saved" and "anna" in s.options]


@pytest.mark.parametrize(("wav", "said"), [
    (lambda: _reference_wav(1.0), "at least 3 s"),
    (lambda: _reference_wav(40.0), "the limit is 30 s"),
    (lambda: _tone_wav(np.zeros(24_000 * 5)), "silent"),
    (lambda: _tone_wav(np.sign(np.sin(np.arange(24_000 * 5) / 10))), "clipped"),
    (lambda: b"RIFF not audio at all" * 100, "not audio"),
])
def test_reference_problems_show_the_services_message_and_nothing_typed_is_lost(page: AppTest, wav, said: str) -> None:
    page.radio(key="voice_mode").set_value("Base").run()
    page.text_input(key="voice_ref_text").input("What the speaker says.")
    page.checkbox(key="voice_consent").check()
    page.text_input(key="voice_consent_id").input("consent-0412")
    page.audio_input(key="voice_recording").set_value(("voice.wav", wav(), "audio/wav")).run()
    assert not page.exception, page.exception
    assert any(said in e.value and "cannot be used" in e.value for e in page.error)
    _speak(page, "Words to keep.")
    assert page.session_state["voice_run"] is None and said in _errors(page)
    assert page.text_area(key="voice_text").value == "Words to keep."
    assert page.text_input(key="voice_ref_text").value == "What the speaker says."
    assert page.text_input(key="voice_consent_id").value == "consent-0412"


def test_what_is_typed_survives_switching_modes(page: AppTest) -> None:
    page.text_input(key="voice_style").input("bright and quick")
    page.radio(key="voice_mode").set_value("Base").run()
    _clone_with(page, _reference_wav())
    page.text_input(key="voice_consent_id").input("consent-7")
    page.radio(key="voice_mode").set_value("VoiceDesign").run()
    page.radio(key="voice_mode").set_value("Base").run()
    assert page.text_input(key="voice_consent_id").value == "consent-7"
    assert any("Reference ready" in s.value for s in page.success)  # the checked recording is kept
    _button(page, "Remove").click().run()  # until removed
    assert not any("Reference ready" in s.value for s in page.success)
    page.checkbox(key="voice_consent").check()
    _speak(page, "No reference now.")
    assert page.session_state["voice_run"] is None and "cloning needs a reference" in _errors(page)
    page.radio(key="voice_mode").set_value("CustomVoice").run()
    assert page.text_input(key="voice_style").value == "bright and quick"


def test_the_first_audio_slider_sets_initial_codec_chunk_frames() -> None:
    from ui.voice_modes import SERVER_DEFAULT, build_config

    values = {"voice_mode": "CustomVoice", "voice_voice": "joe", "voice_first_chunk": SERVER_DEFAULT}
    assert build_config(values, None).initial_codec_chunk_frames is None
    assert build_config({**values, "voice_first_chunk": 4}, None).initial_codec_chunk_frames == 4


def test_the_offline_engine_says_styles_designs_and_clones_are_a_preview(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:
    import dataclasses

    import ui.resources

    real = ui.resources.backend
    monkeypatch.setattr(ui.resources, "backend", lambda: dataclasses.replace(real(), name="offline"))
    at = _page(monkeypatch, tmp_path, engine_url)
    assert any("Offline preview" in c.value and "Qwen3-TTS" in c.value for c in at.caption)


def test_on_sagemaker_saved_voices_are_the_studios_records_and_the_page_says_so(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:
    """SageMaker cannot list or delete a voice: the choice lists the studio's records, the notice says so, and the
    button forgets the record. (Its voice library swapped in; speech still goes to the engine.)"""
    import dataclasses
    from types import SimpleNamespace

    import ui.resources
    from services.history import History
    from services.speech.voices import SageMakerVoices

    history = History(tmp_path / "data")
    voices = SageMakerVoices(SimpleNamespace(region="us-east-1", profile=None), "studio-voice", history)
    history.voices.record(voices.record_target, "anna", "consent-0412", who="dana")
    real, made = ui.resources.backend_of, {}

    def backend(*choice):
        if choice not in made:
            made[choice] = dataclasses.replace(real(*choice), _made={"voices": voices})  # its voice library
        return made[choice]

    monkeypatch.setattr(ui.resources, "backend_of", backend)
    at = _page(monkeypatch, tmp_path, engine_url)
    at.radio(key="voice_mode").set_value("Base").run()
    at.radio(key="voice_clone_source").set_value("saved").run()
    assert at.selectbox(key="voice_saved").options == ["anna"]
    notice = _captions(at).replace("\\", "")
    assert "SageMaker forwards only uploads" in notice and "cannot be deleted there" in notice
    assert "consent id consent-0412 · saved by dana" in notice
    _button(at, "Forget").click().run()
    assert any("forgot its record of 'anna'" in s.value.replace("\\", "") for s in at.success)
    assert not [s for s in at.selectbox if s.key == "voice_saved"]
    assert history.voices.list(include_removed=True)[0].removal == "forgotten"


def test_an_uploaded_file_is_a_reference_too(page: AppTest) -> None:
    page.radio(key="voice_mode").set_value("Base").run()
    page.radio(key="voice_ref_how").set_value("upload").run()
    page.get("file_uploader")[0].set_value(("speaker.wav", _reference_wav(8.0), "audio/wav")).run()
    assert not page.exception, page.exception
    assert any("Reference ready: 8.0 s" in s.value for s in page.success)


def _tone_wav(signal: np.ndarray) -> bytes:
    from services.speech import wav_bytes

    return wav_bytes((np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes(), 24_000, 1)


# ---------------------------------------------------------------------------------------------------
# the player: connected by Speak, Stop live while speech still plays
@pytest.fixture
def connected_player(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The page's player as a connected browser's, minus the browser: a real PCM source that nothing drains
    (a listener still hearing the speech), and what the page asked of the player on each run."""
    from streamlit_webrtc.pcm_source import PcmAudioSource

    import ui.voice_player

    player = {"source": PcmAudioSource(sample_rate=24_000), "connect": [], "on": False}

    def voice_player(playback, ice_servers, *, connect: bool = False) -> bool:
        player["connect"].append(connect)
        player["on"] = player["on"] or connect  # disconnected until asked, then playing
        playback.attach(player["source"])
        return player["on"]

    monkeypatch.setattr(ui.voice_player, "voice_player", voice_player)
    yield player
    player["source"].track.stop()


def test_speak_connects_the_player_and_stop_stays_live_while_speech_still_plays(
        connected_player: dict, page: AppTest) -> None:
    assert connected_player["connect"] == [False]  # opening the page connects nothing
    _speak(page, "Generation ends long before the listener hears the end of this sentence.")
    assert connected_player["connect"][-1] is True  # Speak's click starts the player
    _until_finished(page)
    assert connected_player["connect"][-1] is False  # later runs leave the player's buttons to the person
    playback = page.session_state["voice_playback"]
    assert playback.queued_seconds() > 1.0  # generated, not yet played
    assert not _button(page, "Stop").disabled and not _button(page, "Speak").disabled
    _button(page, "Stop").click().run()
    assert playback.queued_seconds() == 0  # Stop dropped what was still to play
    assert _button(page, "Stop").disabled
    _speak(page, "Once more.")
    assert connected_player["connect"][-1] is False  # a connected player is left alone: no new START under it


def test_the_page_shows_the_first_audio_heard_in_the_browser_beside_the_studios(page: AppTest) -> None:
    _speak(page, "Measured twice.")
    _until_finished(page)
    assert _metric(page, "First audio").endswith(" ms")
    assert _metric(page, "First audio heard") == "—"  # no browser here to hear it
    assert any("First audio heard" in c.value and "click on Speak" in c.value for c in page.caption)


def test_a_variants_count_that_came_back_empty_does_not_break_the_page(page: AppTest) -> None:
    """Chromium once sent the Compare panel's Variants control as None amid the quick reruns of Speak connecting
    the player; the whole page then failed on int(None)."""
    page.session_state["vocmp_count"] = None
    page.run()
    assert not page.exception, page.exception
    assert page.session_state["vocmp_count"] == 2


# ---- intelligibility (issue #21): each finished take heard by a recognizer, opt-in ---------------------------
@pytest.fixture
def heard_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every recognizer call the page makes (the real one runs: this only counts them)."""
    from services.listen import OmniListen

    calls: list[str] = []
    real = OmniListen.transcribe_file

    async def counted(self, audio, **kw):  # type: ignore[no-untyped-def]
        calls.append(self.target)
        return await real(self, audio, **kw)

    monkeypatch.setattr(OmniListen, "transcribe_file", counted)
    return calls


def _kept_figures(at: AppTest) -> dict:
    from services.history import History
    from services.settings import load_settings

    [kept] = History(load_settings().data_dir).takes.list()
    return kept.figures


def test_with_the_toggle_on_a_take_shows_and_keeps_its_word_error_rate(
        page: AppTest, heard_calls: list[str], engine_url: str) -> None:
    from services.listen import normalise, word_error_rate

    from ui.text import plain

    text = "Please open the door for me. We will meet at the station."
    assert page.toggle(key="voice_intel").value is False  # off by default: nothing is sent to a recognizer unasked
    page.toggle(key="voice_intel").set_value(True).run()
    _speak(page, text)
    take = _until_finished(page)
    assert heard_calls == [engine_url]  # the backend's own listen route
    heard = take.intelligibility
    words = len(normalise(text).split())
    assert heard["words"] == words == 12 and heard["transcript"]
    assert heard["wer"] == pytest.approx(round(word_error_rate(text, heard["transcript"]), 4)) and heard["wer"] <= 0.5
    assert heard["errors"] == round(word_error_rate(text, heard["transcript"]) * words)
    line = plain(f"WER {heard['wer'] * 100:.1f} % ({heard['errors']} error{'' if heard['errors'] == 1 else 's'} / {words} words) — heard: "
                 f"{heard['transcript']!r} (by the listen route of {engine_url})")
    shown = [c.value for c in page.caption if c.value.startswith("Intelligibility:")]
    assert len(shown) == 1 and line in shown[0]
    assert _kept_figures(page)["intelligibility"] == heard  # kept with the take in the history
    _speak(page, "A second take.")  # the first is now a kept take: its summary carries the figure
    _until_finished(page)
    assert sum(line in c.value for c in page.caption) == 1


def test_with_the_toggle_off_no_recognizer_is_called(page: AppTest, heard_calls: list[str]) -> None:
    _speak(page, "Nothing is sent to a recognizer unless asked.")
    take = _until_finished(page)
    assert take.utterance.ok and take.intelligibility is None and heard_calls == []
    assert not any("Intelligibility" in c.value for c in page.caption)
    assert "intelligibility" not in _kept_figures(page)


def test_a_recognizer_that_fails_is_one_line_and_the_take_stays(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:
    import dataclasses

    import ui.resources
    from services.listen import OmniListen

    real = ui.resources.backend
    monkeypatch.setattr(ui.resources, "backend",
                        lambda: dataclasses.replace(real(), _made={"listen": OmniListen("http://127.0.0.1:9")}))
    at = _page(monkeypatch, tmp_path, engine_url)
    at.toggle(key="voice_intel").set_value(True).run()
    _speak(at, "The recognizer is down but the take is kept.")
    take = _until_finished(at)
    assert take.utterance.ok and take.record_id is not None
    [line] = [w.value for w in at.warning if "Intelligibility" in w.value]
    assert line.startswith("Intelligibility: not measured") and "127.0.0.1:9" in line
    kept = _kept_figures(at)
    assert "127.0.0.1:9" in kept["intelligibility"]["error"] and "wer" not in kept["intelligibility"]
    assert [d.label for d in at.get("download_button")][0] == "Download WAV"  # the audio stays
