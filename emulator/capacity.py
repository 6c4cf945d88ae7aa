"""What capacity an endpoint config asks for, and whether the account can have it.

`check_variant` refuses a ProductionVariant SageMaker would refuse; `plan_capacity` picks each variant's
instance type — the first `InstancePools` entry, by priority, that has capacity; `check_quotas` counts the
instances every pool entry may need against "ml.<type> for endpoint usage", as CreateEndpoint and
UpdateEndpoint do, and refuses with ResourceLimitExceeded.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from emulator.errors import AwsError, validation
from emulator.records import Deployment, EndpointConfigRecord


def quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


def check_variant(variant: dict[str, Any]) -> None:
    """Refuse a ProductionVariant SageMaker would refuse: one kind of capacity, counts, unique pools."""
    vname = variant.get("VariantName")
    has_type = bool(variant.get("InstanceType"))
    pools = variant.get("InstancePools")
    serverless = variant.get("ServerlessConfig")
    if has_type and pools:
        raise validation(f"Production variant {vname}: specify either InstanceType or InstancePools, not both")
    if not has_type and not pools and not serverless:
        raise validation(f"Production variant {vname}: one of InstanceType, InstancePools or ServerlessConfig is required")
    if serverless and (has_type or pools):
        raise validation(f"Production variant {vname}: ServerlessConfig cannot be combined with InstanceType or InstancePools")
    if not serverless and variant.get("InitialInstanceCount") is None:
        raise validation(f"Production variant {vname}: InitialInstanceCount is required for instance-based variants")
    if pools:
        priorities = [p["Priority"] for p in pools]
        types = [p["InstanceType"] for p in pools]
        if len(set(priorities)) != len(priorities):
            raise validation(f"Production variant {vname}: InstancePools priorities must be unique (got {priorities})")
        if len(set(types)) != len(types):
            raise validation(f"Production variant {vname}: InstancePools instance types must be unique (got {types})")


def plan_capacity(cfg: EndpointConfigRecord, unavailable: set[str]) -> list[Deployment]:
    """Pick each variant's instance type now: the first pool entry (by priority) with capacity
    (`unavailable`: the instance types the faults say have none)."""
    plan: list[Deployment] = []
    for variant in cfg.variants:
        variant = copy.deepcopy(variant)
        count = int(variant.get("InitialInstanceCount") or 0)
        if variant.get("ServerlessConfig"):
            plan.append(Deployment(variant, None, 0, "Provisioning serverless capacity"))
            continue
        entries = (
            sorted(variant["InstancePools"], key=lambda p: p["Priority"])
            if variant.get("InstancePools")
            else [{"InstanceType": variant["InstanceType"], "Priority": 1}]
        )
        skipped = [e for e in entries if e["InstanceType"] in unavailable]
        usable = [e for e in entries if e["InstanceType"] not in unavailable]
        if not usable:
            tried = ", ".join(e["InstanceType"] for e in entries)
            reason = (
                "Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity "
                f"for every instance type of production variant {variant.get('VariantName')} ({tried}). "
                "Please retry using a different ML instance type or after some time."
            )
            plan.append(Deployment(variant, entries[0]["InstanceType"], count, reason, failure=reason))
            continue
        chosen = usable[0]
        message = f"Provisioning {count} x {chosen['InstanceType']} (pool priority {chosen['Priority']})"
        if skipped:
            message += "; no capacity for " + ", ".join(
                f"{e['InstanceType']} (priority {e['Priority']})" for e in skipped if e["Priority"] < chosen["Priority"]
            )
        plan.append(Deployment(variant, chosen["InstanceType"], count, message))
    return plan


def check_quotas(cfg: EndpointConfigRecord, in_use: dict[str, int], quota_for: Callable[[str], float]) -> None:
    """Refuse with ResourceLimitExceeded, as SageMaker does, when an instance type of any pool entry would go
    over its "ml.<type> for endpoint usage" quota: `in_use` (what other endpoints hold) plus this request."""
    requested: dict[str, int] = {}
    ordered: list[str] = []
    for variant in cfg.variants:
        if variant.get("ServerlessConfig"):
            continue
        count = int(variant.get("InitialInstanceCount") or 0)
        entries = variant.get("InstancePools") or [{"InstanceType": variant["InstanceType"], "Priority": 1}]
        for entry in sorted(entries, key=lambda p: p["Priority"]):
            itype = entry["InstanceType"]
            requested[itype] = requested.get(itype, 0) + count
            if itype not in ordered:
                ordered.append(itype)
    for itype in ordered:
        limit = quota_for(itype)
        current = in_use.get(itype, 0)
        if current + requested[itype] > limit:
            raise AwsError(
                "ResourceLimitExceeded",
                f"The account-level service limit '{quota_name(itype)}' is {_num(limit)} Instances, with current "
                f"utilization of {current} Instances and a request delta of {requested[itype]} Instances. "
                "Please use AWS Service Quotas to request an increase for this quota. If AWS Service Quotas is "
                "not available, contact AWS support to request an increase for this quota.",
            )


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
