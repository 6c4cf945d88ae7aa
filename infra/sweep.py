"""Sweep: the studio's endpoints, configs and models in a region that no known state file holds.

A resource is the studio's when it carries the `omni-studio:deployment` tag (every resource infra creates
does). An orphan is one whose name none of the given state files plans or holds — left by a deploy whose
state file was lost, or created elsewhere. Endpoints show their running cost; configs and models cost
nothing but clutter. `delete_orphans` removes them: endpoints first (waiting until gone), then configs,
then models.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, is_not_found, translate
from infra.delete import (
    DELETE_AGAIN,
    DeleteReport,
    Deletion,
    Kind,
    delete_endpoint_chain,
    delete_resource,
    verify_gone,
)
from infra.deploy import Progress, ProgressCallback, WaitSettings
from infra.errors import InfraError
from infra.model import TAG_DEPLOYMENT, TAG_ROLE
from infra.pricing import PriceTable, load_prices
from infra.state import DeploymentState
from infra.status import EndpointStatus, describe_endpoint_status


@dataclass(frozen=True)
class Orphan:
    kind: Kind
    name: str
    arn: str
    deployment_id: str
    role: str | None
    status: EndpointStatus | None = None  # endpoints only

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.status is None else self.status.usd_per_hour

    @property
    def cost_so_far_usd(self) -> float | None:
        return None if self.status is None else self.status.cost_so_far_usd

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "arn": self.arn, "deployment_id": self.deployment_id,
                "role": self.role, "status": None if self.status is None else self.status.status,
                "instance_type": None if self.status is None else self.status.instance_type,
                "usd_per_hour": self.usd_per_hour,
                "cost_so_far_usd": None if self.cost_so_far_usd is None else round(self.cost_so_far_usd, 4)}


@dataclass
class SweepReport:
    region: str
    orphans: list[Orphan]
    known_state_files: list[Path]
    studio_resources: int  # tagged resources seen, orphans or not
    prices: PriceTable | None = None
    deleted: DeleteReport | None = None
    skipped_state_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be listed (e.g. a missing permission)

    @property
    def usd_per_hour(self) -> float:
        return sum(o.usd_per_hour or 0.0 for o in self.orphans)

    @property
    def cost_so_far_usd(self) -> float:
        return sum(o.cost_so_far_usd or 0.0 for o in self.orphans)

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "orphans": [o.to_dict() for o in self.orphans],
                "known_state_files": [str(p) for p in self.known_state_files],
                "skipped_state_files": self.skipped_state_files, "studio_resources": self.studio_resources,
                "notes": self.notes,
                "usd_per_hour": round(self.usd_per_hour, 4), "cost_so_far_usd": round(self.cost_so_far_usd, 4),
                "deleted": None if self.deleted is None else self.deleted.to_dict()}


def known_names(state_files: Iterable[Path], region: str) -> tuple[set[tuple[str, str]], list[Path], list[str]]:
    """(kind, name) pairs the state files hold, for `region`; missing/other-region files are reported."""
    names: set[tuple[str, str]] = set()
    used: list[Path] = []
    skipped: list[str] = []
    for path in state_files:
        path = Path(path)
        if not path.exists():
            skipped.append(f"{path}: does not exist")
            continue
        state = DeploymentState.load(path)
        if state.region != region:
            skipped.append(f"{path}: deployment in {state.region}")
            continue
        names |= state.resource_names()
        used.append(path)
    return names, used, skipped


def _studio_tags(sm: Any, arn: str) -> dict[str, str] | None:
    try:
        tags: dict[str, str] = {}
        for page in sm.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    except AWS_ERRORS as exc:
        if is_not_found(exc):
            return None  # gone between the list and the tags
        raise
    return tags if TAG_DEPLOYMENT in tags else None


def find_orphans(ctx: AwsContext, state_files: Iterable[Path], *, prices: PriceTable | None = None,
                 progress: ProgressCallback | None = None) -> SweepReport:
    progress = progress or (lambda _: None)
    prices = prices or load_prices()
    known, used, skipped = known_names(state_files, ctx.region)
    sm = ctx.sagemaker
    listings: list[tuple[Kind, str, str, str]] = [
        ("endpoint", "list_endpoints", "Endpoints", "Endpoint"),
        ("endpoint config", "list_endpoint_configs", "EndpointConfigs", "EndpointConfig"),
        ("model", "list_models", "Models", "Model"),
    ]
    orphans: list[Orphan] = []
    seen = 0
    try:
        for kind, op, key, prefix in listings:
            for page in sm.get_paginator(op).paginate(PaginationConfig={"PageSize": 100}):
                for item in page.get(key, []):
                    name, arn = item[f"{prefix}Name"], item[f"{prefix}Arn"]
                    tags = _studio_tags(sm, arn)
                    if tags is None:
                        continue
                    seen += 1
                    if (kind, name) in known:
                        continue
                    status = describe_endpoint_status(ctx, name, prices) if kind == "endpoint" else None
                    orphans.append(Orphan(kind, name, arn, tags[TAG_DEPLOYMENT], tags.get(TAG_ROLE), status))
                    progress(Progress(None, "sweep", f"orphan {kind} {name} (deployment {tags[TAG_DEPLOYMENT]})"))
    except AWS_ERRORS as exc:
        raise translate(exc, "list the studio's SageMaker resources") from None
    # The TTL's schedule groups and scheduler roles (infra/ttl.py), tagged like the endpoints.
    from infra.ttl import find_ttl_resources

    extra, notes = find_ttl_resources(ctx)
    for item in extra:
        seen += 1
        if (item.kind, item.name) not in known:
            orphans.append(Orphan(item.kind, item.name, item.arn, item.deployment_id, None))  # type: ignore[arg-type]
            progress(Progress(None, "sweep", f"orphan {item.kind} {item.name} (deployment {item.deployment_id})"))
    return SweepReport(ctx.region, orphans, used, seen, prices, skipped_state_files=skipped, notes=notes)


@dataclass
class StudioFleet:
    """Every studio-tagged endpoint in a region, known or not: what the cost banner shows."""

    region: str
    endpoints: list[tuple[str, EndpointStatus]]  # (deployment id, status)
    prices: PriceTable
    # endpoint name -> when its TTL schedule deletes it (ISO, UTC), None: no schedule (infra/ttl.py)
    deletions: dict[str, str | None] = field(default_factory=dict)

    @property
    def running(self) -> list[EndpointStatus]:
        return [e for _, e in self.endpoints if e.billing]

    @property
    def usd_per_hour(self) -> float:
        return sum(e.usd_per_hour or 0.0 for e in self.running)

    @property
    def cost_so_far_usd(self) -> float:
        return sum(e.cost_so_far_usd or 0.0 for e in self.running)

    def to_dict(self) -> dict[str, Any]:
        live = [e.endpoint_name for _, e in self.endpoints if e.status not in ("gone", "Failed", "Deleting")]
        times = sorted(t for n in live if (t := self.deletions.get(n)))
        # InService at 0 instances (the video endpoint idles there): up, free, and not "running" — the banner
        # names them, or "2 running" reads wrong beside 3 endpoints InService
        idle = [e.role or e.endpoint_name for _, e in self.endpoints if e.status == "InService" and not e.billing]
        return {"region": self.region, "running": len(self.running), "idle": idle,
                "usd_per_hour": round(self.usd_per_hour, 4),
                "cost_so_far_usd": round(self.cost_so_far_usd, 4),
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
                tags = _studio_tags(sm, item["EndpointArn"])
                if tags is not None:
                    status = describe_endpoint_status(ctx, item["EndpointName"], prices, role=tags.get(TAG_ROLE))
                    found.append((tags[TAG_DEPLOYMENT], status))
    except AWS_ERRORS as exc:
        raise translate(exc, "list the studio's endpoints") from None
    from infra.ttl import fleet_ttls, iso  # each endpoint's TTL schedule, for the banner

    deletions: dict[str, str | None] = {}
    for dep in {d for d, _ in found}:
        names = [e.endpoint_name for d, e in found if d == dep]
        deletions |= {n: None if t is None else iso(t) for n, t in fleet_ttls(ctx, dep, names).items()}
    return StudioFleet(ctx.region, found, prices, deletions)


def delete_orphans(ctx: AwsContext, orphans: list[Orphan], *, wait: WaitSettings = WaitSettings(),
                   progress: ProgressCallback | None = None) -> DeleteReport:
    """Endpoints first (concurrently, each waited until gone), then configs, then models; verified."""
    progress = progress or (lambda _: None)
    report = DeleteReport()
    endpoints = [o.name for o in orphans if o.kind == "endpoint"]
    configs = [o.name for o in orphans if o.kind == "endpoint config"]
    models = [o.name for o in orphans if o.kind == "model"]

    def one(name: str) -> tuple[list[Deletion], InfraError | None]:
        try:
            return delete_endpoint_chain(ctx, name, None, [], wait=wait, progress=progress), None
        except AWS_ERRORS as exc:
            return [], translate(exc, f"delete endpoint {name}", retry=DELETE_AGAIN)
        except InfraError as exc:
            return [], exc

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(endpoints))), thread_name_prefix="infra-sweep") as pool:
        for dels, err in pool.map(one, endpoints):
            report.deletions += dels
            if err is not None:
                report.errors.append(err)
                progress(Progress(None, "error", str(err)))
    sm = ctx.sagemaker
    try:
        for name in configs:
            report.deletions.append(delete_resource(sm, "endpoint config", name, None, progress))
        for name in models:
            report.deletions.append(delete_resource(sm, "model", name, None, progress))
        for name in endpoints:
            report.remaining += verify_gone(ctx, name, None, [])
        for name in configs:
            report.remaining += verify_gone(ctx, None, name, [])
        report.remaining += verify_gone(ctx, None, None, models)
    except AWS_ERRORS as exc:
        report.errors.append(translate(exc, "delete orphaned endpoint configs and models", retry=DELETE_AGAIN))
    # Then what deleted the endpoints by their TTL: schedule groups (with their schedules) and roles.
    from infra.ttl import delete_role, delete_schedule_group

    try:
        for o in orphans:
            if o.kind == "schedule group":
                report.deletions.append(Deletion(o.kind, o.name, delete_schedule_group(ctx, o.name)))  # type: ignore[arg-type]
            elif o.kind == "iam role":
                report.deletions.append(Deletion(o.kind, o.name, delete_role(ctx, o.name)))  # type: ignore[arg-type]
    except AWS_ERRORS as exc:
        report.errors.append(translate(exc, "delete orphaned schedule groups and scheduler roles", retry=DELETE_AGAIN))
    return report
