"""Deploy and resume: bring every endpoint of a deployment to InService, creating only what is missing.

    result = deploy(DeployOptions(roles=["voice", "image"], region="us-east-1"), state_file=path,
                    progress=print_progress)
    result = resume(path)            # after a crash or expired credentials: same names, nothing twice

Order of work: credentials (STS) → plan → quota pre-check (nothing is created when it fails) → the state
file, written BEFORE the first create → the bucket (async video only) → per endpoint, in its own thread:
model → endpoint config → endpoint → wait. Every step first describes the planned name, so a resource
that exists is reused; the state is saved after each step. `progress` is called from the worker threads.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.aws import (
    AWS_ERRORS,
    AwsContext,
    error_code,
    error_message,
    is_not_found,
    translate,
)
from infra.errors import (
    RESUME_HINT,
    CredentialsError,
    EndpointFailed,
    InfraError,
    QuotaShortfall,
    StateError,
)
from infra.lock import locked
from infra.model import (
    DeploymentSpec,
    DeployOptions,
    EndpointSpec,
    InstancePool,
    Role,
    gpu_fit_line,
    plan,
    plan_warnings,
)
from infra.quotas import QuotaReport, check_quotas
from infra.state import (
    DEFAULT_STATE_FILE,
    DeploymentState,
    EndpointRecord,
    ResourceRecord,
    utc_now,
)
from services.endpoint_view import GONE, describe_endpoint

# Statuses after which an endpoint is on its way (or there): reuse it, wait for it.
PROGRESSING = ("Creating", "Updating", "SystemUpdating", "RollingBack", "InService", "OutOfService")


@dataclass(frozen=True)
class WaitSettings:
    """How often to describe and how long to wait. Real endpoints take ~10 minutes; tests use fractions."""

    poll_s: float = 15.0
    timeout_s: float = 2 * 3600.0  # provisioning (≤ 1 h) + container start-up health check (≤ 1 h)
    delete_timeout_s: float = 1800.0


@dataclass(frozen=True)
class Progress:
    """One thing that happened. `role` is None for deployment-wide steps (quota, state, bucket)."""

    role: Role | None
    step: str  # plan | quota | state | bucket | model | endpoint config | endpoint | wait | done | failed | error
    message: str
    status: str | None = None  # DescribeEndpoint's EndpointStatus
    elapsed_s: float | None = None  # since the endpoint's CreationTime (or since we started on it)
    instance_type: str | None = None  # the pool entry in use, once SageMaker reports it


ProgressCallback = Callable[[Progress], None]


def _quiet(_: Progress) -> None:
    pass


@dataclass
class EndpointOutcome:
    role: Role
    endpoint_name: str
    status: str  # InService | Failed | Creating (timed out) | Error (a call failed) | Stopped
    instance_type: str | None = None
    failure_reason: str | None = None
    elapsed_s: float | None = None
    created: list[str] = field(default_factory=list)  # "model", "endpoint config", "endpoint"
    reused: list[str] = field(default_factory=list)
    error: InfraError | None = None

    @property
    def ok(self) -> bool:
        return self.status == "InService"

    def summary(self) -> str:
        where = f" on {self.instance_type}" if self.instance_type else ""
        took = f" after {format_duration(self.elapsed_s)}" if self.elapsed_s is not None else ""
        if self.ok:
            return f"{self.role}: {self.endpoint_name} InService{where}{took}"
        if self.status == "Failed":
            return f"{self.role}: {self.endpoint_name} Failed{took}: FailureReason: {self.failure_reason}"
        return f"{self.role}: {self.endpoint_name} {self.status}: {self.error or self.failure_reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "endpoint_name": self.endpoint_name, "status": self.status,
                "instance_type": self.instance_type, "failure_reason": self.failure_reason,
                "elapsed_s": None if self.elapsed_s is None else round(self.elapsed_s, 3),
                "created": self.created, "reused": self.reused, "error": None if self.error is None else str(self.error)}


@dataclass
class DeployResult:
    state: DeploymentState
    outcomes: dict[Role, EndpointOutcome]
    quota: QuotaReport | None = None

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes.values())

    def error(self) -> InfraError | None:
        """The error to report when not ok: expired credentials first (they explain the rest)."""
        errors = [o.error for o in self.outcomes.values() if o.error is not None]
        for e in errors:
            if isinstance(e, CredentialsError):
                return e
        if errors:
            return errors[0]
        failed = [o for o in self.outcomes.values() if not o.ok]
        if failed:
            text = "; ".join(o.summary() for o in failed)
            return EndpointFailed(f"{text}. Fix the cause, then `python -m infra delete` and deploy again, "
                                  f"or {RESUME_HINT} (it recreates Failed endpoints)")
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "deployment_id": self.state.deployment_id, "region": self.state.region,
                "state_file": str(self.state.path), "bucket": self.state.spec.bucket,
                "bucket_created": self.state.bucket_created,
                "endpoints": {r: o.to_dict() for r, o in self.outcomes.items()},
                "quota": None if self.quota is None else self.quota.to_dict()}


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = int(round(seconds))
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


# ---------------------------------------------------------------------------------------------------------
@locked("python -m infra deploy")
def deploy(options: DeployOptions, *, state_file: Path = DEFAULT_STATE_FILE, wait: WaitSettings = WaitSettings(),
           progress: ProgressCallback | None = None, environ: Mapping[str, str] | None = None,
           stop: threading.Event | None = None) -> DeployResult:
    """Plan, check quotas, then create everything concurrently. Raises QuotaShortfall (nothing created),
    StateError (a deployment is already recorded there), UsageError, CredentialsError; returns a
    DeployResult (check `.ok` / `.error()`) once creation started. StateLocked (nothing done) when another
    command holds the state file's lock (infra/lock.py); deploy holds it to the end."""
    progress = progress or _quiet
    environ = os.environ if environ is None else environ
    state_file = Path(state_file)
    if state_file.exists():
        try:
            existing = DeploymentState.load(state_file)
            what = f"deployment {existing.deployment_id} in {existing.region}"
        except StateError:
            what = "a deployment"
        raise StateError(f"{state_file} already records {what}: run `python -m infra resume` to finish it or "
                         "`python -m infra delete` to remove it (or pass another --state-file for a second deployment)")
    ctx = AwsContext(options.region, options.profile)
    role_arn_env = environ.get("SAGEMAKER_EXECUTION_ROLE_ARN")
    # Check the options before the first AWS call: a typo is named without waiting for credentials.
    draft = plan(options, account="000000000000", creator="", region=ctx.region, role_arn_env=role_arn_env)
    from infra import lifecycle  # TTL and autoscaling (infra/ttl.py, infra/scaling.py)

    life = lifecycle.check_options(options)  # --ttl, --max-instances: named before any AWS call
    identity = ctx.identity()
    spec = plan(options, account=identity.account, creator=identity.arn, region=ctx.region,
                role_arn_env=role_arn_env, deployment_id=draft.deployment_id)
    progress(Progress(None, "plan", f"deployment {spec.deployment_id} in {spec.region}: "
                      + ", ".join(f"{e.role} on {e.pool.flag()}" for e in spec.endpoints)))
    for e in spec.endpoints:
        progress(Progress(e.role, "plan", f"{e.model_id}: {gpu_fit_line(e.model_id)}"))
    for warning in plan_warnings(spec):
        progress(Progress(None, "warning", f"warning: {warning}"))
    report = _quota_check(ctx, {e.role: e.pool for e in spec.endpoints}, progress)
    state = DeploymentState.new(spec, state_file)
    say = _say(progress)
    lifecycle.prepare(ctx, state, life, say)  # a scheduler role without the permission stops here
    state.phase = "creating"
    state.save()  # before the first create: every planned name is on disk
    progress(Progress(None, "state", f"state saved to {state_file} (before creating anything)"))
    lifecycle.ensure_ttl_first(ctx, state, say)  # the schedules exist before the endpoints do
    result = _converge(ctx, state, wait, progress, stop)
    result.quota = report
    return result


