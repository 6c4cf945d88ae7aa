"""Converse's pipeline on SageMaker targets: the CLI with --listen-endpoint and --voice-endpoint against the local
emulator (real boto3 and the real HTTP/2 bidirectional-stream SDK over TLS), whose endpoints the offline engine
answers; the reply is a script. Two turns; their text and timelines are checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.listen import DEFAULT_LISTEN_MODEL
from services.listen.sample import spoken_sample_at
pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import EmulatorHandle, deploy_endpoint  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
VOICE_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
TURNS = ("What time do you open?", "Thank you very much.")
SCRIPT = "time open => We open at nine in the morning.\nthank => You are most welcome.\ndefault => Say again?\n"


def converse(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(tmp / "data"), "OMNI_STUDIO_CONFIG": "",
           "OMNI_STUDIO_STATE_FILE": str(tmp / "none.json")}
    return subprocess.run([sys.executable, "-m", "services", "converse", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


def test_two_turns_on_a_listen_and_a_voice_endpoint(emulator_env: EmulatorHandle, engine_url: str,
                                                    tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "sm-listen", environment={"SM_VLLM_MODEL": DEFAULT_LISTEN_MODEL})
    deploy_endpoint(emulator_env, "sm-voice", environment={"SM_VLLM_MODEL": VOICE_MODEL})
    inputs = []
    for i, text in enumerate(TURNS):
        path = tmp_path / f"turn{i + 1}.wav"
        path.write_bytes(spoken_sample_at(engine_url, text))
        inputs.append(path)
    script = tmp_path / "shop.txt"
    script.write_text(SCRIPT)
    p = converse("--input", str(inputs[0]), "--input", str(inputs[1]), "--listen-endpoint", "sm-listen",
                 "--voice-endpoint", "sm-voice", "--script", str(script), "--json", tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    conv = json.loads(p.stdout)
    turns = conv["turns"]
    assert [t["reply_text"] for t in turns] == ["We open at nine in the morning.", "You are most welcome."]
    assert "open" in turns[0]["user_text"].lower() and "thank" in turns[1]["user_text"].lower()
    for t in turns:
        assert t["error"] is None
        assert t["user_speech_end_s"] <= t["transcript_final_s"] <= t["reply_first_token_s"] <= t["first_audio_s"]
    assert conv["voice_to_voice_ms"]["n"] == 2


def test_a_missing_endpoint_is_named(emulator_env: EmulatorHandle, engine_url: str, tmp_path: Path) -> None:
    wav = tmp_path / "turn.wav"
    wav.write_bytes(spoken_sample_at(engine_url, TURNS[0]))
    p = converse("--input", str(wav), "--listen-endpoint", "no-such-endpoint", "--speak-url", engine_url,
                 "--json", tmp=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "no-such-endpoint" in p.stderr
    bad = converse("--input", str(wav), "--listen-endpoint", "x", "--listen-url", engine_url, tmp=tmp_path)
    assert bad.returncode == 2 and "not allowed with argument" in bad.stderr
