"""Quota pre-check: will SageMaker accept these instance pools? Answered BEFORE anything is created.

SageMaker checks the quota `ml.<type> for endpoint usage` of EVERY pool entry when an endpoint is
created: instances held by other endpoints + the requested count must fit, for each entry, even the ones
it will not use. The three endpoints are created together, so when one is created the others may already
hold their instance. Each is expected on its first choice, hence for instance type t:

    needed(t) = (endpoints whose first choice is t) + (1 if t is a later choice of any endpoint)

(an endpoint that lists t as a fall-back still needs one free slot of t at its own creation, on top of
the instances the endpoints preferring t already hold). Free = quota − instances in use in the region.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.aws import (
    AWS_ERRORS,
    AwsContext,
    error_code,
    is_credentials_problem,
    is_not_found,
    translate,
)
from infra.model import ROLES, InstancePool, Role
from services.endpoint_view import describe_endpoint

SERVICE_CODE = "sagemaker"


def quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


@dataclass(frozen=True)
class QuotaLine:
    instance_type: str
    quota: float | None  # None: Service Quotas knows no such quota here (type not offered in the region)
    in_use: int
    needed: int
    preferred_by: tuple[Role, ...]  # endpoints whose first choice it is
    listed_by: tuple[Role, ...]  # endpoints whose pool holds it
    quota_code: str | None = None

    @property
    def free(self) -> float:
        return 0.0 if self.quota is None else self.quota - self.in_use

    @property
    def ok(self) -> bool:
        return self.free >= self.needed

    def explain(self) -> str:
        have = "no quota in this region" if self.quota is None else f"quota {_n(self.quota)}, {self.in_use} in use"
        who = ", ".join(self.listed_by)
        return f"{self.instance_type}: {have}, needs {self.needed} free (pool of {who})"

    def to_dict(self) -> dict[str, Any]:
        return {"instance_type": self.instance_type, "quota": self.quota, "in_use": self.in_use,
                "free": self.free, "needed": self.needed, "ok": self.ok, "listed_by": list(self.listed_by),
                "preferred_by": list(self.preferred_by), "quota_name": quota_name(self.instance_type),
                "quota_code": self.quota_code}


@dataclass(frozen=True)
class QuotaReport:
    region: str
    pools: dict[Role, InstancePool]
    lines: tuple[QuotaLine, ...]
    suggestion: dict[Role, InstancePool] | None  # narrowed pools that would pass, when some subset does

    @property
    def ok(self) -> bool:
        return all(line.ok for line in self.lines)

    @property
    def short(self) -> list[QuotaLine]:
        return [line for line in self.lines if not line.ok]

    def suggested_flags(self) -> str | None:
        """The `--instance-types` that would work, e.g. `--instance-types ml.g6e.xlarge,ml.g5.xlarge`."""
        if self.suggestion is None:
            return None
        pools = [self.suggestion[r] for r in ROLES if r in self.suggestion]
        if all(p == pools[0] for p in pools):
            return f"--instance-types {pools[0].flag()}"
        return " ".join(f"--instance-types {r}={self.suggestion[r].flag()}" for r in ROLES if r in self.suggestion)

    def message(self) -> str:
        lines = [f"quota check failed in {self.region}; nothing was created. Entries without enough quota:"]
        lines += [f"  - {line.explain()}" for line in self.short]
        if (flags := self.suggested_flags()) is not None:
            lines.append(f"these pools fit the quotas you have: {flags}")
        else:
            lines.append("no narrower pool fits the quotas you have.")
        lines.append("or request an increase in Service Quotas (Amazon SageMaker → '<type> for endpoint usage'), e.g. "
                     + "; ".join(_increase_command(line) for line in self.short[:2]))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "ok": self.ok, "lines": [line.to_dict() for line in self.lines],
                "pools": {r: list(p.types) for r, p in self.pools.items()},
                "suggestion": None if self.suggestion is None else {r: list(p.types) for r, p in self.suggestion.items()},
                "suggested_flags": self.suggested_flags()}


def _increase_command(line: QuotaLine) -> str:
    code = line.quota_code or "<quota code>"
    return (f"aws service-quotas request-service-quota-increase --service-code sagemaker --quota-code {code} "
            f"--desired-value {line.in_use + line.needed}")


def _n(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


# ---------------------------------------------------------------------------------------------------------
# The arithmetic (pure: no AWS)
def needed_counts(pools: Mapping[Role, InstancePool]) -> dict[str, int]:
    needed: dict[str, int] = {}
    fallback: set[str] = set()
    for pool in pools.values():
        needed[pool.first] = needed.get(pool.first, 0) + 1
        for t in pool.types[1:]:
            needed.setdefault(t, 0)
            fallback.add(t)
    return {t: n + (1 if t in fallback else 0) for t, n in needed.items()}


def evaluate(region: str, pools: Mapping[Role, InstancePool], quotas: Mapping[str, float | None],
             in_use: Mapping[str, int], codes: Mapping[str, str] | None = None) -> QuotaReport:
    needed = needed_counts(pools)
    order = list(dict.fromkeys(t for r in ROLES if r in pools for t in pools[r].types))
    lines = tuple(
        QuotaLine(
            instance_type=t, quota=quotas.get(t), in_use=int(in_use.get(t, 0)), needed=needed[t],
            preferred_by=tuple(r for r in ROLES if r in pools and pools[r].first == t),
            listed_by=tuple(r for r in ROLES if r in pools and t in pools[r].types),
            quota_code=(codes or {}).get(t),
        )
        for t in order
    )
    free = {line.instance_type: line.free for line in lines}
    ok = all(line.ok for line in lines)
    return QuotaReport(region=region, pools=dict(pools), lines=lines,
                       suggestion=None if ok else suggest(pools, free))


def suggest(pools: Mapping[Role, InstancePool], free: Mapping[str, float]) -> dict[Role, InstancePool] | None:
    """Narrow the pools (keeping priority order) until every entry fits; None when no subset does."""
    current: dict[Role, list[str]] = {r: [t for t in p.types if free.get(t, 0) >= 1] for r, p in pools.items()}
    for _ in range(sum(len(p.types) for p in pools.values()) + 1):  # each round drops one entry
        if any(not types for types in current.values()):
            return None
        candidate = {r: InstancePool(tuple(types)) for r, types in current.items()}
        needed = needed_counts(candidate)
        over = [t for t in needed if needed[t] > free.get(t, 0)]
        if not over:
            return candidate
        t = over[0]
        as_fallback = [r for r in ROLES if r in current and t in current[r][1:]]
        if as_fallback:
            current[as_fallback[-1]].remove(t)  # a fall-back entry costs one extra free slot
        else:
            # Too many endpoints prefer t: move the last of them (that has another choice) off it.
            movable = [r for r in ROLES if r in current and current[r][0] == t and len(current[r]) > 1]
            if not movable:
                return None
            current[movable[-1]].remove(t)
    return None


# ---------------------------------------------------------------------------------------------------------
# Reading the account
def fetch_quotas(ctx: AwsContext, instance_types: list[str]) -> tuple[dict[str, float | None], dict[str, str]]:
    """Quota values (and codes) of `ml.<type> for endpoint usage`; None where Service Quotas has none.

    Applied values first; quotas never changed may only appear among the AWS defaults.
    """
    wanted = {quota_name(t): t for t in instance_types}
    values: dict[str, float | None] = dict.fromkeys(instance_types)
    codes: dict[str, str] = {}

    def scan(operation: str) -> None:
        pages = ctx.quotas.get_paginator(operation).paginate(ServiceCode=SERVICE_CODE, PaginationConfig={"PageSize": 100})
        for page in pages:
            for q in page.get("Quotas", []):
                t = wanted.get(q.get("QuotaName", ""))
                if t is not None and values[t] is None:
                    values[t] = float(q["Value"])
                    codes[t] = q.get("QuotaCode", "")
            if all(v is not None for v in values.values()):
                return

    try:
        scan("list_service_quotas")
    except AWS_ERRORS as exc:
        raise translate(exc, "read SageMaker quotas (servicequotas:ListServiceQuotas)") from None
    if any(v is None for v in values.values()):
        try:
            scan("list_aws_default_service_quotas")
        except AWS_ERRORS as exc:
            if is_credentials_problem(exc) or error_code(exc).startswith("AccessDenied"):
                raise translate(exc, "read SageMaker default quotas (servicequotas:ListAWSDefaultServiceQuotas)") from None
            # Otherwise the applied list is all there is: the missing types have no quota here.
    return values, codes


def instances_in_use(ctx: AwsContext) -> dict[str, int]:
    """Instance type -> instances held by the region's endpoints (every status but Failed)."""
    sm = ctx.sagemaker
    held: dict[str, int] = {}
    try:
        for page in sm.get_paginator("list_endpoints").paginate(PaginationConfig={"PageSize": 100}):
            for summary in page.get("Endpoints", []):
                if summary.get("EndpointStatus") == "Failed":
                    continue
                for itype, n in _endpoint_instances(sm, summary["EndpointName"]).items():
                    held[itype] = held.get(itype, 0) + n
    except AWS_ERRORS as exc:
        raise translate(exc, "count the instances endpoints use (sagemaker:ListEndpoints/DescribeEndpoint)") from None
    return held


