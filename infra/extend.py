"""`python -m infra extend`: a deployment's remaining endpoints delete themselves later (or, after --no-ttl, at all).

    report = extend_deployment(path, "4h")          # new at() for every endpoint still there

Every endpoint still there gets its schedule moved to now + the TTL (infra/ttl.py's `plan_ttl` and `ensure_ttl`,
idempotent); endpoints already gone are named; a deployment whose endpoints are all gone has expired.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, translate
from infra.errors import StateError
from infra.lock import locked
from infra.model import Role
from infra.state import DeploymentState
from infra.ttl import ProgressText, ensure_ttl, plan_ttl
from infra.ttl_choice import iso, parse_ttl
from infra.ttl_role import check_scheduler_role
from services.endpoint_view import describe_endpoint


@dataclass
class ExtendReport:
    deployment_id: str
    expires_at: datetime
    extended: list[str] = field(default_factory=list)  # endpoint names whose schedule now says expires_at
    gone: list[str] = field(default_factory=list)  # endpoints already deleted (by their TTL or by hand)

    def to_dict(self) -> dict[str, Any]:
        return {"deployment_id": self.deployment_id, "expires_at": iso(self.expires_at),
                "seconds_left": round((self.expires_at - datetime.now(UTC)).total_seconds(), 1),
                "extended": self.extended, "gone": self.gone}


def _endpoint_status(ctx: AwsContext, name: str) -> str | None:
    """DescribeEndpoint's status, None when the endpoint does not exist."""
    try:
        view = describe_endpoint(ctx.sagemaker, name)
    except AWS_ERRORS as exc:
        raise translate(exc, f"describe endpoint {name}") from None
    return None if view.gone else view.status


@locked("python -m infra extend")
def extend_deployment(state_file: Path, ttl: str, *, region: str | None = None, profile: str | None = None,
                      yes: bool = False, scheduler_role_arn: str | None = None,
                      progress: ProgressText = lambda _: None) -> ExtendReport:
    """Move every remaining endpoint's deletion to now + `ttl` (or the time given). A deployment whose
    endpoints are all gone has expired: StateError saying so. A --no-ttl deployment gets its TTL now."""
    choice = parse_ttl(ttl, yes=yes)  # named before the state file or any AWS call
    state = DeploymentState.load(Path(state_file))
    if region and region != state.region:
        raise StateError(f"{state_file} records a deployment in {state.region}, not {region}: leave --region out")
    ctx = AwsContext(state.region, profile)
    ctx.identity()
    report = ExtendReport(state.deployment_id, choice.expires_at)  # type: ignore[arg-type]
    alive: list[Role] = []
    for role, rec in state.endpoints.items():
        status = _endpoint_status(ctx, rec.endpoint.name)
        if status is None or status == "Deleting":
            report.gone.append(rec.endpoint.name)
        else:
            alive.append(role)
    if not alive:
        when = (state.ttl or {}).get("expires_at")
        raise StateError(f"deployment {state.deployment_id} has expired: its endpoints are gone"
                         + (f" (its TTL ended at {when})" if when else "") + ", so there is nothing to extend. "
                         "`python -m infra delete` removes what is left (configs, models, schedules: they cost "
                         "nothing); `python -m infra deploy` starts a new deployment")
    if scheduler_role_arn:
        check_scheduler_role(ctx, state.spec, scheduler_role_arn, progress)
    plan_ttl(state, choice, scheduler_role_arn)
    state.save()
    ensure_ttl(ctx, state, progress, roles=alive)
    report.extended = [state.endpoints[r].endpoint.name for r in alive]
    return report
