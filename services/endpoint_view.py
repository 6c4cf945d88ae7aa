"""One SageMaker endpoint as the studio reads it: `describe_endpoint(sm, name)` makes the one DescribeEndpoint
call and returns an `EndpointView` — name, status (or "gone" when SageMaker does not know the name), the
instance type in use, instance counts, FailureReason, the endpoint config running. Both the services layer
(the load sweep's target, backend health, the video jobs' scale-to-zero notice) and infra (deploy, status,
upgrade, delete, extend, quotas) read endpoints through it.

Only "does not exist" is turned into a value; every other botocore error propagates for the caller to word
(infra's `translate`, the services layer's `aws_error`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import botocore.exceptions as bx

GONE = "gone"


def is_not_found(exc: BaseException) -> bool:
    """SageMaker says "Could not find ..." (a ValidationException) for a resource that does not exist."""
    if not isinstance(exc, bx.ClientError):
        return False
    err = exc.response.get("Error", {})
    message = str(err.get("Message", "")) or str(exc)
    return str(err.get("Code", "")) == "ValidationException" and "could not find" in message.lower()


def instance_type_in_use(desc: Mapping[str, Any], pool_types: Sequence[str] = ()) -> str | None:
    """The instance type an endpoint runs on, from DescribeEndpoint: the pool entry holding instances, else the
    variant's own type. `pool_types`: the pool the endpoint was configured with; a pool of one type names it
    while the endpoint is InService or Updating (DescribeEndpoint does not repeat a single type)."""
    for v in desc.get("ProductionVariants", []) or []:
        for p in v.get("InstancePools", []) or []:
            if int(p.get("CurrentInstanceCount") or 0) > 0:
                return p["InstanceType"]
        if v.get("InstanceType"):
            return v["InstanceType"]
        if len(pool_types) == 1 and desc.get("EndpointStatus") in ("InService", "Updating"):
            return pool_types[0]
    return None


def instance_counts(desc: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(current, desired) instance counts of DescribeEndpoint's variants (None when not reported)."""
    variants = desc.get("ProductionVariants") or []
    if not variants:
        return None, None
    current = [v.get("CurrentInstanceCount") for v in variants]
    desired = [v.get("DesiredInstanceCount") for v in variants]
    return (None if any(c is None for c in current) else sum(current),
            None if any(d is None for d in desired) else sum(desired))


@dataclass(frozen=True)
class EndpointView:
    name: str
    status: str  # DescribeEndpoint's EndpointStatus, or "gone"
    instance_type: str | None = None  # in use (instance_type_in_use)
    current_instances: int | None = None
    desired_instances: int | None = None
    failure_reason: str | None = None
    config_name: str | None = None  # the endpoint config it runs
    arn: str | None = None
    created: datetime | None = None  # CreationTime
    desc: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the whole answer ({} when gone)

    @property
    def gone(self) -> bool:
        return self.status == GONE

    @classmethod
    def of(cls, desc: Mapping[str, Any], pool_types: Sequence[str] = (), *, name: str | None = None) -> EndpointView:
        """The view of a DescribeEndpoint answer (`name` when the answer does not carry it)."""
        current, desired = instance_counts(desc)
        created = desc.get("CreationTime")
        return cls(name or desc["EndpointName"], desc["EndpointStatus"], instance_type_in_use(desc, pool_types), current,
                   desired, desc.get("FailureReason"), desc.get("EndpointConfigName"), desc.get("EndpointArn"),
                   created if isinstance(created, datetime) else None, desc)


def describe_endpoint(sm: Any, name: str, pool_types: Sequence[str] = ()) -> EndpointView:
    """DescribeEndpoint `name` with the SageMaker client `sm`: its view, status "gone" when it does not exist.
    Other errors (botocore's) propagate."""
    try:
        desc = sm.describe_endpoint(EndpointName=name)
    except bx.ClientError as exc:
        if is_not_found(exc):
            return EndpointView(name, GONE)
        raise
    return EndpointView.of(desc, pool_types, name=name)
