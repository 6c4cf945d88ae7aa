"""`python -m infra upgrade` and `rollback` against the emulator (+ moto for S3 and CloudWatch): versions in the
state file, blue/green with the rollback alarm deploy puts, the smoke test on the new version, rollback by
SageMaker (a fleet that fails, an alarm during the bake) and by infra (a failed smoke test), a plain update
where the guardrails do not apply, and the refusals: the tag in use, no previous version, no quota."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from infra.cli import main as infra_main
from infra.model import DeployOptions
from infra.progress import Progress, WaitSettings
from infra.state import DeploymentState
from infra.upgrade import upgrade

if TYPE_CHECKING:
    from tests.emulator_support import EmulatorHandle

pytest_plugins = ["tests.emulator_support"]
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"
CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "60"]
FAST = WaitSettings(poll_s=0.05, timeout_s=60, delete_timeout_s=30)
REPO = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:"
# No TTL schedules and no autoscaling where infra has them (infra/ttl.py, infra/scaling.py): not what these
# tests are about, and an endpoint scaled to zero has no fleet to update.
LIFECYCLE_OFF = ["--no-ttl", "--no-scale-to-zero"] if "ttl" in DeployOptions.__dataclass_fields__ else []


def listing(handle: EmulatorHandle) -> dict[str, list[str]]:
    sm = handle.client("sagemaker")
    out: dict[str, list[str]] = {}
    for op, key, name in (("list_models", "Models", "ModelName"),
                          ("list_endpoint_configs", "EndpointConfigs", "EndpointConfigName"),
                          ("list_endpoints", "Endpoints", "EndpointName")):
        out[key] = sorted(item[name] for page in sm.get_paginator(op).paginate() for item in page[key])
    return out


def deploy(state_file: Path, *roles: str, extra: list[str] | None = None) -> DeploymentState:
    code = infra_main(["deploy", *roles, "--state-file", str(state_file), "--role-arn", ROLE_ARN, "--no-smoke",
                       *LIFECYCLE_OFF, *(extra or []), *CLI_FAST])
    assert code == 0
    return DeploymentState.load(state_file)


def versions(state_file: Path, role: str) -> dict[str, Any]:
    return DeploymentState.load(state_file).versions[role]


def image_of(handle: EmulatorHandle, endpoint: str) -> str:
    sm = handle.client("sagemaker")
    config = sm.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
    model = sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"][0]["ModelName"]
    return sm.describe_model(ModelName=model)["PrimaryContainer"]["Image"]


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    return tmp_path / "upgrade-state.json"


@pytest.fixture
def aws(emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> EmulatorHandle:
    """The emulator's environment, with infra's CloudWatch calls straight to its moto (where the emulator reads
    the rollback alarms)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", emulator_env.s3_url)
    return emulator_env


