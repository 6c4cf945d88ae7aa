"""`python -m services converse --mode native --endpoint E`: the duplex session on a SageMaker endpoint, over the
HTTP/2 bidirectional stream (invocation path v1/realtime, query duplex=1), against the local emulator (real
HTTP/2 SDK over TLS) whose endpoint the offline engine plays. Two turns spoken by the engine's voice, answered with
the script's replies; the stages on one clock, voice-to-voice, and the agent's voice in the stereo WAV. A missing
endpoint is named (exit 1); --endpoint beside --url, or in pipeline mode, is refused (exit 2)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import spoken_turn_files

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import EmulatorHandle, deploy_endpoint  # noqa: E402
from tests.cli_support import run_cli
from protocol.script import words

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
OMNI_MODEL = "Qwen/Qwen3-Omni-30B-A3B-Instruct"
TURNS = ("What time do you open?", "Thank you very much.")
SCRIPT = "time open => We open at nine in the morning.\nthank => You are most welcome.\ndefault => Say again?\n"


def converse(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(tmp / "data"), "OMNI_STUDIO_CONFIG": "",
           "OMNI_STUDIO_STATE_FILE": str(tmp / "none.json")}
    return run_cli([sys.executable, "-m", "services", "converse", "--mode", "native", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def inputs(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return spoken_turn_files(engine_url, tmp_path_factory.mktemp("turns"), TURNS)


def test_two_turns_in_the_session_on_an_endpoint(emulator_env: EmulatorHandle, inputs: list[Path],
                                                 tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "sm-omni", environment={"SM_VLLM_MODEL": OMNI_MODEL})
    script = tmp_path / "shop.txt"
    script.write_text(SCRIPT)
    out = tmp_path / "conversation.wav"
    p = converse("--input", str(inputs[0]), "--input", str(inputs[1]), "--endpoint", "sm-omni", "--script",
                 str(script), "--json", "--out", str(out), tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "the session at SageMaker endpoint sm-omni (us-east-1, HTTP/2 v1/realtime?duplex=1)" in p.stderr
    body = json.loads(p.stdout)
    assert body["mode"] == "native"
    turns = body["turns"]
    assert [t["reply_text"].strip() for t in turns] == ["We open at nine in the morning.", "You are most welcome."]
    assert "open" in words(turns[0]["user_text"]) and "thank" in words(turns[1]["user_text"])
    for t in turns:
        assert t["error"] is None and t["interrupted"] is False
        stages = [t["user_speech_end_s"], t["transcript_final_s"], t["reply_first_token_s"], t["first_audio_s"]]
        assert stages == sorted(stages), t
        assert t["voice_to_voice_ms"] == pytest.approx((t["first_audio_s"] - t["user_speech_end_s"]) * 1000, abs=0.2)
        assert t["voice_to_voice_ms"] > 500 * 0.9  # it includes the silence window the server waits for
    assert turns[1]["user_speech_end_s"] > turns[0]["first_audio_s"]  # the next input after the agent spoke
    assert body["voice_to_voice_ms"]["n"] == 2
    with wave.open(io.BytesIO(out.read_bytes())) as w:
        assert w.getnchannels() == 2 and w.getframerate() == 24000
        both = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, 2)
    for t in turns:  # the agent's voice on the right, where each reply arrived; the person's on the left before
        at = int(t["first_audio_s"] * 24000)
        assert np.abs(both[at:at + 12000, 1]).max() > 1000
        assert np.abs(both[int(t["user_speech_end_s"] * 24000) - 12000:int(t["user_speech_end_s"] * 24000), 0]).max() > 1000


def test_a_missing_endpoint_is_named(emulator_env: EmulatorHandle, inputs: list[Path], tmp_path: Path) -> None:
    p = converse("--input", str(inputs[0]), "--endpoint", "no-such-omni", tmp=tmp_path)
    assert p.returncode == 1, p.stderr
    (line,) = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert "SageMaker endpoint no-such-omni" in line and "Endpoint no-such-omni of account" in line


def test_endpoint_beside_a_url_or_in_pipeline_mode_is_refused(inputs: list[Path], tmp_path: Path) -> None:
    both = converse("--input", str(inputs[0]), "--endpoint", "e", "--url", "http://127.0.0.1:9", tmp=tmp_path)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    pipeline = run_cli([sys.executable, "-m", "services", "converse", "--input", str(inputs[0]),
                               "--endpoint", "e"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert pipeline.returncode == 2 and "--url and --endpoint are for --mode native" in pipeline.stderr
