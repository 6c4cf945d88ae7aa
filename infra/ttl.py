"""Endpoints that delete themselves: a time to live kept in the account, not on a laptop.

For each endpoint of a deployment an EventBridge Scheduler one-time schedule (`at(...)` in UTC, flexible
window OFF, `ActionAfterCompletion=DELETE`) calls the universal target
`arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint` with `{"EndpointName": ...}` when the TTL ends. The
schedules live in a schedule group named for the deployment (`omni-studio-<deployment id>`, tagged like the
endpoints: schedules themselves take no tags). Scheduler assumes a role to make the call: the one given
(`--scheduler-role-arn`, checked with iam:SimulatePrincipalPolicy before anything is created), or one deploy
creates (`omni-studio-ttl-<deployment id>` under the path /omni-studio/, trusting scheduler.amazonaws.com for
this account only, with an inline policy allowing sagemaker:DeleteEndpoint on exactly these endpoints'
ARNs, tagged) and `delete` removes.

Deleting the endpoint stops the bill. Its endpoint config and model cost nothing and stay until
`python -m infra delete` (or `sweep --delete`) removes them, with the schedule group and the role.

    choice = parse_ttl("8h", now=now)               # TtlChoice; UsageError names what to fix
    ensure_ttl(ctx, state, progress)                # group, role, one schedule per endpoint (idempotent)
    report = extend_deployment(path, "4h")          # infra/extend.py: new at() for every endpoint still there
    left = ttl_status(ctx, state)                   # endpoint -> EndpointTtl (its schedule's time left)
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, error_code, error_message, tag_dict, tagged, translate
from infra.errors import InfraError
from infra.model import PROJECT, TAG_DEPLOYMENT, DeploymentSpec, Role
from infra.state import DeploymentState, utc_now
from infra.ttl_choice import TtlChoice, format_left, iso, parse_iso
from infra.ttl_role import ROLE_PATH, delete_role, ensure_role, role_arn_for

DELETE_ENDPOINT_TARGET = "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
# Scheduler retries a failed call (an endpoint still Creating or Updating cannot be deleted) for a day.
RETRY_POLICY = {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}
# A role that was just created takes a few seconds to be assumable everywhere (IAM is eventually consistent).
ROLE_PROPAGATION_WAITS_S = (2.0, 4.0, 8.0, 16.0, 30.0)
COSTS_NOTHING = ("deleting an endpoint stops its bill; its endpoint config and model cost nothing and stay until "
                 "`python -m infra delete` (or `python -m infra sweep --delete`) removes them")

_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")


# ---------------------------------------------------------------------------------------------------------
# Schedules and their times
def group_name(spec: DeploymentSpec) -> str:
    return f"{PROJECT}-{spec.deployment_id}"



def at_expression(moment: datetime) -> str:
    return f"at({moment.astimezone(UTC):%Y-%m-%dT%H:%M:%S})"


def parse_at(expression: str | None, timezone: str | None = "UTC") -> datetime | None:
    """The time of an `at(...)` expression (UTC zone only: the studio writes UTC); None for anything else."""
    m = _AT.match(expression or "")
    if not m or (timezone or "UTC") not in ("UTC", "Etc/UTC"):
        return None
    return datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC)


# ---------------------------------------------------------------------------------------------------------
# Deploy: plan, then create (group, role, schedules)
def plan_ttl(state: DeploymentState, choice: TtlChoice, role_arn: str | None = None) -> None:
    """Record what the TTL will be in the state (before anything is created, so delete finds it all). The
    role: the one given now, else the one recorded before, else the role deploy will create."""
    old = state.ttl or {}
    with state.lock:
        if not choice.enabled:
            state.ttl = {"enabled": False, "expires_at": None, "set_at": utc_now(), "schedule_group": None,
                         "schedules": {}, "role_arn": None, "role_created": False}
            return
        if role_arn:
            role, created = role_arn, False
        elif old.get("role_arn"):
            role, created = old["role_arn"], bool(old.get("role_created"))
        else:
            role, created = role_arn_for(state.spec), False  # created by ensure_ttl
        state.ttl = {"enabled": True, "expires_at": iso(choice.expires_at), "set_at": utc_now(),  # type: ignore[arg-type]
                     "schedule_group": old.get("schedule_group") or group_name(state.spec),
                     "schedules": dict(old.get("schedules") or {}), "role_arn": role, "role_created": created}


ProgressText = Callable[[str], None]


def ensure_ttl(ctx: AwsContext, state: DeploymentState, progress: ProgressText = lambda _: None,
               roles: Iterable[Role] | None = None) -> None:
    """Create (or update) the schedule group, the role when deploy owns it, and one schedule per endpoint at
    the recorded expiry. Idempotent: run again by resume and extend. Saves the state after each step."""
    ttl = state.ttl
    if not ttl or not ttl.get("enabled"):
        return
    spec = state.spec
    scheduler = ctx.client("scheduler")
    group = ttl["schedule_group"]
    expires = parse_iso(ttl["expires_at"])
    try:
        try:
            scheduler.get_schedule_group(Name=group)
        except AWS_ERRORS as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise
            try:
                scheduler.create_schedule_group(Name=group, Tags=spec.tags(None))
                progress(f"schedule group {group} created")
            except AWS_ERRORS as exc2:
                if error_code(exc2) != "ConflictException":
                    raise
        role_arn = ttl["role_arn"]
        if role_arn == role_arn_for(spec) or ttl.get("role_created"):
            role_arn = ensure_role(ctx, state, progress)
        wanted = [e for e in spec.endpoints if roles is None or e.role in set(roles)]
        for ep in wanted:
            name = ep.endpoint_name
            _put_schedule(scheduler, group, name, ep.endpoint_name, expires, role_arn, spec, progress)
            with state.lock:
                ttl.setdefault("schedules", {})[ep.role] = name
            state.save()
    except InfraError:
        raise
    except AWS_ERRORS as exc:
        raise translate(exc, "set up the endpoints' TTL (EventBridge Scheduler)", resumable=True) from None
    progress(f"TTL: {len(wanted)} endpoint(s) delete themselves at {iso(expires)} "
             f"(in {format_left((expires - datetime.now(UTC)).total_seconds())})")


def schedule_request(group: str, name: str, endpoint: str, expires: datetime, role_arn: str,
                     spec: DeploymentSpec) -> dict[str, Any]:
    return {
        "Name": name, "GroupName": group, "ScheduleExpression": at_expression(expires),
        "ScheduleExpressionTimezone": "UTC", "FlexibleTimeWindow": {"Mode": "OFF"}, "State": "ENABLED",
        "ActionAfterCompletion": "DELETE",
        "Description": f"{PROJECT}: delete endpoint {endpoint} of deployment {spec.deployment_id} at its TTL",
        "Target": {"Arn": DELETE_ENDPOINT_TARGET, "RoleArn": role_arn, "Input": json.dumps({"EndpointName": endpoint}),
                   "RetryPolicy": dict(RETRY_POLICY)},
    }


def _put_schedule(scheduler: Any, group: str, name: str, endpoint: str, expires: datetime, role_arn: str,
                  spec: DeploymentSpec, progress: ProgressText) -> None:
    request = schedule_request(group, name, endpoint, expires, role_arn, spec)
    for wait in (*ROLE_PROPAGATION_WAITS_S, None):
        try:
            try:
                scheduler.create_schedule(**request)
                progress(f"schedule {group}/{name}: deletes {endpoint} at {iso(expires)}")
            except AWS_ERRORS as exc:
                if error_code(exc) != "ConflictException":
                    raise
                scheduler.update_schedule(**request)
                progress(f"schedule {group}/{name}: now deletes {endpoint} at {iso(expires)}")
            return
        except AWS_ERRORS as exc:
            # A role created a moment ago may not be assumable yet: Scheduler says so; wait and try again.
            if wait is None or error_code(exc) != "ValidationException" or "role" not in error_message(exc).lower():
                raise
            time.sleep(wait)


# ---------------------------------------------------------------------------------------------------------
# Reading the schedules back
@dataclass(frozen=True)
class EndpointTtl:
    role: Role
    endpoint_name: str
    expires_at: datetime | None  # the schedule's at() time; None: no schedule (none set, fired or deleted)
    state: str  # "scheduled" | "no schedule" | "no TTL" | "unknown"
    detail: str = ""

    def seconds_left(self, now: datetime | None = None) -> float | None:
        if self.expires_at is None:
            return None
        return (self.expires_at - (now or datetime.now(UTC))).total_seconds()

    def label(self, now: datetime | None = None) -> str:
        if self.state == "scheduled" and self.expires_at is not None:
            left = self.seconds_left(now) or 0.0
            return f"deletes itself in {format_left(left)}" if left > 0 else "deletes itself now"
        if self.state == "no TTL":
            return "no TTL"
        return self.detail or self.state

    def to_dict(self) -> dict[str, Any]:
        left = self.seconds_left()
        return {"role": self.role, "endpoint_name": self.endpoint_name, "state": self.state,
                "expires_at": None if self.expires_at is None else iso(self.expires_at),
                "seconds_left": None if left is None else round(left, 1), "label": self.label(), "detail": self.detail}


def ttl_status(ctx: AwsContext, state: DeploymentState) -> dict[Role, EndpointTtl]:
    """Each endpoint's schedule as EventBridge Scheduler has it now (one GetSchedule per endpoint)."""
    ttl = state.ttl
    out: dict[Role, EndpointTtl] = {}
    for role, rec in state.endpoints.items():
        name = rec.endpoint.name
        if not ttl or not ttl.get("enabled"):
            out[role] = EndpointTtl(role, name, None, "no TTL", "no TTL" if ttl else "no TTL (deployed before TTLs)")
            continue
        schedule = (ttl.get("schedules") or {}).get(role) or name
        try:
            got = ctx.client("scheduler").get_schedule(Name=schedule, GroupName=ttl["schedule_group"])
        except AWS_ERRORS as exc:
            if error_code(exc) == "ResourceNotFoundException":
                out[role] = EndpointTtl(role, name, None, "no schedule", "its schedule is gone (it ran, or was deleted)")
            else:
                out[role] = EndpointTtl(role, name, None, "unknown", f"TTL unknown ({error_code(exc) or 'error'})")
            continue
        at = parse_at(got.get("ScheduleExpression"), got.get("ScheduleExpressionTimezone"))
        out[role] = EndpointTtl(role, name, at, "scheduled" if at else "unknown",
                                "" if at else f"schedule {got.get('ScheduleExpression')!r} is not the studio's")
    return out