# ---------------------------------------------------------------------------------------------------------
def test_upgrade_blue_green_with_the_smoke_test_then_rollback_and_delete_every_version(
        aws: EmulatorHandle, state_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    state = deploy(state_file, "image")
    capsys.readouterr()
    name = state.record("image").endpoint.name
    cw = aws.client("cloudwatch")
    alarm = f"{name}-errors-rollback"
    (put,) = cw.describe_alarms(AlarmNames=[alarm])["MetricAlarms"]  # deploy put the rollback alarm
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in put["Metrics"] if "MetricStat" in m} == {
        "Invocation5XXErrors", "InvocationModelErrors"}
    assert versions(state_file, "image")["versions"][0]["status"] == "in service"

    # The tag already in use: refused before anything is created.
    before = listing(aws)
    assert infra_main(["upgrade", "image", "--image-tag", "omni-sagemaker-cuda-v1.6", "--state-file", str(state_file),
                       *CLI_FAST]) == 2
    assert "already runs omni-sagemaker-cuda-v1.6 (v1): nothing to upgrade" in capsys.readouterr().err
    assert listing(aws) == before

    code = infra_main(["upgrade", "--image-tag", "omni-v1.7-good", "--state-file", str(state_file), "--json",
                       "--smoke-dir", str(tmp_path / "smoke"), *CLI_FAST])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)["endpoints"]["image"]
    assert (report["from_version"], report["to_version"], report["strategy"], report["status"]) == (
        1, 2, "blue/green", "in service")
    assert report["smoke"]["ok"] and "PNG" in report["smoke"]["detail"]
    assert any("a 600 s bake watching the alarm" in n for n in report["notes"])
    sm = aws.client("sagemaker")
    desc = sm.describe_endpoint(EndpointName=name)
    assert desc["EndpointConfigName"] == f"{name}-v2"
    assert desc["LastDeploymentConfig"]["AutoRollbackConfiguration"] == {"Alarms": [{"AlarmName": alarm}]}
    policy = desc["LastDeploymentConfig"]["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"] == {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 600}
    assert image_of(aws, name) == REPO + "omni-v1.7-good"
    recorded = versions(state_file, "image")
    assert recorded["current"] == 2
    assert [(v["number"], v["status"], v["image_tag"]) for v in recorded["versions"]] == [
        (1, "superseded", "omni-sagemaker-cuda-v1.6"), (2, "in service", "omni-v1.7-good")]
    assert recorded["versions"][1]["smoke"]["ok"] and recorded["versions"][1]["config_name"] == f"{name}-v2"
    state = DeploymentState.load(state_file)
    assert state.spec.endpoint("image").config_name == f"{name}-v2"  # resume and status see what runs
    assert state.record("image").model.name == f"{name}-v2"

    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    text = capsys.readouterr().out
    assert "image version: v2 (omni-v1.7-good, blue/green, since " in text
    assert "v1 (omni-sagemaker-cuda-v1.6) kept for rollback" in text

    # Rollback: back on v1, whose model and config were kept.
    assert infra_main(["rollback", "--state-file", str(state_file), "--no-smoke", *CLI_FAST]) == 0
    out = capsys.readouterr().out
    assert "image: v2 -> v1 (omni-sagemaker-cuda-v1.6) in service by plain update" in out
    assert sm.describe_endpoint(EndpointName=name)["EndpointConfigName"] == name
    assert image_of(aws, name) == REPO + "omni-sagemaker-cuda-v1.6"
    recorded = versions(state_file, "image")
    assert recorded["current"] == 1 and recorded["versions"][1]["status"] == "rolled back"
    # ... and nothing before v1: a second rollback is refused, saying why.
    assert infra_main(["rollback", "--state-file", str(state_file), *CLI_FAST]) == 2
    assert "no previous version to roll back to: v1 (omni-sagemaker-cuda-v1.6) is its first version" in \
        capsys.readouterr().err

    # The next good upgrade removes what neither it nor its predecessor needs (the rolled-back v2).
    assert infra_main(["upgrade", "--image-tag", "omni-v1.8", "--state-file", str(state_file), "--no-smoke",
                       *CLI_FAST]) == 0
    capsys.readouterr()
    models = listing(aws)["Models"]
    assert name in models and f"{name}-v3" in models and f"{name}-v2" not in models
    assert versions(state_file, "image")["versions"][1]["resources_deleted"]

    # delete removes every version and the alarm.
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    out = capsys.readouterr().out
    assert f"image: endpoint config {name}: deleted (older version)" in out and f"alarm {alarm}: deleted" in out
    assert listing(aws) == {"Models": [], "EndpointConfigs": [], "Endpoints": []}
    assert cw.describe_alarms(AlarmNames=[alarm])["MetricAlarms"] == []


def test_a_new_version_that_fails_to_start_is_rolled_back_by_sagemaker(aws: EmulatorHandle, state_file: Path,
                                                                      capsys: pytest.CaptureFixture[str]):
    state = deploy(state_file, "voice", "image")
    capsys.readouterr()
    aws.set_faults(fail_images={"omni-v1.7-cuda13": "CUDA driver 535 is too old for CUDA 13"})
    code = infra_main(["upgrade", "voice", "--image-tag", "omni-v1.7-cuda13", "--state-file", str(state_file),
                       "--json", *CLI_FAST])
    out = capsys.readouterr()
    assert code == 5
    voice = json.loads(out.out)["endpoints"]["voice"]
    assert voice["status"] == "rolled back" and voice["rolled_back_by"] == "SageMaker"
    assert "CUDA driver 535 is too old" in voice["detail"] and voice["smoke"] is None  # never smoke-tested
    assert "voice: v2 (omni-v1.7-cuda13) rolled back by SageMaker; v1 serves" in out.err
    name = state.record("voice").endpoint.name
    assert image_of(aws, name) == REPO + "omni-sagemaker-cuda-v1.6"
    recorded = versions(state_file, "voice")
    assert recorded["current"] == 1
    assert [(v["number"], v["status"]) for v in recorded["versions"]] == [(1, "in service"), (2, "rolled back")]
    assert "image" not in json.loads(out.out)["endpoints"]  # only the endpoint named was touched
    # The failed version has no predecessor to return to either.
    assert infra_main(["rollback", "voice", "--state-file", str(state_file), *CLI_FAST]) == 2
    assert "v1 (omni-sagemaker-cuda-v1.6) is its first version" in capsys.readouterr().err
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert listing(aws)["Models"] == []


