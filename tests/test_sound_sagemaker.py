"""Sound on SageMaker, on the local emulator (real boto3, the real engine behind it): `infra deploy --with sound`
plans and deploys the opt-in endpoint, smoke-tests it through `invoke_endpoint` with `route=/v1/audio/generate`,
and deletes it; `python -m services sound --backend sagemaker` reaches it by its name; without one the message
says how to deploy it."""

from __future__ import annotations

import json
import os
import wave
from pathlib import Path

import pytest

from infra.cli import main as infra_main
from infra.state import DeploymentState
from protocol.sound import SOUND_MODEL
from tests.test_media_cli import cli

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import ROLE_ARN, EmulatorHandle  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "30"]


def test_deploy_with_sound_smokes_generates_and_deletes(emulator_env: EmulatorHandle, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    state_file, smoke_dir = tmp_path / "state.json", tmp_path / "smoke"
    assert infra_main(["plan", "sound", "--json", "--no-price-list"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert "sound" in json.dumps(planned) and SOUND_MODEL in json.dumps(planned)

    code = infra_main(["deploy", "sound", "--json", "--smoke-dir", str(smoke_dir), "--state-file", str(state_file),
                       "--role-arn", ROLE_ARN, *CLI_FAST])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert sorted(data["endpoints"]) == ["sound"]
    (check,) = data["smoke"]["checks"]
    assert check["role"] == "sound" and check["ok"], check
    with wave.open(str(smoke_dir / "smoke-sound.wav")) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (44100, 2, 2 * 44100)
    state = DeploymentState.load(state_file)
    assert state.record("sound").smoke["ok"]
    sm = emulator_env.client("sagemaker")
    env = sm.describe_model(ModelName=state.record("sound").model.name)["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_MODEL"] == SOUND_MODEL

    # the studio's command reaches the endpoint the state file names, through invoke_endpoint
    out_wav = tmp_path / "rain.wav"
    r = cli("sound", "--backend", "sagemaker", "--state-file", str(state_file), "--prompt", "rain on a tin roof",
            "--seconds", "1.5", "--seed", "5", "--out", str(out_wav), "--json", "--no-history", data=tmp_path / "d")
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures["seed"] == 5 and figures["target"].startswith("SageMaker endpoint ")
    with wave.open(str(out_wav)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (44100, 2, int(1.5 * 44100))

    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert sm.list_endpoints()["Endpoints"] == []


def test_without_a_sound_endpoint_the_message_says_how_to_deploy_one(emulator_env: EmulatorHandle,
                                                                    tmp_path: Path) -> None:
    r = cli("sound", "--backend", "sagemaker", "--state-file", str(tmp_path / "none.json"), "--prompt", "wind",
            "--seconds", "1", "--no-history", data=tmp_path / "d")
    assert r.returncode == 1
    assert "python -m infra deploy --with sound" in r.stderr and "OMNI_STUDIO_SOUND_ENDPOINT" in r.stderr
    assert os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER")  # the emulator was the target
