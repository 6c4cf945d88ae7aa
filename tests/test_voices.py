"""Voice style, design and cloning on the services side: speech_config's rules, what each target's model can
do (task types, with the model to deploy when it cannot), the studio's voice records, and the voice library
(add/list/delete) against the real offline engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import InvalidInput, ServerError
from protocol.limits import INSTRUCTIONS_MAX_CHARS
from protocol.speech import OFFLINE_TASK_TYPES
from services.backend import server_backend
from services.history import History
from services.settings import Settings
from services.speech import load_reference, omni_client, speech_config
from tests.loopback_support import serving
from tests.test_reference_audio import encode, speech_like

TRANSCRIPT = "This is what the speaker says in the reference recording."


def reference(seconds: float = 5.0, seed: int = 1) -> bytes:
    return encode(speech_like(seconds, 24_000, seed=seed), 24_000)


# -- speech_config: every rule before anything is sent ---------------------------------------------------------
def test_style_instructions_go_with_a_preset_voice() -> None:
    cfg = speech_config("joe", instructions="  slow and warm ", initial_codec_chunk_frames=4)
    assert (cfg.voice, cfg.task_type, cfg.instructions, cfg.initial_codec_chunk_frames) == ("joe", None, "slow and warm", 4)
    assert cfg.stream_audio and cfg.response_format == "pcm"


def test_voice_design_needs_a_description() -> None:
    for blank in (None, "", "   "):
        with pytest.raises(InvalidInput, match="describe the voice"):
            speech_config(task_type="VoiceDesign", instructions=blank)
    cfg = speech_config("joe", task_type="VoiceDesign", instructions="a calm, low voice")
    assert cfg.task_type == "VoiceDesign" and cfg.voice is None and cfg.instructions == "a calm, low voice"


def test_instructions_longer_than_the_limit_are_refused() -> None:
    speech_config(instructions="x" * INSTRUCTIONS_MAX_CHARS)
    with pytest.raises(InvalidInput, match=f"{INSTRUCTIONS_MAX_CHARS + 1} characters; the limit is {INSTRUCTIONS_MAX_CHARS}"):
        speech_config(instructions="x" * (INSTRUCTIONS_MAX_CHARS + 1))
    with pytest.raises(InvalidInput, match="voice description is"):
        speech_config(task_type="VoiceDesign", instructions="x" * (INSTRUCTIONS_MAX_CHARS + 1))


def test_cloning_needs_a_reference_or_a_saved_voice() -> None:
    with pytest.raises(InvalidInput, match="cloning \\(Base\\) needs a reference"):
        speech_config(task_type="Base")
    with pytest.raises(InvalidInput, match="needs a reference"):
        speech_config("default", task_type="Base")  # the preset default is not a saved voice
    with pytest.raises(InvalidInput, match="needs a reference"):
        speech_config(ref_text=TRANSCRIPT)  # a transcript without its recording
    saved = speech_config("anna", task_type="Base")
    assert saved.voice == "anna" and saved.ref_audio is None


def test_a_reference_means_base_and_goes_as_a_wav_data_url() -> None:
    ref = load_reference(reference())
    with_text = speech_config(ref_audio=ref, ref_text=TRANSCRIPT)
    assert with_text.task_type == "Base" and with_text.ref_audio == ref.data_url() and with_text.ref_text == TRANSCRIPT
    assert with_text.x_vector_only_mode is None
    timbre_only = speech_config(ref_audio=ref.data_url())
    assert timbre_only.x_vector_only_mode is True  # vLLM-Omni refuses Base without a transcript otherwise
    with pytest.raises(InvalidInput, match="recording"):
        speech_config(ref_audio="/home/me/voice.wav")


def test_a_reference_with_another_task_type_is_refused() -> None:
    ref = load_reference(reference())
    for task_type in ("CustomVoice", "VoiceDesign"):
        with pytest.raises(InvalidInput, match=f"for cloning \\(Base\\), not {task_type}"):
            speech_config(task_type=task_type, instructions="a voice", ref_audio=ref)


@pytest.mark.parametrize("frames", [0, 65, 2.5, True])
def test_first_chunk_frames_outside_the_range_are_refused(frames: Any) -> None:
    with pytest.raises(InvalidInput, match="first-chunk frames must be a whole number from 1 to 64"):
        speech_config(initial_codec_chunk_frames=frames)


# -- what each target can do ---------------------------------------------------------------------------------
class _Models(BaseHTTPRequestHandler):
    models: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/v1/models":
            body = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "vllm-omni"} for m in self.models]}
        elif self.path == "/v1/audio/voices":
            body = {"voices": [], "uploaded_voices": []}
        else:
            self.send_error(404)
            return
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def vllm_omni_models() -> Iterator[tuple[str, type[_Models]]]:
    """A loopback server answering /v1/models as a vLLM-Omni server would, with the model ids the test sets."""
    handler = type("Models", (_Models,), {"models": []})
    with serving(handler) as url:
        yield url, handler


def test_the_offline_engine_can_do_every_task_type(engine_url: str) -> None:
    client = omni_client(engine_url)
    assert client.task_types() == OFFLINE_TASK_TYPES
    for task_type in OFFLINE_TASK_TYPES:
        client.require_task_type(task_type)


def test_a_vllm_omni_url_can_do_what_its_model_serves(vllm_omni_models: tuple[str, Any]) -> None:
    url, handler = vllm_omni_models
    handler.models = ["Qwen/Qwen3-TTS-12Hz-0.6B-Base"]
    client = omni_client(url)
    assert client.task_types() == ("Base",)
    client.check(speech_config(ref_audio=load_reference(reference()), ref_text=TRANSCRIPT))
    with pytest.raises(InvalidInput) as err:
        client.check(speech_config(task_type="VoiceDesign", instructions="a calm voice"))
    message = str(err.value)
    assert "Qwen/Qwen3-TTS-12Hz-0.6B-Base" in message and "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign" in message
    assert url in message and "vllm serve" in message
    with pytest.raises(InvalidInput, match="CustomVoice"):
        client.check(speech_config("vivian"))  # a preset voice needs a CustomVoice model
    handler.models = ["Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"]
    assert client.task_types() == ("CustomVoice",)
    handler.models = ["some/other-tts"]  # unknown: a preset voice, as before
    assert client.task_types() == ("CustomVoice",)


def test_a_saved_voice_that_is_not_there_is_named(vllm_omni_models: tuple[str, Any]) -> None:
    url, handler = vllm_omni_models
    handler.models = ["Qwen/Qwen3-TTS-12Hz-1.7B-Base"]
    with pytest.raises(InvalidInput, match="there is no saved voice 'anna'.*voices add"):
        omni_client(url).check(speech_config("anna", task_type="Base"))


# -- the studio's records ------------------------------------------------------------------------------------
def test_voice_records_keep_consent_and_survive_removal(tmp_path: Path) -> None:
    history = History(tmp_path)
    with pytest.raises(InvalidInput, match="consent"):
        history.voices.record("http://x", "anna", "  ", who="me")
    rec = history.voices.record("http://x", "Anna", "consent-1", who="me", ref_text=TRANSCRIPT)
    with pytest.raises(InvalidInput, match="already saved"):
        history.voices.record("http://x", "anna", "consent-2", who="me")
    history.voices.record("http://y", "anna", "consent-3", who="you")  # another target: its own names
    assert [r.name for r in History(tmp_path).voices.list("http://x")] == ["Anna"]  # a new History sees it
    assert history.voices.remove("http://x", "ANNA", "deleted") == 1
    assert history.voices.list("http://x") == []
    kept = history.voices.list("http://x", include_removed=True)
    assert [(r.id, r.consent_id, r.removal) for r in kept] == [(rec.id, "consent-1", "deleted")]
    history.voices.record("http://x", "anna", "consent-4", who="me")  # the name is free again


# -- the voice library against the real offline engine ---------------------------------------------------------
def backend_for(url: str, data_dir: Path, name: str = "server") -> Any:
    settings = Settings.model_validate({"backend": "server", "server_url": url, "data_dir": str(data_dir)})
    return server_backend(url, settings, name=name)


def unique(prefix: str) -> str:
    """Voice names unique to this test run: the session's engine keeps every voice uploaded to it."""
    import uuid

    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def say(backend: Any, config: Any, text: str = "A saved voice, speaking again.") -> Any:
    return asyncio.run(asyncio.wait_for(backend.client("voice").say(backend.client("voice").check(config), text), 60))


