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
    report = extend_deployment(path, "4h")          # new at() for every endpoint still there
    left = ttl_status(ctx, state)                   # endpoint -> EndpointTtl (its schedule's time left)
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, error_code, error_message, tag_dict, tagged, translate
from infra.errors import AccessDenied, InfraError, StateError, UsageError
from infra.lock import locked
from infra.model import PROJECT, TAG_DEPLOYMENT, DeploymentSpec, Role
from infra.state import DeploymentState, utc_now
from services.endpoint_view import describe_endpoint

MAX_TTL_WITHOUT_YES = timedelta(days=7)
MAX_TTL = timedelta(days=365)  # even with --yes: past a year it is a typo, not a plan (and dates overflow)
SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"
DELETE_ENDPOINT_TARGET = "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
ROLE_PATH = f"/{PROJECT}/"
POLICY_NAME = f"{PROJECT}-delete-endpoints"
# Scheduler retries a failed call (an endpoint still Creating or Updating cannot be deleted) for a day.
RETRY_POLICY = {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}
# A role that was just created takes a few seconds to be assumable everywhere (IAM is eventually consistent).
ROLE_PROPAGATION_WAITS_S = (2.0, 4.0, 8.0, 16.0, 30.0)
COSTS_NOTHING = ("deleting an endpoint stops its bill; its endpoint config and model cost nothing and stay until "
                 "`python -m infra delete` (or `python -m infra sweep --delete`) removes them")

