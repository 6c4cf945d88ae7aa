"""Where (and on what) the studio can be deployed: per region, per endpoint and pool entry, the quota free
right now and the on-demand $/hour; and per endpoint a recommendation with the `deploy` line for it.

    report = plan_regions(["us-east-1", "eu-west-1"], roles=DEFAULT_ROLES)
    for region in report.regions: region.choices, region.deploy_command, region.prices.describe()

Quotas are read as `deploy` checks them (infra/quotas.py: Service Quotas' `ml.<type> for endpoint usage`
minus the instances the region's endpoints hold). Prices come from the AWS Price List API, else the bundled
table (infra/price_list.py says which). Nothing is created.

The recommendation per endpoint is its cheapest pool entry with quota free, chosen for all endpoints
together (two endpoints on one type need two free instances of it), as a one-entry pool: the narrowest pool
that deploys, since SageMaker checks the quota of every entry. When the quotas allow it, the same choices
with the other free entries as fall-backs (cheapest first) are offered too — a shortage of capacity then
falls through instead of failing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.aws import AwsContext
from infra.errors import InfraError
from infra.model import DEFAULT_ROLES, ROLE_PROFILES, ROLES, DeployOptions, InstancePool, Role, deploy_command
from infra.planning import gpu_fit_line
from infra.price_list import RegionPrices, region_prices
from infra.pricing import PriceTable
from infra.quotas import fetch_quotas, instances_in_use, needed_counts
from protocol.catalog import model as catalog_model
from protocol.instances import instance, misfit
from services.pricing import usd


@dataclass(frozen=True)
class PlanEntry:
    role: Role
    instance_type: str
    priority: int  # its place in the endpoint's pool (1 = first choice)
    quota: float | None  # None: no such quota in the region (the type is not offered there)
    in_use: int
    usd_per_hour: float | None
    price_source: str
    model_id: str = ""  # the model the endpoint would serve
    misfit: str | None = None  # why this type's GPU memory cannot serve it (None: it fits, or unknown)

    @property
    def free(self) -> float:
        return 0.0 if self.quota is None else max(self.quota - self.in_use, 0.0)

    @property
    def available(self) -> bool:
        """Quota free and the model fits in its GPU memory."""
        return self.free >= 1 and self.misfit is None

    @property
    def gpu(self) -> str:
        inst = instance(self.instance_type)
        return "?" if inst is None else inst.describe()

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "instance_type": self.instance_type, "priority": self.priority,
                "quota": self.quota, "in_use": self.in_use, "free": self.free, "available": self.available,
                "usd_per_hour": self.usd_per_hour, "price_source": self.price_source, "gpu": self.gpu,
                "model_id": self.model_id, "fits": self.misfit is None, "misfit": self.misfit}


@dataclass(frozen=True)
class Choice:
    role: Role
    instance_type: str
    usd_per_hour: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "instance_type": self.instance_type, "usd_per_hour": self.usd_per_hour}


@dataclass
class RegionPlan:
    region: str
    roles: tuple[Role, ...]
    entries: list[PlanEntry] = field(default_factory=list)
    prices: RegionPrices | None = None
    choices: dict[Role, Choice] = field(default_factory=dict)
    fallback_pools: dict[Role, InstancePool] | None = None  # the choices plus free fall-backs, if they fit
    error: str | None = None  # the region could not be read (credentials, permissions, network)
    profile: str | None = None
    model_ids: dict[Role, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Every endpoint has an entry with quota free."""
        return self.error is None and set(self.choices) == set(self.roles)

    @property
    def missing(self) -> list[Role]:
        return [r for r in self.roles if r not in self.choices]

    @property
    def usd_per_hour(self) -> float | None:
        if not self.ok or any(c.usd_per_hour is None for c in self.choices.values()):
            return None
        return sum(c.usd_per_hour or 0.0 for c in self.choices.values())

    def _command(self, pools: dict[Role, InstancePool]) -> str:
        flags = [p.flag() for p in pools.values()]
        if len(set(flags)) == 1:
            values = [flags[0]]
        else:
            values = [f"{r}={pools[r].flag()}" for r in ROLES if r in pools]
        models = [f"{r}={m}" for r, m in self.model_ids.items() if m != ROLE_PROFILES[r].model_id]
        return deploy_command(DeployOptions(roles=self.roles, region=self.region, profile=self.profile,
                                            instance_types=values, models=models))

    @property
    def deploy_command(self) -> str | None:
        if not self.ok:
            return None
        return self._command({r: InstancePool((self.choices[r].instance_type,)) for r in ROLES if r in self.choices})

    @property
    def fallback_command(self) -> str | None:
        if not self.ok or self.fallback_pools is None:
            return None
        if all(len(p.types) == 1 for p in self.fallback_pools.values()):
            return None  # nothing beyond the narrowest pools fits
        return self._command(self.fallback_pools)

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "ok": self.ok, "error": self.error, "roles": list(self.roles),
                "entries": [e.to_dict() for e in self.entries],
                "prices": None if self.prices is None else self.prices.to_dict(),
                "recommendation": {r: c.to_dict() for r, c in self.choices.items()},
                "gpu_fit": {r: gpu_fit_line(m) for r, m in self.model_ids.items()},
                "missing": self.missing, "usd_per_hour": self.usd_per_hour, "deploy_command": self.deploy_command,
                "fallback_pools": None if self.fallback_pools is None else
                {r: list(p.types) for r, p in self.fallback_pools.items()},
                "fallback_command": self.fallback_command}