def _endpoint_instances(sm: Any, name: str) -> dict[str, int]:
    ep = describe_endpoint(sm, name)
    if ep.gone or ep.status == "Failed":  # gone: deleted between the list and the describe
        return {}
    config_variants: dict[str, dict[str, Any]] | None = None
    out: dict[str, int] = {}
    for v in ep.desc.get("ProductionVariants", []):
        count = int(v.get("CurrentInstanceCount") or 0) or int(v.get("DesiredInstanceCount") or 0)
        pools = [p for p in v.get("InstancePools", []) if int(p.get("CurrentInstanceCount") or 0) > 0]
        if pools:
            for p in pools:
                out[p["InstanceType"]] = out.get(p["InstanceType"], 0) + int(p["CurrentInstanceCount"])
            continue
        if count == 0:
            continue
        if config_variants is None:
            try:
                cfg = sm.describe_endpoint_config(EndpointConfigName=ep.config_name)
                config_variants = {cv["VariantName"]: cv for cv in cfg.get("ProductionVariants", [])}
            except AWS_ERRORS as exc:
                if not is_not_found(exc):
                    raise
                config_variants = {}
        cv = config_variants.get(v.get("VariantName", ""), {})
        # Still provisioning a pool: the first choice is the best guess of what it will hold.
        itype = cv.get("InstanceType") or next(
            (p["InstanceType"] for p in sorted(cv.get("InstancePools", []), key=lambda p: p["Priority"])), None)
        if itype:
            out[itype] = out.get(itype, 0) + count
    return out


def check_quotas(ctx: AwsContext, pools: Mapping[Role, InstancePool]) -> QuotaReport:
    """Read quotas and usage for every pool entry and evaluate them. Creates nothing."""
    types = list(dict.fromkeys(t for r in ROLES if r in pools for t in pools[r].types))
    quotas, codes = fetch_quotas(ctx, types)
    return evaluate(ctx.region, pools, quotas, instances_in_use(ctx), codes)