_UNITS = {"d": 86400, "day": 86400, "days": 86400, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
          "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60, "s": 1, "sec": 1, "secs": 1, "second": 1,
          "seconds": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_DURATION = re.compile(r"^(\s*\d+(?:\.\d+)?\s*[a-z]+)+\s*$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")


# ---------------------------------------------------------------------------------------------------------
# Reading --ttl
@dataclass(frozen=True)
class TtlChoice:
    """What --ttl asked for: an end time (UTC), or none (--no-ttl)."""

    expires_at: datetime | None
    given: str | None = None

    @property
    def enabled(self) -> bool:
        return self.expires_at is not None

    def describe(self, now: datetime | None = None) -> str:
        if self.expires_at is None:
            return "no TTL"
        now = now or datetime.now(UTC)
        return f"{iso(self.expires_at)} (in {format_left((self.expires_at - now).total_seconds())})"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def format_left(seconds: float | None) -> str:
    """`2 h 10 min`, `45 min`, `3 d 4 h`, `under a minute`; `—` for None."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return "under a minute"
    minutes = int(seconds // 60)
    days, rem = divmod(minutes, 24 * 60)
    hours, mins = divmod(rem, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {mins} min" if mins else f"{hours} h"
    return f"{mins} min"


def parse_ttl(value: str | None, *, now: datetime | None = None, yes: bool = False, option: str = "--ttl") -> TtlChoice:
    """`8h`, `90m`, `1h30m`, `2d` (from now) or an ISO time (`2026-05-01T18:00Z`; without a zone: this machine's
    local time). None is no TTL. UsageError for what cannot be read, zero, a time in the past, more than
    7 days without `yes` (a forgotten GPU endpoint bills for all of it), or more than MAX_TTL."""
    if value is None:
        return TtlChoice(None)
    now = (now or datetime.now(UTC)).astimezone(UTC)
    text = value.strip().lower()
    examples = "e.g. 8h, 90m, 1h30m, 2d, or a time such as 2026-05-01T18:00Z"

    def too_long() -> UsageError:
        shown = str(value) if len(str(value)) <= 40 else str(value)[:30] + "…"
        return UsageError(f"{option} {shown!r} is too long: a time to live is from 1 second to {MAX_TTL.days} days "
                          f"(over {MAX_TTL_WITHOUT_YES.days} days with --yes), {examples}; --no-ttl keeps the endpoints "
                          "until `python -m infra delete`")

    if not text:
        raise UsageError(f"{option} is empty: give a time to live, {examples} (or --no-ttl to keep the endpoints)")
    if _DURATION.match(text):
        seconds = 0.0
        for number, unit in _PART.findall(text):
            if unit not in _UNITS:
                raise UsageError(f"{option} {value!r}: unknown unit {unit!r}; use d, h, m or s ({examples})")
            seconds += float(number) * _UNITS[unit]
        if not seconds <= MAX_TTL.total_seconds():  # also inf, from a number too long for a float
            raise too_long()
        if seconds <= 0:
            raise UsageError(f"{option} {value!r} is zero: the endpoints would be deleted as they are created. Give a "
                             f"time to live ({examples}), or run `python -m infra delete` to remove them now")
        expires = now + timedelta(seconds=math.ceil(seconds))
    elif re.fullmatch(r"\s*\d+(\.\d+)?\s*", text):
        raise UsageError(f"{option} {value!r} has no unit: write {value.strip()}h for hours or {value.strip()}m for "
                         "minutes")
    else:
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise UsageError(f"{option} {value!r} is neither a duration nor a time: {examples} (or --no-ttl to keep "
                             "the endpoints until you delete them)") from None
        try:
            expires = (moment if moment.tzinfo else moment.astimezone()).astimezone(UTC)
        except (OverflowError, ValueError):  # year 9999 in a zone west of UTC is past datetime's range
            raise too_long() from None
        if expires - now > MAX_TTL:
            raise too_long()
        if expires <= now:
            raise UsageError(f"{option} {value!r} is in the past ({iso(expires)}, {format_left((now - expires).total_seconds())} "
                             f"ago; now is {iso(now)}): give a later time or a duration such as 8h")
    expires = expires.replace(microsecond=0) + (timedelta(seconds=1) if expires.microsecond else timedelta())
    if expires - now > MAX_TTL_WITHOUT_YES and not yes:
        raise UsageError(f"{option} {value!r} keeps the endpoints for {format_left((expires - now).total_seconds())} "
                         f"(until {iso(expires)}); a TTL over {MAX_TTL_WITHOUT_YES.days} days asks for confirmation — "
                         "pass --yes as well, or a shorter --ttl (`python -m infra extend` can move it later)")
    return TtlChoice(expires, value)


# ---------------------------------------------------------------------------------------------------------
# Names and policies
def group_name(spec: DeploymentSpec) -> str:
    return f"{PROJECT}-{spec.deployment_id}"


def role_name(spec: DeploymentSpec) -> str:
    return f"{PROJECT}-ttl-{spec.deployment_id}"


def partition(region: str) -> str:
    return "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"


def endpoint_arn(spec: DeploymentSpec, name: str) -> str:
    """SageMaker ARNs carry the resource name in lower case."""
    return f"arn:{partition(spec.region)}:sagemaker:{spec.region}:{spec.account}:endpoint/{name.lower()}"


def role_arn_for(spec: DeploymentSpec) -> str:
    return f"arn:{partition(spec.region)}:iam::{spec.account}:role{ROLE_PATH}{role_name(spec)}"


def delete_policy(endpoint_arns: Iterable[str]) -> dict[str, Any]:
    """The permission Scheduler needs: DeleteEndpoint on exactly these endpoints."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "DeleteTheStudioEndpointsAtTheirTTL", "Effect": "Allow", "Action": "sagemaker:DeleteEndpoint",
        "Resource": sorted(set(endpoint_arns))}]}


def trust_policy(account: str) -> dict[str, Any]:
    """Scheduler may assume the role, for schedules of this account only (the confused-deputy guard)."""
    return {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": SCHEDULER_PRINCIPAL}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"aws:SourceAccount": account}}}]}


def at_expression(moment: datetime) -> str:
    return f"at({moment.astimezone(UTC):%Y-%m-%dT%H:%M:%S})"


def parse_at(expression: str | None, timezone: str | None = "UTC") -> datetime | None:
    """The time of an `at(...)` expression (UTC zone only: the studio writes UTC); None for anything else."""
    m = _AT.match(expression or "")
    if not m or (timezone or "UTC") not in ("UTC", "Etc/UTC"):
        return None
    return datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC)


# ---------------------------------------------------------------------------------------------------------
# The role given with --scheduler-role-arn
def _document(value: Any) -> dict[str, Any]:
    """A policy document as IAM returns it: a dict from boto3, or URL-encoded JSON text."""
    if isinstance(value, dict):
        return value
    return json.loads(urllib.parse.unquote(str(value)))


