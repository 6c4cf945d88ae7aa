"""The Converse page on the SageMaker backend with Streamlit's AppTest (through app.py's navigation), against the local
emulator (real boto3 and the real HTTP/2 bidirectional-stream SDK over TLS) whose listen, voice and omni endpoints the
offline engine plays, and a reply endpoint a real streaming chat server plays (the emulator's `containers` config) —
deployed once for the module. Pipeline mode: a recorded turn heard by the listen endpoint, answered by the script
(or streamed from the reply endpoint) and spoken by the voice endpoint, kept in the history; the live call built
from the same setup (a microphone fed at real time). Native mode: the session on the omni endpoint. What a mode
needs and is not deployed — and a model reply with no chat endpoint or server to pick — is said in one line with
no runtime reachable, and nothing can start. Compare on SageMaker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from protocol.listen import DEFAULT_LISTEN_MODEL
from services.history import History
from services.listen import load_audio
from ui import resources
from tests.chat_support import chat_app, serving_app
from tests.test_converse_live import PIECE, Track, quiet_until, speak, turns_done
from tests.test_converse_page import _download, served, turn_wav, webrtc_inert  # noqa: F401  (fixtures)

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import IMAGE_URI, EmulatorHandle, deploy_endpoint  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGE = "pages/converse.py"
VOICE_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
OMNI_MODEL = "Qwen/Qwen3-Omni-30B-A3B-Instruct"
ENDPOINTS = {"listen": "sm-listen", "voice": "sm-voice", "omni": "sm-omni"}
REPLY = "We open at nine in the morning, every day."  # the default script's answer to "what time do you open"
CHAT_IMAGE = IMAGE_URI.replace(":omni-", ":chat-")  # the image the chat server plays
CHAT_ANSWER = "We open at nine, every day of the week."
CHAT_NAMED = {"OMNI_STUDIO_CHAT_ENDPOINTS": '["sm-chat"]'}  # an admin names the chat endpoint in the settings
NO_RUNTIME = {"AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": "http://127.0.0.1:9",
              "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": "https://127.0.0.1:9"}


@pytest.fixture(scope="module")
def deployed(sagemaker_emulator: EmulatorHandle) -> Iterator[tuple[EmulatorHandle, list[dict]]]:
    """The endpoints, deployed once for the module (the per-test `emulator` fixture would remove them), and the
    requests the reply endpoint's chat server received."""
    app, seen = chat_app(CHAT_ANSWER)
    with serving_app(app) as chat_url:
        sagemaker_emulator.reset()
        sagemaker_emulator.configure(containers={":chat-": chat_url})
        for name, model in (("sm-listen", DEFAULT_LISTEN_MODEL), ("sm-voice", VOICE_MODEL), ("sm-omni", OMNI_MODEL)):
            deploy_endpoint(sagemaker_emulator, name, environment={"SM_VLLM_MODEL": model})
        deploy_endpoint(sagemaker_emulator, "sm-chat", image=CHAT_IMAGE, environment={"SM_VLLM_MODEL": OMNI_MODEL})
        yield sagemaker_emulator, seen
        sagemaker_emulator.reset()


def _open(monkeypatch: pytest.MonkeyPatch, deployed: tuple[EmulatorHandle, list[dict]], data: Path,
          env: dict[str, str] | None = None, **endpoints: str) -> AppTest:
    """The page on SageMaker with the endpoints named (role=name), no state file; `env` over the emulator's."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in {**deployed[0].env(), **(env or {})}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "sagemaker")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(data))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(data.parent / "no-state.json"))
    for role in ("voice", "image", "video", "listen", "omni"):
        monkeypatch.delenv(f"OMNI_STUDIO_{role.upper()}_ENDPOINT", raising=False)
    for role, name in endpoints.items():
        monkeypatch.setenv(f"OMNI_STUDIO_{role.upper()}_ENDPOINT", name)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(PAGE)
    at.run()
    _ok(at)
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, at.exception[0].message if at.exception else ""


def _talk(at: AppTest, wav: bytes) -> None:
    at.file_uploader(key="converse_uploads").set_value([("turn1.wav", wav, "audio/wav")]).run()
    next(b for b in at.button if b.label == "Talk").click().run()
    _ok(at)


def _error(at: AppTest) -> str:
    """The page's one error, as the person reads it (the markdown escapes taken out)."""
    [error] = at.error
    return error.value.replace("\\", "")


def _talk_disabled(at: AppTest) -> bool:
    return next(b for b in at.button if b.label == "Talk").disabled


