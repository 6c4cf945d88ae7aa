"""The Listen and Sound pages on the SageMaker backend with Streamlit's AppTest (through app.py), against the local
emulator. Settings that name the voice, image and video endpoints but no listen (or sound) endpoint: the page says
so at once — the message `services.aws.missing_endpoint` gives, naming `python -m infra deploy --with listen` and
OMNI_STUDIO_LISTEN_ENDPOINT — and offers nothing to upload or press. With a listen endpoint as well, a transcribed
upload's progress line names the listen endpoint only, not the backend's other endpoints."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from protocol.listen import DEFAULT_LISTEN_MODEL
from services.backend import create_backend
from services.listen import word_error_rate
from services.settings import load_settings

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import EmulatorHandle, deploy_endpoint  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
OTHERS = {"voice": "sm-voice", "image": "sm-image", "video": "sm-video"}  # named, never called by these pages
SENTENCE = "Please call me back when you get home tonight."


def _open(monkeypatch: pytest.MonkeyPatch, tmp: Path, page: str, **endpoints: str) -> AppTest:
    """`page` on SageMaker with only these endpoints named (role=name) and no state file."""
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "sagemaker")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp / "data"))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp / "no-state.json"))
    for role in ("voice", "image", "video", "listen", "omni", "sound"):
        monkeypatch.delenv(f"OMNI_STUDIO_{role.upper()}_ENDPOINT", raising=False)
    for role, name in endpoints.items():
        monkeypatch.setenv(f"OMNI_STUDIO_{role.upper()}_ENDPOINT", name)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception[0].message if at.exception else ""
    return at


def _errors(at: AppTest) -> str:
    return " ".join(e.value for e in at.main.error).replace("\\", "")


@pytest.mark.parametrize("page, family", [("pages/listen.py", "listen"), ("pages/sound.py", "sound")])
def test_without_its_endpoint_the_page_says_so_before_anything_is_offered(
        emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, page: str, family: str) -> None:
    at = _open(monkeypatch, tmp_path, page, **OTHERS)
    errors = _errors(at)
    assert f"The {family} backend is not available: no {family} endpoint is configured" in errors
    assert f"python -m infra deploy --with {family}" in errors and f"OMNI_STUDIO_{family.upper()}_ENDPOINT" in errors
    assert f"python -m infra add {family}" in errors
    # the same words as the service's own refusal, said before anything is sent
    backend = create_backend(load_settings())
    try:
        assert str(backend.missing(family)) in errors and backend.missing("voice") is None
    finally:
        backend.close()
    assert not at.file_uploader and not at.text_area and not at.main.button  # nothing to upload, write or press


@pytest.fixture
def sentence_wav(engine_url: str) -> bytes:
    r = httpx.post(f"{engine_url}/v1/audio/speech", json={"input": SENTENCE, "voice": "joe", "seed": 7}, timeout=60,
                   trust_env=False)
    assert r.status_code == 200, r.text
    return r.content


def test_the_progress_line_names_the_listen_endpoint_only(emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path, sentence_wav: bytes) -> None:
    import streamlit_webrtc.component
    import streamlit_webrtc.shutdown

    # AppTest runs no WebRTC: the microphone renders inert (as tests/test_listen_page.py does)
    monkeypatch.setattr(streamlit_webrtc.component, "get_this_session_info", lambda: None)
    monkeypatch.setattr(streamlit_webrtc.shutdown, "get_this_session_info", lambda: None)
    deploy_endpoint(emulator_env, "sm-listen", environment={"SM_VLLM_MODEL": DEFAULT_LISTEN_MODEL})
    at = _open(monkeypatch, tmp_path, "pages/listen.py", listen="sm-listen", **OTHERS)
    assert not _errors(at)
    at.file_uploader(key="listen_upload").set_value(("call.wav", sentence_wav, "audio/wav")).run()
    next(b for b in at.button if b.label == "Transcribe").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    [bar] = at.get("progress")
    line = bar.proto.text
    assert line == "Transcribed on SageMaker endpoint sm-listen (us-east-1)", line
    assert not any(name in line for name in OTHERS.values())
    assert any(word_error_rate(SENTENCE, t.value) <= 0.2 for t in at.text)
