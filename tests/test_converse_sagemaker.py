"""Converse's pipeline on SageMaker targets: the CLI with --listen-endpoint, --voice-endpoint and --reply-endpoint
against the local emulator (real boto3 and the real HTTP/2 bidirectional-stream SDK over TLS). The listen and voice
endpoints are played by the offline engine; the reply endpoint by a real streaming chat server on loopback (the
emulator's `containers` config), reached through InvokeEndpointWithResponseStream. Two turns; their text,
timelines and the chat requests are checked; then the reply stage alone: its caps, and its failures as one line
naming the endpoint."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.errors import BackendUnreachable, ServerError
from protocol.listen import DEFAULT_LISTEN_MODEL
from services.aws import AwsSession
from services.converse.sagemaker import EndpointReply
from services.listen.sample import spoken_sample_at
from tests.chat_support import chat_app, serving_app

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import IMAGE_URI, EmulatorHandle, deploy_endpoint  # noqa: E402
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
VOICE_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
TURNS = ("What time do you open?", "Thank you very much.")
CHAT_IMAGE = IMAGE_URI.replace(":omni-", ":chat-")  # the image the chat server plays (the containers config)
CHAT_MODEL = "Qwen/Qwen3-Omni-30B-A3B-Instruct"  # in text mode: what the endpoint's container says it serves
ANSWER = "We open at nine, every day of the week."
SCRIPT = "time open => We open at nine in the morning.\nthank => You are most welcome.\ndefault => Say again?\n"


def converse(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(tmp / "data"), "OMNI_STUDIO_CONFIG": "",
           "OMNI_STUDIO_STATE_FILE": str(tmp / "none.json")}
    return run_cli([sys.executable, "-m", "services", "converse", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


def _inputs(engine_url: str, tmp_path: Path) -> list[Path]:
    inputs = []
    for i, text in enumerate(TURNS):
        path = tmp_path / f"turn{i + 1}.wav"
        path.write_bytes(spoken_sample_at(engine_url, text))
        inputs.append(path)
    return inputs


def test_two_turns_on_a_listen_and_a_voice_endpoint(emulator_env: EmulatorHandle, engine_url: str,
                                                    tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "sm-listen", environment={"SM_VLLM_MODEL": DEFAULT_LISTEN_MODEL})
    deploy_endpoint(emulator_env, "sm-voice", environment={"SM_VLLM_MODEL": VOICE_MODEL})
    inputs = _inputs(engine_url, tmp_path)
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


@pytest.fixture()
def chat_endpoint(emulator_env: EmulatorHandle) -> Iterator[tuple[str, list[dict]]]:
    """`sm-chat`, an endpoint whose container is a real streaming chat server (one word per SSE chunk)."""
    app, seen = chat_app(ANSWER)
    with serving_app(app) as url:
        emulator_env.configure(containers={":chat-": url})
        deploy_endpoint(emulator_env, "sm-chat", image=CHAT_IMAGE, environment={"SM_VLLM_MODEL": CHAT_MODEL})
        yield "sm-chat", seen


def test_every_stage_on_an_endpoint_the_reply_streamed_from_one(emulator_env: EmulatorHandle, engine_url: str,
                                                                chat_endpoint: tuple[str, list[dict]],
                                                                tmp_path: Path) -> None:
    endpoint, seen = chat_endpoint
    deploy_endpoint(emulator_env, "sm-listen", environment={"SM_VLLM_MODEL": DEFAULT_LISTEN_MODEL})
    deploy_endpoint(emulator_env, "sm-voice", environment={"SM_VLLM_MODEL": VOICE_MODEL})
    inputs = _inputs(engine_url, tmp_path)
    p = converse("--input", str(inputs[0]), "--input", str(inputs[1]), "--listen-endpoint", "sm-listen",
                 "--reply-endpoint", endpoint, "--voice-endpoint", "sm-voice", "--system-prompt", "You run a shop.",
                 "--json", tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"the reply comes from {CHAT_MODEL} on SageMaker endpoint sm-chat" in p.stderr
    turns = json.loads(p.stdout)["turns"]
    assert [t["reply_text"] for t in turns] == [ANSWER, ANSWER]
    for t in turns:
        assert t["error"] is None
        assert t["user_speech_end_s"] <= t["transcript_final_s"] <= t["reply_first_token_s"] <= t["first_audio_s"]
    first, second = seen  # one chat request per turn, as the reply route's body, through the response stream
    assert first["model"] == CHAT_MODEL and first["stream"] is True and first["max_tokens"] == 200
    assert first["messages"][0] == {"role": "system", "content": "You run a shop."}
    assert "open" in first["messages"][1]["content"].lower()
    assert second["messages"][2] == {"role": "assistant", "content": ANSWER}  # the conversation so far
    assert "thank" in second["messages"][3]["content"].lower()


def test_reply_endpoint_options_that_cannot_go_together(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    wav = tmp_path / "turn.wav"
    wav.write_bytes(b"RIFF")
    both = converse("--input", str(wav), "--reply-endpoint", "e", "--reply-url", "http://127.0.0.1:9", tmp=tmp_path)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    scripted = converse("--input", str(wav), "--reply-endpoint", "e", "--script", str(wav), tmp=tmp_path)
    assert scripted.returncode == 2 and "not allowed with argument" in scripted.stderr
    native = converse("--input", str(wav), "--mode", "native", "--reply-endpoint", "e", tmp=tmp_path)
    assert native.returncode == 2 and "--mode native talks to one server" in native.stderr


def test_a_reply_endpoint_that_does_not_exist_fails_every_turn_naming_it(emulator_env: EmulatorHandle,
                                                                         engine_url: str, tmp_path: Path) -> None:
    wav = tmp_path / "turn.wav"
    wav.write_bytes(spoken_sample_at(engine_url, TURNS[0]))
    p = converse("--input", str(wav), "--reply-endpoint", "no-such-chat", "--listen-url", engine_url,
                 "--speak-url", engine_url, "--json", tmp=tmp_path)
    assert p.returncode == 1, p.stderr
    (turn,) = json.loads(p.stdout)["turns"]
    assert "open" in turn["user_text"].lower() and turn["reply_first_token_s"] is None  # heard, not answered
    assert turn["error"].startswith("streaming the reply from SageMaker endpoint no-such-chat (us-east-1): ")
    assert "Endpoint no-such-chat of account" in turn["error"] and "\n" not in turn["error"]


async def collect(stage: EndpointReply) -> list[str]:
    return [piece async for piece in stage.stream([{"role": "user", "content": "what time do you open"}])]


def _stage(endpoint: str, **kw) -> EndpointReply:  # type: ignore[no-untyped-def]
    return EndpointReply(AwsSession("us-east-1", connect_timeout=2, read_timeout=60), endpoint, **kw)


def test_the_stage_streams_piece_by_piece_and_caps_a_reply_that_never_ends(emulator_env: EmulatorHandle) -> None:
    stage = _stage("sm-chat")
    app, _ = chat_app("la", forever=True, delay_s=0.05)
    with serving_app(app) as url:
        emulator_env.configure(containers={":chat-": url})
        deploy_endpoint(emulator_env, "sm-chat", image=CHAT_IMAGE, environment={"SM_VLLM_MODEL": CHAT_MODEL})
        by_tokens = _stage("sm-chat", max_tokens=7, max_seconds=30)
        assert asyncio.run(collect(by_tokens)) == ["la "] * 7 and by_tokens.capped == "tokens"
        # A cap long enough for the first pieces to arrive on a loaded machine (with none, it is the turn's error).
        by_time = _stage("sm-chat", max_tokens=10**9, max_seconds=5)
        assert asyncio.run(collect(by_time)) and by_time.capped == "seconds"
    app, _ = chat_app(ANSWER)
    with serving_app(app) as url:
        emulator_env.configure(containers={":chat-": url})
        pieces = asyncio.run(collect(stage))
    assert "".join(pieces) == ANSWER and len(pieces) == len(ANSWER.split(" "))  # streamed, not at once
    assert stage.capped is None and stage.label == f"{CHAT_MODEL} on SageMaker endpoint sm-chat (us-east-1)"


def test_the_stages_failures_name_the_endpoint(emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = chat_app(ANSWER, fail_after=3)
    with serving_app(app) as url:
        emulator_env.configure(containers={":chat-": url})
        deploy_endpoint(emulator_env, "sm-chat", image=CHAT_IMAGE, environment={"SM_VLLM_MODEL": CHAT_MODEL})
        with pytest.raises(ServerError) as broke:
            asyncio.run(collect(_stage("sm-chat")))
    assert str(broke.value).startswith("streaming the reply from SageMaker endpoint sm-chat (us-east-1): The model "
                                       "container's response stream broke off mid-answer")
    assert str(broke.value).endswith("(ModelStreamError)")
    with pytest.raises(ServerError, match=r"SageMaker endpoint gone-chat \(us-east-1\): Endpoint gone-chat of"):
        asyncio.run(collect(_stage("gone-chat", model="m")))
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "http://127.0.0.1:9")
    with pytest.raises(BackendUnreachable, match=r"SageMaker endpoint sm-chat \(us-east-1\): cannot reach AWS"):
        asyncio.run(collect(_stage("sm-chat", model="m")))