def test_a_voice_is_saved_with_its_consent_listed_spoken_and_deleted(engine_url: str, tmp_path: Path) -> None:
    backend = backend_for(engine_url, tmp_path)
    name = unique("Anna")
    saved = backend.client("voices").add(name, load_reference(reference(6.0)), " consent-0412 ", ref_text=TRANSCRIPT,
                               speaker_description="warm narrator", who="tester")
    assert (saved.name, saved.consent_id, saved.who, saved.source) == (name, "consent-0412", "tester", "server")
    listed = {v.name: v for v in backend.client("voices").list()}
    assert listed[name].consent_id == "consent-0412" and listed[name].who == "tester"  # the server's list + the record
    assert listed[name].ref_text == TRANSCRIPT and listed[name].speaker_description == "warm narrator"
    (record,) = History(tmp_path).voices.list(engine_url, name=name)
    assert (record.consent_id, record.who, record.ref_text) == ("consent-0412", "tester", TRANSCRIPT)
    assert name.lower() in [v.lower() for v in backend.client("voice").voices()]

    u = say(backend, speech_config(name, task_type="Base"))
    assert u.ok, u.error
    assert u.stats.bytes > 4000

    said = backend.client("voices").delete(name.upper())  # names match in any case, as on vLLM-Omni
    assert "deleted" in said and name.upper() in said
    assert name not in {v.name for v in backend.client("voices").list()}
    (kept,) = History(tmp_path).voices.list(engine_url, name=name, include_removed=True)
    assert kept.removal == "deleted" and kept.consent_id == "consent-0412"  # the consent trail stays
    with pytest.raises(InvalidInput, match=f"there is no saved voice '{name.upper()}'"):
        backend.client("voices").delete(name.upper())
    with pytest.raises(InvalidInput, match="no saved voice"):
        backend.client("voice").check(speech_config(name, task_type="Base"))