@locked("python -m infra resume")
def resume(state_file: Path = DEFAULT_STATE_FILE, *, region: str | None = None, profile: str | None = None,
           wait: WaitSettings = WaitSettings(), progress: ProgressCallback | None = None,
           stop: threading.Event | None = None, ttl: str | None = None) -> DeployResult:
    """Continue the deployment in `state_file`: reuse what exists (by describing each planned name), create
    what is missing, recreate endpoints that Failed. Never creates a second copy of anything. Holds the state
    file's lock (infra/lock.py) throughout."""
    progress = progress or _quiet
    state = DeploymentState.load(Path(state_file))
    if region and region != state.region:
        raise StateError(f"{state_file} records a deployment in {state.region}, not {region}: leave --region out "
                         f"(or pass --region {state.region}); resources never move between regions")
    ctx = AwsContext(state.region, profile)
    identity = ctx.identity()
    if identity.account != state.spec.account:
        raise StateError(f"{state_file} records a deployment in account {state.spec.account}, but these credentials "
                         f"are for account {identity.account}: use the profile of account {state.spec.account}")
    progress(Progress(None, "plan", f"resuming deployment {state.deployment_id} in {state.region}"))
    to_create = {}
    for ep in state.spec.endpoints:
        status = _endpoint_status(ctx, ep.endpoint_name)
        if status is None or status == "Failed":
            to_create[ep.role] = ep.pool
    report = _quota_check(ctx, to_create, progress) if to_create else None
    from infra import lifecycle

    lifecycle.resume_ttl(state, ttl)  # a TTL that passed before the schedules existed needs a new one
    state.phase = "creating"
    state.save()
    lifecycle.ensure_ttl_first(ctx, state, _say(progress))
    result = _converge(ctx, state, wait, progress, stop)
    result.quota = report
    return result


