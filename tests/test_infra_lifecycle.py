"""The deployment's lifecycle in the account, against the emulator and moto: endpoints that delete themselves
(--ttl: EventBridge Scheduler schedules, a scoped role, extend), the async video endpoint that scales to zero
and back with the studio's job waiting through it, bounded realtime scaling, and the bad input named before
anything is created. Time passes on the emulator's clock (moved, never slept).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from infra.cli import main as infra_main
from infra.delete import delete_deployment
from infra.deploy import deploy
from infra.errors import UsageError
from infra.model import DeployOptions
from infra.progress import WaitSettings
from infra.state import DeploymentState
from infra.ttl import parse_at
from infra.ttl_choice import parse_ttl

if TYPE_CHECKING:
    from tests.emulator_support import EmulatorHandle

pytest_plugins = ["tests.emulator_support"]
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"
FAST = WaitSettings(poll_s=0.05, timeout_s=30, delete_timeout_s=30)
CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "30", "--no-smoke"]
TARGET = "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"


def options(**kw) -> DeployOptions:
    return DeployOptions(role_arn=ROLE_ARN, **kw)


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    return tmp_path / "deploy-state.json"


def endpoints(handle: EmulatorHandle) -> list[str]:
    return sorted(e["EndpointName"] for e in handle.client("sagemaker").list_endpoints()["Endpoints"])


def until(check, timeout_s: float = 30.0):  # noqa: ANN001, ANN201
    """Poll `check()` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not true after {timeout_s:.0f} s")


def schedule_time(handle: EmulatorHandle, group: str, name: str) -> datetime:
    got = handle.client("scheduler").get_schedule(Name=name, GroupName=group)
    return parse_at(got["ScheduleExpression"], got["ScheduleExpressionTimezone"])  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------------------
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("value", "expires"), [
    ("8h", NOW + timedelta(hours=8)), ("90m", NOW + timedelta(minutes=90)), ("1h30m", NOW + timedelta(minutes=90)),
    ("2d", NOW + timedelta(days=2)), ("45 min", NOW + timedelta(minutes=45)),
    ("2026-05-01T18:00Z", NOW + timedelta(hours=6)), ("2026-05-01T14:30:00+02:00", NOW + timedelta(minutes=30)),
])
def test_ttl_is_a_duration_or_a_time(value: str, expires: datetime) -> None:
    assert parse_ttl(value, now=NOW).expires_at == expires