def test_a_name_that_exists_is_refused_and_the_voice_kept(engine_url: str, tmp_path: Path) -> None:
    backend = backend_for(engine_url, tmp_path)
    name = unique("twice")
    backend.client("voices").add(name, reference(5.0, seed=1), "consent-a", who="tester")
    with pytest.raises(InvalidInput, match="already exists"):
        backend.client("voices").add(name.upper(), reference(5.0, seed=2), "consent-b")
    (voice,) = [v for v in backend.client("voices").list() if v.name == name]
    assert voice.consent_id == "consent-a"  # not replaced (vLLM-Omni itself would replace it)
    assert [r.consent_id for r in History(tmp_path).voices.list(engine_url)] == ["consent-a"]
    with pytest.raises(InvalidInput, match="'joe' is a preset voice"):
        backend.client("voices").add("joe", reference(), "consent-c")
    backend.client("voices").delete(name)


def test_no_consent_no_upload(engine_url: str, tmp_path: Path) -> None:
    backend = backend_for(engine_url, tmp_path)
    name = unique("noconsent")
    for consent in ("", "   "):
        with pytest.raises(InvalidInput, match="consent"):
            backend.client("voices").add(name, reference(), consent)
    with pytest.raises(InvalidInput, match="the reference is 1.5 s"):
        backend.client("voices").add(name, reference(1.5), "consent-d")  # raw bytes are checked like any reference
    with pytest.raises(InvalidInput, match="Invalid voice name"):
        backend.client("voices").add("a/b", reference(), "consent-e")
    assert name not in {v.name for v in backend.client("voices").list()}
    assert History(tmp_path).voices.list(include_removed=True) == []


def test_the_servers_refusal_is_its_message_and_leaves_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from offline.launch import start_engine
    from offline.voices import MAX_UPLOADED_ENV

    monkeypatch.setenv(MAX_UPLOADED_ENV, "1")  # an engine that takes one uploaded voice
    engine = start_engine()
    try:
        backend = backend_for(engine.url, tmp_path)
        backend.client("voices").add("first", reference(), "consent-1")
        with pytest.raises(ServerError) as err:
            backend.client("voices").add("second", reference(), "consent-2")
        assert "Uploaded voice limit reached (1)" in str(err.value)
        assert [r.name for r in History(tmp_path).voices.list(include_removed=True)] == ["first"]
    finally:
        engine.stop()


def test_the_offline_engine_records_its_voices_under_one_name(engine_url: str, tmp_path: Path) -> None:
    backend = backend_for(engine_url, tmp_path, name="offline")
    name = unique("offline")
    backend.client("voices").add(name, reference(), "consent-f")
    assert [r.target for r in History(tmp_path).voices.list(name=name)] == ["offline engine"]  # its port changes
    backend.client("voices").delete(name)


def test_voice_design_and_a_reference_clone_speak_on_the_offline_engine(engine_url: str, tmp_path: Path) -> None:
    backend = backend_for(engine_url, tmp_path)
    designed = say(backend, speech_config(task_type="VoiceDesign", instructions="a calm, low voice",
                                          initial_codec_chunk_frames=2))
    assert designed.ok, designed.error
    cloned = say(backend, speech_config(ref_audio=load_reference(reference()), ref_text=TRANSCRIPT))
    assert cloned.ok, cloned.error
    styled = say(backend, speech_config("joe", instructions="slow and warm"))
    assert styled.ok, styled.error
    assert min(u.stats.bytes for u in (designed, cloned, styled)) > 4000