def _statements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    items = doc.get("Statement", [])
    return items if isinstance(items, list) else [items]


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def trusts_scheduler(doc: dict[str, Any]) -> bool:
    for st in _statements(doc):
        services = _as_list((st.get("Principal") or {}).get("Service")) if isinstance(st.get("Principal"), dict) else []
        actions = [a.lower() for a in _as_list(st.get("Action"))]
        if st.get("Effect") == "Allow" and SCHEDULER_PRINCIPAL in services and (
                {"sts:assumerole", "sts:*", "*"} & set(actions)):
            return True
    return False


def check_scheduler_role(ctx: AwsContext, spec: DeploymentSpec, role_arn: str,
                         progress: Callable[[str], None] = lambda _: None) -> None:
    """The role given for the schedules: it exists, trusts EventBridge Scheduler, and may call
    sagemaker:DeleteEndpoint on every endpoint of the deployment (iam:SimulatePrincipalPolicy). Raises
    UsageError / AccessDenied naming the statement or policy to add; a check the caller may not run is said
    through `progress` and skipped (the schedules would then fail at their time)."""
    if not re.match(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$", role_arn):
        raise UsageError(f"--scheduler-role-arn {role_arn!r} is not an IAM role ARN (arn:aws:iam::123456789012:role/Name)")
    iam = ctx.client("iam")
    name = role_arn.rsplit("/", 1)[-1]
    arns = [endpoint_arn(spec, e.endpoint_name) for e in spec.endpoints]
    policy = json.dumps(delete_policy(arns), indent=2)
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except AWS_ERRORS as exc:
        if error_code(exc) == "NoSuchEntity":
            raise UsageError(f"--scheduler-role-arn {role_arn}: there is no such role in account {spec.account}. Create "
                             "it (trusting scheduler.amazonaws.com) or leave the option out: deploy then creates one "
                             "with exactly the permission it needs") from None
        if error_code(exc) in ("AccessDenied", "AccessDeniedException"):
            progress(f"could not read the scheduler role {name} (iam:GetRole is denied): its trust and permissions "
                     "are not checked; if it lacks them the endpoints will NOT delete themselves")
            return
        raise translate(exc, f"read the scheduler role {name}") from None
    if not trusts_scheduler(_document(role.get("AssumeRolePolicyDocument") or {})):
        statement = json.dumps(trust_policy(spec.account)["Statement"][0], indent=2)
        raise UsageError(f"the scheduler role {role_arn} does not let EventBridge Scheduler assume it: add this "
                         f"statement to its trust relationships (IAM → Roles → {name} → Trust relationships):\n"
                         f"{statement}")
    try:
        results: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"PolicySourceArn": role_arn, "ActionNames": ["sagemaker:DeleteEndpoint"],
                                  "ResourceArns": arns}
        while True:
            page = iam.simulate_principal_policy(**kwargs)
            results += page.get("EvaluationResults", [])
            if not page.get("IsTruncated"):
                break
            kwargs["Marker"] = page["Marker"]
    except AWS_ERRORS as exc:
        if error_code(exc) in ("AccessDenied", "AccessDeniedException"):
            progress(f"could not check what the scheduler role {name} may do (iam:SimulatePrincipalPolicy is denied "
                     "to you); if it lacks sagemaker:DeleteEndpoint the endpoints will NOT delete themselves")
            return
        raise translate(exc, f"check the permissions of the scheduler role {name}") from None
    denied = sorted(r.get("EvalResourceName", "?") for r in results if r.get("EvalDecision") != "allowed")
    if denied:
        raise AccessDenied(f"the scheduler role {role_arn} may not delete {', '.join(denied)} (sagemaker:DeleteEndpoint "
                           f"is not allowed), so these endpoints would NOT delete themselves. Nothing was created. "
                           f"Add this policy to the role (IAM → Roles → {name} → Add permissions → Create inline "
                           f"policy), or leave --scheduler-role-arn out and deploy creates a role with it:\n{policy}")
    progress(f"scheduler role {name}: trusts scheduler.amazonaws.com and may delete the {len(arns)} endpoint(s)")


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
            role_arn = _ensure_role(ctx, state, progress)
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


