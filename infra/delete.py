"""Delete: endpoint (wait until gone) → endpoint config → model, for each endpoint; verified by describing.

Each deletion is reported on its own ("deleted" or "already gone", both fine); the state file is removed
only when every resource is verified gone (and, with `purge_s3`, the S3 outputs too). A cleanup that did
not finish keeps the state file, marks what is gone, and says how to finish: a half-done delete can leave
a billing endpoint behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from infra.aws import AWS_ERRORS, AwsContext, error_message, is_not_found, translate
from infra.errors import EndpointFailed, InfraError, StateError
from infra.lock import locked
from infra.model import Role
from infra.progress import Progress, ProgressCallback, WaitSettings, format_duration
from infra.state import DEFAULT_STATE_FILE, DeploymentState
from services.endpoint_view import GONE, describe_endpoint

Kind = Literal["endpoint", "endpoint config", "model",
               # the lifecycle's (infra/scaling.py, infra/ttl.py): removed before / after the endpoints
               "alarm", "scaling policy", "scalable target", "schedule", "schedule group", "iam role"]
Outcome = Literal["deleted", "already gone", "failed"]
IN_PROGRESS = ("Creating", "Updating", "SystemUpdating", "RollingBack")
DELETE_AGAIN = "run `python -m infra delete` again"


@dataclass(frozen=True)
class Deletion:
    kind: Kind
    name: str
    outcome: Outcome
    role: Role | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome != "failed"

    def line(self) -> str:
        who = f"{self.role}: " if self.role else ""
        extra = f" ({self.detail})" if self.detail else ""
        return f"{who}{self.kind} {self.name}: {self.outcome}{extra}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "outcome": self.outcome, "role": self.role,
                "detail": self.detail}


@dataclass
class DeleteReport:
    deletions: list[Deletion] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)  # "kind name" that still exist after verification
    state_file: Path | None = None
    state_removed: bool = False
    s3_objects_deleted: int = 0
    bucket_deleted: bool = False
    errors: list[InfraError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.remaining and not self.errors and all(d.ok for d in self.deletions)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "deletions": [d.to_dict() for d in self.deletions], "remaining": self.remaining,
                "state_file": None if self.state_file is None else str(self.state_file),
                "state_removed": self.state_removed, "s3_objects_deleted": self.s3_objects_deleted,
                "bucket_deleted": self.bucket_deleted, "errors": [str(e) for e in self.errors]}


def deletion_plan(state: DeploymentState, roles: list[Role] | None = None) -> list[tuple[str, str, str]]:
    """What `delete_deployment` will delete, for the confirmation that names it: per endpoint its scaling
    (target, policies, alarms), the endpoint, config and model, the other versions' configs and models and the
    rollback alarm; then the TTL's schedules, schedule group and the role deploy made."""
    plan: list[tuple[str, str, str]] = []
    chosen = [r for r in state.endpoints if roles is None or r in roles]
    for role in chosen:
        ep = state.endpoints[role]
        scaling = state.scaling.get(role) or {}
        if scaling.get("registered"):
            plan.append((role, "scalable target", scaling["resource_id"]))
        plan += [(role, "scaling policy", name) for name in scaling.get("policies", [])]
        plan += [(role, "alarm", name) for name in scaling.get("alarms", [])]
        plan += [(role, kind, rec.name) for kind, rec in ep.resources()]
        history = state.versions.get(role) or {}
        current = {ep.config.name, ep.model.name}
        for v in history.get("versions", []):
            if v.get("resources_deleted"):
                continue
            plan += [(role, kind, name) for kind, name in (("endpoint config", v["config_name"]),
                                                          ("model", v["model_name"])) if name not in current]
        if history.get("alarm") and history.get("alarm_created"):
            plan.append((role, "alarm", history["alarm"]))
    ttl = state.ttl or {}
    plan += [(role, "schedule", name) for role, name in (ttl.get("schedules") or {}).items() if role in chosen]
    if roles is None or set(chosen) == set(state.endpoints):
        if ttl.get("schedule_group"):
            plan.append(("deployment", "schedule group", ttl["schedule_group"]))
        if ttl.get("role_arn") and ttl.get("role_created"):
            plan.append(("deployment", "iam role", ttl["role_arn"].rsplit("/", 1)[-1]))
    return plan


