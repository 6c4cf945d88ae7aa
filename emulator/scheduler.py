"""EventBridge Scheduler: moto stores the schedules; the emulator fills its gaps and makes them fire.

Where moto 5.2 differs from the real API (each filled here, before or after passing the call on):
- CreateScheduleGroup on a name that exists: moto silently replaces the group (losing its schedules); the
  real API answers ConflictException.
- DeleteScheduleGroup / CreateSchedule with a group that does not exist: moto fails with a 500 (KeyError);
  the real API answers ResourceNotFoundException.
- ScheduleExpression: moto takes any text (`at(garbage)`); the real API accepts only at(yyyy-mm-ddThh:mm:ss),
  rate(n unit) and cron(6 fields) — anything else is a ValidationException.
- UpdateSchedule: moto keeps the old ActionAfterCompletion; the real call replaces every setting (NONE when
  left out). The emulator keeps what the last create/update said.
- Nothing fires in moto. Here a one-time `at()` schedule whose time has come on the emulator's clock invokes
  its target: the universal target `arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint` deletes the
  endpoint named in `Input`, as the schedule's role (which must trust scheduler.amazonaws.com and allow
  sagemaker:DeleteEndpoint on it, emulator/iam.py) — or fails as AccessDenied. An endpoint that cannot be
  deleted yet (Creating, Updating) is retried on later ticks until the RetryPolicy's maximum event age; then,
  with ActionAfterCompletion=DELETE, the schedule is deleted. rate() and cron() schedules never fire here.

The clock is `Lifecycle.clock` (real time plus an offset the tests move with POST /_emulator/clock).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from starlette.requests import Request
from starlette.responses import Response

from emulator import forward, iam
from emulator.clock import Clock
from emulator.errors import AwsError, rest_json_response

# The Emulator (emulator/core.py) is typed loosely: core creates the lifecycle, so importing it back would
# close an import cycle (tests/test_layers.py).
Emulator = Any

log = logging.getLogger("emulator")

DELETE_ENDPOINT_TARGET = "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
PRINCIPAL = "scheduler.amazonaws.com"
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_RATE = re.compile(r"^rate\(\s*[1-9]\d*\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON = re.compile(r"^cron\(\s*(\S+\s+){5}\S+\s*\)$")
PATHS = ("/schedules", "/schedule-groups", "/tags/")


def check_expression(expression: str | None) -> None:
    expr = (expression or "").strip()
    if _AT.match(expr):
        try:
            datetime.fromisoformat(_AT.match(expr).group(1))  # type: ignore[union-attr]
            return
        except ValueError:
            pass
    elif _RATE.match(expr) or _CRON.match(expr):
        return
    raise AwsError("ValidationException", f"Invalid Schedule Expression {expression}.")


def at_time(expression: str, timezone: str | None) -> float | None:
    m = _AT.match(expression or "")
    if not m:
        return None
    try:
        zone = ZoneInfo(timezone or "UTC")
    except Exception:
        zone = ZoneInfo("UTC")
    return datetime.fromisoformat(m.group(1)).replace(tzinfo=zone).timestamp()


@dataclass
class Entry:
    group: str
    name: str
    expression: str
    timezone: str
    target: dict[str, Any]
    after_completion: str
    state: str
    max_age_s: float
    attempts: int = 0
    last_error: str | None = None


@dataclass
class Schedules:
    emu: Emulator
    clock: Clock
    moto: forward.MotoClients
    index: dict[tuple[str, str], Entry] = field(default_factory=dict)
    invocations: list[dict[str, Any]] = field(default_factory=list)  # what fired, for /_emulator/state

    def reset(self) -> None:
        self.index.clear()
        self.invocations.clear()

    # -- the API front ---------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        try:
            self.emu.authorize(request.headers)
            body = await request.body()
            path = request.url.path
            params = json.loads(body) if body else {}
            if not isinstance(params, dict):
                raise AwsError("ValidationException", "The request body must be a JSON object")
            parts = path.strip("/").split("/")
            if parts[0] == "schedules" and len(parts) == 2:
                name = parts[1]
                group = params.get("GroupName") or request.query_params.get("groupName") or "default"
                if request.method in ("POST", "PUT"):
                    check_expression(params.get("ScheduleExpression"))
                    await self._require_group(group)
                upstream = await forward.forward(self.emu, request, body, "scheduler")
                if upstream.status_code < 300:
                    if request.method in ("POST", "PUT"):
                        self._remember(group, name, params)
                    elif request.method == "DELETE":
                        self.index.pop((group, name), None)
                return forward.relay(upstream)
            if parts[0] == "schedule-groups" and len(parts) == 2:
                group = parts[1]
                if request.method == "POST" and await self._group_exists(group):
                    raise AwsError("ConflictException", f"Schedule group {group} already exists.", 409)
                if request.method == "DELETE":
                    await self._require_group(group)
                upstream = await forward.forward(self.emu, request, body, "scheduler")
                if upstream.status_code < 300 and request.method == "DELETE":
                    for key in [k for k in self.index if k[0] == group]:
                        del self.index[key]
                return forward.relay(upstream)
            return forward.relay(await forward.forward(self.emu, request, body, "scheduler"))
        except AwsError as err:
            return rest_json_response(err)
        except json.JSONDecodeError as exc:
            return rest_json_response(AwsError("ValidationException", f"The request body is not valid JSON: {exc}"))

    async def _group_exists(self, group: str) -> bool:
        if group == "default":
            return True
        try:
            await self.moto.call("scheduler", "get_schedule_group", Name=group)
            return True
        except Exception as exc:  # botocore ResourceNotFoundException
            if "ResourceNotFound" in type(exc).__name__ or "ResourceNotFound" in str(exc):
                return False
            raise

    async def _require_group(self, group: str) -> None:
        if not await self._group_exists(group):
            raise AwsError("ResourceNotFoundException", f"Schedule group {group} does not exist.", 404)

    def _remember(self, group: str, name: str, p: dict[str, Any]) -> None:
        target = dict(p.get("Target") or {})
        retry = target.get("RetryPolicy") or {}
        self.index[(group, name)] = Entry(
            group, name, p.get("ScheduleExpression", ""), p.get("ScheduleExpressionTimezone") or "UTC", target,
            p.get("ActionAfterCompletion") or "NONE", p.get("State") or "ENABLED",
            float(retry.get("MaximumEventAgeInSeconds", 86400)))

    # -- firing -------------------------------------------------------------------------------------
    async def tick(self, now: float) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for key, e in list(self.index.items()):
            due = at_time(e.expression, e.timezone)
            if e.state != "ENABLED" or due is None or due > now:
                continue
            outcome, retry = await self._invoke(e)
            e.attempts += 1
            if retry and now - due < e.max_age_s:
                if outcome != e.last_error:
                    log.info("schedule %s/%s: %s; retrying", e.group, e.name, outcome)
                e.last_error = outcome
                continue
            event = {"kind": "schedule", "schedule": f"{e.group}/{e.name}", "due": _iso(due), "ran_at": _iso(now),
                     "target": e.target.get("Arn"), "outcome": outcome, "attempts": e.attempts}
            self.invocations.append(event)
            events.append(event)
            log.info("schedule %s/%s fired: %s", e.group, e.name, outcome)
            self.index.pop(key, None)
            if e.after_completion == "DELETE":
                try:
                    await self.moto.call("scheduler", "delete_schedule", Name=e.name, GroupName=e.group)
                except Exception as exc:
                    log.warning("could not delete schedule %s/%s after it ran: %s", e.group, e.name, exc)
        return events

    async def _invoke(self, e: Entry) -> tuple[str, bool]:
        """(what happened, whether to retry)."""
        if e.target.get("Arn") != DELETE_ENDPOINT_TARGET:
            return f"failed: the emulator's Scheduler invokes only {DELETE_ENDPOINT_TARGET}", False
        try:
            name = json.loads(e.target.get("Input") or "{}")["EndpointName"]
        except (ValueError, KeyError, TypeError):
            return "failed: ValidationException: Input must be {\"EndpointName\": ...}", False
        reg = self.emu.registry
        resource = reg.arn("endpoint", name)
        denied = await asyncio.to_thread(iam.check_call, self.moto, e.target.get("RoleArn", ""), PRINCIPAL,
                                         "sagemaker:DeleteEndpoint", resource)
        if denied:
            return f"failed: {denied}", False
        try:
            reg.delete_endpoint(name)
        except AwsError as err:
            if "in-progress" in err.message:
                return f"not yet: {err.message}", True
            return f"failed: {err.code}: {err.message}", False
        return f"deleted endpoint {name}", False


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
