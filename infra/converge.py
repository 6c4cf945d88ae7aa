"""One endpoint of a deployment brought to InService, creating only what is missing (deploy and resume run one
per endpoint, each in its own thread).

Model → endpoint config → endpoint → wait, the bucket first for the async endpoint. Every step first
describes the planned name, so a resource that exists is reused, and the state is saved after each step;
a Failed endpoint is deleted and created again. `progress` is called from the worker thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, error_code, error_message, is_not_found, translate
from infra.errors import RESUME_HINT, EndpointFailed, InfraError
from infra.model import DeploymentSpec, EndpointSpec, Role
from infra.progress import Progress, ProgressCallback, WaitSettings, format_duration, lifecycle_say
from infra.state import DeploymentState, EndpointRecord, ResourceRecord, utc_now
from services.endpoint_view import GONE, describe_endpoint

# Statuses after which an endpoint is on its way (or there): reuse it, wait for it.
PROGRESSING = ("Creating", "Updating", "SystemUpdating", "RollingBack", "InService", "OutOfService")


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



def converge_endpoint(ctx: AwsContext, state: DeploymentState, ep: EndpointSpec, wait: WaitSettings,
                       progress: ProgressCallback, stop: threading.Event) -> EndpointOutcome:
    """Model, endpoint config, endpoint (the bucket first for an async endpoint), then the wait until InService;
    every step reuses what exists. Never raises: a failed call is the outcome's error."""
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

            scale_endpoint(ctx, state, ep, lifecycle_say(progress))  # registering needs InService
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