def _quiet(_: Progress) -> None:
    pass


# ---------------------------------------------------------------------------------------------------------
def delete_endpoint_chain(ctx: AwsContext, endpoint: str, config: str | None, models: list[str], *,
                          role: Role | None = None, wait: WaitSettings = WaitSettings(),
                          progress: ProgressCallback = _quiet, stop: threading.Event | None = None) -> list[Deletion]:
    """Endpoint (waiting until it is gone), then its config, then its model(s). AWS errors propagate."""
    stop = stop or threading.Event()
    sm = ctx.sagemaker
    out = [_delete_endpoint(ctx, endpoint, role, wait, progress, stop)]
    if config:
        out.append(delete_resource(sm, "endpoint config", config, role, progress))
    for model in models:
        out.append(delete_resource(sm, "model", model, role, progress))
    return out


def delete_resource(sm: Any, kind: Literal["endpoint config", "model"], name: str, role: Role | None,
                    progress: ProgressCallback) -> Deletion:
    """Delete an endpoint config or a model; "already gone" is fine. Other AWS errors propagate."""
    try:
        if kind == "endpoint config":
            sm.delete_endpoint_config(EndpointConfigName=name)
        else:
            sm.delete_model(ModelName=name)
        outcome: Outcome = "deleted"
    except AWS_ERRORS as exc:
        if not is_not_found(exc):
            raise
        outcome = "already gone"
    progress(Progress(role, kind, f"{kind} {name}: {outcome}"))
    return Deletion(kind, name, outcome, role)


def _delete_endpoint(ctx: AwsContext, name: str, role: Role | None, wait: WaitSettings,
                     progress: ProgressCallback, stop: threading.Event) -> Deletion:
    sm = ctx.sagemaker
    started = time.monotonic()
    issued = False
    while True:
        status = describe_endpoint(sm, name).status
        if status == GONE:
            outcome: Outcome = "deleted" if issued else "already gone"
            took = time.monotonic() - started
            progress(Progress(role, "endpoint", f"endpoint {name}: {outcome}"
                              + (f" after {format_duration(took)}" if issued else ""), elapsed_s=took))
            return Deletion("endpoint", name, outcome, role)
        elapsed = time.monotonic() - started
        if status in IN_PROGRESS:
            # SageMaker refuses to delete an endpoint mid-change: wait until it settles.
            if elapsed > wait.timeout_s:
                raise EndpointFailed(f"endpoint {name} stayed {status} for {format_duration(elapsed)}; {DELETE_AGAIN}")
            progress(Progress(role, "wait", f"endpoint {name} is {status}; waiting to delete it", status, elapsed))
        elif status != "Deleting":
            try:
                sm.delete_endpoint(EndpointName=name)
                issued = True
                progress(Progress(role, "endpoint", f"endpoint {name}: deleting", "Deleting", elapsed))
                continue  # describe again at once
            except AWS_ERRORS as exc:
                if is_not_found(exc):
                    continue
                if "in-progress" not in error_message(exc).lower() and "cannot delete" not in error_message(exc).lower():
                    raise
        else:
            issued = True
            if elapsed > wait.delete_timeout_s:
                raise EndpointFailed(f"endpoint {name} is still Deleting after {format_duration(elapsed)}; {DELETE_AGAIN}")
            progress(Progress(role, "wait", f"endpoint {name} Deleting", status, elapsed))
        if stop.wait(wait.poll_s):
            raise EndpointFailed(f"stopped while deleting endpoint {name}; {DELETE_AGAIN}")


def verify_gone(ctx: AwsContext, endpoint: str | None, config: str | None, models: list[str]) -> list[str]:
    """Describe each resource given: "kind name" for every one that still exists."""
    sm = ctx.sagemaker
    checks: list[tuple[str, str, Callable[[], Any]]] = []
    if endpoint:
        checks.append(("endpoint", endpoint, lambda: sm.describe_endpoint(EndpointName=endpoint)))
    if config:
        checks.append(("endpoint config", config, lambda: sm.describe_endpoint_config(EndpointConfigName=config)))
    checks += [("model", m, lambda m=m: sm.describe_model(ModelName=m)) for m in models]
    remaining = []
    for kind, name, call in checks:
        try:
            call()
            remaining.append(f"{kind} {name}")
        except AWS_ERRORS as exc:
            if not is_not_found(exc):
                raise
    return remaining


