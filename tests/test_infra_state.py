"""The state file's one shape (protocol.sagemaker.DeploymentStateFile) and the region check, through the real
command lines: a damaged file is named with its field (infra: exit 6; services: ConfigError), and --region
is checked against botocore's regions before any client exists (exit 2, with the closest match).

Nothing here reaches AWS: boto3 client creation is made to fail loudly, and the subprocesses point every
AWS endpoint at a closed loopback port.
"""

from __future__ import annotations

from protocol.catalog import FAMILY_NAMES

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import boto3.session
import pytest

from infra.cli import main as infra_main
from infra.errors import StateError, UsageError
from infra.model import DeployOptions
from infra.planning import plan
from infra.state import DeploymentState
from protocol.errors import ConfigError
from protocol.sagemaker import DeploymentStateFile, StateFileInvalid, parse_state_file
from services.aws import known_regions, validate_region
from services.sagemaker import read_state_file, resolve_targets
from services.settings import Settings
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/omni-studio-sagemaker"
CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens, so a stray call fails fast and stays local
STATE_COMMANDS = (["status"], ["resume"], ["delete"], ["cost"])


@pytest.fixture(autouse=True)
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No client may be made in these tests; and no shared AWS config of the machine leaks in."""
    def refuse(self, service_name, *args, **kwargs):
        raise AssertionError(f"a boto3 {service_name} client was made: the check must come before any client")

    monkeypatch.setattr(boto3.session.Session, "client", refuse)
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", CLOSED)


def saved_state(path: Path, **options) -> DeploymentState:
    spec = plan(DeployOptions(role_arn=ROLE, **options), account=ACCOUNT, creator=f"arn:aws:iam::{ACCOUNT}:user/ana",
                region="eu-west-1", now=datetime(2026, 12, 2, tzinfo=UTC), deployment_id="261202-000000-abcd")
    state = DeploymentState.new(spec, path)
    state.save()
    return state


def rewrite(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def studio_settings(state_file: Path, **extra) -> Settings:
    return Settings.model_validate({"backend": "sagemaker", "state_file": str(state_file), **extra})


def subprocess_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    (tmp / "studio.toml").write_text("")  # no settings of the machine's
    return {**env, "AWS_ENDPOINT_URL": CLOSED, "AWS_CONFIG_FILE": str(tmp / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-aws-credentials"), "AWS_ACCESS_KEY_ID": "AKIAFAKEFAKEFAKE0000",
            "AWS_SECRET_ACCESS_KEY": "fake", "OMNI_STUDIO_DATA_DIR": str(tmp / "data"),
            "OMNI_STUDIO_CONFIG": str(tmp / "studio.toml")}


# -- damaged state files ----------------------------------------------------------------------------------
def test_random_bytes_are_exit_6_naming_the_file_not_a_traceback(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_bytes(bytes(range(256)) * 4)  # not UTF-8, not JSON
    run = run_cli([sys.executable, "-m", "infra", "status", "--state-file", str(state)], cwd=ROOT,
                         env=subprocess_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert run.returncode == 6, run.stderr
    assert "Traceback" not in run.stderr and str(state) in run.stderr and "not JSON" in run.stderr
    with pytest.raises(ConfigError, match="not JSON") as info:
        resolve_targets(studio_settings(state))
    assert str(state) in str(info.value)
    assert state.read_bytes() == bytes(range(256)) * 4  # the operator's file is left as it was


@pytest.mark.parametrize("change, field", [
    (lambda d: d.update(region=123), "region: Input should be a valid string"),
    (lambda d: d["endpoints"]["voice"].update(smoke="yes"), "endpoints.voice.smoke: Input should be an object"),
    (lambda d: d.update(bucket_created="yes"), "bucket_created: Input should be a valid boolean"),
    (lambda d: d["spec"].update(endpoints="voice"), "spec.endpoints: Input should be a valid array"),
    (lambda d: d.update(endpoint_names={"audio": "x"}), "endpoint_names: key 'audio': Input should be 'voice'"),
])
def test_wrong_types_are_named_by_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], change, field) -> None:
    state = tmp_path / "state.json"
    saved_state(state)
    rewrite(state, change)
    for command in STATE_COMMANDS:
        assert infra_main([*command, "--state-file", str(state)]) == 6, command
        err = capsys.readouterr().err
        assert field in err and str(state) in err, (command, err)
    with pytest.raises(ConfigError) as info:
        resolve_targets(studio_settings(state))
    assert field in str(info.value) and str(state) in str(info.value)


@pytest.mark.parametrize("text", ["[1, 2]", '"a string"', "null", "42", ""])
def test_non_object_json_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    state = tmp_path / "state.json"
    state.write_text(text)
    assert infra_main(["status", "--state-file", str(state)]) == 6
    err = capsys.readouterr().err
    assert str(state) in err and ("not a JSON object" in err or "not JSON" in err)
    with pytest.raises(ConfigError, match="not a JSON object|not JSON"):
        read_state_file(state)


def test_a_flat_file_serves_the_studio_but_is_no_deployment_record_for_infra(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"region": "eu-west-1", "endpoint_names": {"voice": "v1", "video": None}}))
    targets = resolve_targets(studio_settings(state))
    assert targets.region == "eu-west-1" and targets.endpoints == {r: None for r in FAMILY_NAMES} | {"voice": "v1"}
    assert infra_main(["status", "--state-file", str(state)]) == 6
    assert "not a deployment record" in capsys.readouterr().err
    rewrite(state, lambda d: d.update(format="omni-studio-deployment/9"))
    with pytest.raises(StateError, match="format is 'omni-studio-deployment/9'"):
        DeploymentState.load(state)


def test_records_that_disagree_are_named(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    saved_state(state)
    rewrite(state, lambda d: d["endpoints"]["voice"].update(role="image"))
    with pytest.raises(StateError, match="endpoints.voice is the record of the image endpoint"):
        DeploymentState.load(state)
    saved_state(state)
    rewrite(state, lambda d: d["spec"]["endpoints"][0].update(instance_types=[f"ml.g{i}.xlarge" for i in range(7)]))
    with pytest.raises(StateError, match="damaged.*1 to 5 instance types"):  # a StateError (6), not a UsageError
        DeploymentState.load(state)


# -- a good file -------------------------------------------------------------------------------------------
def test_valid_file_round_trips_through_the_one_model(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = saved_state(path, roles=["voice", "video"], kms_key="alias/studio")
    rec = state.record("voice")
    rec.model.status, rec.model.arn = "created", "arn:aws:sagemaker:eu-west-1:123456789012:model/x"
    rec.endpoint_status, rec.instance_type, rec.smoke = "InService", "ml.g6.xlarge", {"ok": True, "bytes": 48000}
    state.phase, state.bucket_created = "deployed", True
    state.save()

    parsed = parse_state_file(path.read_bytes())
    assert isinstance(parsed, DeploymentStateFile) and parsed.is_deployment_record
    assert parsed.region == "eu-west-1" and parsed.endpoint_names["voice"] == rec.endpoint.name

    loaded = DeploymentState.load(path)
    assert loaded.spec == state.spec and loaded.to_dict() == state.to_dict()
    assert loaded.record("voice").smoke == {"ok": True, "bytes": 48000} and loaded.record("voice").model.exists
    loaded.save()  # what infra reads back it writes again, unchanged (and atomically: no temporary left)
    assert json.loads(path.read_text()) | {"updated_at": ""} == state.to_dict() | {"updated_at": ""}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]

    targets = resolve_targets(studio_settings(path))  # the services layer reads the same file
    assert (targets.region, targets.bucket, targets.kms_key, targets.source) == (
        "eu-west-1", state.spec.bucket, "alias/studio", str(path))
    assert targets.endpoints["voice"] == rec.endpoint.name and targets.endpoints["image"] is None


def test_parse_state_file_accepts_a_utf8_bom(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    saved_state(path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert DeploymentState.load(path).region == "eu-west-1"
    with pytest.raises(StateFileInvalid, match="region: Input should be a valid string"):
        parse_state_file(b'{"region": ["eu-west-1"]}')


# -- regions -----------------------------------------------------------------------------------------------
def test_every_partition_botocore_knows_is_accepted_and_case_is_normalised() -> None:
    partitions = known_regions()
    assert {"aws", "aws-cn", "aws-us-gov"} <= set(partitions)
    for region in ("us-east-1", "eu-central-1", "cn-north-1", "us-gov-west-1", *partitions["aws-iso"]):
        assert validate_region(region) == region
    assert validate_region(" US-EAST-1 ") == "us-east-1"
    for bad in ("aws-global", "us-eas-1", "", "mars-north-1"):
        with pytest.raises(ConfigError, match="cn-north-1"):  # the message lists the regions there are
            validate_region(bad)


def test_region_upper_case_is_read_as_lower_case_and_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert infra_main(["cost", "--region", "US-EAST-1", "--json", "--state-file", str(tmp_path / "none.json")]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["region"] == "us-east-1"
    assert "--region 'US-EAST-1' read as us-east-1" in out.err


@pytest.mark.parametrize("command", [["deploy", "--role-arn", ROLE, "--no-smoke"], ["resume"], ["status"], ["delete"],
                                     ["delete", "--endpoint", "x"], ["sweep"], ["cost"]])
def test_unknown_region_is_exit_2_with_the_closest_before_anything_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    state = tmp_path / "state.json"
    saved_state(state)  # a good deployment in eu-west-1: the region check still comes first
    before = state.read_bytes()
    assert infra_main([*command, "--region", "us-eas-1", "--state-file", str(state)]) == 2
    err = capsys.readouterr().err
    assert "--region 'us-eas-1' is not an AWS region (did you mean us-east-1?)" in err
    assert "aws-cn: cn-north-1" in err and "Traceback" not in err
    assert state.read_bytes() == before


def test_the_profiles_region_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.aws import AwsContext

    monkeypatch.setenv("AWS_DEFAULT_REGION", " EU-WEST-1")
    assert AwsContext().region == "eu-west-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-wst-1")
    with pytest.raises(UsageError, match=r"profile's region .* \(did you mean eu-west-1\?\)"):
        AwsContext()
    with pytest.raises(UsageError, match="did you mean ap-south-1"):
        AwsContext("ap-suth-1")


def test_services_check_the_region_of_the_settings_and_the_state_file(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"region": "EU-WEST-1", "endpoint_names": {"voice": "v1"}}))
    assert resolve_targets(studio_settings(state)).region == "eu-west-1"
    state.write_text(json.dumps({"region": "eu-wset-1", "endpoint_names": {"voice": "v1"}}))
    with pytest.raises(ConfigError, match="did you mean eu-west-1") as info:
        resolve_targets(studio_settings(state))
    assert str(state) in str(info.value)
    with pytest.raises(ConfigError, match="the region setting 'us-eas-1' is not an AWS region"):
        resolve_targets(studio_settings(tmp_path / "none.json", region="us-eas-1"))

    run = run_cli([sys.executable, "-m", "services", "image", "--prompt", "x", "--size", "128x96", "--out",
                          str(tmp_path / "i.png"), "--backend", "sagemaker", "--region", "us-eas-1", "--state-file",
                          str(tmp_path / "none.json")], cwd=ROOT, env=subprocess_env(tmp_path), capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1 and "did you mean us-east-1" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "i.png").exists()


# -- the voice model -----------------------------------------------------------------------------------------
VOICE_DESIGN = "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"


def test_the_voice_model_round_trips_as_a_flat_key_next_to_the_endpoint_names(tmp_path: Path) -> None:
    from protocol.sagemaker import voice_model_of

    path = tmp_path / "state.json"
    state = saved_state(path, voice_model=VOICE_DESIGN)
    data = json.loads(path.read_text())
    assert data["voice_model"] == VOICE_DESIGN
    assert list(data).index("voice_model") == list(data).index("endpoint_names") + 1
    parsed = parse_state_file(path.read_bytes())
    assert parsed.voice_model == voice_model_of(parsed) == VOICE_DESIGN
    loaded = DeploymentState.load(path)  # resume rebuilds the same CreateModel request from it
    assert loaded.spec == state.spec and loaded.spec.voice_model == VOICE_DESIGN
    voice = loaded.spec.endpoint("voice")
    assert loaded.spec.create_model_request(voice)["PrimaryContainer"]["Environment"]["SM_VLLM_MODEL"] == VOICE_DESIGN
    loaded.save()
    assert json.loads(path.read_text())["voice_model"] == VOICE_DESIGN

    # without a voice endpoint the key says so
    saved_state(path, roles=["image"])
    parsed = parse_state_file(path.read_bytes())
    assert parsed.voice_model is None and voice_model_of(parsed) is None


def test_state_files_without_the_voice_model_stay_valid(tmp_path: Path) -> None:
    from protocol.sagemaker import voice_model_of

    path = tmp_path / "state.json"
    saved_state(path)
    rewrite(path, lambda d: d.pop("voice_model"))  # written before the key existed
    loaded = DeploymentState.load(path)
    assert loaded.spec.voice_model == "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
    assert voice_model_of(parse_state_file(path.read_bytes())) == "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
    assert resolve_targets(studio_settings(path)).endpoints["voice"] == loaded.record("voice").endpoint.name

    flat = tmp_path / "flat.json"  # hand-written: the names only, or the names and the model
    flat.write_text(json.dumps({"region": "eu-west-1", "endpoint_names": {"voice": "v1"}}))
    assert voice_model_of(read_state_file(flat)) is None
    flat.write_text(json.dumps({"region": "eu-west-1", "endpoint_names": {"voice": "v1"}, "voice_model": VOICE_DESIGN}))
    assert voice_model_of(read_state_file(flat)) == VOICE_DESIGN
    assert resolve_targets(studio_settings(flat)).endpoints["voice"] == "v1"


@pytest.mark.parametrize("change, field", [
    (lambda d: d.update(voice_model=123), "voice_model: Input should be a valid string"),
    (lambda d: d.update(voice_model=""), "voice_model: String should have at least 1 character"),
    (lambda d: d.update(voice_model=VOICE_DESIGN),
     "voice_model is 'Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign' but spec.endpoints plans the voice endpoint with "
     "'Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice'"),
])
def test_a_damaged_voice_model_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], change, field) -> None:
    state = tmp_path / "state.json"
    saved_state(state)
    rewrite(state, change)
    assert infra_main(["status", "--state-file", str(state)]) == 6
    err = capsys.readouterr().err
    assert field in err and str(state) in err
    with pytest.raises(ConfigError) as info:
        resolve_targets(studio_settings(state))
    assert field in str(info.value)
