"""Deploy and resume: bring every endpoint of a deployment to InService, creating only what is missing.

    result = deploy(DeployOptions(roles=["voice", "image"], region="us-east-1"), state_file=path,
                    progress=print_progress)
    result = resume(path)            # after a crash or expired credentials: same names, nothing twice

Order of work: credentials (STS) → plan → quota pre-check (nothing is created when it fails) → the state
file, written BEFORE the first create → the bucket (async video only) → per endpoint, in its own thread:
model → endpoint config → endpoint → wait (infra/converge.py). Every step first describes the planned name,
so a resource that exists is reused; the state is saved after each step. `progress` is called from the
worker threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, translate
from infra.converge import EndpointOutcome, converge_endpoint
from infra.errors import (
    RESUME_HINT,
    CredentialsError,
    EndpointFailed,
    InfraError,
    QuotaShortfall,
    StateError,
)
from infra.lock import locked
from infra.model import DeployOptions, InstancePool, Role
from infra.planning import gpu_fit_line, plan, plan_warnings
from infra.progress import Progress, ProgressCallback, WaitSettings, lifecycle_say
from infra.quotas import QuotaReport, check_quotas
from infra.state import DEFAULT_STATE_FILE, DeploymentState
from services.endpoint_view import describe_endpoint


def _quiet(_: Progress) -> None:
    pass


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
    report = quota_check(ctx, {e.role: e.pool for e in spec.endpoints}, progress)
    state = DeploymentState.new(spec, state_file)
    say = lifecycle_say(progress)
    lifecycle.prepare(ctx, state, life, say)  # a scheduler role without the permission stops here
    state.phase = "creating"
    state.save()  # before the first create: every planned name is on disk
    progress(Progress(None, "state", f"state saved to {state_file} (before creating anything)"))
    lifecycle.ensure_ttl_first(ctx, state, say)  # the schedules exist before the endpoints do
    result = converge(ctx, state, wait, progress, stop)
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
    report = quota_check(ctx, to_create, progress) if to_create else None
    from infra import lifecycle

    lifecycle.resume_ttl(state, ttl)  # a TTL that passed before the schedules existed needs a new one
    state.phase = "creating"
    state.save()
    lifecycle.ensure_ttl_first(ctx, state, lifecycle_say(progress))
    result = converge(ctx, state, wait, progress, stop)
    result.quota = report
    return result


def quota_check(ctx: AwsContext, pools: dict[Role, InstancePool], progress: ProgressCallback) -> QuotaReport:
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
def converge(ctx: AwsContext, state: DeploymentState, wait: WaitSettings, progress: ProgressCallback,
             stop: threading.Event | None, roles: Collection[Role] | None = None) -> DeployResult:
    """Bring the spec's endpoints (or only `roles`: `infra add`'s new ones) to InService, side by side."""
    stop = stop or threading.Event()
    chosen = [ep for ep in state.spec.endpoints if roles is None or ep.role in roles]
    result = DeployResult(state=state, outcomes={})
    # One thread per endpoint: the three create and wait side by side.
    with ThreadPoolExecutor(max_workers=max(1, len(chosen)), thread_name_prefix="infra-endpoint") as pool:
        futures = {ep.role: pool.submit(converge_endpoint, ctx, state, ep, wait, progress, stop)
                   for ep in chosen}
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