# ---------------------------------------------------------------------------------------------------------
@locked("python -m infra delete")
def delete_deployment(state_file: Path = DEFAULT_STATE_FILE, *, region: str | None = None, profile: str | None = None,
                      purge_s3: bool = False, wait: WaitSettings = WaitSettings(),
                      progress: ProgressCallback | None = None, roles: list[Role] | None = None) -> DeleteReport:
    """Delete every endpoint of the deployment in `state_file` (or only `roles`), concurrently: each endpoint's
    resources (`_delete_role`), then — once all are verified gone — the TTL's schedules, the S3 outputs when
    asked, and the state file (or, for some roles only, their records in it)."""
    progress = progress or _quiet
    state = DeploymentState.load(Path(state_file))
    if region and region != state.region:
        raise StateError(f"{state_file} records a deployment in {state.region}, not {region}: leave --region out")
    ctx = AwsContext(state.region, profile)
    ctx.identity()
    report = DeleteReport(state_file=state.path)
    chosen = [r for r in state.endpoints if roles is None or r in roles]
    with state.lock:
        state.phase = "deleting"
    state.save()
    with ThreadPoolExecutor(max_workers=max(1, len(chosen)), thread_name_prefix="infra-delete") as pool:
        for dels, remaining, err in pool.map(lambda role: _delete_role(ctx, state, role, wait, progress), chosen):
            report.deletions += dels
            report.remaining += remaining
            if err is not None:
                report.errors.append(err)
    if report.ok:
        _remove_ttl(ctx, state, chosen, report)
    if purge_s3 and state.spec.bucket and not report.errors:
        try:
            report.s3_objects_deleted, report.bucket_deleted = purge_outputs(ctx, state, progress)
        except InfraError as exc:
            report.errors.append(exc)
    _settle_state(state, report, chosen, everything=roles is None or set(chosen) == set(state.endpoints),
                  progress=progress)
    return report


def _delete_role(ctx: AwsContext, state: DeploymentState, role: Role, wait: WaitSettings,
                 progress: ProgressCallback) -> tuple[list[Deletion], list[str], InfraError | None]:
    """One endpoint's resources: its autoscaling, the endpoint, config and model (marked deleted in the state),
    its other versions; then verified. (deletions, what still exists, the error that stopped it)."""
    rec = state.record(role)
    try:
        from infra.scaling import remove_scaling

        # Autoscaling first: a policy must not scale an endpoint that is being deleted.
        scaled = [Deletion(r.kind, r.name, r.outcome, role) for r in remove_scaling(ctx, state, role)]  # type: ignore[arg-type]
        dels = scaled + delete_endpoint_chain(ctx, rec.endpoint.name, rec.config.name, [rec.model.name], role=role,
                                              wait=wait, progress=progress)
        with state.lock:
            for d in dels:
                target = {"endpoint": rec.endpoint, "endpoint config": rec.config, "model": rec.model}.get(d.kind)
                if target is not None:
                    target.status = "deleted"
            rec.endpoint_status = None
        state.save()
        from infra.versions import delete_all  # the other versions' models and configs, the rollback alarm

        older, older_left = delete_all(ctx, state, role, lambda m: progress(Progress(role, "version", m)))
        dels += [Deletion(kind, name, outcome, role, "" if kind == "alarm" else "older version")  # type: ignore[arg-type]
                 for kind, name, outcome in older]
        return dels, verify_gone(ctx, rec.endpoint.name, rec.config.name, [rec.model.name]) + older_left, None
    except AWS_ERRORS as exc:
        err = translate(exc, f"delete the {role} endpoint's resources", retry=DELETE_AGAIN)
    except InfraError as exc:
        err = exc
    progress(Progress(role, "error", str(err)))
    return [], [f"{role} resources (not verified: {err})"], err


def _remove_ttl(ctx: AwsContext, state: DeploymentState, chosen: list[Role], report: DeleteReport) -> None:
    """The schedules (and the role and group deploy made) go once the endpoints are verified gone: until then
    they are what still deletes an endpoint a failed delete left behind."""
    from infra.ttl import remove_ttl

    try:
        report.deletions += [Deletion(r.kind, r.name, r.outcome) for r in remove_ttl(ctx, state, chosen)]  # type: ignore[arg-type]
    except AWS_ERRORS as exc:
        report.errors.append(translate(exc, "remove the TTL schedules", retry=DELETE_AGAIN))


