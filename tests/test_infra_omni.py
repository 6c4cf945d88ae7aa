"""The omni family's smoke check (services/smoke/omni.py): a one-turn native conversation — vLLM-Omni's duplex
session — with the endpoint after `infra deploy --with omni`, on the local emulator (real boto3, the real HTTP/2
bidirectional stream over TLS) whose container is the offline engine. It passes with the transcript, the scripted
reply and the agent's audio in the stereo WAV; status, cost and `infra smoke` show it. It fails with one line
naming what did not come: a container with no duplex session (a tiny websockets server answering vLLM-Omni's
`unsupported`, played by the emulator's `containers` config), a session that hears no words, a reply without
audio, a session that never answers."""

from __future__ import annotations

import asyncio
import http
import io
import json
import threading
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from infra.cli import main as infra_main
from services.smoke import SMOKE_TEXT
from services.smoke.omni import OMNI_FILE, smoke_session
from infra.state import DeploymentState
from protocol.script import DEFAULT_SCRIPT, parse_script
from services.listen.sample import spoken_sample_at
from tests.conftest import free_port

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import ROLE_ARN, EmulatorHandle  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "30"]
OMNI_MODEL = "Qwen/Qwen3-Omni-30B-A3B-Instruct"
SCRIPTED = {rule.reply for rule in parse_script(DEFAULT_SCRIPT).rules} | {parse_script(DEFAULT_SCRIPT).default}


def stereo(path: Path) -> np.ndarray:
    with wave.open(io.BytesIO(path.read_bytes())) as w:
        assert w.getnchannels() == 2 and w.getframerate() == 24000
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, 2)


