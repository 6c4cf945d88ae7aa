"""The studio's endpoints in a region, whichever deployment or state file they belong to: what the cost banner
shows (running, idle, $/h, cost so far, when each deletes itself).

    fleet = studio_fleet(AwsContext(region, profile))    # StudioFleet; .to_dict() for the banner

A resource is the studio's when it carries the `omni-studio:deployment` tag (`studio_tags`), as infra/sweep.py
reads it too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, is_not_found, translate
from infra.model import TAG_DEPLOYMENT, TAG_ROLE
from infra.pricing import PriceTable, load_prices
from infra.status import EndpointStatus, describe_endpoint_status
from services.aws import on_loopback
from services.pricing import Spend, spend


def studio_tags(sm: Any, arn: str) -> dict[str, str] | None:
    """The resource's tags when it is the studio's (tagged with its deployment), else None (also when it is gone
    between a listing and this call)."""
    try:
        tags: dict[str, str] = {}
        for page in sm.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    except AWS_ERRORS as exc:
        if is_not_found(exc):
            return None  # gone between the list and the tags
        raise
    return tags if TAG_DEPLOYMENT in tags else None


@dataclass
class StudioFleet:
    """Every studio-tagged endpoint in a region, known or not: what the cost banner shows."""

    region: str
    endpoints: list[tuple[str, EndpointStatus]]  # (deployment id, status)
    prices: PriceTable
    # endpoint name -> when its TTL schedule deletes it (ISO, UTC), None: no schedule (infra/ttl.py)
    deletions: dict[str, str | None] = field(default_factory=dict)
    emulated: bool = False  # the region is the local SageMaker emulator's: its dollars price nothing that ran

    @property
    def running(self) -> list[EndpointStatus]:
        return [e for _, e in self.endpoints if e.billing]

    def spend(self, at: float | None = None) -> Spend:
        """What the fleet costs at `at` (now), by the one rule the Endpoints page's figures follow too
        (services.pricing.spend): an endpoint idle at 0 instances costs nothing now, and what it cost before stays in
        the cost so far."""
        return spend((e.metered() for _, e in self.endpoints), at=time.time() if at is None else at,
                     emulated=self.emulated)

    @property
    def usd_per_hour(self) -> float:
        return self.spend().usd_per_hour

    @property
    def cost_so_far_usd(self) -> float:
        return self.spend().cost_so_far_usd

    def to_dict(self, at: float | None = None) -> dict[str, Any]:
        """The banner's figures, its cost so far at `at` (now): a cached listing still gives the cost of the moment."""
        cost = self.spend(at)
        live = [e.endpoint_name for _, e in self.endpoints if e.status not in ("gone", "Failed", "Deleting")]
        times = sorted(t for n in live if (t := self.deletions.get(n)))
        # InService at 0 instances (the video endpoint idles there): up, free, and not "running" — the banner
        # names them, or "2 running" reads wrong beside 3 endpoints InService
        idle = [e.role or e.endpoint_name for _, e in self.endpoints if e.status == "InService" and not e.billing]
        unpriced = sorted({e.instance_type or "unknown" for e in self.running if e.usd_per_hour is None})
        return {"region": self.region, "running": len(self.running), "idle": idle,
                "usd_per_hour": round(cost.usd_per_hour, 4), "unpriced": unpriced,
                "cost_so_far_usd": cost.cost_so_far_usd, "emulated": cost.emulated, "at": cost.at,
                "endpoints": [{"deployment_id": d, **e.to_dict(), "deletes_at": self.deletions.get(e.endpoint_name)}
                              for d, e in self.endpoints],
                "soonest_deletion": times[0] if times else None,
                "without_ttl": sum(1 for n in live if self.deletions and self.deletions.get(n) is None)}


def studio_fleet(ctx: AwsContext, *, prices: PriceTable | None = None) -> StudioFleet:
    """List the region's endpoints and keep the studio's (tagged), with status and running cost."""
    prices = prices or load_prices()
    sm = ctx.sagemaker
    found: list[tuple[str, EndpointStatus]] = []
    try:
        for page in sm.get_paginator("list_endpoints").paginate(PaginationConfig={"PageSize": 100}):
            for item in page.get("Endpoints", []):
                tags = studio_tags(sm, item["EndpointArn"])
                if tags is not None:
                    status = describe_endpoint_status(ctx, item["EndpointName"], prices, role=tags.get(TAG_ROLE))
                    found.append((tags[TAG_DEPLOYMENT], status))
    except AWS_ERRORS as exc:
        raise translate(exc, "list the studio's endpoints") from None
    from infra.ttl import fleet_ttls  # each endpoint's TTL schedule, for the banner
    from infra.ttl_choice import iso

    deletions: dict[str, str | None] = {}
    for dep in {d for d, _ in found}:
        names = [e.endpoint_name for d, e in found if d == dep]
        deletions |= {n: None if t is None else iso(t) for n, t in fleet_ttls(ctx, dep, names).items()}
    return StudioFleet(ctx.region, found, prices, deletions, emulated=on_loopback(sm.meta.endpoint_url))