def test_a_broken_version_fails_its_smoke_test_and_infra_rolls_it_back(aws: EmulatorHandle, state_file: Path,
                                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    state = deploy(state_file, "image")
    capsys.readouterr()
    aws.set_faults(broken_images={"omni-v1.7-broken": "CUDA error: an illegal memory access"})
    code = infra_main(["upgrade", "--image-tag", "omni-v1.7-broken", "--state-file", str(state_file), "--json",
                       "--smoke-dir", str(tmp_path), *CLI_FAST])
    out = capsys.readouterr()
    assert code == 5
    image = json.loads(out.out)["endpoints"]["image"]
    assert image["status"] == "rolled back" and image["rolled_back_by"] == "infra"
    assert image["strategy"] == "blue/green, then back by a plain update"
    assert not image["smoke"]["ok"] and "illegal memory access" in image["smoke"]["detail"]
    name = state.record("image").endpoint.name
    assert aws.client("sagemaker").describe_endpoint(EndpointName=name)["EndpointConfigName"] == name
    recorded = versions(state_file, "image")
    v2 = recorded["versions"][1]
    assert recorded["current"] == 1 and v2["status"] == "rolled back"
    assert v2["detail"].startswith("the smoke test failed on v2: ") and not v2["smoke"]["ok"]
    assert DeploymentState.load(state_file).record("image").smoke is None  # v1's own (never smoke-tested)
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0


def test_an_alarm_during_the_bake_rolls_the_upgrade_back(aws: EmulatorHandle, state_file: Path):
    state = deploy(state_file, "image")
    name = state.record("image").endpoint.name
    alarm = f"{name}-errors-rollback"
    aws.configure(delays={"bake_s": 60})  # the bake lasts until the alarm trips
    cw = aws.client("cloudwatch")
    tripped = threading.Event()

    def trip_during_the_bake(p: Progress) -> None:
        if p.step == "wait" and "Baking" in p.message and not tripped.is_set():
            tripped.set()
            cw.set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason="p99 latency over 10 s")

    report = upgrade(state_file, "omni-v1.7-slow", wait=FAST, progress=trip_during_the_bake, smoke=False)
    assert tripped.is_set()
    image = report.outcomes["image"]
    assert image.status == "rolled back" and image.rolled_back_by == "SageMaker"
    assert f"CloudWatch alarm {alarm} went into ALARM state during the baking period" in image.detail
    assert aws.client("sagemaker").describe_endpoint(EndpointName=name)["EndpointConfigName"] == name
    assert report.error().exit_code == 5
    cw.set_alarm_state(AlarmName=alarm, StateValue="OK", StateReason="test over")
    aws.configure(delays={"bake_s": 0})
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0


def test_where_the_guardrails_do_not_apply_a_plain_update_and_the_async_config_kept(
        aws: EmulatorHandle, state_file: Path, capsys: pytest.CaptureFixture[str]):
    state = deploy(state_file, "video", extra=["--instance-types", "ml.inf1.xlarge"])
    capsys.readouterr()
    name = state.record("video").endpoint.name
    alarm = aws.client("cloudwatch").describe_alarms(AlarmNames=[f"{name}-errors-rollback"])["MetricAlarms"][0]
    assert "InvocationFailures" in json.dumps(alarm["Metrics"])  # the async endpoint's failures count too
    assert infra_main(["upgrade", "--image-tag", "omni-v1.7", "--state-file", str(state_file), "--no-smoke",
                       *CLI_FAST]) == 0
    out = capsys.readouterr().out
    assert "video: v1 -> v2 (omni-v1.7) in service by plain update" in out
    assert "SageMaker's deployment guardrails exclude Inf1 instances (ml.inf1.xlarge)" in out
    sm = aws.client("sagemaker")
    desc = sm.describe_endpoint(EndpointName=name)
    assert desc["EndpointConfigName"] == f"{name}-v2" and "LastDeploymentConfig" not in desc
    config = sm.describe_endpoint_config(EndpointConfigName=f"{name}-v2")
    assert config["AsyncInferenceConfig"]["OutputConfig"]["S3OutputPath"].endswith("/omni-studio/outputs/")
    assert config["ProductionVariants"][0]["InstanceType"] == "ml.inf1.xlarge"
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0


