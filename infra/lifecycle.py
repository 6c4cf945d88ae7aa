"""Deploy's lifecycle steps, in the order deploy and resume run them (infra/ttl.py, infra/scaling.py):

    life = check_options(options)          # --ttl, --max-instances, --scheduler-role-arn: before any AWS call
    prepare(ctx, state, life, progress)    # check the given scheduler role; record the TTL and scaling plans
    ensure_ttl_first(ctx, state, progress) # schedules BEFORE the endpoints: a crash later still deletes them
    scale_endpoint(ctx, state, ep, ...)    # per endpoint, once InService
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from collections.abc import Callable

from infra.aws import AwsContext
from infra.errors import UsageError
from infra.model import DeployOptions, EndpointSpec, Role
from infra.scaling import apply_scaling, check_max_instances, plan_scaling, scaling_label
from infra.state import DeploymentState
from infra.ttl import COSTS_NOTHING, ensure_ttl, plan_ttl
from infra.ttl_choice import TtlChoice, iso, parse_iso, parse_ttl
from infra.ttl_role import check_scheduler_role

# What to say, as deploy's Progress(role, step, message): deploy passes it in (this module never imports
# deploy, which imports this one).
Say = Callable[[Role | None, str, str], None]


@dataclass(frozen=True)
class LifecycleOptions:
    ttl: TtlChoice
    scheduler_role_arn: str | None
    max_instances: int
    scale_to_zero: bool


def check_options(options: DeployOptions) -> LifecycleOptions:
    ttl = parse_ttl(options.ttl, yes=options.yes)
    max_instances = check_max_instances(options.max_instances)
    role = (options.scheduler_role_arn or "").strip() or None
    if role and not ttl.enabled:
        raise UsageError("--scheduler-role-arn is the role of the TTL's schedules, and --no-ttl makes none: leave "
                         "one of the two out")
    return LifecycleOptions(ttl, role, max_instances, options.scale_to_zero)


def ttl_line(state: DeploymentState, now: datetime | None = None) -> str:
    """What deploy, resume and status say about the TTL (loudly when there is none)."""
    ttl = state.ttl
    if ttl is None:
        return "no TTL (deployed before TTLs): the endpoints run and bill until `python -m infra delete`"
    if not ttl.get("enabled"):
        return ("NO TTL (--no-ttl): these endpoints run and BILL until `python -m infra delete` — nothing deletes "
                "them by itself; `python -m infra extend --ttl 8h` gives them one")
    expires = parse_iso(ttl["expires_at"])
    return (f"TTL: the endpoints delete themselves at {TtlChoice(expires).describe(now)} (EventBridge Scheduler, "
            f"in the account); `python -m infra extend --ttl 4h` moves it. {COSTS_NOTHING[0].upper()}{COSTS_NOTHING[1:]}")


def prepare(ctx: AwsContext, state: DeploymentState, life: LifecycleOptions, say: Say) -> None:
    if life.ttl.enabled and life.scheduler_role_arn:
        check_scheduler_role(ctx, state.spec, life.scheduler_role_arn, lambda text: say(None, "ttl", text))
    plan_ttl(state, life.ttl, life.scheduler_role_arn)
    state.scaling = plan_scaling(state.spec, life.max_instances, life.scale_to_zero)
    say(None, "ttl", ttl_line(state))
    for role, plan in state.scaling.items():
        say(role, "scaling", f"autoscaling planned: {scaling_label(plan)} instances"
            + (" (0 when idle)" if plan["min_instances"] == 0 else ""))


def ensure_ttl_first(ctx: AwsContext, state: DeploymentState, say: Say) -> None:
    ensure_ttl(ctx, state, lambda text: say(None, "ttl", text))


def resume_ttl(state: DeploymentState, ttl: str | None) -> None:
    """resume --ttl sets a new TTL from now; without it, a TTL that already ended stops resume (the
    endpoints it would create again would have no schedule left to delete them)."""
    if ttl is not None:
        plan_ttl(state, parse_ttl(ttl))
        return
    recorded = state.ttl or {}
    if recorded.get("enabled") and recorded.get("expires_at"):
        ended = parse_iso(recorded["expires_at"])
        if ended <= datetime.now(UTC):
            raise UsageError(f"the deployment's TTL ended at {iso(ended)}; resuming would create endpoints nothing "
                             "deletes. Pass a new one: `python -m infra resume --ttl 8h`")


def scale_endpoint(ctx: AwsContext, state: DeploymentState, ep: EndpointSpec, say: Say) -> None:
    apply_scaling(ctx, state, ep, lambda text: say(ep.role, "scaling", text))


# ---------------------------------------------------------------------------------------------------------
# status: instances and TTL per endpoint
@dataclass
class LifecycleStatus:
    """What `status` adds to the status report: each endpoint's schedule (time left) and scaling range."""

    line: str
    ttl: dict[str, object]  # role -> infra.ttl.EndpointTtl
    scaling: dict[str, dict]  # role -> protocol.sagemaker.ScalingState

    @classmethod
    def read(cls, state_file, report, *, profile: str | None = None) -> LifecycleStatus:  # noqa: ANN001
        from infra.ttl import ttl_status

        state = DeploymentState.load(state_file)
        ttl = ttl_status(AwsContext(state.region, profile), state)
        return cls(ttl_line(state), dict(ttl), dict(state.scaling))

    def ttl_label(self, role: str | None) -> str:
        entry = self.ttl.get(role or "")
        return entry.label() if entry is not None else "—"  # type: ignore[attr-defined]

    def instances(self, endpoint) -> str:  # noqa: ANN001  (infra.status.EndpointStatus)
        """`1`, `0 (→1)` while scaling, with the range when it scales: `0 (0–1)`."""
        cur, want = endpoint.current_instances, endpoint.desired_instances
        text = "—" if cur is None else str(cur)
        if cur is not None and want is not None and want != cur:
            text += f" (→{want})"
        plan = self.scaling.get(endpoint.role or "")
        return f"{text} [{scaling_label(plan)}]" if plan else text

    def to_dict(self) -> dict:
        return {"ttl_line": self.line, "ttl": {r: t.to_dict() for r, t in self.ttl.items()},  # type: ignore[attr-defined]
                "scaling": self.scaling}