def _say(progress: ProgressCallback) -> Callable[[Role | None, str, str], None]:
    """The lifecycle's messages (infra/lifecycle.py) as Progress."""
    return lambda role, step, text: progress(Progress(role, step, text))


def _quota_check(ctx: AwsContext, pools: dict[Role, InstancePool], progress: ProgressCallback) -> QuotaReport:
    report = check_quotas(ctx, pools)
    if not report.ok:
        progress(Progress(None, "quota", report.message()))
        raise QuotaShortfall(report.message(), report)
    progress(Progress(None, "quota", "quotas allow every pool entry: " + ", ".join(
        f"{line.instance_type} {line.free:g} free/{line.needed} needed" for line in report.lines)))
    return report


def _endpoint_status(ctx: AwsContext, name: str) -> str | None:
    """DescribeEndpoint's status, None when the endpoint does not exist."""
    try:
        view = describe_endpoint(ctx.sagemaker, name)
    except AWS_ERRORS as exc:
        raise translate(exc, f"describe endpoint {name}", resumable=True) from None
    return None if view.gone else view.status


# ---------------------------------------------------------------------------------------------------------
def _converge(ctx: AwsContext, state: DeploymentState, wait: WaitSettings, progress: ProgressCallback,
              stop: threading.Event | None) -> DeployResult:
    stop = stop or threading.Event()
    spec = state.spec
    result = DeployResult(state=state, outcomes={})
    # One thread per endpoint: the three create and wait side by side.
    with ThreadPoolExecutor(max_workers=len(spec.endpoints), thread_name_prefix="infra-endpoint") as pool:
        futures = {ep.role: pool.submit(_converge_endpoint, ctx, state, ep, wait, progress, stop)
                   for ep in spec.endpoints}
        try:
            for role, fut in futures.items():
                result.outcomes[role] = fut.result()
        except KeyboardInterrupt:
            stop.set()  # workers end at their next check; the state on disk is already current
            raise
    with state.lock:
        state.phase = "deployed" if result.ok else (
            "failed" if any(o.status == "Failed" for o in result.outcomes.values()) else "incomplete")
    state.save()
    return result