def test_deploy_with_omni_smoke_tests_a_spoken_turn_and_status_shows_it(
        emulator_env: EmulatorHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_file, smoke_dir = tmp_path / "state.json", tmp_path / "smoke"
    code = infra_main(["deploy", "voice", "--with", "omni", "--json", "--smoke-dir", str(smoke_dir),
                       "--state-file", str(state_file), "--role-arn", ROLE_ARN, *CLI_FAST])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert sorted(data["endpoints"]) == ["omni", "voice"]
    checks = data["smoke"]["checks"]
    assert [c["role"] for c in checks] == ["voice", "omni"]  # catalog order: the voice's recording is the turn
    omni = checks[1]
    assert omni["ok"], omni
    figures = omni["figures"]
    assert figures["source"] == "the voice check's recording"
    assert len(figures["user_text"].split()) >= 4  # the recognizer heard the smoke line
    assert figures["reply_text"].strip() in SCRIPTED  # the offline engine answers with its default script
    assert figures["agent_audio_bytes"] > 24000 and figures["voice_to_voice_ms"] > 0
    assert omni["detail"].startswith("one turn from the voice check's recording: heard ")
    assert omni["path"] == str(smoke_dir / OMNI_FILE)
    both = stereo(smoke_dir / OMNI_FILE)
    first_audio = int(figures["first_audio_s"] * 24000)
    assert np.abs(both[: first_audio, 0]).max() > 1000  # the person's turn on the left, before the reply
    assert np.abs(both[first_audio: first_audio + 12000, 1]).max() > 1000  # the agent's voice on the right
    assert (smoke_dir / "validation-output.wav").exists()

    state = DeploymentState.load(state_file)
    assert state.record("omni").smoke["ok"] and "heard" in state.record("omni").smoke["detail"]
    sm = emulator_env.client("sagemaker")
    env = sm.describe_model(ModelName=state.record("omni").model.name)["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_MODEL"] == OMNI_MODEL

    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("omni "))
    assert "InService" in row and "ml.g6e.12xlarge" in row and " ok " in row, row
    # the shipped table has no price for the multi-GPU types: the total says what it leaves out
    assert "total without ml.g6e.12xlarge (no price): " in text
    assert infra_main(["cost", "--state-file", str(state_file)]) == 0
    text = capsys.readouterr().out
    assert "running deployment in us-east-1 without ml.g6e.12xlarge (no price): " in text
    assert "no price for ml.g6e.12xlarge" in text
    assert infra_main(["cost", "--json", "--state-file", str(state_file)]) == 0
    assert json.loads(capsys.readouterr().out)["unpriced_instance_types"] == ["ml.g6e.12xlarge"]

    # `infra smoke omni` alone: no voice check in this run, so the offline engine's voice says the turn
    assert infra_main(["smoke", "omni", "--json", "--state-file", str(state_file), "--out-dir", str(smoke_dir)]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["ok"] and [c["role"] for c in alone["checks"]] == ["omni"]
    assert alone["checks"][0]["figures"]["source"] == "the offline engine's voice"
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert sm.list_endpoints()["Endpoints"] == []


# ---------------------------------------------------------------------------------------------------------
# A tiny duplex server on loopback: what it does depends on the path its base URL has (the emulator's container
# is reached at /v1/realtime: it answers `unsupported`, as a vLLM-Omni server without the duplex session does).
def _event(kind: str, **fields: object) -> str:
    return json.dumps({"type": kind, **fields})


async def _duplex(ws) -> None:  # type: ignore[no-untyped-def]
    mode = ws.request.path.split("/v1/realtime")[0].strip("/") or "unsupported"
    appends = 0
    async for raw in ws:
        kind = json.loads(raw).get("type")
        if kind == "session.update":
            if mode == "unsupported":
                await ws.send(_event("error", error={"type": "invalid_request_error", "code": "unsupported",
                                                     "message": "this deployment serves no duplex session"}))
                continue
            await ws.send(_event("session.created", session={}))
            await ws.send(_event("session.updated", session={}))
        elif kind == "input_audio_buffer.append":
            appends += 1
            if appends != 10 or mode == "stall":  # one second of the turn, then the answer (a stall never does)
                continue
            heard = "" if mode == "deaf" else "hello there"
            await ws.send(_event("conversation.item.input_audio_transcription.completed", transcript=heard))
            if mode == "mute":
                await ws.send(_event("response.output_audio_transcript.delta", delta="Hi, how can I help?"))
                await ws.send(_event("response.done", response={"status": "completed"}))


@pytest.fixture(scope="module")
def duplex_server() -> Iterator[str]:
    from websockets.asyncio.server import serve

    port = free_port()
    ready = threading.Event()
    stop: dict[str, asyncio.Future] = {}

    def health(connection, request):  # type: ignore[no-untyped-def]  # the emulator's ping
        return connection.respond(http.HTTPStatus.OK, "{}") if request.path == "/health" else None

    async def main() -> None:
        stop["f"] = asyncio.get_running_loop().create_future()
        async with serve(_duplex, "127.0.0.1", port, process_request=health):
            ready.set()
            await stop["f"]

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield f"http://127.0.0.1:{port}"
    loop.call_soon_threadsafe(stop["f"].set_result, None)
    thread.join(5)


@pytest.fixture(scope="module")
def turn(engine_url: str) -> bytes:
    return spoken_sample_at(engine_url, SMOKE_TEXT)


def test_a_container_without_the_duplex_session_fails_the_smoke_naming_it(
        emulator_env: EmulatorHandle, duplex_server: str, tmp_path: Path, turn: bytes,
        capsys: pytest.CaptureFixture[str]) -> None:
    emulator_env.configure(containers={":omni-sagemaker-": duplex_server})  # the deployment's image
    state_file = tmp_path / "state.json"
    code = infra_main(["deploy", "omni", "--smoke-dir", str(tmp_path / "smoke"), "--state-file", str(state_file),
                       "--role-arn", ROLE_ARN, *CLI_FAST])
    err = capsys.readouterr().err
    assert code == 5, err
    (line,) = [x for x in err.splitlines() if x.startswith("error: the smoke test failed")]
    name = DeploymentState.load(state_file).record("omni").endpoint.name
    assert line == (f"error: the smoke test failed: omni: session refused: SageMaker endpoint {name} (us-east-1, "
                    "HTTP/2 v1/realtime?duplex=1) has no speech-to-speech session (it answered vLLM-Omni's "
                    "`unsupported` to the duplex session.update)"), line
    assert not (tmp_path / "smoke" / OMNI_FILE).exists()  # nothing was said
    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("omni "))
    assert " FAILED " in row, row
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0


@pytest.mark.parametrize(("mode", "expected"), [
    ("deaf", "no transcript: no words heard in "),
    ("mute", "no reply audio: heard 'hello there'; the reply's text came ('Hi, how can I help?') but only 0 bytes "
             "of the agent's audio (needs more than 2000)"),
    ("stall", "timed out: no complete turn from ws://127.0.0.1:"),
])
def test_a_session_that_does_not_answer_fully_fails_naming_what_did_not_come(
        duplex_server: str, turn: bytes, tmp_path: Path, mode: str, expected: str) -> None:
    check = smoke_session(f"{duplex_server}/{mode}", tmp_path, recording=turn, timeout_s=3)
    assert not check.ok and check.role == "omni"
    assert check.detail.startswith(expected), check.detail
    assert "\n" not in check.detail
    if mode != "stall":  # what was said is kept (the person's turn on the left), the agent's side is silent
        both = stereo(tmp_path / OMNI_FILE)
        assert np.abs(both[:, 0]).max() > 1000 and np.abs(both[:, 1]).max() == 0


def test_an_unreachable_session_fails_naming_it(turn: bytes, tmp_path: Path) -> None:
    check = smoke_session("http://127.0.0.1:9", tmp_path, recording=turn, timeout_s=20)
    assert not check.ok
    assert check.detail.startswith("no session: cannot reach the speech-to-speech session at "
                                   "ws://127.0.0.1:9/v1/realtime?duplex=1"), check.detail