def test_a_recorded_turn_through_the_listen_and_voice_endpoints(
        deployed: tuple[EmulatorHandle, list[dict]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, turn_wav: bytes,  # noqa: F811
        served: dict[str, bytes]) -> None:  # noqa: F811
    at = _open(monkeypatch, deployed, tmp_path / "data", **ENDPOINTS)
    assert not at.error, [e.value for e in at.error]
    assert at.radio(key="converse_reply_kind").options[-1] == "A model on a SageMaker endpoint (streaming chat)"
    _talk(at, turn_wav)
    assert not at.error, [e.value for e in at.error]
    timeline = json.loads(_download(at, served, "Download the JSON timeline"))
    [turn] = timeline["turns"]
    assert {"time", "open"} <= set(turn["user_text"].lower().strip("?.!").split())
    assert turn["reply_text"] == REPLY and turn["error"] is None
    assert turn["user_speech_end_s"] < turn["transcript_final_s"] <= turn["reply_first_token_s"] < turn["first_audio_s"]
    assert timeline["voice_to_voice_ms"]["n"] == 1
    assert {m.label: m.value for m in at.metric}["Turns measured (n)"] == "1"
    [kept] = History(tmp_path / "data").conversations.list()
    assert kept.timeline == timeline and kept.mode == "pipeline"
    assert kept.settings["listen"] == "SageMaker endpoint sm-listen (us-east-1)"
    assert kept.settings["speak"] == "SageMaker endpoint sm-voice (us-east-1)"


def test_the_reply_streamed_from_a_reply_endpoint(
        deployed: tuple[EmulatorHandle, list[dict]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        turn_wav: bytes) -> None:  # noqa: F811
    at = _open(monkeypatch, deployed, tmp_path / "data", CHAT_NAMED, **ENDPOINTS)
    at.radio(key="converse_reply_kind").set_value("endpoint").run()
    assert at.selectbox(key="converse_reply_target").options == ["SageMaker endpoint sm-omni",
                                                                  "SageMaker endpoint sm-chat"]
    at.selectbox(key="converse_reply_target").set_value("sagemaker:sm-chat").run()
    at.text_area(key="converse_system_prompt").input("You run a shop.").run()
    seen = deployed[1]
    seen.clear()
    _talk(at, turn_wav)
    assert not at.error, [e.value for e in at.error]
    [kept] = History(tmp_path / "data").conversations.list()
    [turn] = kept.timeline["turns"]
    assert turn["reply_text"] == CHAT_ANSWER and turn["error"] is None
    assert kept.settings["reply"] == f"{OMNI_MODEL} on SageMaker endpoint sm-chat (us-east-1)"
    assert kept.settings["reply_endpoint"] == "sm-chat"
    [request] = seen  # the turn's chat request, through the response stream
    assert request["stream"] is True and request["model"] == OMNI_MODEL
    assert request["messages"][0] == {"role": "system", "content": "You run a shop."}
    assert "open" in request["messages"][1]["content"].lower()


def test_the_live_call_is_built_from_the_same_setup(deployed: tuple[EmulatorHandle, list[dict]], monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path, turn_wav: bytes) -> None:  # noqa: F811
    """The page's microphone begins the conversation its setup says (the browser's first frame calls its factory):
    fed at real time, the listen endpoint hears the turn, the voice endpoint's answer is played on the track."""
    at = _open(monkeypatch, deployed, tmp_path / "data", **ENDPOINTS)
    mic, playback = at.session_state["converse_microphone"], at.session_state["converse_playback"]
    live = mic.factory()
    track = Track(resources.loop())
    playback.attach(track.source)
    try:
        speak(live, bytes(PIECE * 10) + load_audio(turn_wav).pcm)
        quiet_until(live, lambda: turns_done(live, 1) and playback.queued_seconds() == 0)
        live.stop()
        conv = live.result(60)
    finally:
        track.stop()
    [turn] = conv.turns
    assert "open" in turn.user_text.lower() and turn.reply_text == REPLY and turn.error is None
    assert turn.first_audio_played_s is not None and turn.first_audio_played_s >= turn.first_audio_s
    assert max(rms for _, rms in track.frames) > 1000  # the agent's voice went out on the track


def test_native_mode_holds_the_session_on_the_omni_endpoint(
        deployed: tuple[EmulatorHandle, list[dict]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, turn_wav: bytes,  # noqa: F811
        served: dict[str, bytes]) -> None:  # noqa: F811
    at = _open(monkeypatch, deployed, tmp_path / "data", omni="sm-omni")  # native needs neither listen nor voice
    at.radio(key="converse_mode").set_value("native").run()
    assert not at.error, [e.value for e in at.error]
    assert not [s for s in at.selectbox if s.key == "converse_voice"]  # the omni endpoint's own voice
    _talk(at, turn_wav)
    assert not at.error, [e.value for e in at.error]
    timeline = json.loads(_download(at, served, "Download the JSON timeline"))
    assert timeline["mode"] == "native"
    [turn] = timeline["turns"]
    assert "open" in turn["user_text"].lower() and turn["reply_text"].strip() == REPLY and turn["error"] is None
    assert timeline["voice_to_voice_ms"]["n"] == 1
    [kept] = History(tmp_path / "data").conversations.list()
    assert kept.settings["url"] == "SageMaker endpoint sm-omni (us-east-1, HTTP/2 v1/realtime?duplex=1)"
    assert kept.settings["reply"] == "the session at SageMaker endpoint sm-omni (us-east-1, HTTP/2 " \
                                     "v1/realtime?duplex=1), instructed with the script"


def test_what_a_mode_lacks_is_said_in_one_line_and_nothing_starts(
        deployed: tuple[EmulatorHandle, list[dict]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, turn_wav: bytes) -> None:  # noqa: F811
    at = _open(monkeypatch, deployed, tmp_path / "data", NO_RUNTIME, voice="sm-voice")  # nothing invoked to say it
    at.file_uploader(key="converse_uploads").set_value([("turn1.wav", turn_wav, "audio/wav")]).run()
    error = _error(at)
    assert error.startswith("Pipeline mode on SageMaker listens through a listen endpoint, and none is deployed")
    assert "`python -m infra deploy --with listen`" in error and "OMNI_STUDIO_LISTEN_ENDPOINT" in error
    assert _talk_disabled(at) and "\n" not in error
    at.radio(key="converse_mode").set_value("native").run()
    error = _error(at)
    assert "`python -m infra deploy --with omni`" in error and "OMNI_STUDIO_OMNI_ENDPOINT" in error
    assert error.endswith("or choose pipeline mode") and _talk_disabled(at)
    no_voice = _open(monkeypatch, deployed, tmp_path / "data", NO_RUNTIME, listen="sm-listen")
    error = _error(no_voice)
    assert error.startswith("Pipeline mode on SageMaker speaks through a voice endpoint, and none is deployed")
    assert "`python -m infra deploy`, or name" in error and "OMNI_STUDIO_VOICE_ENDPOINT" in error

    # A model reply with nothing in the closed set to pick: no server registered, no endpoint serving chat.
    pipeline = {"listen": "sm-listen", "voice": "sm-voice"}
    bare = _open(monkeypatch, deployed, tmp_path / "data", NO_RUNTIME, **pipeline)
    bare.radio(key="converse_reply_kind").set_value("chat").run()
    assert _error(bare).startswith("No server for the reply is registered: an admin adds one on the sidebar")
    bare.radio(key="converse_reply_kind").set_value("endpoint").run()
    error = _error(bare)
    assert error.startswith("This deployment has no endpoint that serves chat: deploy the omni endpoint")
    assert "chat_endpoints" in error and _talk_disabled(bare)

    every = _open(monkeypatch, deployed, tmp_path / "data", {**NO_RUNTIME, **CHAT_NAMED}, **ENDPOINTS)
    every.radio(key="converse_reply_kind").set_value("endpoint").run()
    every.selectbox(key="converse_reply_target").set_value("sagemaker:sm-chat").run()
    every.file_uploader(key="converse_uploads").set_value([("turn1.wav", turn_wav, "audio/wav")]).run()
    assert not every.error and not _talk_disabled(every)
    assert History(tmp_path / "data").conversations.list() == []


def test_compare_two_silence_windows_on_the_endpoints(deployed: tuple[EmulatorHandle, list[dict]], monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path, turn_wav: bytes) -> None:  # noqa: F811
    at = _open(monkeypatch, deployed, tmp_path / "data", **ENDPOINTS)
    at.slider(key="converse_silence_ms").set_value(300).run()
    at.slider(key="cmp_silence_ms").set_value(700).run()
    at.file_uploader(key="converse_uploads").set_value([("turn1.wav", turn_wav, "audio/wav")]).run()
    at.button(key="cmp_go").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    d = at.session_state["cmp_last"]["json"]
    for side, silence in (("a", 300), ("b", 700)):
        assert d[side]["setup"]["silence_ms"] == silence
        assert d[side]["setup"]["listen"] == "SageMaker endpoint sm-listen (us-east-1)"
        [turn] = d[side]["conversation"]["turns"]
        assert turn["error"] is None and turn["reply_text"] == REPLY
        assert d[side]["voice_to_voice_ms"]["n"] == 1
    assert d["ratio_p50"] == round(d["b"]["voice_to_voice_ms"]["p50"] / d["a"]["voice_to_voice_ms"]["p50"], 3)