def _converge_endpoint(ctx: AwsContext, state: DeploymentState, ep: EndpointSpec, wait: WaitSettings,
                       progress: ProgressCallback, stop: threading.Event) -> EndpointOutcome:
    outcome = EndpointOutcome(ep.role, ep.endpoint_name, "Error")
    rec = state.record(ep.role)
    spec = state.spec
    sm = ctx.sagemaker
    try:
        if ep.kind == "async" and spec.bucket:
            # Only the async endpoint needs the bucket; in its own thread, the others do not wait for it.
            created = ensure_bucket(ctx, spec, progress)
            with state.lock:
                state.bucket_created = state.bucket_created or created
            state.save()
        _ensure(state, rec.model, "model", outcome, progress, ep.role,
                describe=lambda: sm.describe_model(ModelName=ep.model_name)["ModelArn"],
                create=lambda: sm.create_model(**spec.create_model_request(ep))["ModelArn"])
        _ensure(state, rec.config, "endpoint config", outcome, progress, ep.role,
                describe=lambda: sm.describe_endpoint_config(EndpointConfigName=ep.config_name)["EndpointConfigArn"],
                create=lambda: sm.create_endpoint_config(**spec.create_endpoint_config_request(ep))["EndpointConfigArn"])
        _ensure_endpoint(ctx, state, ep, rec, outcome, wait, progress, stop)
        _wait_in_service(ctx, state, ep, rec, outcome, wait, progress, stop)
        if outcome.ok:  # its version 1 recorded, its rollback alarm put (infra/versions.py; never raises)
            from infra.versions import after_deploy

            after_deploy(ctx, state, ep.role, lambda m: progress(Progress(ep.role, "alarm", m)))
        if outcome.ok:
            from infra.lifecycle import scale_endpoint

            scale_endpoint(ctx, state, ep, _say(progress))  # registering needs InService
    except AWS_ERRORS as exc:
        outcome.status = "Error"
        outcome.error = translate(exc, f"deploy the {ep.role} endpoint", resumable=True)
        progress(Progress(ep.role, "error", str(outcome.error)))
    except InfraError as exc:
        outcome.status = "Error"
        outcome.error = exc
        progress(Progress(ep.role, "error", str(exc)))
    finally:
        state.save()
    return outcome


def _ensure(state: DeploymentState, rec: ResourceRecord, kind: str, outcome: EndpointOutcome,
            progress: ProgressCallback, role: Role, *, describe: Callable[[], str], create: Callable[[], str]) -> None:
    """Make sure the planned resource exists, never creating it twice.

    A name still `planned` is created straight away (names carry the deployment id, so nobody else has
    it); "already existing" means an earlier attempt created it and lost the answer: it is reused. A name
    recorded as created is described first and only created again if SageMaker no longer has it.
    """
    if rec.status == "planned":
        try:
            arn = create()
        except AWS_ERRORS as exc:
            if "already existing" not in error_message(exc).lower():
                raise
        else:
            _record(state, rec, "created", arn, kind, outcome, progress, role)
            return
    try:
        arn = describe()
    except AWS_ERRORS as exc:
        if not is_not_found(exc):
            raise
        _record(state, rec, "created", create(), kind, outcome, progress, role)
        return
    _record(state, rec, "reused", arn, kind, outcome, progress, role)


def _record(state: DeploymentState, rec: ResourceRecord, how: str, arn: str, kind: str, outcome: EndpointOutcome,
            progress: ProgressCallback, role: Role) -> None:
    with state.lock:
        rec.arn = arn
        if how == "created" or rec.status != "created":
            rec.status = how  # type: ignore[assignment]
    (outcome.created if how == "created" else outcome.reused).append(kind)
    progress(Progress(role, kind, f"{kind} {rec.name} {'created' if how == 'created' else 'exists: reused'}"))
    state.save()


