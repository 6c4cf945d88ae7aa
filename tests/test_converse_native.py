"""`python -m services converse --mode native` on the real offline engine's duplex session: two turns spoken by
the engine's own voice, answered with the script's replies, the stages in order on one clock, voice-to-voice over
both; a server without the session (a tiny local websockets server answering vLLM-Omni's `unsupported` error)
→ exit 1 with the message."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import spoken_turn_files
from tests.loopback_support import ws_serving
from tests.cli_support import run_cli
from protocol.script import words

TURNS = ("What time do you open?", "Thank you very much.")
SCRIPT = """\
# the test's shop
time open => We open at nine in the morning.
thank => You are most welcome.
default => Sorry, say that again?
"""


@pytest.fixture(scope="module")
def inputs(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return spoken_turn_files(engine_url, tmp_path_factory.mktemp("turns"), TURNS)


def converse(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return run_cli([sys.executable, "-m", "services", "converse", "--mode", "native", *args],
                          capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).resolve().parent.parent)


def test_two_turns_answered_by_the_session(engine_url: str, inputs: list[Path], tmp_path: Path) -> None:
    script = tmp_path / "shop.txt"
    script.write_text(SCRIPT)
    out = tmp_path / "conversation.wav"
    p = converse("--input", str(inputs[0]), "--input", str(inputs[1]), "--url", engine_url, "--script",
                 str(script), "--json", "--out", str(out))
    assert p.returncode == 0, p.stderr
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
    at = int(turns[0]["first_audio_s"] * 24000)
    assert np.abs(both[at:at + 12000, 1]).max() > 1000  # the agent's voice on the right, where it arrived


@pytest.fixture()
def no_duplex_server() -> Iterator[tuple[str, list[dict]]]:
    """A websockets server on loopback whose answer to session.update is vLLM-Omni's `unsupported` error; and the
    events it received."""
    received: list[dict] = []

    async def handler(ws) -> None:  # type: ignore[no-untyped-def]
        async for text in ws:
            received.append(json.loads(text))
            await ws.send(json.dumps({"type": "error", "error": {
                "type": "invalid_request_error", "code": "unsupported", "message": "no duplex session here"}}))

    with ws_serving(handler) as url:
        yield url, received


def test_a_server_without_the_session_exits_1(inputs: list[Path], no_duplex_server: tuple[str, list[dict]]) -> None:
    url, received = no_duplex_server
    p = converse("--input", str(inputs[0]), "--url", url, "--vad-threshold", "0.7", "--silence-ms", "800",
                 "--turn-detector", "silence")
    assert p.returncode == 1, p.stderr
    assert "this server has no speech-to-speech session; use --mode pipeline" in p.stderr
    [update] = received  # what it asked for: the server VAD's threshold and silence window as given
    assert update["type"] == "session.update"
    assert update["session"]["turn_detection"] == {"type": "server_vad", "threshold": 0.7, "silence_duration_ms": 800,
                                                   "prefix_padding_ms": update["session"]["turn_detection"][
                                                       "prefix_padding_ms"]}


def test_an_unreachable_server_exits_1(inputs: list[Path]) -> None:
    p = converse("--input", str(inputs[0]), "--url", "http://127.0.0.1:9")
    assert p.returncode == 1 and "cannot reach the speech-to-speech session" in p.stderr
