"""The price range of each endpoint's instance pool: what every entry costs per hour, lowest to highest.

SageMaker provisions one instance from a pool of up to five types, the first with capacity; which one it takes
is known only once it runs. So before (and besides) the type in use, the honest figure is the range: the
published voice pool runs from ml.g4dn.xlarge's rate to ml.g6e.xlarge's.

    ranges = deployment_pool_prices(state, prices, in_use={"voice": "ml.g6.xlarge"})
    ranges = planned_pool_prices("us-east-1", prices)            # the default pools, before deploying
    r.min_usd, r.max_usd, r.label(), r.to_dict()

`python -m infra cost` prints them (and `--json` carries them under `pools`); the Endpoints page shows the
range next to each endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.model import DEFAULT_ROLES, ROLE_PROFILES
from infra.pricing import Price, PriceTable
from infra.state import DeploymentState
from services.pricing import usd


@dataclass(frozen=True)
class PoolPrices:
    """One endpoint's pool, in priority order, each entry with its price (or none) in the region."""

    role: str
    endpoint: str | None  # the endpoint's name; None for a pool not deployed yet
    region: str
    entries: tuple[Price, ...]
    in_use: str | None = None  # the entry SageMaker provisioned, when known

    @property
    def priced(self) -> list[Price]:
        return [p for p in self.entries if p.usd_per_hour is not None]

    @property
    def unpriced(self) -> list[str]:
        return [p.instance_type for p in self.entries if p.usd_per_hour is None]

    @property
    def min_usd(self) -> float | None:
        return min((p.usd_per_hour for p in self.priced), default=None)  # type: ignore[type-var]

    @property
    def max_usd(self) -> float | None:
        return max((p.usd_per_hour for p in self.priced), default=None)  # type: ignore[type-var]

    def range_label(self) -> str:
        """"$0.7364–$2.6100/h", "$1.1267/h" for one price, "no price" when none is known."""
        lo, hi = self.min_usd, self.max_usd
        if lo is None or hi is None:
            return "no price"
        text = f"{usd(lo, 'rate')}/h" if lo == hi else f"{usd(lo, 'rate')}–{usd(hi, 'rate')}/h"
        if any(p.basis == "reference region" for p in self.priced):
            text += " (≈, us-east-1 rates)"
        return text

    def label(self) -> str:
        """The range and every entry: "$1.1267–$2.6100/h: ml.g6.xlarge $1.1267 (in use), ml.g6e.xlarge $2.6100"."""
        parts = []
        for p in self.entries:
            price = "no price" if p.usd_per_hour is None else usd(p.usd_per_hour, "rate")
            parts.append(f"{p.instance_type} {price}" + (" (in use)" if p.instance_type == self.in_use else ""))
        return f"{self.range_label()}: {', '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role, "endpoint": self.endpoint, "region": self.region, "in_use": self.in_use,
            "entries": [{"instance_type": p.instance_type, "usd_per_hour": p.usd_per_hour, "basis": p.basis}
                        for p in self.entries],
            "min_usd_per_hour": self.min_usd, "max_usd_per_hour": self.max_usd, "unpriced": self.unpriced,
        }


def pool_prices(role: str, types: tuple[str, ...] | list[str], region: str, prices: PriceTable, *,
                endpoint: str | None = None, in_use: str | None = None) -> PoolPrices:
    return PoolPrices(role, endpoint, region, tuple(prices.hourly(t, region) for t in types), in_use)


def deployment_pool_prices(state: DeploymentState, prices: PriceTable,
                           in_use: dict[str, str | None] | None = None) -> list[PoolPrices]:
    """Every endpoint of the deployment: its pool as planned, priced in the deployment's region."""
    in_use = in_use or {}
    out = []
    for spec in state.spec.endpoints:
        record = state.endpoints.get(spec.role)
        seen = in_use.get(spec.role) or (record.instance_type if record is not None else None)
        out.append(pool_prices(spec.role, spec.pool.types, state.region, prices, endpoint=spec.endpoint_name,
                               in_use=seen))
    return out


def planned_pool_prices(region: str, prices: PriceTable, instance_types: tuple[str, ...] | None = None) -> list[PoolPrices]:
    """Before a deployment: the default pool of each endpoint `deploy` creates (or the one pool `instance_types`
    gives to all); the opt-in families (listen, omni) are priced once they are deployed."""
    return [pool_prices(role, instance_types or ROLE_PROFILES[role].default_pool, region, prices)
            for role in DEFAULT_ROLES]
