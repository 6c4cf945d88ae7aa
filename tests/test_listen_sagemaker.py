"""Listen on SageMaker: the studio's CLI and listener against the local emulator's listen endpoint (real boto3
InvokeEndpoint and the real HTTP/2 bidirectional-stream SDK over TLS), answered by the offline engine's
recognizer. The audio is the engine's own voice saying a known sentence; the text that comes back is checked
against it by word error rate.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from protocol.audio import wav_bytes
from protocol.listen import DEFAULT_LISTEN_MODEL
from services.backend import create_backend
from services.listen import load_audio, word_error_rate
from services.settings import Settings
pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import EmulatorHandle, deploy_endpoint  # noqa: E402
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "Please call me back when you get home tonight."
SECOND = "The children played in the garden after school."
VOICE_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"


def speak(engine_url: str, text: str) -> bytes:
    r = httpx.post(f"{engine_url}/v1/audio/speech", json={"input": text, "voice": "joe", "seed": 7}, timeout=60,
                   trust_env=False)
    assert r.status_code == 200, r.text
    return r.content


@pytest.fixture(scope="module")
def sentence_wav(engine_url: str) -> bytes:
    return speak(engine_url, SENTENCE)


@pytest.fixture
def listen_endpoint(emulator_env: EmulatorHandle) -> str:
    deploy_endpoint(emulator_env, "sm-listen", environment={"SM_VLLM_MODEL": DEFAULT_LISTEN_MODEL})
    return "sm-listen"


def cli(*args: str, tmp: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(tmp / "data"), "OMNI_STUDIO_CONFIG": "",
            "OMNI_STUDIO_STATE_FILE": str(tmp / "none.json"), **(env or {})}
    return run_cli([sys.executable, "-m", "services", "listen", *args, "--backend", "sagemaker", "--json"],
                          cwd=ROOT, env=full, capture_output=True, text=True, timeout=120)


def test_cli_file_and_stream_on_the_listen_endpoint(listen_endpoint: str, sentence_wav: bytes, tmp_path: Path) -> None:
    wav = tmp_path / "call.wav"
    wav.write_bytes(sentence_wav)
    state = tmp_path / "state.json"  # what `python -m infra deploy --with listen` writes (the flat keys)
    state.write_text(json.dumps({"region": "us-east-1", "endpoint_names": {"listen": listen_endpoint}}))
    for extra in ((), ("--stream",)):
        r = cli(str(wav), *extra, "--reference", SENTENCE, "--state-file", str(state), tmp=tmp_path)
        assert r.returncode == 0, r.stderr
        figures = json.loads(r.stdout)
        assert figures["backend"] == "sagemaker" and "sm-listen" in figures["target"]
        assert figures["model"] == DEFAULT_LISTEN_MODEL
        assert figures["wer"] is not None and figures["wer"] <= 0.3, figures
        assert "call" in figures["text"].lower() and "home" in figures["text"].lower()
        if extra:
            assert figures["partials"] >= 1 and figures["final_ms"] is not None
        else:
            assert figures["segments"] and "fitting" not in figures


def test_an_invoke_only_principal_can_still_transcribe(listen_endpoint: str, sentence_wav: bytes,
                                                       emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    wav = tmp_path / "call.wav"
    wav.write_bytes(sentence_wav)
    emulator_env.set_faults(deny_actions=["sagemaker:Describe*"])
    try:
        for extra in ((), ("--stream",)):
            r = cli(str(wav), *extra, tmp=tmp_path, env={"OMNI_STUDIO_LISTEN_ENDPOINT": listen_endpoint})
            assert r.returncode == 0, r.stderr
            figures = json.loads(r.stdout)
            assert figures["model"] == DEFAULT_LISTEN_MODEL and "home" in figures["text"].lower()
    finally:
        emulator_env.set_faults()


def test_an_endpoint_that_is_not_a_listen_model_is_named(emulator_env: EmulatorHandle, sentence_wav: bytes,
                                                         tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "sm-voice", environment={"SM_VLLM_MODEL": VOICE_MODEL})
    wav = tmp_path / "call.wav"
    wav.write_bytes(sentence_wav)
    r = cli(str(wav), "--endpoint", "sm-voice", tmp=tmp_path)
    assert r.returncode == 1, r.stderr
    assert f"endpoint sm-voice serves {VOICE_MODEL}, a voice model, not a listen model" in r.stderr
    assert "python -m infra deploy --with listen" in r.stderr
    missing = cli(str(wav), tmp=tmp_path)  # no listen endpoint anywhere
    assert missing.returncode == 1 and "OMNI_STUDIO_LISTEN_ENDPOINT" in missing.stderr
    assert "--with listen" in missing.stderr
    bad = cli(str(wav), "--endpoint", "sm-listen", "--url", "http://127.0.0.1:9", tmp=tmp_path)
    assert bad.returncode == 2


def settings(**over: Any) -> Settings:
    base = {"backend": "sagemaker", "listen_endpoint": "sm-listen", "connect_timeout_s": 5.0,
            "request_timeout_s": 30.0, "state_file": "/nonexistent/state.json"}
    return Settings.model_validate({**base, **over})


def test_a_file_over_the_invoke_limit_is_cut_at_silences_and_joined(listen_endpoint: str, engine_url: str) -> None:
    """The 6 MB limit, scaled down: a listener allowed 120 kB a request gets two sentences 1.5 s apart
    (about 200 kB of WAV), cuts them in the silence between, and joins the two texts."""
    from services.listen.sagemaker import cut_at_silences

    rate = 16_000
    parts = [load_audio(speak(engine_url, text), "s.wav").pcm for text in (SENTENCE, SECOND)]
    gap = np.zeros(int(1.5 * rate), dtype="<i2").tobytes()
    pcm = gap[:8000] + parts[0] + gap + parts[1] + gap[:8000]
    audio = load_audio(wav_bytes(pcm, rate), "two.wav")
    limit = 120_000
    assert len(audio.data) > limit
    pieces = cut_at_silences(audio.pcm, limit - 2_000)
    assert len(pieces) == 2 and all(len(p) * 1 + 44 <= limit for _, p in pieces)
    boundary = pieces[1][0]
    first_end = (8000 + len(parts[0])) / 2 / rate
    assert first_end < boundary < first_end + 1.5  # cut in the silence between the sentences
    backend = create_backend(settings())
    try:
        backend.client("listen").max_bytes = limit
        transcript = asyncio.run(backend.client("listen").transcribe_file(audio))
    finally:
        backend.close()
    assert transcript.fitting and "cut at silences into 2 pieces" in transcript.fitting
    assert word_error_rate(f"{SENTENCE} {SECOND}", transcript.text) <= 0.3, transcript.text
    assert transcript.segments[-1].start > boundary  # the second piece's segments moved to their place


def test_a_live_source_over_the_bidirectional_stream(listen_endpoint: str, sentence_wav: bytes) -> None:
    """`stream_live` on SageMaker: chunks from an async source over the HTTP/2 bidirectional stream."""
    audio = load_audio(sentence_wav, "s.wav")

    async def frames():  # type: ignore[no-untyped-def]
        for i in range(0, len(audio.pcm), 3200):
            yield audio.pcm[i:i + 3200]
            await asyncio.sleep(0.1)

    backend = create_backend(settings())
    try:
        heard = asyncio.run(backend.client("listen").stream_live(frames()))
    finally:
        backend.close()
    assert word_error_rate(SENTENCE, heard.text) <= 0.2, heard.text
    assert heard.route == "stream" and heard.audio_s == pytest.approx(audio.seconds)
    assert heard.model == DEFAULT_LISTEN_MODEL and heard.final_ms is not None
