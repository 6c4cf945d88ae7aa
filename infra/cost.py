"""What a deployment costs per hour and per day: the figures `python -m infra cost` prints, counted here.

    report = deployment_cost(state_file)                                  # the running deployment, if the file is there
    report = deployment_cost(state_file, instance_types="ml.g6.xlarge")  # these types, before deploying
    report = deployment_cost(state_file, refresh=True, save_prices=path) # today's rates from the Price List API
    report.lines, report.usd_per_hour, report.usd_per_day, report.pools, report.idle, report.prices

With a state file, each running endpoint counts once per instance on the type it runs (a scaled-to-zero one
costs nothing until a job arrives) and the cost so far is the status's. Without one, each endpoint is priced
at the first choice of its pool (the default pools, or the types given). Every pool entry is listed too, with
its price: what a fall-back would cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.errors import UsageError
from infra.model import DEFAULT_ROLES, ROLE_PROFILES, InstancePool
from infra.pool_prices import PoolPrices, deployment_pool_prices, planned_pool_prices
from infra.price_list import refresh_prices
from infra.pricing import Price, PriceTable, load_prices
from infra.state import DeploymentState
from infra.status import HOURS_PER_DAY, StatusReport, deployment_status

RUNNING = "running deployment"
PLANNED = "planned (first choice of each pool)"


@dataclass(frozen=True)
class CostLine:
    instance_type: str
    price: Price
    endpoints: tuple[str, ...]  # roles (or names) that run on it

    def to_dict(self) -> dict[str, Any]:
        return {"instance_type": self.instance_type, "usd_per_hour": self.price.usd_per_hour,
                "basis": self.price.basis, "endpoints": list(self.endpoints)}


@dataclass
class CostReport:
    region: str
    lines: list[CostLine]
    prices: PriceTable
    usd_per_hour: float
    basis: str  # RUNNING | PLANNED
    cost_so_far_usd: float | None = None
    pools: list[PoolPrices] = field(default_factory=list)  # each endpoint's pool, priced entry by entry
    idle: list[str] = field(default_factory=list)  # endpoints at 0 instances now (scaled to zero)

    @property
    def usd_per_day(self) -> float:
        return self.usd_per_hour * HOURS_PER_DAY

    @property
    def unpriced(self) -> list[str]:
        """The instance types counted in the total that have no price (left out of it: the total is a floor)."""
        return [line.instance_type for line in self.lines if line.endpoints and line.price.usd_per_hour is None]

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "basis": self.basis, "lines": [line.to_dict() for line in self.lines],
                "usd_per_hour": round(self.usd_per_hour, 4), "usd_per_day": round(self.usd_per_day, 2),
                "unpriced_instance_types": self.unpriced,
                "cost_so_far_usd": None if self.cost_so_far_usd is None else round(self.cost_so_far_usd, 4),
                "prices": {"source": self.prices.source, "as_of": self.prices.as_of.isoformat(),
                           "age_days": self.prices.age_days(), "stale": self.prices.stale(),
                           "note": self.prices.note},
                "pools": [p.to_dict() for p in self.pools]}


def cost_of_types(region: str, assignments: dict[str, str], prices: PriceTable, *, basis: str,
                  pool_types: list[str] = ()) -> CostReport:
    """`assignments`: endpoint label -> instance type. Lists every pool type too (what a fall-back costs)."""
    by_type: dict[str, list[str]] = {}
    for label, itype in assignments.items():
        by_type.setdefault(itype, []).append(label)
    for t in pool_types:
        by_type.setdefault(t, [])
    lines = [CostLine(t, prices.hourly(t, region), tuple(labels)) for t, labels in by_type.items()]
    total = sum((line.price.usd_per_hour or 0.0) * len(line.endpoints) for line in lines)
    return CostReport(region, lines, prices, total, basis)


def running_assignments(status: StatusReport) -> dict[str, str]:
    """Endpoint label -> the type it runs on, once per instance ("voice", "voice #2", ...)."""
    running = [e for e in status.running if e.instance_type]
    assignments = {e.role or e.endpoint_name: e.instance_type for e in running}
    for e in running:
        for i in range(2, (e.current_instances or 1) + 1):
            assignments[f"{e.role or e.endpoint_name} #{i}"] = e.instance_type
    return assignments  # type: ignore[return-value]  (instance_type is set on every one kept)


def _pool_types(state: DeploymentState | None, instance_types: str | None) -> list[str]:
    """The types to price: those given, else the deployment's pools, else the default pools."""
    if instance_types:
        return list(InstancePool.parse(instance_types).types)
    if state is not None:
        return list(dict.fromkeys(t for e in state.spec.endpoints for t in e.pool.types))
    return list(dict.fromkeys(t for r in DEFAULT_ROLES for t in ROLE_PROFILES[r].default_pool))


def _refreshed(prices: PriceTable, types: list[str], region: str | None, profile: str | None,
               save_prices: Path | None) -> tuple[PriceTable, str]:
    """The table with today's Price List API rates for `types` merged in (saved to `save_prices` if given)."""
    from infra.aws import AwsContext

    ctx = AwsContext(region, profile)
    prices = prices.merged(refresh_prices(ctx, types, ctx.region))
    if save_prices:
        prices.save(save_prices)
    return prices, ctx.region


def deployment_cost(state_file: Path, *, instance_types: str | None = None, prices: PriceTable | None = None,
                    region: str | None = None, profile: str | None = None, refresh: bool = False,
                    save_prices: Path | None = None) -> CostReport:
    """The cost of the deployment in `state_file` (when it exists and no `instance_types` are given), else of
    the planned pools. `refresh` asks the AWS Price List API (credentials, pricing:GetProducts); `save_prices`
    goes with it (UsageError otherwise)."""
    if save_prices and not refresh:
        raise UsageError("--save-prices goes with --refresh-prices")
    prices = prices or load_prices()
    state = DeploymentState.load(state_file) if (state_file.exists() and not instance_types) else None
    region = region or (state.region if state else None)
    types = _pool_types(state, instance_types)
    if refresh:
        prices, region = _refreshed(prices, types, region, profile, save_prices)
    region = region or "us-east-1"
    if state is None:
        # Before a deployment: what `python -m infra deploy` creates (the opt-in families only when named).
        first = {r: types[0] if instance_types else ROLE_PROFILES[r].default_pool[0] for r in DEFAULT_ROLES}
        report = cost_of_types(region, first, prices, basis=PLANNED, pool_types=types)
        report.pools = planned_pool_prices(region, prices, tuple(types) if instance_types else None)
        return report
    status = deployment_status(state_file, profile=profile, prices=prices)
    report = cost_of_types(region, running_assignments(status), prices, basis=RUNNING, pool_types=types)
    report.cost_so_far_usd = status.cost_so_far_usd
    report.idle = [e.role or e.endpoint_name for e in status.endpoints if e.current_instances == 0]
    report.pools = deployment_pool_prices(state, prices, {e.role: e.instance_type for e in status.endpoints if e.role})
    return report
