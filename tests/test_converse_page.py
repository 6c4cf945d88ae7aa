"""The Converse page with Streamlit's AppTest (through app.py's navigation), against the real offline engine: a
recorded turn (the engine's own voice) is held as a conversation in pipeline mode with the scripted reply — the
transcript with both sides, the timeline, voice-to-voice with n, the stereo WAV and JSON downloads with the right
bytes, the conversation kept in the history and listed for a new session —; a script with a bad line gets one line
naming it; a model reply is picked among the registered servers, never typed (tests/test_converse_targets.py; with
none registered, tests/test_converse_sagemaker_page.py).
"""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import httpx
import pytest
import streamlit as st
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from services.history import History
from protocol.script import words

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGE = "pages/converse.py"
SAID = "What time do you open?"


@pytest.fixture(scope="module")
def turn_wav(engine_url: str) -> bytes:
    r = httpx.post(f"{engine_url}/v1/audio/speech", json={"input": SAID, "voice": "joe", "seed": 7}, timeout=60,
                   trust_env=False)
    assert r.status_code == 200, r.text
    return r.content


@pytest.fixture(autouse=True)
def webrtc_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest cannot run WebRTC: streamlit-webrtc's session lookups patched to None, the live call renders inert
    (its conversation is tested by tests/test_converse_live.py and tests/test_browser_converse.py)."""
    import streamlit_webrtc.component
    import streamlit_webrtc.shutdown

    monkeypatch.setattr(streamlit_webrtc.component, "get_this_session_info", lambda: None)
    monkeypatch.setattr(streamlit_webrtc.shutdown, "get_this_session_info", lambda: None)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """Every file the page hands the browser (downloads, players), by its media id."""
    files: dict[str, bytes] = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def load(self, path_or_data, mimetype, kind, filename=None):  # type: ignore[no-untyped-def]
        file_id = original(self, path_or_data, mimetype, kind, filename)
        if isinstance(path_or_data, bytes | str):
            files[file_id] = path_or_data.encode() if isinstance(path_or_data, str) else path_or_data
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", load)
    return files


def _open(monkeypatch: pytest.MonkeyPatch, data: Path, url: str) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(data))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception[0].message if at.exception else ""
    return at


def _talk(at: AppTest, wav: bytes) -> None:
    at.file_uploader(key="converse_uploads").set_value([("turn1.wav", wav, "audio/wav")]).run()
    next(b for b in at.button if b.label == "Talk").click().run()
    assert not at.exception, at.exception[0].message if at.exception else ""


def _download(at: AppTest, served: dict[str, bytes], label: str) -> bytes:
    [button] = [d for d in at.download_button if d.proto.label == label]
    return served[button.proto.url.rsplit("/", 1)[-1].split(".")[0]]


def test_the_settings_show_with_their_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              engine_url: str) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    assert at.radio(key="converse_mode").value == "pipeline"
    assert at.slider(key="converse_vad_threshold").value == 0.5 and at.slider(key="converse_min_speech_ms").value == 100
    assert at.slider(key="converse_silence_ms").value == 500
    assert (at.slider(key="converse_silence_ms").min, at.slider(key="converse_silence_ms").max) == (200, 2000)
    assert "scripted, not a model" in at.text_area(key="converse_script").label
    assert "hello =>" in at.text_area(key="converse_script").value
    at.radio(key="converse_reply_kind").set_value("chat").run()
    assert at.selectbox(key="converse_reply_target").value == f"server:{engine_url}"  # the registered server
    assert at.text_area(key="converse_system_prompt") and not at.main.text_input  # no address to type


def test_native_mode_on_the_engine_offers_the_learned_turn_taking_and_asks_its_session_for_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    at.radio(key="converse_mode").set_value("native").run()
    assert at.radio(key="converse_turn_detector").value == "learned"  # offered in native mode on a URL target
    from services.converse.setup import Setup

    runner = Setup(mode="native", url=engine_url, turn_detector="learned", eot_threshold=0.6).check().runner()
    detection = runner.update.session.turn_detection
    assert (detection.type, detection.eot_threshold) == ("semantic_vad", 0.6)


def test_a_bad_script_line_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str,
                                    turn_wav: bytes) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    at.text_area(key="converse_script").input("hello => Hi there.\nbye -> See you\n").run()
    at.file_uploader(key="converse_uploads").set_value([("turn1.wav", turn_wav, "audio/wav")]).run()
    [error] = at.error  # said once, before any talk; neither the call nor Talk can start
    assert "the script line 2" in error.value and "bye" in error.value
    # the typo shows as typed: a `->` standing alone is inline code, which Streamlit's Markdown leaves alone
    # (as text it draws "→", and the line the error quotes looks right)
    assert "`->`" in error.value
    assert next(b for b in at.button if b.label == "Talk").disabled
    assert History(tmp_path / "data").conversations.list() == []


def test_a_turn_is_answered_timed_downloaded_and_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     engine_url: str, turn_wav: bytes,
                                                     served: dict[str, bytes]) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    _talk(at, turn_wav)
    assert not at.error, [e.value for e in at.error]
    timeline = json.loads(_download(at, served, "Download the JSON timeline"))
    [turn] = timeline["turns"]
    assert {"time", "open"} <= set(words(turn["user_text"]))
    assert turn["reply_text"] == "We open at nine in the morning, every day."
    assert turn["user_speech_end_s"] < turn["transcript_final_s"] <= turn["reply_first_token_s"] < turn["first_audio_s"]
    assert timeline["voice_to_voice_ms"]["n"] == 1
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Turns measured (n)"] == "1"
    assert metrics["Voice-to-voice p50"] == f"{timeline['voice_to_voice_ms']['p50']:.0f} ms"
    assert any("We open at nine in the morning" in m.value for m in at.markdown)
    # the turn's end is a stage of its own: decided by the learned detector (the page's default), then the rest
    assert turn["eot_rule"] in ("learned", "cap", "fallback") and turn["eot_wait_ms"] >= 200
    assert any(c.value.startswith(f"Timeline from speech ended: turn decided +{turn['eot_wait_ms']:.0f} ms "
                                  f"({turn['eot_rule']}") and "→ final transcript +" in c.value for c in at.caption)
    with wave.open(io.BytesIO(_download(at, served, "Download the stereo WAV"))) as w:
        assert w.getnchannels() == 2 and w.getnframes() > 0
        frames = w.readframes(w.getnframes())
    assert any(frames[i] for i in range(0, len(frames), 4)) and any(frames[i + 2] for i in range(0, len(frames), 4))

    [kept] = History(tmp_path / "data").conversations.list()
    assert kept.timeline == timeline and kept.mode == "pipeline" and kept.settings["silence_ms"] == 500
    assert (kept.settings["turn_detector"], kept.settings["eot_threshold"]) == ("learned", 0.5)
    assert kept.settings["script"].startswith("# The studio's default script")

    again = _open(monkeypatch, tmp_path / "data", engine_url)  # a new session: the conversation is listed
    assert any(s.value == "Earlier conversations" for s in again.subheader)
    assert any(kept.title in t.value for t in again.text)
    assert any("pipeline · 1 turns" in c.value for c in again.caption)


def test_a_conversation_from_the_history_is_shown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                 engine_url: str) -> None:
    timeline = {"mode": "native", "turns": [
        {"user_text": "what time do you open", "reply_text": "We open at nine.", "user_speech_end_s": 1.0,
         "transcript_final_s": 1.6, "reply_first_token_s": 1.7, "first_audio_s": 2.2, "voice_to_voice_ms": 1200.0,
         "interrupted": False, "error": None}], "voice_to_voice_ms": {"n": 1, "p50": 1200.0, "p95": 1200.0}}
    History(tmp_path / "data").conversations.record(timeline, settings={"mode": "native"})
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    assert any(t.value == "what time do you open" for t in at.text)
    assert any("native · 1 turns · voice-to-voice p50 1200 ms (n=1)" in c.value for c in at.caption)
    assert any(c.value.startswith("Timeline from speech ended: final transcript +600 ms → first reply token +700 ms "
                                  "→ first audio received +1200 ms") for c in at.caption)
