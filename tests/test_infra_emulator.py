"""Infra against the local SageMaker emulator (+ moto S3), through real boto3 clients reached with the
standard AWS_ENDPOINT_URL_* variables: deploy, pools, quotas, interruption and resume, delete, sweep,
status and cost. Every check of "what exists" lists the emulator's resources with boto3.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from infra.cli import main as infra_main
from infra.delete import delete_deployment
from infra.deploy import deploy, resume
from infra.errors import CredentialsError, QuotaShortfall, StateError
from infra.model import TAG_DEPLOYMENT, DeployOptions
from infra.pricing import load_prices
from infra.progress import Progress, WaitSettings
from infra.state import DeploymentState
from infra.status import deployment_status
from infra.sweep import delete_orphans, find_orphans

if TYPE_CHECKING:
    from tests.emulator_support import EmulatorHandle

pytest_plugins = ["tests.emulator_support"]  # the emulator fixtures, registered once per session
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"

FAST = WaitSettings(poll_s=0.05, timeout_s=30, delete_timeout_s=30)
CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "30"]


class Events:
    """A progress callback that keeps every event (called from worker threads)."""

    def __init__(self) -> None:
        self.items: list[Progress] = []
        self._lock = threading.Lock()

    def __call__(self, p: Progress) -> None:
        with self._lock:
            self.items.append(p)

    def for_role(self, role: str) -> list[Progress]:
        return [p for p in self.items if p.role == role]


def listing(handle: EmulatorHandle) -> dict[str, list[str]]:
    """What exists, by listing with boto3 (all pages)."""
    sm = handle.client("sagemaker")
    out: dict[str, list[str]] = {}
    for op, key, name in (("list_models", "Models", "ModelName"),
                          ("list_endpoint_configs", "EndpointConfigs", "EndpointConfigName"),
                          ("list_endpoints", "Endpoints", "EndpointName")):
        out[key] = sorted(item[name] for page in sm.get_paginator(op).paginate() for item in page[key])
    return out


def options(**kw) -> DeployOptions:
    return DeployOptions(role_arn=ROLE_ARN, **kw)


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    return tmp_path / "deploy-state.json"


# ---------------------------------------------------------------------------------------------------------
def test_full_deploy_of_three_endpoints_then_status_cost_and_delete(emulator_env: EmulatorHandle, state_file: Path,
                                                                    capsys: pytest.CaptureFixture[str]):
    events = Events()
    result = deploy(options(tags=["owner=ana"]), state_file=state_file, wait=FAST, progress=events)
    assert result.ok, [o.summary() for o in result.outcomes.values()]
    state = DeploymentState.load(state_file)
    names = sorted(rec.endpoint.name for rec in state.endpoints.values())
    assert listing(emulator_env) == {"Models": names, "EndpointConfigs": names, "Endpoints": names}

    sm = emulator_env.client("sagemaker")
    for role, rec in state.endpoints.items():
        assert (rec.model.status, rec.config.status, rec.endpoint.status) == ("created", "created", "created")
        assert rec.instance_type == "ml.g6.xlarge" and rec.endpoint_status == "InService"
        cfg = sm.describe_endpoint_config(EndpointConfigName=rec.config.name)
        variant = cfg["ProductionVariants"][0]
        assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
        assert variant["InstancePools"][0] == {"InstanceType": "ml.g6.xlarge", "Priority": 1}
        model = sm.describe_model(ModelName=rec.model.name)
        assert model["PrimaryContainer"]["Image"].endswith("/vllm:omni-sagemaker-cuda-v1.6")
        tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=rec.endpoint.arn)["Tags"]}
        assert tags["omni-studio:role"] == role and tags["owner"] == "ana"
        assert tags["omni-studio:creator"] == "arn:aws:iam::123456789012:user/omni-studio-emulator"
        assert tags[TAG_DEPLOYMENT] == state.deployment_id and tags["omni-studio:created"].endswith("Z")
        # live progress: statuses with elapsed time and the instance type chosen from the pool
        waits = [p for p in events.for_role(role) if p.step in ("wait", "done")]
        assert waits and waits[-1].status == "InService" and waits[-1].instance_type == "ml.g6.xlarge"
        assert waits[-1].elapsed_s is not None and waits[-1].elapsed_s >= 0
    video = sm.describe_endpoint_config(EndpointConfigName=state.record("video").config.name)
    bucket = state.spec.bucket
    assert video["AsyncInferenceConfig"]["OutputConfig"]["S3OutputPath"] == f"s3://{bucket}/omni-studio/outputs/"
    assert video["AsyncInferenceConfig"]["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 1}

    s3 = emulator_env.client("s3")
    block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert all(block.values())
    rule = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    s3.put_object(Bucket=bucket, Key="omni-studio/outputs/job-1.out", Body=b"mp4 bytes")

    # status: figures per endpoint, from the shipped price table
    report = deployment_status(state_file)
    price = load_prices().hourly("ml.g6.xlarge", "us-east-1").usd_per_hour
    for row in report.endpoints:
        assert row.status == "InService" and row.instance_type == "ml.g6.xlarge"
        assert row.usd_per_hour == pytest.approx(price)
        assert row.uptime_s is not None and row.uptime_s >= 0
        assert row.cost_so_far_usd == pytest.approx(price * row.uptime_s / 3600, rel=0.05, abs=1e-4)
    assert report.usd_per_hour == pytest.approx(3 * price) and report.usd_per_day == pytest.approx(72 * price)
    assert infra_main(["status", "--state-file", str(state_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [e["status"] for e in data["endpoints"]] == ["InService"] * 3
    assert data["usd_per_hour"] == pytest.approx(3 * price, abs=1e-3)
    assert infra_main(["cost", "--state-file", str(state_file), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert cost["basis"] == "running deployment" and cost["usd_per_day"] == pytest.approx(72 * price, abs=0.01)
    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    table = capsys.readouterr().out
    assert table.count("InService") == 3 and "$/hour" in table and "ml.g6.xlarge" in table

    # delete: three deletions per endpoint, verified; S3 kept without --purge-s3
    events = Events()
    deleted = delete_deployment(state_file, wait=FAST, progress=events)
    assert deleted.ok and deleted.state_removed and not state_file.exists()
    sagemaker = ("endpoint", "endpoint config", "model")
    assert sorted((d.kind, d.outcome) for d in deleted.deletions if d.kind in sagemaker) == sorted(
        [("endpoint", "deleted"), ("endpoint config", "deleted"), ("model", "deleted")] * 3)
    # and the lifecycle's (the default 8 h TTL; video scales to zero): its autoscaling first, the TTL last
    video = [(d.kind, d.outcome) for d in deleted.deletions if d.role == "video"]
    assert video[:4] == [("alarm", "deleted"), ("scaling policy", "deleted"), ("scaling policy", "deleted"),
                         ("scalable target", "deleted")]
    lifecycle = ("schedule", "schedule group", "iam role")
    assert [(d.kind, d.outcome) for d in deleted.deletions[-5:]] == [("schedule", "deleted")] * 3 + [
        ("schedule group", "deleted"), ("iam role", "deleted")]
    assert sum(d.kind in lifecycle for d in deleted.deletions) == 5
    assert listing(emulator_env) == {"Models": [], "EndpointConfigs": [], "Endpoints": []}
    assert s3.get_object(Bucket=bucket, Key="omni-studio/outputs/job-1.out")["Body"].read() == b"mp4 bytes"


def test_capacity_fallback_takes_the_next_pool_entry_and_prices_it(emulator_env: EmulatorHandle, state_file: Path):
    emulator_env.set_faults(capacity_unavailable=["ml.g6.xlarge"])
    result = deploy(options(roles=["voice"]), state_file=state_file, wait=FAST)
    assert result.ok and result.outcomes["voice"].instance_type == "ml.g6e.xlarge"
    row = deployment_status(state_file).endpoints[0]
    assert row.instance_type == "ml.g6e.xlarge"
    assert row.usd_per_hour == pytest.approx(load_prices().hourly("ml.g6e.xlarge", "us-east-1").usd_per_hour)
    assert delete_deployment(state_file, wait=FAST).ok


def test_narrowed_pools(emulator_env: EmulatorHandle, state_file: Path, capsys: pytest.CaptureFixture[str]):
    code = infra_main(["deploy", "voice", "image", "--instance-types", "ml.g5.xlarge",
                       "--instance-types", "voice=g4dn.xlarge,ml.g5.xlarge", "--no-smoke", "--json",
                       "--state-file", str(state_file), "--role-arn", ROLE_ARN, *CLI_FAST])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert data["endpoints"]["image"]["instance_type"] == "ml.g5.xlarge"
    assert data["endpoints"]["voice"]["instance_type"] == "ml.g4dn.xlarge"
    sm = emulator_env.client("sagemaker")
    state = DeploymentState.load(state_file)
    image_variant = sm.describe_endpoint_config(EndpointConfigName=state.record("image").config.name)["ProductionVariants"][0]
    assert image_variant["InstanceType"] == "ml.g5.xlarge" and "InstancePools" not in image_variant
    voice_variant = sm.describe_endpoint_config(EndpointConfigName=state.record("voice").config.name)["ProductionVariants"][0]
    assert [p["InstanceType"] for p in voice_variant["InstancePools"]] == ["ml.g4dn.xlarge", "ml.g5.xlarge"]
    assert "video" not in state.endpoints and state.spec.bucket is None
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert "model" in capsys.readouterr().out
    assert listing(emulator_env)["Endpoints"] == []


def test_upper_case_region_deploys_in_the_lower_case_region(emulator_env: EmulatorHandle, state_file: Path,
                                                            capsys: pytest.CaptureFixture[str]):
    """`--region US-EAST-1` used to fail on the default bucket's name (omni-studio-<account>-US-EAST-1)."""
    code = infra_main(["deploy", "video", "--region", "US-EAST-1", "--no-smoke", "--state-file", str(state_file),
                       "--role-arn", ROLE_ARN, *CLI_FAST])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "--region 'US-EAST-1' read as us-east-1" in err
    state = DeploymentState.load(state_file)
    assert state.region == "us-east-1" and state.spec.bucket == f"omni-studio-{state.spec.account}-us-east-1"
    assert infra_main(["status", "--region", " Us-East-1 ", "--state-file", str(state_file)]) == 0
    assert infra_main(["delete", "--region", "US-EAST-1", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert listing(emulator_env)["Endpoints"] == []


def test_quota_shortfall_creates_nothing_and_names_pools_that_fit(emulator_env: EmulatorHandle, state_file: Path,
                                                                 capsys: pytest.CaptureFixture[str]):
    emulator_env.configure(quotas={"ml.g6e.xlarge": 0, "ml.g6.xlarge": 2})
    s3 = emulator_env.client("s3")
    for b in s3.list_buckets()["Buckets"]:  # moto outlives the emulator's reset: start without the bucket
        if b["Name"].startswith("omni-studio-"):
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=b["Name"]):
                for o in page.get("Contents", []):
                    s3.delete_object(Bucket=b["Name"], Key=o["Key"])
            s3.delete_bucket(Bucket=b["Name"])
    with pytest.raises(QuotaShortfall) as info:
        deploy(options(), state_file=state_file, wait=FAST)
    report = info.value.report
    short = {line.instance_type: line for line in report.short}
    assert set(short) == {"ml.g6e.xlarge", "ml.g6.xlarge"}
    assert short["ml.g6.xlarge"].needed == 3 and short["ml.g6.xlarge"].quota == 2
    assert not state_file.exists()
    assert listing(emulator_env) == {"Models": [], "EndpointConfigs": [], "Endpoints": []}
    assert not [b for b in s3.list_buckets()["Buckets"] if b["Name"].startswith("omni-studio-")]  # no bucket either

    # The CLI says the same, exit code 4, and prints --instance-types that would work ...
    code = infra_main(["deploy", "--state-file", str(state_file), "--role-arn", ROLE_ARN, "--no-smoke", *CLI_FAST])
    err = capsys.readouterr().err
    assert code == 4 and "nothing was created" in err and "ml.g6e.xlarge: quota 0" in err
    flags = report.suggested_flags()
    assert flags and "ml.g6e.xlarge" not in flags
    # ... and they do work.
    argv = ["deploy", "--state-file", str(state_file), "--role-arn", ROLE_ARN, "--no-smoke", *CLI_FAST]
    for part in flags.split(" --instance-types "):
        argv += ["--instance-types", part.removeprefix("--instance-types ")]
    assert infra_main(argv) == 0, capsys.readouterr().err
    assert len(listing(emulator_env)["Endpoints"]) == 3
    assert delete_deployment(state_file, wait=FAST).ok


def test_failed_endpoint_shows_failure_reason_and_resume_recreates_it(emulator_env: EmulatorHandle, state_file: Path,
                                                                      capsys: pytest.CaptureFixture[str]):
    emulator_env.set_faults(fail_endpoints={"*": "CUDA driver too old for this image"})
    code = infra_main(["deploy", "image", "--state-file", str(state_file), "--role-arn", ROLE_ARN, "--no-smoke", *CLI_FAST])
    err = capsys.readouterr().err
    assert code == 5 and "FailureReason: CUDA driver too old for this image" in err
    state = DeploymentState.load(state_file)
    assert state.record("image").failure_reason == "CUDA driver too old for this image" and state.phase == "failed"

    emulator_env.set_faults()
    result = resume(state_file, wait=FAST)
    assert result.ok and "endpoint" in result.outcomes["image"].created
    assert len(listing(emulator_env)["Endpoints"]) == 1
    assert delete_deployment(state_file, wait=FAST).ok


def test_deploy_interrupted_after_each_create_step_resumes_to_exactly_one_of_each(
        emulator_env: EmulatorHandle, state_file: Path, monkeypatch: pytest.MonkeyPatch):
    """Credentials expire after N calls — before the plan is saved, after the model, after the config, after
    the endpoint; a resume with fresh credentials ends with exactly one model, config and endpoint."""
    from infra.aws import AwsContext
    from infra.model import PUBLISHED_POOL, InstancePool
    from infra.quotas import check_quotas

    # How many calls come before the first create (STS, Service Quotas pages, the usage count)?
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAPROBECALLS000001")
    probe = AwsContext()
    probe.identity()
    check_quotas(probe, {"voice": InstancePool(PUBLISHED_POOL)})
    before = emulator_env.state()["calls"]["AKIAPROBECALLS000001"]
    # Then one create per resource (names still only planned are created without a describe first).
    expected = {before - 1: None, before + 1: ("model",), before + 2: ("endpoint config", "model"),
                before + 3: ("endpoint", "endpoint config", "model")}
    for n, created_expected in expected.items():
        emulator_env.reset()
        emulator_env.set_faults(expire_credentials_after_calls=n)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", f"AKIAEXPIRING{n:08d}")
        try:
            # (no TTL: this counts the SageMaker calls; the TTL's come before them, test_infra_lifecycle.py)
            first = deploy(options(roles=["voice"], ttl=None), state_file=state_file, wait=FAST)
            assert isinstance(first.error(), CredentialsError)
            assert "credentials expired; refresh them and run `python -m infra resume`" in str(first.error())
        except CredentialsError as exc:
            assert "credentials expired; refresh them" in str(exc)
        if created_expected is None:
            assert not state_file.exists()  # expired before the plan was saved: nothing was created
            assert listing(emulator_env) == {"Models": [], "EndpointConfigs": [], "Endpoints": []}
            continue
        record = DeploymentState.load(state_file).record("voice")
        assert tuple(kind for kind, rec in record.resources() if rec.status == "created") == created_expected
        exists = listing(emulator_env)
        assert (len(exists["Models"]), len(exists["EndpointConfigs"]), len(exists["Endpoints"])) == (
            1, int("endpoint config" in created_expected), int("endpoint" in created_expected))
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", f"AKIAFRESHKEY{n:08d}")  # refreshed credentials ...
        emulator_env.set_faults()  # ... that last (each key would otherwise get N calls too)
        again = resume(state_file, wait=FAST)
        assert again.ok, again.outcomes["voice"].summary()
        assert sorted(again.outcomes["voice"].reused) == sorted(created_expected)
        names = listing(emulator_env)
        assert [len(v) for v in names.values()] == [1, 1, 1], (n, names)
        assert delete_deployment(state_file, wait=FAST).ok


def test_three_endpoint_deploy_cut_by_expired_credentials_then_resumed(emulator_env: EmulatorHandle, state_file: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIACUTMIDWAY0000001")

    def expire_after_the_first_config(p: Progress) -> None:  # mid-creation, whatever the threads' timing
        if p.step == "endpoint config":  # this key's next call fails (the limit is per access key id)
            used = emulator_env.state()["calls"].get("AKIACUTMIDWAY0000001", 0)
            emulator_env.set_faults(expire_credentials_after_calls=used)

    try:
        err = deploy(options(), state_file=state_file, wait=FAST, progress=expire_after_the_first_config).error()
    except CredentialsError as exc:
        err = exc
    assert isinstance(err, CredentialsError) and "python -m infra resume" in str(err)
    partial = listing(emulator_env)
    assert 1 <= sum(len(v) for v in partial.values()) < 9
    # The CLI says the same, with its exit code, while the credentials stay expired.
    assert infra_main(["resume", "--state-file", str(state_file), "--no-smoke", *CLI_FAST]) == 3
    assert "error: credentials expired; refresh them and run the command again" in capsys.readouterr().err
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREFRESHED0000001")
    emulator_env.set_faults()
    assert infra_main(["resume", "--state-file", str(state_file), "--no-smoke", *CLI_FAST]) == 0
    names = listing(emulator_env)
    assert [len(v) for v in names.values()] == [3, 3, 3]
    state = DeploymentState.load(state_file)
    assert names["Endpoints"] == sorted(rec.endpoint.name for rec in state.endpoints.values())
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert listing(emulator_env) == {"Models": [], "EndpointConfigs": [], "Endpoints": []}


def test_resume_refuses_another_region_and_deploy_refuses_an_existing_state(emulator_env: EmulatorHandle,
                                                                           state_file: Path):
    assert deploy(options(roles=["voice"]), state_file=state_file, wait=FAST).ok
    with pytest.raises(StateError, match="not eu-west-1"):
        resume(state_file, region="eu-west-1", wait=FAST)
    with pytest.raises(StateError, match="already records deployment"):
        deploy(options(roles=["voice"]), state_file=state_file, wait=FAST)
    assert len(listing(emulator_env)["Endpoints"]) == 1
    again = resume(state_file, wait=FAST)  # nothing missing: everything reused
    assert again.ok and again.outcomes["voice"].created == []
    assert sorted(again.outcomes["voice"].reused) == ["endpoint", "endpoint config", "model"]
    assert delete_deployment(state_file, wait=FAST).ok


def test_delete_is_idempotent_and_reports_already_gone(emulator_env: EmulatorHandle, state_file: Path,
                                                       capsys: pytest.CaptureFixture[str]):
    bucket = f"studio-purge-{uuid.uuid4().hex[:12]}"
    assert deploy(options(roles=["voice", "video"], bucket=bucket), state_file=state_file, wait=FAST).ok
    state = DeploymentState.load(state_file)
    assert state.bucket_created
    sm = emulator_env.client("sagemaker")
    sm.delete_model(ModelName=state.record("voice").model.name)  # someone cleaned up by hand
    s3 = emulator_env.client("s3")
    s3.put_object(Bucket=state.spec.bucket, Key="omni-studio/failures/x.out", Body=b"error text")
    assert infra_main(["delete", "--state-file", str(state_file), "--purge-s3", *CLI_FAST]) == 0
    out = capsys.readouterr().out
    assert f"voice: model {state.record('voice').model.name}: already gone" in out
    sagemaker_lines = re.findall(r"^\w+: (?:endpoint|endpoint config|model) \S+: deleted$", out, re.MULTILINE)
    assert len(sagemaker_lines) == 5 and "removed the state file" in out  # (besides the TTL's and scaling's)
    assert listing(emulator_env) == {"Models": [], "EndpointConfigs": [], "Endpoints": []}
    assert state.spec.bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]  # we created it: gone too
    # Nothing left to delete: a clear message, not a crash.
    assert infra_main(["delete", "--state-file", str(state_file)]) == 6
    assert "no state file" in capsys.readouterr().err


def test_delete_waits_for_a_creating_endpoint(emulator_env: EmulatorHandle, state_file: Path):
    emulator_env.configure(delays={"create_s": 1.0})
    first = deploy(options(roles=["voice"]), state_file=state_file, wait=WaitSettings(poll_s=0.05, timeout_s=0.2))
    assert not first.ok and first.outcomes["voice"].status == "Creating"  # gave up waiting; still Creating
    report = delete_deployment(state_file, wait=FAST)
    assert report.ok and listing(emulator_env)["Endpoints"] == []


def test_sweep_finds_planted_orphans_and_deletes_them(emulator_env: EmulatorHandle, state_file: Path,
                                                      capsys: pytest.CaptureFixture[str]):
    assert deploy(options(roles=["voice"]), state_file=state_file, wait=FAST).ok
    known = DeploymentState.load(state_file).record("voice").endpoint.name
    sm = emulator_env.client("sagemaker")
    studio = [{"Key": TAG_DEPLOYMENT, "Value": "lost-deployment"}, {"Key": "omni-studio:role", "Value": "image"}]
    from tests.emulator_support import deploy_endpoint

    deploy_endpoint(emulator_env, "orphan-image", instance_types=["ml.g5.xlarge"], tags=studio)
    sm.create_model(ModelName="orphan-model-only", ExecutionRoleArn=ROLE_ARN,
                    PrimaryContainer={"Image": "x/vllm:1"}, Tags=studio)
    deploy_endpoint(emulator_env, "customer-own", instance_types=["ml.g5.xlarge"])  # not the studio's

    report = find_orphans(_ctx(), [state_file])
    found = sorted((o.kind, o.name) for o in report.orphans)
    assert found == [("endpoint", "orphan-image"), ("endpoint config", "orphan-image-config"),
                     ("model", "orphan-image-model"), ("model", "orphan-model-only")]
    endpoint = next(o for o in report.orphans if o.kind == "endpoint")
    price = load_prices().hourly("ml.g5.xlarge", "us-east-1").usd_per_hour
    assert endpoint.status.instance_type == "ml.g5.xlarge" and endpoint.usd_per_hour == pytest.approx(price)
    assert endpoint.cost_so_far_usd is not None and report.usd_per_hour == pytest.approx(price)
    assert endpoint.deployment_id == "lost-deployment" and endpoint.role == "image"

    # Without a known state file, the deployment's own resources are orphans too (with its TTL's schedule
    # group and scheduler role, and its endpoint's rollback alarm).
    unknown = find_orphans(_ctx(), [state_file.with_name("other.json")]).orphans
    assert len(unknown) == 10 and {o.kind for o in unknown} >= {"schedule group", "iam role", "alarm"}

    assert infra_main(["sweep", "--state-file", str(state_file)]) == 0
    assert "orphan-image" in capsys.readouterr().out
    assert infra_main(["sweep", "--state-file", str(state_file), "--delete"]) == 2  # no TTY, no --yes
    assert "--yes" in capsys.readouterr().err
    assert infra_main(["sweep", "--state-file", str(state_file), "--delete", "--yes", "--json", *CLI_FAST]) == 0
    swept = json.loads(capsys.readouterr().out)
    assert swept["deleted"]["ok"] and len(swept["deleted"]["deletions"]) == 4
    left = listing(emulator_env)
    assert left["Endpoints"] == sorted([known, "customer-own"])
    assert "orphan-model-only" not in left["Models"] and "orphan-image-config" not in left["EndpointConfigs"]
    assert find_orphans(_ctx(), [state_file]).orphans == []
    assert delete_deployment(state_file, wait=FAST).ok
    assert delete_orphans(_ctx(), []).ok


def _ctx():
    from infra.aws import AwsContext

    return AwsContext()


def test_no_price_list_call_unless_asked(emulator_env: EmulatorHandle, state_file: Path,
                                         monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """Deploy, status, cost and delete use the shipped table: the Pricing endpoint is never contacted."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", f"http://127.0.0.1:{listener.getsockname()[1]}")
    try:
        assert deploy(options(roles=["voice"]), state_file=state_file, wait=FAST).ok
        assert infra_main(["status", "--state-file", str(state_file)]) == 0
        assert infra_main(["cost", "--state-file", str(state_file)]) == 0
        assert infra_main(["cost", "--instance-types", "ml.g5.xlarge,ml.g6.xlarge"]) == 0
        out = capsys.readouterr().out
        assert "prices as of 2025-10-01" in out and "$1.4080/h" in out
        assert delete_deployment(state_file, wait=FAST).ok
        with pytest.raises(TimeoutError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


def test_missing_credentials_and_bad_options_are_named(emulator_env: EmulatorHandle, state_file: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]):
    assert infra_main(["deploy", "--state-file", str(state_file), "--role-arn", ROLE_ARN,
                       "--instance-types", "ml.g6.xlarge,ml.g6.xlarge"]) == 2
    assert "unique" in capsys.readouterr().err
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key)
    assert infra_main(["deploy", "--state-file", str(state_file), "--role-arn", ROLE_ARN]) == 3
    assert "no usable AWS credentials" in capsys.readouterr().err
    assert not state_file.exists()


def test_fleet_lists_every_studio_endpoint_with_its_cost(emulator_env: EmulatorHandle, state_file: Path):
    from infra.fleet import studio_fleet
    from tests.emulator_support import deploy_endpoint

    assert deploy(options(roles=["voice", "image"]), state_file=state_file, wait=FAST).ok
    deploy_endpoint(emulator_env, "customer-own", instance_types=["ml.g5.xlarge"])  # not the studio's
    fleet = studio_fleet(_ctx())
    state = DeploymentState.load(state_file)
    assert sorted(e.endpoint_name for e in fleet.running) == sorted(r.endpoint.name for r in state.endpoints.values())
    assert {d for d, _ in fleet.endpoints} == {state.deployment_id}
    price = load_prices().hourly("ml.g6.xlarge", "us-east-1").usd_per_hour
    assert fleet.usd_per_hour == pytest.approx(2 * price) and fleet.cost_so_far_usd > 0
    assert delete_deployment(state_file, wait=FAST).ok
    assert studio_fleet(_ctx()).running == []


def test_deploy_runs_the_smoke_test_over_sagemaker(emulator_env: EmulatorHandle, state_file: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]):
    """After InService, deploy streams speech over the HTTP/2 bidi route, invokes the image endpoint and runs
    a 4-step async video job through S3 — all via the studio's SageMaker backend — and keeps the files."""
    import io
    import wave

    import av
    from PIL import Image

    from services.smoke.image import IMAGE_FILE
    from services.smoke.video import VIDEO_FILE
    from services.smoke.voice import VOICE_FILE

    out = tmp_path / "smoke"
    code = infra_main(["deploy", "--state-file", str(state_file), "--role-arn", ROLE_ARN, "--smoke-dir", str(out),
                       *CLI_FAST])
    err = capsys.readouterr().err
    assert code == 0, err
    with wave.open(str(out / VOICE_FILE)) as w:
        assert w.getframerate() == 24000 and w.getnframes() * 2 > 2000
    with Image.open(out / IMAGE_FILE) as im:
        assert im.format == "PNG"
    with av.open(io.BytesIO((out / VIDEO_FILE).read_bytes())) as c:
        assert sum(1 for _ in c.decode(video=0)) > 0
    state = DeploymentState.load(state_file)
    assert all(state.record(role).smoke["ok"] for role in ("voice", "image", "video"))
    assert infra_main(["smoke", "image", "--state-file", str(state_file), "--out-dir", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / IMAGE_FILE).is_file()
    assert delete_deployment(state_file, wait=FAST).ok
    assert [len(v) for v in listing(emulator_env).values()] == [0, 0, 0]


def test_quota_refused_at_creation_after_a_capacity_fallback_then_resume(emulator_env: EmulatorHandle,
                                                                        state_file: Path):
    """The pre-check expects each endpoint on its first choice; no capacity there sends the first endpoint
    to its fall-back, whose quota then refuses the second one. That is reported, and resume finishes."""
    emulator_env.configure(quotas={"ml.g6e.xlarge": 1})
    emulator_env.set_faults(capacity_unavailable=["ml.g6.xlarge"])
    first = deploy(options(roles=["voice", "image"]), state_file=state_file, wait=FAST)
    assert not first.ok
    refused = [o for o in first.outcomes.values() if o.status == "Error"]
    assert len(refused) == 1 and "SageMaker refused for quota" in str(refused[0].error)
    assert "ml.g6e.xlarge for endpoint usage" in str(first.error())
    emulator_env.configure(quotas={"ml.g6e.xlarge": 2})  # the increase came through
    again = resume(state_file, wait=FAST)
    assert again.ok and {o.instance_type for o in again.outcomes.values()} == {"ml.g6e.xlarge"}
    assert [len(v) for v in listing(emulator_env).values()] == [2, 2, 2]
    assert delete_deployment(state_file, wait=FAST).ok


def test_an_endpoint_slower_than_the_wait_is_left_creating_and_resume_waits_for_it(emulator_env: EmulatorHandle,
                                                                                   state_file: Path):
    """Each endpoint has its own pace (the emulator's create_s_by_endpoint): voice comes up, video is held
    in Creating past the wait; deploy says it still bills and how to go on; resume picks it up."""
    emulator_env.configure(delays={"create_s_by_endpoint": {"-video-": 600}})
    first = deploy(options(roles=["voice", "video"]), state_file=state_file,
                   wait=WaitSettings(poll_s=0.05, timeout_s=2, delete_timeout_s=30))
    assert first.outcomes["voice"].ok
    video = first.outcomes["video"]
    assert video.status == "Creating" and "bills meanwhile" in str(video.error) and "infra resume" in str(video.error)
    assert DeploymentState.load(state_file).record("video").endpoint_status == "Creating"
    emulator_env.configure(delays={"create_s_by_endpoint": {"-video-": 0}})  # provisioning finishes
    again = resume(state_file, wait=FAST)
    assert again.ok and again.outcomes["video"].created == []
    assert [len(v) for v in listing(emulator_env).values()] == [2, 2, 2]
    assert delete_deployment(state_file, wait=FAST).ok


# ---------------------------------------------------------------------------------------------------------
VOICE_DESIGN = "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"


def _engine_serves(engine_url: str, task_type: str) -> bool:
    """Whether the offline engine behind the emulator synthesizes `task_type` (it learns more of them over time)."""
    import httpx

    body = {"input": "Hello.", "task_type": task_type, "response_format": "wav"}
    if task_type == "VoiceDesign":
        body["instructions"] = "A calm adult voice."
    r = httpx.post(f"{engine_url}/v1/audio/speech", json=body, timeout=120, trust_env=False)
    assert r.status_code == 200 or "does not support task_type" in r.text, r.text
    return r.status_code == 200


def test_deploy_with_a_voice_model_records_it_shows_it_and_resume_keeps_it(emulator_env: EmulatorHandle,
                                                                             state_file: Path, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]):
    from protocol.sagemaker import model_id_of_container, parse_state_file, voice_model_of
    from services.aws import AwsSession
    from services.aws import endpoint_model

    code = infra_main(["deploy", "voice", "image", "--voice-model", VOICE_DESIGN, "--smoke-dir", str(tmp_path),
                       "--state-file", str(state_file), "--role-arn", ROLE_ARN, *CLI_FAST])
    err = capsys.readouterr().err
    state = DeploymentState.load(state_file)
    assert all(state.record(r).endpoint_status == "InService" for r in ("voice", "image")), err
    # the smoke test asked the voice endpoint for what its model does: a voice from a description
    smoke = state.record("voice").smoke
    assert smoke["detail"].startswith("VoiceDesign (a described voice): "), smoke
    if _engine_serves(emulator_env.engine_url, "VoiceDesign"):
        assert code == 0 and smoke["ok"], err
    else:  # the engine refuses the task by name: the smoke test sent it
        assert code == 5 and not smoke["ok"] and "task_type='VoiceDesign'" in smoke["detail"]

    # SageMaker runs that model: DescribeModel's container environment, read as the studio reads it
    sm = emulator_env.client("sagemaker")
    voice_name = state.record("voice").endpoint.name
    model = sm.describe_model(ModelName=state.record("voice").model.name)
    assert model["PrimaryContainer"]["Environment"] == {"SM_VLLM_MODEL": VOICE_DESIGN}
    assert model_id_of_container(model["PrimaryContainer"]["Environment"]) == VOICE_DESIGN
    assert endpoint_model(AwsSession(emulator_env.region), voice_name) == VOICE_DESIGN
    image_model = sm.describe_model(ModelName=state.record("image").model.name)
    assert image_model["PrimaryContainer"]["Environment"]["SM_VLLM_MODEL"] == "black-forest-labs/FLUX.2-klein-4B"

    # the state file has it for readers outside infra; status shows it with its task types
    parsed = parse_state_file(state_file.read_bytes())
    assert parsed.voice_model == voice_model_of(parsed) == VOICE_DESIGN
    assert infra_main(["status", "--state-file", str(state_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["voice_model"] == VOICE_DESIGN and data["voice_task_types"] == ["VoiceDesign"]
    voice_row = next(e for e in data["endpoints"] if e["role"] == "voice")
    assert voice_row["model_id"] == VOICE_DESIGN and voice_row["task_types"] == ["VoiceDesign"]
    assert next(e for e in data["endpoints"] if e["role"] == "image")["task_types"] == []
    assert infra_main(["status", "--state-file", str(state_file)]) == 0
    assert f"voice model: {VOICE_DESIGN}: VoiceDesign (a voice designed from a description)" in capsys.readouterr().out

    # lost behind infra's back: resume recreates the voice endpoint with the same model, never the default
    sm.delete_endpoint(EndpointName=voice_name)
    sm.get_waiter("endpoint_deleted").wait(EndpointName=voice_name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 100})
    sm.delete_endpoint_config(EndpointConfigName=state.record("voice").config.name)
    sm.delete_model(ModelName=state.record("voice").model.name)
    assert infra_main(["resume", "--state-file", str(state_file), "--no-smoke", *CLI_FAST]) == 0, capsys.readouterr().err
    again = DeploymentState.load(state_file)
    assert again.record("voice").endpoint.name == voice_name and again.spec.voice_model == VOICE_DESIGN
    assert sm.describe_model(ModelName=again.record("voice").model.name)["PrimaryContainer"]["Environment"] == {
        "SM_VLLM_MODEL": VOICE_DESIGN}
    assert json.loads(state_file.read_text())["voice_model"] == VOICE_DESIGN
    assert [len(v) for v in listing(emulator_env).values()] == [2, 2, 2]
    assert delete_deployment(state_file, wait=FAST).ok


def test_deploy_refuses_an_unknown_voice_model_before_creating_anything(emulator_env: EmulatorHandle,
                                                                         state_file: Path,
                                                                         capsys: pytest.CaptureFixture[str]):
    code = infra_main(["deploy", "--voice-model", "Qwen/Qwen3-TTS-12Hz-1.7B-Clone", "--state-file", str(state_file),
                       "--role-arn", ROLE_ARN, "--no-smoke", *CLI_FAST])
    err = capsys.readouterr().err
    assert code == 2 and "is not a voice model the studio knows" in err
    assert "Qwen/Qwen3-TTS-12Hz-0.6B-Base: Base (cloning a voice from a short recording)" in err
    assert emulator_env.state()["calls"] == {}  # not even STS
    assert not state_file.exists() and listing(emulator_env) == {"Models": [], "EndpointConfigs": [], "Endpoints": []}
    code = infra_main(["deploy", "image", "--voice-model", VOICE_DESIGN, "--state-file", str(state_file),
                       "--role-arn", ROLE_ARN, "--no-smoke", *CLI_FAST])
    assert code == 2 and "does not include voice" in capsys.readouterr().err
    assert not state_file.exists()


def test_voice_and_listen_deploy_smoke_and_delete(emulator_env: EmulatorHandle, state_file: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]):
    """Listen is opt-in: named, it is a realtime endpoint answering the bidirectional stream, with the quota and
    GPU checks, TTL and scaling of the others, smoke-tested by transcribing the voice check's recording."""
    code = infra_main(["deploy", "voice", "listen", "--json", "--smoke-dir", str(tmp_path / "smoke"), "--max-instances", "2",
                       "--state-file", str(state_file), "--role-arn", ROLE_ARN, *CLI_FAST])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert sorted(data["endpoints"]) == ["listen", "voice"]
    checks = {c["role"]: c for c in data["smoke"]["checks"]}
    assert checks["listen"]["ok"], checks["listen"]
    assert checks["listen"]["figures"]["source"] == "the voice check's recording"
    heard = (tmp_path / "smoke" / "smoke-transcript.txt").read_text()
    assert "smoke test" in heard.lower() or "omni" in heard.lower() or len(heard.split()) >= 5, heard
    state = DeploymentState.load(state_file)
    sm = emulator_env.client("sagemaker")
    listen = state.record("listen")
    config = sm.describe_endpoint_config(EndpointConfigName=listen.config.name)
    assert "AsyncInferenceConfig" not in config  # realtime, like voice
    variant = config["ProductionVariants"][0]
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"  # the bidi stream's AMI
    assert [p["InstanceType"] for p in variant["InstancePools"]] == ["ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge"]
    env = sm.describe_model(ModelName=listen.model.name)["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_MODEL"] == "mistralai/Voxtral-Mini-4B-Realtime-2602"
    targets = emulator_env.client("application-autoscaling").describe_scalable_targets(ServiceNamespace="sagemaker")
    assert any(listen.endpoint.name in t["ResourceId"] for t in targets["ScalableTargets"])
    schedules = emulator_env.client("scheduler").list_schedules()["Schedules"]
    assert schedules  # the TTL: the deployment deletes itself
    # a listen endpoint with no GPU for it is refused before anything is created
    assert infra_main(["plan", "listen", "--instance-types", "listen=ml.g4dn.xlarge", "--no-price-list"]) == 2
    assert "ml.g4dn.xlarge" in capsys.readouterr().err
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert listing(emulator_env)["Endpoints"] == []