def test_upgrade_needs_quota_for_a_second_fleet_and_a_valid_tag(aws: EmulatorHandle, state_file: Path,
                                                                capsys: pytest.CaptureFixture[str]):
    deploy(state_file, "voice", extra=["--instance-types", "ml.g6.xlarge"])
    capsys.readouterr()
    before = listing(aws)
    aws.configure(quotas={"ml.g6.xlarge": 1})
    assert infra_main(["upgrade", "--image-tag", "omni-v1.7", "--state-file", str(state_file), *CLI_FAST]) == 4
    err = capsys.readouterr().err
    assert "an update brings the new fleet up beside the old one (blue/green)" in err and "nothing was changed" in err
    assert "ml.g6.xlarge: quota 1, 1 in use, needs 1 free" in err
    assert infra_main(["upgrade", "--image-tag", "bad tag!", "--state-file", str(state_file)]) == 2
    assert "--image-tag 'bad tag!' is not an image tag" in capsys.readouterr().err
    assert infra_main(["upgrade", "image", "--image-tag", "omni-v1.7", "--state-file", str(state_file)]) == 2
    assert "has no image endpoint (it has voice)" in capsys.readouterr().err
    assert infra_main(["upgrade", "--image-tag", "omni-v1.7", "--bake-seconds", "4000",
                       "--state-file", str(state_file)]) == 2
    assert "--bake-seconds 4000 is out of range" in capsys.readouterr().err
    assert listing(aws) == before
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0


def test_versions_in_the_state_file_round_trip_and_damage_is_named(tmp_path: Path):
    from datetime import UTC, datetime

    from infra import versions as vs
    from infra.errors import StateError
    from infra.planning import plan
    from infra.version_update import switch_version

    spec = plan(DeployOptions(roles=["voice"], role_arn=ROLE_ARN), account="123456789012", creator="me",
                region="eu-west-1", now=datetime(2026, 12, 2, tzinfo=UTC), deployment_id="261202-000000-abcd")
    path = tmp_path / "state.json"
    state = DeploymentState.new(spec, path)
    base = state.record("voice").endpoint.name
    h = vs.history(state, "voice")  # version 1 from the spec
    h["versions"].append({"number": 2, "image_tag": "omni-v1.7", "model_name": vs.version_name(base, 2),
                          "config_name": vs.version_name(base, 2), "created_at": "2026-12-02T01:00:00Z",
                          "status": "in service", "strategy": "blue/green", "smoke": None, "detail": None,
                          "resources_deleted": False})
    h["versions"][0]["status"] = "superseded"
    switch_version(state, "voice", 2)
    again = DeploymentState.load(path)
    assert again.spec.endpoint("voice").config_name == f"{base}-v2"
    assert again.spec.image_uri_of(again.spec.endpoint("voice")).endswith("/vllm:omni-v1.7")
    assert vs.label(again, "voice").startswith("v2 (omni-v1.7, blue/green, since 2026-12-02T01:00:00Z); v1 (")
    assert ("model", base) in again.resource_names() and ("endpoint config", f"{base}-v2") in again.resource_names()
    # Names stay within SageMaker's 63 characters, and stay distinct.
    long = "x" * 60
    assert len(vs.version_name(long, 12)) == 63 and vs.version_name(long, 12) != vs.version_name(long, 13)

    data = json.loads(path.read_text())
    data["versions"]["voice"]["current"] = 5
    path.write_text(json.dumps(data))
    with pytest.raises(StateError, match="versions.voice: Value error, current is version 5, which versions does "
                                         "not record"):
        DeploymentState.load(path)