@pytest.mark.parametrize(("value", "words"), [
    ("0", "no unit"), ("0h", "is zero"), ("0m0s", "is zero"), ("", "is empty"), ("soon", "neither a duration"),
    ("8 fortnights", "unknown unit"), ("2026-05-01T11:00Z", "is in the past"), ("2020-01-01", "is in the past"),
    ("8d", "pass --yes"), ("2026-06-01T00:00Z", "pass --yes"),
    # past datetime's range once, a raw OverflowError: now the allowed range, with or without --yes
    ("99999999999h", "from 1 second to 365 days"), ("9" * 400 + "h", "from 1 second to 365 days"),
    ("366d", "from 1 second to 365 days"), ("9999-12-31T23:00-05:00", "from 1 second to 365 days"),
])
def test_bad_ttl_is_named(value: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        parse_ttl(value, now=NOW)
    if "365 days" in words:
        with pytest.raises(UsageError, match=words):
            parse_ttl(value, now=NOW, yes=True)
    assert parse_ttl(None).enabled is False
    assert parse_ttl("8d", now=NOW, yes=True).expires_at == NOW + timedelta(days=8)


def test_bad_lifecycle_options_stop_deploy_before_any_call(emulator_env: EmulatorHandle, state_file: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    cases = [(["--ttl", "0h"], "is zero"), (["--ttl", "2020-01-01T00:00Z"], "is in the past"),
             (["--ttl", "someday"], "neither a duration nor a time"), (["--ttl", "30d"], "pass --yes"),
             (["--ttl", "99999999999h"], "--ttl '99999999999h' is too long: a time to live is from 1 second to 365 days"),
             (["--ttl", "99999999999h", "--yes"], "from 1 second to 365 days"),
             (["--max-instances", "0"], "give 1 to 10"), (["--max-instances", "11"], "give 1 to 10"),
             (["--max-instances", "two"], "not a whole number"), (["--no-ttl", "--ttl", "4h"], "contradict"),
             (["--no-ttl", "--scheduler-role-arn", "arn:aws:iam::123456789012:role/x"], "--no-ttl makes none")]
    for args, words in cases:
        assert infra_main(["deploy", "voice", "--role-arn", ROLE_ARN, "--state-file", str(state_file), *args,
                           *CLI_FAST]) == 2, args
        assert words in capsys.readouterr().err, args
    assert emulator_env.state()["calls"] == {}  # not even the credentials were asked
    assert not state_file.exists() and endpoints(emulator_env) == []


def test_endpoints_delete_themselves_when_their_ttl_ends(emulator_env: EmulatorHandle, state_file: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    started = datetime.now(UTC)
    assert infra_main(["deploy", "voice", "image", "--role-arn", ROLE_ARN, "--state-file", str(state_file),
                       "--tags", "owner=ana", *CLI_FAST]) == 0
    out = capsys.readouterr().out
    assert "TTL: the endpoints delete themselves at" in out and "cost nothing" in out
    state = DeploymentState.load(state_file)
    ttl, spec = state.ttl, state.spec
    assert ttl is not None and ttl["enabled"] and ttl["role_created"]
    group = f"omni-studio-{state.deployment_id}"
    assert ttl["schedule_group"] == group
    # One schedule per endpoint: at(8 h from now) in UTC, window off, deleted after it runs, the universal target.
    sch = emulator_env.client("scheduler")
    names = sorted(rec.endpoint.name for rec in state.endpoints.values())
    assert sorted(s["Name"] for s in sch.list_schedules(GroupName=group)["Schedules"]) == names
    for name in names:
        got = sch.get_schedule(Name=name, GroupName=group)
        at = schedule_time(emulator_env, group, name)
        assert timedelta(hours=8) - timedelta(seconds=5) <= at - started <= timedelta(hours=8, seconds=30)
        assert (got["FlexibleTimeWindow"], got["ActionAfterCompletion"]) == ({"Mode": "OFF"}, "DELETE")
        assert got["Target"]["Arn"] == TARGET and json.loads(got["Target"]["Input"]) == {"EndpointName": name}
        assert got["Target"]["RoleArn"] == ttl["role_arn"]
    tags = {t["Key"]: t["Value"] for t in sch.list_tags_for_resource(
        ResourceArn=sch.get_schedule_group(Name=group)["Arn"])["Tags"]}
    assert tags["omni-studio:deployment"] == state.deployment_id and tags["owner"] == "ana"
    # The role: trusted by Scheduler for this account only, allowed DeleteEndpoint on exactly these endpoints.
    iam = emulator_env.client("iam")
    role_name = ttl["role_arn"].rsplit("/", 1)[-1]
    role = iam.get_role(RoleName=role_name)["Role"]
    assert role["Path"] == "/omni-studio/"
    trust = role["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": spec.account}}
    policy = iam.get_role_policy(RoleName=role_name, PolicyName="omni-studio-delete-endpoints")["PolicyDocument"]
    assert policy["Statement"][0]["Action"] == "sagemaker:DeleteEndpoint"
    assert policy["Statement"][0]["Resource"] == sorted(
        f"arn:aws:sagemaker:us-east-1:{spec.account}:endpoint/{n}" for n in names)
    assert {t["Key"] for t in iam.list_role_tags(RoleName=role_name)["Tags"]} >= {"omni-studio:deployment", "owner"}

    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    table = capsys.readouterr().out
    assert table.count("deletes itself in 7 h 5") + table.count("deletes itself in 8 h") == 2
    assert infra_main(["status", "--state-file", str(state_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r: t["state"] for r, t in data["ttl"].items()} == {"voice": "scheduled", "image": "scheduled"}

    # Eight hours later, with no process of ours running: the schedules delete the endpoints, then themselves.
    assert emulator_env.advance_clock(4 * 3600)["events"] == []
    events = emulator_env.advance_clock(4 * 3600 + 60)["events"]
    assert sorted(e["outcome"] for e in events) == sorted(f"deleted endpoint {n}" for n in names)
    until(lambda: endpoints(emulator_env) == [])
    assert sch.list_schedules(GroupName=group)["Schedules"] == []
    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    assert capsys.readouterr().out.count("its schedule is gone") == 2
    # Extending an expired deployment is refused, saying what happened and what to do.
    assert infra_main(["extend", "--ttl", "4h", "--state-file", str(state_file)]) == 6
    err = capsys.readouterr().err
    assert f"deployment {state.deployment_id} has expired" in err and "python -m infra delete" in err
    # delete tidies up: configs and models (they cost nothing), the schedule group and the role.
    report = delete_deployment(state_file, wait=FAST)
    assert report.ok and report.state_removed
    kinds = {(d.kind, d.outcome) for d in report.deletions}
    assert {("endpoint", "already gone"), ("endpoint config", "deleted"), ("model", "deleted"),
            ("schedule group", "deleted"), ("iam role", "deleted")} <= kinds
    assert [g["Name"] for g in sch.list_schedule_groups()["ScheduleGroups"]] == ["default"]
    assert iam.list_roles(PathPrefix="/omni-studio/")["Roles"] == []


def test_extend_moves_every_schedule_and_unknown_deployments_are_named(emulator_env: EmulatorHandle,
                                                                      state_file: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert infra_main(["extend", "--ttl", "4h", "--state-file", str(state_file)]) == 6
    assert "no state file" in capsys.readouterr().err
    assert deploy(options(roles=["voice"], ttl="30m"), state_file=state_file, wait=FAST).ok
    state = DeploymentState.load(state_file)
    group, name = state.ttl["schedule_group"], state.record("voice").endpoint.name  # type: ignore[index]
    before = datetime.now(UTC)
    assert infra_main(["extend", "--ttl", "4h", "--state-file", str(state_file)]) == 0
    assert "now delete themselves at" in capsys.readouterr().out
    moved = schedule_time(emulator_env, group, name)
    assert timedelta(hours=4) - timedelta(seconds=5) <= moved - before <= timedelta(hours=4, seconds=30)
    assert DeploymentState.load(state_file).ttl["expires_at"] == moved.strftime("%Y-%m-%dT%H:%M:%SZ")  # type: ignore[index]
    assert infra_main(["extend", "--ttl", "9d", "--state-file", str(state_file)]) == 2  # asks for --yes
    assert "--yes" in capsys.readouterr().err
    # The old time passes: nothing happens; the new one: the endpoint goes.
    assert emulator_env.advance_clock(3600)["events"] == []
    assert endpoints(emulator_env) == [name]
    events = emulator_env.advance_clock(3 * 3600 + 60)["events"]
    assert [e["outcome"] for e in events] == [f"deleted endpoint {name}"]
    assert delete_deployment(state_file, wait=FAST).ok


def test_no_ttl_says_so_loudly_and_extend_gives_one(emulator_env: EmulatorHandle, state_file: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert infra_main(["deploy", "voice", "--no-ttl", "--role-arn", ROLE_ARN, "--state-file", str(state_file),
                       *CLI_FAST]) == 0
    captured = capsys.readouterr()
    assert "NO TTL" in captured.out and "BILL until `python -m infra delete`" in captured.out
    assert json.loads(state_file.read_text())["ttl"]["enabled"] is False
    assert [g["Name"] for g in emulator_env.client("scheduler").list_schedule_groups()["ScheduleGroups"]] == ["default"]
    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    assert "NO TTL" in capsys.readouterr().out
    assert infra_main(["extend", "--ttl", "2h", "--state-file", str(state_file)]) == 0
    state = DeploymentState.load(state_file)
    assert state.ttl["enabled"] and state.ttl["role_created"]  # type: ignore[index]
    assert emulator_env.client("scheduler").get_schedule(Name=state.record("voice").endpoint.name,
                                                        GroupName=state.ttl["schedule_group"])  # type: ignore[index]
    assert delete_deployment(state_file, wait=FAST).ok


def _role(handle: EmulatorHandle, name: str, *, trust_service: str, resource: str) -> str:
    iam = handle.client("iam")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": trust_service},
                                                     "Action": "sts:AssumeRole"}]}
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=name, PolicyName="delete", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint",
                                                "Resource": resource}]}))
    return arn