def _settle_state(state: DeploymentState, report: DeleteReport, chosen: list[Role], *, everything: bool,
                  progress: ProgressCallback) -> None:
    """After the deletions: the state file removed when everything is gone; the deleted roles forgotten when
    the others stay deployed (so `resume` never brings them back); else marked incomplete."""
    if report.ok and not everything:
        with state.lock:
            state.spec = replace(state.spec, endpoints=tuple(e for e in state.spec.endpoints if e.role not in chosen))
            for role in chosen:
                del state.endpoints[role]
    if report.ok and everything:
        state.remove()
        report.state_removed = True
        progress(Progress(None, "state", f"everything is gone; removed {state.path}"))
    else:
        with state.lock:
            state.phase = "incomplete" if not report.ok else state.phase
        state.save()


def purge_outputs(ctx: AwsContext, state: DeploymentState, progress: ProgressCallback) -> tuple[int, bool]:
    """Delete the objects under s3://bucket/prefix/ (outputs, failures, requests); the bucket too when this
    deployment created it and nothing else is left in it."""
    s3 = ctx.s3
    bucket, prefix = state.spec.bucket, state.spec.prefix + "/"
    deleted = 0
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
                deleted += len(keys)
        bucket_deleted = False
        if state.bucket_created and s3.list_objects_v2(Bucket=bucket, MaxKeys=1).get("KeyCount", 0) == 0:
            s3.delete_bucket(Bucket=bucket)
            bucket_deleted = True
    except AWS_ERRORS as exc:
        if is_not_found(exc) or "NoSuchBucket" in str(exc):
            return deleted, False
        raise translate(exc, f"purge s3://{bucket}/{prefix}", retry="run `python -m infra delete --purge-s3` again") from None
    progress(Progress(None, "s3", f"removed {deleted} objects under s3://{bucket}/{prefix}"
                      + (f" and the bucket {bucket}" if bucket_deleted else "")))
    return deleted, bucket_deleted


def delete_by_name(endpoint_names: list[str], *, region: str | None = None, profile: str | None = None,
                   wait: WaitSettings = WaitSettings(), progress: ProgressCallback | None = None) -> DeleteReport:
    """Delete endpoints no state file holds (e.g. named by sweep): their config and models are read from
    DescribeEndpoint / DescribeEndpointConfig; same-named ones are tried when the endpoint is already gone."""
    progress = progress or _quiet
    ctx = AwsContext(region, profile)
    ctx.identity()
    report = DeleteReport()

    def one(name: str) -> tuple[list[Deletion], list[str], InfraError | None]:
        try:
            config, models = discover_chain(ctx, name)
            dels = delete_endpoint_chain(ctx, name, config, models, wait=wait, progress=progress)
            return dels, verify_gone(ctx, name, config, models), None
        except AWS_ERRORS as exc:
            err = translate(exc, f"delete endpoint {name}", retry=DELETE_AGAIN)
        except InfraError as exc:
            err = exc
        return [], [f"endpoint {name} (not verified: {err})"], err

    with ThreadPoolExecutor(max_workers=max(1, len(endpoint_names)), thread_name_prefix="infra-delete") as pool:
        for dels, remaining, err in pool.map(one, endpoint_names):
            report.deletions += dels
            report.remaining += remaining
            if err is not None:
                report.errors.append(err)
    return report


def discover_chain(ctx: AwsContext, endpoint: str) -> tuple[str | None, list[str]]:
    """The endpoint's config and the models its variants use."""
    sm = ctx.sagemaker
    view = describe_endpoint(sm, endpoint)
    config = endpoint if view.gone else view.config_name  # gone: the studio names all three alike
    try:
        variants = sm.describe_endpoint_config(EndpointConfigName=config).get("ProductionVariants", [])
        models = list(dict.fromkeys(v["ModelName"] for v in variants if v.get("ModelName")))
    except AWS_ERRORS as exc:
        if not is_not_found(exc):
            raise
        models = [endpoint]
    return config, models