def fleet_ttls(ctx: AwsContext, deployment_id: str, endpoint_names: Iterable[str]) -> dict[str, datetime | None]:
    """For the cost banner: endpoint name -> when its schedule deletes it (None: no schedule). Reads the
    deployment's schedule group; {} when Scheduler cannot be read."""
    scheduler = ctx.client("scheduler")
    group = f"{PROJECT}-{deployment_id}"
    out: dict[str, datetime | None] = {}
    try:
        for name in endpoint_names:
            try:
                got = scheduler.get_schedule(Name=name, GroupName=group)
                out[name] = parse_at(got.get("ScheduleExpression"), got.get("ScheduleExpressionTimezone"))
            except AWS_ERRORS as exc:
                if error_code(exc) != "ResourceNotFoundException":
                    raise
                out[name] = None
    except AWS_ERRORS:
        return {}
    return out


# ---------------------------------------------------------------------------------------------------------
# delete and sweep
@dataclass(frozen=True)
class Removal:
    kind: str  # "schedule" | "schedule group" | "iam role"
    name: str
    outcome: str  # "deleted" | "already gone"


def remove_ttl(ctx: AwsContext, state: DeploymentState, roles: Iterable[Role] | None = None) -> list[Removal]:
    """Delete the schedules of `roles` (default: all, then the group and the role deploy created)."""
    ttl = state.ttl
    if not ttl or not ttl.get("enabled") and not ttl.get("schedule_group"):
        return []
    chosen = list(state.endpoints) if roles is None else list(roles)
    everything = set(chosen) >= set(state.endpoints)
    scheduler = ctx.client("scheduler")
    group = ttl.get("schedule_group") or group_name(state.spec)
    out: list[Removal] = []
    for role in chosen:
        name = (ttl.get("schedules") or {}).get(role) or state.endpoints[role].endpoint.name
        out.append(Removal("schedule", f"{group}/{name}", _gone_ok(lambda: scheduler.delete_schedule(Name=name, GroupName=group))))
        with state.lock:
            (ttl.get("schedules") or {}).pop(role, None)
    if everything:
        out.append(Removal("schedule group", group, _gone_ok(lambda: scheduler.delete_schedule_group(Name=group))))
        if ttl.get("role_created") or ttl.get("role_arn") == role_arn_for(state.spec):
            # deploy's own role (also when a crash came between creating it and recording that)
            name = (ttl.get("role_arn") or role_arn_for(state.spec)).rsplit("/", 1)[-1]
            out.append(Removal("iam role", name, delete_role(ctx, name)))
    return out


