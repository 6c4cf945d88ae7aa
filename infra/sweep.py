"""Sweep: the studio's resources in a region that no known state file holds.

A resource is the studio's when it carries the `omni-studio:deployment` tag (every resource infra creates
does). An orphan is one whose name none of the given state files plans or holds — left by a deploy whose
state file was lost, or created elsewhere: endpoints, endpoint configs and models; the TTL's schedule groups
and roles; and the CloudWatch alarms and Application Auto Scaling targets (with their policies) of the
endpoints — those also when their endpoint no longer exists, even if a state file names them (nothing
they watch or scale is left). Endpoints show their running cost; the rest costs nothing or little but
clutters, and an alarm or a target outliving its endpoint would act on the next endpoint of that name.
`delete_orphans` removes them: alarms, policies and targets first (nothing may scale an endpoint being
deleted), then endpoints (waiting until gone), configs, models, schedule groups and roles.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, error_code, is_not_found, tag_dict, tagged, translate
from infra.delete import (
    DELETE_AGAIN,
    DeleteReport,
    Deletion,
    Kind,
    Outcome,
    delete_endpoint_chain,
    delete_resource,
    verify_gone,
)
from infra.errors import InfraError
from infra.fleet import studio_tags
from infra.model import TAG_DEPLOYMENT, TAG_ROLE
from infra.pricing import PriceTable, load_prices
from infra.progress import Progress, ProgressCallback, WaitSettings
from infra.scaling import DIMENSION, Names, is_gone, resource_id
from infra.scaling import NAMESPACE as SCALING_NAMESPACE
from infra.state import DeploymentState
from infra.status import EndpointStatus, describe_endpoint_status
from infra.versions import alarm_name


@dataclass(frozen=True)
class Orphan:
    kind: Kind
    name: str
    arn: str
    deployment_id: str
    role: str | None
    status: EndpointStatus | None = None  # endpoints only
    detail: str | None = None  # why, when it is not just "no state file names it"
    parent: str | None = None  # a scaling policy's scalable target (its resource id)

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
                "usd_per_hour": self.usd_per_hour, "detail": self.detail, "parent": self.parent,
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
        names |= state.resource_names() | _alarm_and_scaling_names(state)
        used.append(path)
    return names, used, skipped


def _alarm_and_scaling_names(state: DeploymentState) -> set[tuple[str, str]]:
    """Every alarm, scalable target and scaling policy an endpoint of `state` may have (recorded or not)."""
    names: set[tuple[str, str]] = set()
    for rec in state.endpoints.values():
        endpoint = rec.endpoint.name
        scaling = Names.of(endpoint)
        names |= {("alarm", alarm_name(endpoint)), ("alarm", scaling.backlog_alarm),
                  ("scalable target", resource_id(endpoint)), ("scaling policy", scaling.backlog_policy),
                  ("scaling policy", scaling.from_zero_policy), ("scaling policy", scaling.invocations_policy)}
    return names


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
    existing: set[str] = set()  # every endpoint in the region (lower case: SageMaker names ignore case)
    try:
        for kind, op, key, prefix in listings:
            for page in sm.get_paginator(op).paginate(PaginationConfig={"PageSize": 100}):
                for item in page.get(key, []):
                    name, arn = item[f"{prefix}Name"], item[f"{prefix}Arn"]
                    if kind == "endpoint":
                        existing.add(name.lower())
                    tags = studio_tags(sm, arn)
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
    # The endpoints' alarms, scalable targets and policies (infra/versions.py, infra/scaling.py).
    for orphan in _scaling_and_alarms(ctx, known, existing, notes):
        seen += 1
        if orphan.detail or (orphan.kind, orphan.name) not in known:
            orphans.append(orphan)
            progress(Progress(None, "sweep", f"orphan {orphan.kind} {orphan.name} (deployment {orphan.deployment_id})"))
    return SweepReport(ctx.region, orphans, used, seen, prices, skipped_state_files=skipped, notes=notes)


def _watched_endpoint(alarm: dict[str, Any]) -> str | None:
    """The SageMaker endpoint an alarm watches (its EndpointName dimension, or its metric-math metrics')."""
    dimensions = list(alarm.get("Dimensions") or [])
    for metric in alarm.get("Metrics") or []:
        dimensions += ((metric.get("MetricStat") or {}).get("Metric") or {}).get("Dimensions") or []
    return next((d["Value"] for d in dimensions if d.get("Name") == "EndpointName"), None)


def _scaling_and_alarms(ctx: AwsContext, known: set[tuple[str, str]], existing: set[str],
                        notes: list[str]) -> list[Orphan]:
    """Every studio-tagged CloudWatch alarm on an endpoint and every studio-tagged scalable target of an endpoint
    (with its policies), as Orphan candidates: `detail` says when the endpoint is gone. What cannot be listed
    (a missing permission) goes to `notes`."""
    found: list[Orphan] = []

    def gone(endpoint: str) -> str | None:
        return None if endpoint.lower() in existing else f"its endpoint {endpoint} is gone"

    cw = ctx.client("cloudwatch")
    try:
        def alarm_tags(alarm: dict[str, Any]) -> dict[str, str] | None:
            if _watched_endpoint(alarm) is None:
                return None  # not on an endpoint: not the studio's, and no tags to read
            return tag_dict(cw.list_tags_for_resource(ResourceARN=alarm["AlarmArn"]).get("Tags", []))

        for alarm, tags in tagged(cw.get_paginator("describe_alarms").paginate(), "MetricAlarms", TAG_DEPLOYMENT,
                                  alarm_tags):
            found.append(Orphan("alarm", alarm["AlarmName"], alarm["AlarmArn"], tags[TAG_DEPLOYMENT],
                                tags.get(TAG_ROLE), detail=gone(_watched_endpoint(alarm) or "")))
    except AWS_ERRORS as exc:
        notes.append(f"CloudWatch alarms not listed: {translate(exc, 'list CloudWatch alarms')}")
    aas = ctx.client("application-autoscaling")
    try:
        for page in aas.get_paginator("describe_scalable_targets").paginate(ServiceNamespace=SCALING_NAMESPACE):
            for target in page.get("ScalableTargets", []):
                rid, arn = target["ResourceId"], target.get("ScalableTargetARN", "")
                parts = rid.split("/")
                if len(parts) != 4 or parts[0] != "endpoint" or not arn:
                    continue
                try:
                    tags = aas.list_tags_for_resource(ResourceARN=arn).get("Tags", {})
                except AWS_ERRORS as exc:
                    if is_not_found(exc) or error_code(exc) == "ResourceNotFoundException":
                        continue  # deregistered between the list and the tags
                    raise
                if TAG_DEPLOYMENT not in tags:
                    continue
                why = gone(parts[1])
                found.append(Orphan("scalable target", rid, arn, tags[TAG_DEPLOYMENT], tags.get(TAG_ROLE), detail=why))
                for pp in aas.get_paginator("describe_scaling_policies").paginate(
                        ServiceNamespace=SCALING_NAMESPACE, ResourceId=rid):
                    for policy in pp.get("ScalingPolicies", []):
                        found.append(Orphan("scaling policy", policy["PolicyName"], policy["PolicyARN"],
                                            tags[TAG_DEPLOYMENT], tags.get(TAG_ROLE), detail=why, parent=rid))
    except AWS_ERRORS as exc:
        notes.append(f"scalable targets not listed: {translate(exc, 'list Application Auto Scaling targets')}")
    return found


def delete_orphans(ctx: AwsContext, orphans: list[Orphan], *, wait: WaitSettings = WaitSettings(),
                   progress: ProgressCallback | None = None) -> DeleteReport:
    """Alarms, scaling policies and targets first, then endpoints (concurrently, each waited until gone), then
    configs, then models; verified. Then schedule groups and roles."""
    progress = progress or (lambda _: None)
    report = DeleteReport()
    try:
        report.deletions += _delete_scaling_and_alarms(ctx, orphans, progress)
    except AWS_ERRORS as exc:
        report.errors.append(translate(exc, "delete orphaned alarms and autoscaling", retry=DELETE_AGAIN))
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
    from infra.ttl import delete_schedule_group
    from infra.ttl_role import delete_role

    try:
        for o in orphans:
            if o.kind == "schedule group":
                report.deletions.append(Deletion(o.kind, o.name, delete_schedule_group(ctx, o.name)))  # type: ignore[arg-type]
            elif o.kind == "iam role":
                report.deletions.append(Deletion(o.kind, o.name, delete_role(ctx, o.name)))  # type: ignore[arg-type]
    except AWS_ERRORS as exc:
        report.errors.append(translate(exc, "delete orphaned schedule groups and scheduler roles", retry=DELETE_AGAIN))
    return report


def _delete_scaling_and_alarms(ctx: AwsContext, orphans: list[Orphan], progress: ProgressCallback) -> list[Deletion]:
    """Alarms (one of them drives a scaling policy), then policies, then their targets; "already gone" is fine."""
    out: list[Deletion] = []
    alarms = [o.name for o in orphans if o.kind == "alarm"]
    if alarms:
        cw = ctx.client("cloudwatch")
        present: set[str] = set()
        for i in range(0, len(alarms), 100):  # DescribeAlarms and DeleteAlarms take 100 names at most
            batch = alarms[i:i + 100]
            present |= {a["AlarmName"] for a in cw.describe_alarms(AlarmNames=batch).get("MetricAlarms", [])}
            if present & set(batch):
                cw.delete_alarms(AlarmNames=sorted(present & set(batch)))
        out += [Deletion("alarm", a, "deleted" if a in present else "already gone") for a in alarms]
    aas = ctx.client("application-autoscaling")
    for o in orphans:
        if o.kind == "scaling policy":
            outcome = _gone_ok(lambda o=o: aas.delete_scaling_policy(
                PolicyName=o.name, ServiceNamespace=SCALING_NAMESPACE, ResourceId=o.parent, ScalableDimension=DIMENSION))
            out.append(Deletion("scaling policy", o.name, outcome))
    for o in orphans:
        if o.kind == "scalable target":
            outcome = _gone_ok(lambda o=o: aas.deregister_scalable_target(
                ServiceNamespace=SCALING_NAMESPACE, ResourceId=o.name, ScalableDimension=DIMENSION))
            out.append(Deletion("scalable target", o.name, outcome))
    for d in out:
        progress(Progress(None, "delete", d.line()))
    return out


def _gone_ok(call: Any) -> Outcome:
    try:
        call()
    except AWS_ERRORS as exc:
        if is_gone(exc):
            return "already gone"
        raise
    return "deleted"