def _ensure_endpoint(ctx: AwsContext, state: DeploymentState, ep: EndpointSpec, rec: EndpointRecord,
                     outcome: EndpointOutcome, wait: WaitSettings, progress: ProgressCallback,
                     stop: threading.Event) -> None:
    """Create the endpoint (straight away while it is only planned, as in `_ensure`), or reuse it: Creating
    or InService endpoints are waited for; a Failed one is deleted and created again."""
    sm = ctx.sagemaker
    if rec.endpoint.status == "planned" and _create_endpoint(sm, state, ep, rec, outcome, progress):
        return
    view = describe_endpoint(sm, ep.endpoint_name)
    if view.status in ("Failed", "Deleting"):
        if view.status == "Failed":
            progress(Progress(ep.role, "endpoint", f"endpoint {ep.endpoint_name} is Failed "
                              f"({view.failure_reason or 'no reason given'}); deleting it to create it again",
                              status="Failed"))
            try:
                sm.delete_endpoint(EndpointName=ep.endpoint_name)
            except AWS_ERRORS as exc:
                if not is_not_found(exc):
                    raise
        _wait_gone(ctx, ep.endpoint_name, wait, stop)
    elif not view.gone:
        with state.lock:
            if rec.endpoint.status != "created":
                rec.endpoint.status = "reused"
            rec.endpoint.arn = view.arn
            rec.endpoint_status = view.status
        outcome.reused.append("endpoint")
        progress(Progress(ep.role, "endpoint", f"endpoint {ep.endpoint_name} exists ({view.status}): reused",
                          status=view.status))
        state.save()
        return
    if not _create_endpoint(sm, state, ep, rec, outcome, progress):
        raise EndpointFailed(f"endpoint {ep.endpoint_name} appeared while being created again; {RESUME_HINT}")


def _create_endpoint(sm: Any, state: DeploymentState, ep: EndpointSpec, rec: EndpointRecord,
                     outcome: EndpointOutcome, progress: ProgressCallback) -> bool:
    """CreateEndpoint; False when it already exists (the caller describes it instead)."""
    try:
        arn = sm.create_endpoint(**state.spec.create_endpoint_request(ep))["EndpointArn"]
    except AWS_ERRORS as exc:
        if "already existing" not in error_message(exc).lower():
            raise
        return False
    with state.lock:
        rec.endpoint.status, rec.endpoint.arn = "created", arn
        rec.failure_reason = None
        rec.endpoint_status = "Creating"
    outcome.created.append("endpoint")
    progress(Progress(ep.role, "endpoint", f"endpoint {ep.endpoint_name} created; SageMaker picks the instance "
                      f"from {ep.pool.flag()}", status="Creating"))
    state.save()
    return True