def test_a_scheduler_role_without_permission_stops_deploy_before_anything_with_the_policy_to_add(
        emulator_env: EmulatorHandle, state_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    narrow = _role(emulator_env, "too-narrow", trust_service="scheduler.amazonaws.com",
                   resource="arn:aws:sagemaker:us-east-1:123456789012:endpoint/someone-elses")
    base = ["deploy", "voice", "video", "--role-arn", ROLE_ARN, "--state-file", str(state_file), *CLI_FAST]
    assert infra_main([*base, "--scheduler-role-arn", narrow]) == 3
    err = capsys.readouterr().err
    assert "may not delete" in err and "Nothing was created" in err and '"sagemaker:DeleteEndpoint"' in err
    assert "arn:aws:sagemaker:us-east-1:123456789012:endpoint/omni-studio-voice-" in err  # the policy names them
    assert not state_file.exists() and endpoints(emulator_env) == []
    untrusting = _role(emulator_env, "lambda-only", trust_service="lambda.amazonaws.com", resource="*")
    assert infra_main([*base, "--scheduler-role-arn", untrusting]) == 2
    err = capsys.readouterr().err
    assert "does not let EventBridge Scheduler assume it" in err and "scheduler.amazonaws.com" in err
    missing = "arn:aws:iam::123456789012:role/nobody-made-this"
    assert infra_main([*base, "--scheduler-role-arn", missing]) == 2
    assert "no such role" in capsys.readouterr().err
    assert not state_file.exists() and endpoints(emulator_env) == []
    # A role that may: used as given, and left alone by delete.
    good = _role(emulator_env, "ours-to-keep", trust_service="scheduler.amazonaws.com",
                 resource="arn:aws:sagemaker:us-east-1:123456789012:endpoint/omni-studio-*")
    assert infra_main(["deploy", "voice", "--role-arn", ROLE_ARN, "--state-file", str(state_file),
                       "--scheduler-role-arn", good, *CLI_FAST]) == 0
    state = DeploymentState.load(state_file)
    assert state.ttl["role_arn"] == good and not state.ttl["role_created"]  # type: ignore[index]
    got = emulator_env.client("scheduler").get_schedule(Name=state.record("voice").endpoint.name,
                                                       GroupName=state.ttl["schedule_group"])  # type: ignore[index]
    assert got["Target"]["RoleArn"] == good
    assert delete_deployment(state_file, wait=FAST).ok
    assert emulator_env.client("iam").get_role(RoleName="ours-to-keep")["Role"]["Arn"] == good


def test_realtime_max_instances_and_a_video_endpoint_kept_at_one(emulator_env: EmulatorHandle,
                                                                state_file: Path) -> None:
    assert deploy(options(roles=["voice", "video"], ttl=None, max_instances=3, scale_to_zero=False),
                  state_file=state_file, wait=FAST).ok
    state = DeploymentState.load(state_file)
    aas = emulator_env.client("application-autoscaling")
    targets = {t["ResourceId"]: (t["MinCapacity"], t["MaxCapacity"])
               for t in aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]}
    voice, video = state.record("voice").endpoint.name, state.record("video").endpoint.name
    assert targets == {f"endpoint/{voice}/variant/AllTraffic": (1, 3), f"endpoint/{video}/variant/AllTraffic": (1, 3)}
    policies = {p["PolicyName"]: p for p in aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]}
    tracking = policies[f"{voice}-invocations-per-instance"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"] == {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}
    assert f"{video}-scale-out-from-zero" not in policies  # min 1: never at zero
    assert delete_deployment(state_file, wait=FAST).ok
    assert aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"] == []
    # max 1 and no scale to zero: nothing registered at all
    assert deploy(options(roles=["voice", "video"], ttl=None, scale_to_zero=False), state_file=state_file,
                  wait=FAST).ok
    assert aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"] == []
    assert DeploymentState.load(state_file).scaling == {}
    assert delete_deployment(state_file, wait=FAST).ok


def test_video_scales_to_zero_and_the_studios_job_waits_through_the_start(emulator_env: EmulatorHandle,
                                                                          state_file: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from infra.smoke import deployment_backend
    from services.history import History
    from services.videos import VideoJobs, VideoRequest

    assert deploy(options(roles=["video"], ttl=None, bucket="studio-scale-zero"), state_file=state_file, wait=FAST).ok
    state = DeploymentState.load(state_file)
    name = state.record("video").endpoint.name
    aas, cw = emulator_env.client("application-autoscaling"), emulator_env.client("cloudwatch")
    [target] = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (
        f"endpoint/{name}/variant/AllTraffic", 0, 1)
    policies = {p["PolicyName"]: p for p in aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]}
    backlog = policies[f"{name}-backlog-per-instance"]["TargetTrackingScalingPolicyConfiguration"]
    assert backlog["CustomizedMetricSpecification"]["MetricName"] == "ApproximateBacklogSizePerInstance"
    assert backlog["CustomizedMetricSpecification"]["Dimensions"] == [{"Name": "EndpointName", "Value": name}]
    [alarm] = cw.describe_alarms(AlarmNames=[f"{name}-has-backlog-without-capacity"])["MetricAlarms"]
    assert alarm["MetricName"] == "HasBacklogWithoutCapacity" and alarm["Namespace"] == "AWS/SageMaker"
    assert alarm["AlarmActions"] == [policies[f"{name}-scale-out-from-zero"]["PolicyARN"]]
    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    assert "1 [0–1]" in capsys.readouterr().out

    # Idle for a quarter of an hour (then two minutes to release it): no instance, no cost.
    emulator_env.advance_clock(17 * 60)
    until(lambda: emulator_env.client("sagemaker").describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService")
    assert infra_main(["status", "--state-file", str(state_file), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["endpoints"]
    assert (row["current_instances"], row["usd_per_hour"]) == (0, 0.0)
    assert infra_main(["cost", "--state-file", str(state_file)]) == 0
    assert "0 instances now (scaled to zero): costs nothing" in capsys.readouterr().out

    # The studio submits a video: it waits, saying why, while an instance starts; then the video arrives.
    backend = deployment_backend(state)
    history = History(tmp_path / "data")
    jobs = VideoJobs(backend.client("video"), history)
    try:
        job = jobs.start(VideoRequest(prompt="waves rolling onto a beach", width=96, height=64, frames=5, fps=8,
                                      steps=4, seed=3))
        notice = until(lambda: history.jobs.get(job.id).meta.get("notice"))
        assert notice == "starting an instance (about 10 min)"
        assert history.jobs.get(job.id).status == "running"
        emulator_env.advance_clock(2 * 60)  # the alarm: two one-minute periods with a backlog and no instance
        desc = emulator_env.client("sagemaker").describe_endpoint(EndpointName=name)
        assert (desc["EndpointStatus"], desc["ProductionVariants"][0]["DesiredInstanceCount"]) == ("Updating", 1)
        emulator_env.advance_clock(8 * 60)  # the instance starts
        done = until(lambda: (j := history.jobs.get(job.id)).status in ("succeeded", "failed") and j)
        assert done.status == "succeeded", done.error
        assert "notice" not in done.meta and done.meta["frames"] == 5
    finally:
        jobs.close()
        backend.close()
    assert delete_deployment(state_file, wait=FAST).ok


def test_sweep_finds_schedule_groups_and_roles_of_lost_deployments(emulator_env: EmulatorHandle, state_file: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert deploy(options(roles=["voice"]), state_file=state_file, wait=FAST).ok
    state = DeploymentState.load(state_file)
    assert infra_main(["sweep", "--state-file", str(state_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["orphans"] == []  # known: not orphans
    state_file.unlink()  # the laptop with the state file is gone
    lost = state_file.with_name("lost.json")
    assert infra_main(["sweep", "--state-file", str(lost), "--json"]) == 0
    kinds = {(o["kind"], o["name"]) for o in json.loads(capsys.readouterr().out)["orphans"]}
    assert {("schedule group", state.ttl["schedule_group"]),  # type: ignore[index]
            ("iam role", state.ttl["role_arn"].rsplit("/", 1)[-1])} <= kinds  # type: ignore[index]
    assert infra_main(["sweep", "--state-file", str(lost), "--delete", "--yes", "--poll-seconds", "0.05",
                       "--wait-timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert f"schedule group {state.ttl['schedule_group']}: deleted" in out  # type: ignore[index]
    assert emulator_env.client("iam").list_roles(PathPrefix="/omni-studio/")["Roles"] == []
    assert endpoints(emulator_env) == []


def test_resume_after_the_ttl_ended_asks_for_a_new_one(emulator_env: EmulatorHandle, state_file: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert deploy(options(roles=["voice"], ttl="1h"), state_file=state_file, wait=FAST).ok
    record = json.loads(state_file.read_text())
    record["ttl"]["expires_at"] = "2020-01-01T00:00:00Z"  # as if resumed long after a crash
    state_file.write_text(json.dumps(record))
    assert infra_main(["resume", "--state-file", str(state_file), *CLI_FAST]) == 2
    assert "resume --ttl 8h" in capsys.readouterr().err
    before = datetime.now(UTC)
    assert infra_main(["resume", "--state-file", str(state_file), "--ttl", "3h", *CLI_FAST]) == 0
    state = DeploymentState.load(state_file)
    moved = schedule_time(emulator_env, state.ttl["schedule_group"], state.record("voice").endpoint.name)  # type: ignore[index]
    assert timedelta(hours=3) - timedelta(seconds=5) <= moved - before <= timedelta(hours=3, seconds=30)
    assert delete_deployment(state_file, wait=FAST).ok
