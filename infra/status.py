"""Status and cost of a deployment: per endpoint its status, the instance type in use, uptime, $/hour and
cost so far (list price × time since the endpoint's CreationTime — SageMaker bills per second from about
then until it is deleted). Read-only: it describes, it never changes anything.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, translate
from infra.errors import StateError
from infra.model import Role
from infra.planning import gpu_fit_line
from infra.pricing import Price, PriceTable, cost_so_far, load_prices
from infra.state import DEFAULT_STATE_FILE, DeploymentState
from protocol.catalog import model as catalog_model
from protocol.catalog import models_differ
from protocol.speech import task_types_for_model
from services.aws import on_loopback
from services.endpoint_view import GONE, describe_endpoint
from services.pricing import Metered, Spend, spend

HOURS_PER_DAY = 24


@dataclass(frozen=True)
class EndpointStatus:
    role: Role | None
    endpoint_name: str
    status: str  # DescribeEndpoint's status, or "gone"
    instance_type: str | None
    uptime_s: float | None
    price: Price | None
    cost_so_far_usd: float | None
    failure_reason: str | None = None
    created: str | None = None
    smoke: dict[str, Any] | None = None
    model_id: str | None = None  # what the deployment planned for it (the state file's spec)
    version: dict[str, Any] | None = None  # the version in use and the others (infra.versions.summary)
    # Instances now and wanted (DescribeEndpoint; autoscaling moves them: the async video endpoint idles at 0)
    current_instances: int | None = None
    desired_instances: int | None = None
    created_at: float | None = None  # its CreationTime, epoch seconds (when it began to bill)

    @property
    def task_types(self) -> tuple[str, ...]:
        """What the endpoint's model can do, for a family whose models differ in it (protocol.catalog.models_differ:
        the voice models, one task type per checkpoint); () for the others."""
        if not self.model_id or not models_differ(self.role):
            return ()
        known = catalog_model(self.model_id)
        return known.task_types if known is not None else task_types_for_model(self.model_id)

    @property
    def gpu_fit(self) -> str | None:
        """`needs ≈ 5.1 GB; fits on …` for the model the deployment planned (None when there is none)."""
        return None if not self.model_id else gpu_fit_line(self.model_id)

    @property
    def billing(self) -> bool:
        """Instances are (or are being) held: every status but gone and Failed."""
        return self.status not in ("gone", "Failed") and self.current_instances != 0

    @property
    def usd_per_hour(self) -> float | None:
        """The list price times the instances running (0 instances cost 0)."""
        if self.current_instances == 0 and self.status not in ("gone", "Failed"):
            return 0.0
        if self.price is None or not self.billing or self.price.usd_per_hour is None:
            return None
        return self.price.usd_per_hour * (self.current_instances or 1)

    def metered(self) -> Metered:
        """Its instance time for services.pricing.spend: billed since its creation unless gone or Failed."""
        billed = self.status not in ("gone", "Failed") and self.created_at is not None
        return Metered(self.endpoint_name, None if self.price is None else self.price.usd_per_hour,
                       self.current_instances, self.created_at if billed else None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role, "endpoint_name": self.endpoint_name, "status": self.status,
            "instance_type": self.instance_type,
            "uptime_s": None if self.uptime_s is None else round(self.uptime_s, 1),
            "usd_per_hour": self.usd_per_hour, "price_basis": None if self.price is None else self.price.basis,
            "cost_so_far_usd": None if self.cost_so_far_usd is None else round(self.cost_so_far_usd, 4),
            "failure_reason": self.failure_reason, "created": self.created, "smoke": self.smoke,
            "model_id": self.model_id, "task_types": list(self.task_types), "gpu_fit": self.gpu_fit,
            "version": self.version,
            "current_instances": self.current_instances, "desired_instances": self.desired_instances,
        }


@dataclass
class StatusReport:
    region: str
    deployment_id: str | None
    endpoints: list[EndpointStatus]
    prices: PriceTable
    state_file: Path | None = None
    checked_at: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    emulated: bool = False  # the account is the local SageMaker emulator's: its dollars price nothing that ran

    def spend(self, at: float | None = None) -> Spend:
        """What its endpoints cost, at `at` (now): the figure the Endpoints page shows, computed once."""
        return spend((e.metered() for e in self.endpoints), at=time.time() if at is None else at,
                     emulated=self.emulated)

    @property
    def usd_per_hour(self) -> float:
        return sum(e.usd_per_hour or 0.0 for e in self.endpoints)

    @property
    def usd_per_day(self) -> float:
        return self.usd_per_hour * HOURS_PER_DAY

    @property
    def cost_so_far_usd(self) -> float:
        return sum(e.cost_so_far_usd or 0.0 for e in self.endpoints)

    @property
    def running(self) -> list[EndpointStatus]:
        return [e for e in self.endpoints if e.billing]

    @property
    def unpriced(self) -> list[str]:
        return sorted({e.instance_type or "unknown" for e in self.running if e.usd_per_hour is None})

    def model_of(self, role: str) -> str | None:
        return next((e.model_id for e in self.endpoints if e.role == role), None)

    @property
    def voice_model(self) -> str | None:
        return self.model_of("voice")

    @property
    def creating(self) -> bool:
        return any(e.status in ("Creating", "Updating", "SystemUpdating", "Deleting") for e in self.endpoints)

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region, "deployment_id": self.deployment_id, "checked_at": self.checked_at,
            "state_file": None if self.state_file is None else str(self.state_file),
            "voice_model": self.voice_model,
            "voice_task_types": list(task_types_for_model(self.voice_model)) if self.voice_model else [],
            "endpoints": [e.to_dict() for e in self.endpoints],
            "usd_per_hour": round(self.usd_per_hour, 4), "usd_per_day": round(self.usd_per_day, 2),
            "cost_so_far_usd": round(self.cost_so_far_usd, 4), "unpriced_instance_types": self.unpriced,
            "emulated": self.emulated,
            "prices": {"source": self.prices.source, "as_of": self.prices.as_of.isoformat(),
                       "stale": self.prices.stale()},
        }


def describe_endpoint_status(ctx: AwsContext, name: str, prices: PriceTable, *, role: Role | None = None,
                             fallback_type: str | None = None, smoke: dict[str, Any] | None = None,
                             model_id: str | None = None) -> EndpointStatus:
    try:
        view = describe_endpoint(ctx.sagemaker, name)
    except AWS_ERRORS as exc:
        raise translate(exc, f"describe endpoint {name}") from None
    if view.gone:
        return EndpointStatus(role, name, GONE, None, None, None, None, smoke=smoke, model_id=model_id)
    itype = view.instance_type or (fallback_type if view.status != "Failed" else None)
    created = view.created
    uptime = (datetime.now(UTC) - created.astimezone(UTC)).total_seconds() if created else None
    price = prices.hourly(itype, ctx.region) if itype else None
    billing = view.status not in ("Failed",)
    cost = cost_so_far(price.usd_per_hour if price else None, uptime) if billing else None
    return EndpointStatus(role, name, view.status, itype, uptime, price, cost, view.failure_reason,
                          created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if created else None,
                          smoke, model_id, current_instances=view.current_instances,
                          desired_instances=view.desired_instances,
                          created_at=created.timestamp() if created else None)


def deployment_status(state_file: Path = DEFAULT_STATE_FILE, *, region: str | None = None, profile: str | None = None,
                      prices: PriceTable | None = None) -> StatusReport:
    """Describe every endpoint of the deployment in `state_file`."""
    state = DeploymentState.load(Path(state_file))
    if region and region != state.region:
        raise StateError(f"{state_file} records a deployment in {state.region}, not {region}: leave --region out")
    prices = prices or load_prices()
    ctx = AwsContext(state.region, profile)
    rows = []
    for role, rec in state.endpoints.items():
        # While a pool is still provisioning SageMaker may not say which entry it took: the state's last
        # sighting stands in; with none, the first choice is the likely one.
        fallback = rec.instance_type or state.spec.endpoint(role).pool.first
        rows.append(describe_endpoint_status(ctx, rec.endpoint.name, prices, role=role, fallback_type=fallback,
                                             smoke=rec.smoke, model_id=state.spec.endpoint(role).model_id))
    from infra.versions import summary

    rows = [replace(r, version=summary(state, r.role)) if r.role in state.endpoints else r for r in rows]
    return StatusReport(state.region, state.deployment_id, rows, prices, state.path,
                        emulated=on_loopback(ctx.sagemaker.meta.endpoint_url))


def without_unpriced(types: list[str]) -> str:
    """What a total leaves out: ' without ml.g6e.12xlarge (no price)', or '' when every type is priced."""
    return f" without {', '.join(types)} (no price)" if types else ""