def _ensure_role(ctx: AwsContext, state: DeploymentState, progress: ProgressText) -> str:
    spec = state.spec
    iam = ctx.client("iam")
    name = role_name(spec)
    try:
        arn = iam.create_role(RoleName=name, Path=ROLE_PATH, AssumeRolePolicyDocument=json.dumps(trust_policy(spec.account)),
                              Description=f"EventBridge Scheduler deletes the endpoints of studio deployment "
                                          f"{spec.deployment_id} at their TTL", Tags=spec.tags(None))["Role"]["Arn"]
        progress(f"scheduler role {name} created (trusts scheduler.amazonaws.com; may delete only these endpoints)")
    except AWS_ERRORS as exc:
        if error_code(exc) != "EntityAlreadyExists":
            raise
        arn = iam.get_role(RoleName=name)["Role"]["Arn"]
    with state.lock:
        state.ttl["role_arn"], state.ttl["role_created"] = arn, True  # type: ignore[index]
    state.save()
    arns = [endpoint_arn(spec, e.endpoint_name) for e in spec.endpoints]
    iam.put_role_policy(RoleName=name, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(delete_policy(arns)))
    return arn


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
# extend
@dataclass
class ExtendReport:
    deployment_id: str
    expires_at: datetime
    extended: list[str] = field(default_factory=list)  # endpoint names whose schedule now says expires_at
    gone: list[str] = field(default_factory=list)  # endpoints already deleted (by their TTL or by hand)

    def to_dict(self) -> dict[str, Any]:
        return {"deployment_id": self.deployment_id, "expires_at": iso(self.expires_at),
                "seconds_left": round((self.expires_at - datetime.now(UTC)).total_seconds(), 1),
                "extended": self.extended, "gone": self.gone}


def _endpoint_status(ctx: AwsContext, name: str) -> str | None:
    """DescribeEndpoint's status, None when the endpoint does not exist."""
    try:
        view = describe_endpoint(ctx.sagemaker, name)
    except AWS_ERRORS as exc:
        raise translate(exc, f"describe endpoint {name}") from None
    return None if view.gone else view.status


@locked("python -m infra extend")
def extend_deployment(state_file: Path, ttl: str, *, region: str | None = None, profile: str | None = None,
                      yes: bool = False, scheduler_role_arn: str | None = None,
                      progress: ProgressText = lambda _: None) -> ExtendReport:
    """Move every remaining endpoint's deletion to now + `ttl` (or the time given). A deployment whose
    endpoints are all gone has expired: StateError saying so. A --no-ttl deployment gets its TTL now."""
    choice = parse_ttl(ttl, yes=yes)  # named before the state file or any AWS call
    state = DeploymentState.load(Path(state_file))
    if region and region != state.region:
        raise StateError(f"{state_file} records a deployment in {state.region}, not {region}: leave --region out")
    ctx = AwsContext(state.region, profile)
    ctx.identity()
    report = ExtendReport(state.deployment_id, choice.expires_at)  # type: ignore[arg-type]
    alive: list[Role] = []
    for role, rec in state.endpoints.items():
        status = _endpoint_status(ctx, rec.endpoint.name)
        if status is None or status == "Deleting":
            report.gone.append(rec.endpoint.name)
        else:
            alive.append(role)
    if not alive:
        when = (state.ttl or {}).get("expires_at")
        raise StateError(f"deployment {state.deployment_id} has expired: its endpoints are gone"
                         + (f" (its TTL ended at {when})" if when else "") + ", so there is nothing to extend. "
                         "`python -m infra delete` removes what is left (configs, models, schedules: they cost "
                         "nothing); `python -m infra deploy` starts a new deployment")
    if scheduler_role_arn:
        check_scheduler_role(ctx, state.spec, scheduler_role_arn, progress)
    plan_ttl(state, choice, scheduler_role_arn)
    state.save()
    ensure_ttl(ctx, state, progress, roles=alive)
    report.extended = [state.endpoints[r].endpoint.name for r in alive]
    return report


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


def delete_role(ctx: AwsContext, name: str) -> str:
    """Inline policies, attached policies, then the role; "already gone" is fine."""
    iam = ctx.client("iam")
    try:
        for policy in iam.list_role_policies(RoleName=name).get("PolicyNames", []):
            iam.delete_role_policy(RoleName=name, PolicyName=policy)
        for attached in iam.list_attached_role_policies(RoleName=name).get("AttachedPolicies", []):
            iam.detach_role_policy(RoleName=name, PolicyArn=attached["PolicyArn"])
    except AWS_ERRORS as exc:
        if error_code(exc) == "NoSuchEntity":
            return "already gone"
        raise
    return _gone_ok(lambda: iam.delete_role(RoleName=name))


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