@dataclass
class PlanReport:
    regions: list[RegionPlan]

    @property
    def best(self) -> RegionPlan | None:
        """The cheapest region where every endpoint fits (priced ones first)."""
        ok = [r for r in self.regions if r.ok]
        return min(ok, key=lambda r: (r.usd_per_hour is None, r.usd_per_hour or 0.0), default=None)

    @property
    def ok(self) -> bool:
        return any(r.error is None for r in self.regions)

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {"regions": [r.to_dict() for r in self.regions], "best_region": None if best is None else best.region,
                "best_usd_per_hour": None if best is None else best.usd_per_hour}


# ---------------------------------------------------------------------------------------------------------
def choose(roles: Sequence[Role], entries: Sequence[PlanEntry]) -> dict[Role, Choice]:
    """Per endpoint the entry to deploy on: together the cheapest assignment the free quota allows (priced
    entries before unpriced, then the pool's own order). Endpoints with no free entry are left out."""
    by_role = {r: [e for e in entries if e.role == r and e.available] for r in roles}
    free = {e.instance_type: e.free for e in entries}
    options = [by_role[r] or [None] for r in roles]  # None: that endpoint cannot be placed
    best: tuple[Any, ...] | None = None
    best_pick: tuple[PlanEntry | None, ...] = ()
    for pick in itertools.product(*options):
        counts: dict[str, int] = {}
        for e in pick:
            if e is not None:
                counts[e.instance_type] = counts.get(e.instance_type, 0) + 1
        if any(n > free.get(t, 0) for t, n in counts.items()):
            continue
        placed = [e for e in pick if e is not None]
        key = (-len(placed), sum(e.usd_per_hour is None for e in placed),
               round(sum(e.usd_per_hour or 0.0 for e in placed), 6), sum(e.priority for e in placed))
        if best is None or key < best:
            best, best_pick = key, pick
    return {r: Choice(r, e.instance_type, e.usd_per_hour) for r, e in zip(roles, best_pick, strict=False) if e is not None}


def with_fallbacks(choices: dict[Role, Choice], entries: Sequence[PlanEntry]) -> dict[Role, InstancePool] | None:
    """The chosen entry first, then the endpoint's other free entries cheapest first, dropping fall-backs
    (most expensive first) until the quota check deploy runs would pass. None without choices."""
    if not choices:
        return None
    free = {e.instance_type: e.free for e in entries}
    pools: dict[Role, list[str]] = {}
    for role, choice in choices.items():
        others = sorted((e for e in entries if e.role == role and e.available and e.instance_type != choice.instance_type),
                        key=lambda e: (e.usd_per_hour is None, e.usd_per_hour or 0.0, e.priority))
        pools[role] = [choice.instance_type, *(e.instance_type for e in others)][:5]
    while True:
        needed = needed_counts({r: InstancePool(tuple(t)) for r, t in pools.items()})
        over = [t for t, n in needed.items() if n > free.get(t, 0)]
        if not over:
            return {r: InstancePool(tuple(pools[r])) for r in ROLES if r in pools}
        # Drop the most expensive fall-back entry of an over-subscribed type.
        dropped = False
        for role in reversed(ROLES):
            if role in pools and over[0] in pools[role][1:]:
                pools[role].remove(over[0])
                dropped = True
                break
        if not dropped:
            return {r: InstancePool((choices[r].instance_type,)) for r in ROLES if r in choices}