def _gone_ok(call: Callable[[], Any]) -> str:
    try:
        call()
        return "deleted"
    except AWS_ERRORS as exc:
        if error_code(exc) in ("ResourceNotFoundException", "NoSuchEntity"):
            return "already gone"
        raise


def delete_schedule_group(ctx: AwsContext, name: str) -> str:
    """The group and every schedule in it; "already gone" is fine."""
    scheduler = ctx.client("scheduler")
    return _gone_ok(lambda: scheduler.delete_schedule_group(Name=name))


@dataclass(frozen=True)
class TtlOrphan:
    kind: str  # "schedule group" | "iam role"
    name: str
    arn: str
    deployment_id: str


def find_ttl_resources(ctx: AwsContext) -> tuple[list[TtlOrphan], list[str]]:
    """Every studio-tagged schedule group and scheduler role in the region/account, with notes for what
    could not be listed (a missing permission is said, not fatal)."""
    found: list[TtlOrphan] = []
    notes: list[str] = []
    scheduler = ctx.client("scheduler")
    try:
        for g, tags in tagged(scheduler.get_paginator("list_schedule_groups").paginate(NamePrefix=f"{PROJECT}-"),
                              "ScheduleGroups", TAG_DEPLOYMENT,
                              lambda g: tag_dict(scheduler.list_tags_for_resource(ResourceArn=g["Arn"]).get("Tags", []))):
            found.append(TtlOrphan("schedule group", g["Name"], g["Arn"], tags[TAG_DEPLOYMENT]))
    except AWS_ERRORS as exc:
        notes.append(f"schedule groups not listed: {translate(exc, 'list schedule groups')}")
    iam = ctx.client("iam")
    try:
        for r, tags in tagged(iam.get_paginator("list_roles").paginate(PathPrefix=ROLE_PATH), "Roles", TAG_DEPLOYMENT,
                              lambda r: tag_dict(iam.list_role_tags(RoleName=r["RoleName"]).get("Tags", []))):
            found.append(TtlOrphan("iam role", r["RoleName"], r["Arn"], tags[TAG_DEPLOYMENT]))
    except AWS_ERRORS as exc:
        notes.append(f"scheduler roles not listed: {translate(exc, 'list IAM roles')}")
    return found, notes