def _iso(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return None


def _seconds_since(value: Any) -> float | None:
    if isinstance(value, datetime):
        return (datetime.now(UTC) - value.astimezone(UTC)).total_seconds()
    return None


def _wait_in_service(ctx: AwsContext, state: DeploymentState, ep: EndpointSpec, rec: EndpointRecord,
                     outcome: EndpointOutcome, wait: WaitSettings, progress: ProgressCallback,
                     stop: threading.Event) -> None:
    sm = ctx.sagemaker
    started = time.monotonic()
    last: tuple[str | None, str | None] = (None, None)
    while True:
        view = describe_endpoint(sm, ep.endpoint_name, ep.pool.types)
        if view.gone:
            raise EndpointFailed(f"endpoint {ep.endpoint_name} was deleted while it was being created (by hand or "
                                 f"by its TTL); {RESUME_HINT} to create it again")
        status, itype = view.status, view.instance_type
        elapsed = _seconds_since(view.created)
        elapsed = time.monotonic() - started if elapsed is None else elapsed
        outcome.instance_type = itype or outcome.instance_type
        outcome.elapsed_s = elapsed
        with state.lock:
            rec.endpoint_status = status
            rec.instance_type = itype or rec.instance_type
            rec.creation_time = rec.creation_time or _iso(view.created)
        if (status, itype) != last:
            state.save()
            last = (status, itype)
        if status == "InService":
            with state.lock:
                rec.in_service_at = rec.in_service_at or utc_now()
                rec.failure_reason = None
            outcome.status = "InService"
            progress(Progress(ep.role, "done", f"{ep.endpoint_name} InService on {itype or 'an instance'} after "
                              f"{format_duration(elapsed)}", status, elapsed, itype))
            return
        if status in ("Failed", "OutOfService") or status not in PROGRESSING:
            reason = view.failure_reason or f"endpoint status {status}"
            with state.lock:
                rec.failure_reason = reason
            outcome.status, outcome.failure_reason = "Failed", reason
            progress(Progress(ep.role, "failed", f"{ep.endpoint_name} {status}: {reason}", status, elapsed, itype))
            return
        progress(Progress(ep.role, "wait", f"{ep.endpoint_name} {status}", status, elapsed, itype))
        if time.monotonic() - started > wait.timeout_s:
            outcome.status = status
            outcome.error = EndpointFailed(
                f"{ep.endpoint_name} is still {status} after {format_duration(wait.timeout_s)} (it bills meanwhile): "
                f"{RESUME_HINT} to keep waiting, or `python -m infra delete`")
            return
        if stop.wait(wait.poll_s):
            outcome.status = "Stopped"
            outcome.error = EndpointFailed(f"stopped while {ep.endpoint_name} was {status}; {RESUME_HINT} to go on")
            return


def _wait_gone(ctx: AwsContext, name: str, wait: WaitSettings, stop: threading.Event) -> None:
    """Until DescribeEndpoint says "Could not find" (or the delete timeout passes)."""
    deadline = time.monotonic() + wait.delete_timeout_s
    while True:
        status = describe_endpoint(ctx.sagemaker, name).status
        if status == GONE:
            return
        if time.monotonic() > deadline:
            raise EndpointFailed(f"endpoint {name} is still {status} after {format_duration(wait.delete_timeout_s)}; "
                                 "check it in the SageMaker console")
        if stop.wait(wait.poll_s):
            raise EndpointFailed(f"stopped while waiting for endpoint {name} to go away")


# ---------------------------------------------------------------------------------------------------------
def ensure_bucket(ctx: AwsContext, spec: DeploymentSpec, progress: ProgressCallback) -> bool:
    """The async bucket: reused when it exists, else created with public access blocked and default
    encryption (KMS when --kms-key is given). Returns True when it was created now."""
    s3 = ctx.s3
    bucket = spec.bucket
    assert bucket
    try:
        s3.head_bucket(Bucket=bucket, ExpectedBucketOwner=spec.account)
        progress(Progress(None, "bucket", f"bucket {bucket} exists: reused (outputs under s3://{bucket}/{spec.prefix}/)"))
        return False
    except AWS_ERRORS as exc:
        code = error_code(exc)
        if code in ("403", "AccessDenied", "Forbidden"):
            raise translate(exc, f"use bucket {bucket} (it exists but belongs to another account, or s3:ListBucket is "
                            "missing); pass --bucket with a bucket of your own") from None
        if code not in ("404", "NoSuchBucket", "NotFound"):
            raise translate(exc, f"check bucket {bucket}", resumable=True) from None
    try:
        kwargs: dict[str, Any] = {"Bucket": bucket}
        if ctx.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": ctx.region}
        try:
            s3.create_bucket(**kwargs)
        except AWS_ERRORS as exc:
            if error_code(exc) != "BucketAlreadyOwnedByYou":
                raise
        s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration={
            "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
        rule: dict[str, Any] = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        if spec.kms_key:
            rule = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": spec.kms_key},
                    "BucketKeyEnabled": True}
        s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={"Rules": [rule]})
        s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": spec.tags(None)})
    except AWS_ERRORS as exc:
        if error_code(exc) == "BucketAlreadyExists":
            raise translate(exc, f"create bucket {bucket}: the name is taken by another account; pass --bucket "
                            "with another name") from None
        raise translate(exc, f"create bucket {bucket}", resumable=True) from None
    progress(Progress(None, "bucket", f"bucket {bucket} created (public access blocked, "
                      f"{'KMS' if spec.kms_key else 'SSE-S3'} default encryption)"))
    return True