def plan_region(region: str, roles: Sequence[Role], *, profile: str | None = None, table: PriceTable | None = None,
                use_price_list: bool = True, pools: dict[Role, InstancePool] | None = None,
                model_ids: dict[Role, str] | None = None) -> RegionPlan:
    """Read quotas, usage and prices for one region and recommend. Errors reading the region are kept on
    the plan (`.error`), so one region refusing does not hide the others. An entry whose GPU memory cannot
    hold the endpoint's model (protocol/instances.py) is listed with the reason and never recommended."""
    roles = tuple(r for r in ROLES if r in roles)
    pools = pools or {r: InstancePool(ROLE_PROFILES[r].default_pool) for r in roles}
    models = {r: (model_ids or {}).get(r) or ROLE_PROFILES[r].model_id for r in roles}
    plan = RegionPlan(region, roles, profile=profile, model_ids=models)
    types = list(dict.fromkeys(t for r in roles for t in pools[r].types))
    try:
        ctx = AwsContext(region, profile)
        quotas, _codes = fetch_quotas(ctx, types)
        in_use = instances_in_use(ctx)
        plan.prices = region_prices(ctx.session, region, types, table=table, use_api=use_price_list)
    except InfraError as exc:
        plan.error = str(exc)
        return plan
    for role in roles:
        known = catalog_model(models[role])
        for priority, t in enumerate(pools[role].types, start=1):
            plan.entries.append(PlanEntry(role, t, priority, quotas.get(t), int(in_use.get(t, 0)),
                                          plan.prices.usd(t), plan.prices.source_of(t), models[role],
                                          None if known is None else misfit(known, t)))
    plan.choices = choose(roles, plan.entries)
    plan.fallback_pools = with_fallbacks(plan.choices, plan.entries) if plan.ok else None
    return plan


def plan_regions(regions: Sequence[str], roles: Sequence[Role] = DEFAULT_ROLES, *, profile: str | None = None,
                 table: PriceTable | None = None, use_price_list: bool = True,
                 pools: dict[Role, InstancePool] | None = None, model_ids: dict[Role, str] | None = None) -> PlanReport:
    return PlanReport([plan_region(r, roles, profile=profile, table=table, use_price_list=use_price_list,
                                   pools=pools, model_ids=model_ids)
                       for r in dict.fromkeys(regions)])


# ---------------------------------------------------------------------------------------------------------
def _money(v: float | None) -> str:
    return usd(v, "rate")


def render(report: PlanReport) -> str:
    """The plan as text: per region a table of entries, the recommendation and its deploy line."""
    out: list[str] = []
    for plan in report.regions:
        out.append(f"region {plan.region}")
        if plan.error is not None:
            out += [f"  could not be read: {plan.error}", ""]
            continue
        assert plan.prices is not None
        out.append(f"  {plan.prices.describe()}")
        header = ["endpoint", "instance type", "GPU memory", "fits", "pool", "quota", "in use", "free", "$/hour"]
        rows = [[e.role, e.instance_type, e.gpu, "yes" if e.misfit is None else "NO", str(e.priority),
                 "none" if e.quota is None else f"{e.quota:g}",
                 str(e.in_use), f"{e.free:g}", _money(e.usd_per_hour) + ("" if e.price_source == "price list" else
                                                                         " (table)" if e.usd_per_hour else "")]
                for e in plan.entries]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for r in [header, ["-" * w for w in widths], *rows]:
            out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        for role in plan.roles:
            out.append(f"  {role}: {plan.model_ids[role]} {gpu_fit_line(plan.model_ids[role])}")
            out += [f"    {e.instance_type} cannot serve it: {e.misfit}" for e in plan.entries
                    if e.role == role and e.misfit is not None]
        for role in plan.roles:
            c = plan.choices.get(role)
            if c is None and all(e.misfit for e in plan.entries if e.role == role):
                out.append(f"  {role}: no pool entry has the GPU memory its model needs — plan with "
                           f"--instance-types {role}=<a type that fits>")
            elif c is None:
                out.append(f"  {role}: no pool entry has quota free here — request an increase in Service Quotas "
                           f"(Amazon SageMaker → '<type> for endpoint usage') or plan another region")
            else:
                out.append(f"  {role}: {c.instance_type} at {_money(c.usd_per_hour)}/hour (the cheapest entry the free quota leaves for it)")
        if plan.ok:
            total = plan.usd_per_hour
            out.append(f"  recommended, {_money(total)}/hour: " + plan.deploy_command if total is not None else
                       "  recommended: " + str(plan.deploy_command))
            if plan.fallback_command:
                out.append(f"  with fall-backs that also fit the quotas: {plan.fallback_command}")
        out.append("")
    best = report.best
    if len(report.regions) > 1:
        out.append(f"cheapest region where every endpoint fits: {best.region} ({_money(best.usd_per_hour)}/hour)"
                   if best is not None else "no region has quota for every endpoint")
    return "\n".join(out).rstrip() + "\n"
