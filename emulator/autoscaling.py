"""Application Auto Scaling for the emulator's endpoints: moto stores targets and policies (CloudWatch alarms
too); the emulator fills moto's gaps and moves the instance counts of asynchronous endpoints.

Where moto 5.2 differs from the real API (filled here):
- RegisterScalableTarget for `endpoint/<name>/variant/<variant>`: moto registers anything; the real API
  refuses an endpoint or variant that does not exist (ValidationException).
- PutScalingPolicy on a resource with no scalable target: moto accepts it; the real API answers
  ObjectNotFoundException.
- DeregisterScalableTarget: moto leaves the target's policies behind; the real API deletes them with it.
- Tags of scalable targets: moto drops RegisterScalableTarget's `Tags` and has no ListTagsForResource; the
  emulator keeps them per target and answers ListTagsForResource by the target's ARN (what `sweep` reads).
- Target tracking creates no CloudWatch alarms for SageMaker in moto (the real service makes its own
  TargetTracking-* alarms); nothing reads them here, so nothing is lost.

What scales (asynchronous endpoints only; realtime endpoints keep their instances here), all on the
emulator's clock (`Lifecycle.clock`):
- scale in: with a target-tracking policy on ApproximateBacklogSizePerInstance and no job waiting or running
  for `autoscaling.scale_in_after_s` (default 900 s: the policy's low alarm needs 15 one-minute datapoints),
  the endpoint goes Updating and, `scale_in_s` later, runs MinCapacity instances (0 when it scales to zero).
- scale out from zero: a job arriving while 0 instances run waits in the queue; a CloudWatch alarm on
  HasBacklogWithoutCapacity (EndpointName = the endpoint) whose action is a step-scaling policy of the
  endpoint's target goes to ALARM after its Period x EvaluationPeriods, then the endpoint goes Updating and,
  `scale_out_s` later (default 480 s: a GPU instance, the image and the model), runs +ScalingAdjustment
  instances (at most MaxCapacity) — the first pool entry with capacity and quota, as SageMaker picks it. The
  queued job then runs. Without that alarm the backlog must exceed the target value first (as AWS says).
- scale out above one: backlog per instance over the target value adds instances up to MaxCapacity.
DescribeEndpoint shows CurrentInstanceCount and DesiredInstanceCount while it moves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from emulator import forward
from emulator.clock import Clock
from emulator.errors import AwsError, json_protocol_response
from emulator.records import EndpointRecord

# The Emulator (emulator/core.py) is typed loosely: core creates the lifecycle, so importing it back would
# close an import cycle (tests/test_layers.py).
Emulator = Any

log = logging.getLogger("emulator")

DIMENSION = "sagemaker:variant:DesiredInstanceCount"
BACKLOG_METRIC = "ApproximateBacklogSizePerInstance"
NO_CAPACITY_METRIC = "HasBacklogWithoutCapacity"
AAS_PREFIX = "AnyScaleFrontendService"
CLOUDWATCH_PREFIX = "GraniteServiceVersion20100801"


@dataclass
class Target:
    resource_id: str
    min: int
    max: int
    registered_at: float
    arn: str = ""
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return self.resource_id.split("/")[1]

    @property
    def variant(self) -> str:
        return self.resource_id.split("/")[3]


@dataclass
class Policy:
    resource_id: str
    name: str
    type: str
    config: dict[str, Any]
    arn: str


@dataclass
class Activity:
    """A scaling activity under way: the endpoint is Updating until `ready_at`."""

    count: int
    ready_at: float
    cause: str


@dataclass
class EndpointLoad:
    record: EndpointRecord | None = None
    backlog: int = 0  # async jobs accepted and not finished (ApproximateBacklogSize)
    last_done: float = 0.0  # when the backlog last became 0
    waiting_since: float | None = None  # first job of the backlog while 0 instances ran
    low_since: float | None = None  # since when fewer instances would do
    activity: Activity | None = None


@dataclass
class Autoscaler:
    emu: Emulator
    clock: Clock
    moto: forward.MotoClients
    targets: dict[str, Target] = field(default_factory=dict)
    policies: dict[tuple[str, str], Policy] = field(default_factory=dict)
    load: dict[str, EndpointLoad] = field(default_factory=dict)  # endpoint name (lower case) -> load
    activities: list[dict[str, Any]] = field(default_factory=list)  # what scaled, for /_emulator/state

    def reset(self) -> None:
        self.targets.clear()
        self.policies.clear()
        self.load.clear()
        self.activities.clear()

    # -- the API fronts --------------------------------------------------------------------------
    async def handle_aas(self, request: Request, op: str) -> Response:
        try:
            self.emu.authorize(request.headers)
            body = await request.body()
            p = json.loads(body) if body else {}
            if op == "ListTagsForResource":
                return self._tags_of(p.get("ResourceARN", ""))
            rid = p.get("ResourceId", "")
            sagemaker = p.get("ServiceNamespace") == "sagemaker"
            if sagemaker and op == "RegisterScalableTarget":
                self._check_resource(rid)
            if sagemaker and op == "PutScalingPolicy" and rid not in self.targets:
                raise AwsError("ObjectNotFoundException", f"No scalable target registered for service namespace: "
                                                          f"sagemaker, resource ID: {rid}, scalable dimension: "
                                                          f"{p.get('ScalableDimension')}")
            upstream = await forward.forward(self.emu, request, body, "application-autoscaling")
            if upstream.status_code < 300 and sagemaker:
                await self._remember(op, p, upstream.json() if upstream.content else {})
            return forward.relay(upstream)
        except AwsError as err:
            return json_protocol_response(err)
        except ValueError as exc:
            return json_protocol_response(AwsError("SerializationException", f"The request body is not JSON: {exc}"))

    async def handle_cloudwatch(self, request: Request) -> Response:
        try:
            self.emu.authorize(request.headers)
            return forward.relay(await forward.forward(self.emu, request, await request.body(), "cloudwatch"))
        except AwsError as err:
            return json_protocol_response(err)

    def _tags_of(self, arn: str) -> Response:
        for target in self.targets.values():
            if target.arn and target.arn == arn:
                return Response(json.dumps({"Tags": target.tags}), media_type="application/x-amz-json-1.1")
        return json_protocol_response(AwsError("ResourceNotFoundException", f"No scalable target with the ARN {arn}"))

    def _check_resource(self, rid: str) -> None:
        parts = rid.split("/")
        if len(parts) != 4 or parts[0] != "endpoint" or parts[2] != "variant":
            raise AwsError("ValidationException", f"Unsupported resource ID {rid!r}: expected endpoint/<name>/variant/<variant>")
        record = self.emu.registry.endpoints.get(parts[1].lower())
        if record is None or not any(d.name == parts[3] for d in [*record.live, *record.pending]):
            raise AwsError("ValidationException", f"The endpoint variant {rid} does not exist.")

    async def _remember(self, op: str, p: dict[str, Any], answer: dict[str, Any]) -> None:
        rid = p.get("ResourceId", "")
        if op == "RegisterScalableTarget":
            old = self.targets.get(rid)
            self.targets[rid] = Target(rid, int(p.get("MinCapacity", old.min if old else 0)),
                                       int(p.get("MaxCapacity", old.max if old else 1)),
                                       old.registered_at if old else self.clock.now(),
                                       answer.get("ScalableTargetARN") or (old.arn if old else ""),
                                       {**(old.tags if old else {}), **(p.get("Tags") or {})})
        elif op == "DeregisterScalableTarget":
            self.targets.pop(rid, None)
            for key in [k for k in self.policies if k[0] == rid]:  # the real API deletes them with the target
                pol = self.policies.pop(key)
                try:
                    await self.moto.call("application-autoscaling", "delete_scaling_policy", PolicyName=pol.name,
                                         ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=DIMENSION)
                except Exception as exc:
                    log.info("policy %s of %s already gone in moto: %s", pol.name, rid, exc)
        elif op == "PutScalingPolicy":
            kind = p.get("PolicyType", "")
            config = p.get("StepScalingPolicyConfiguration") or p.get("TargetTrackingScalingPolicyConfiguration") or {}
            self.policies[(rid, p["PolicyName"])] = Policy(rid, p["PolicyName"], kind, config, answer.get("PolicyARN", ""))
        elif op == "DeleteScalingPolicy":
            self.policies.pop((rid, p.get("PolicyName", "")), None)

    # -- the jobs (emulator/runtime.py) ---------------------------------------------------------------
    def _load(self, record: EndpointRecord, since: float | None = None) -> EndpointLoad:
        """The endpoint's load; a new endpoint under an old name starts afresh."""
        load = self.load.get(record.name.lower())
        if load is None or load.record is not record:
            load = self.load[record.name.lower()] = EndpointLoad(record=record, last_done=since or self.clock.now())
        return load

    def arrived(self, record: EndpointRecord) -> None:
        load = self._load(record)
        load.backlog += 1
        if load.waiting_since is None and _instances(record) == 0:
            load.waiting_since = self.clock.now()

    def finished(self, record: EndpointRecord) -> None:
        load = self._load(record)
        load.backlog = max(0, load.backlog - 1)
        if load.backlog == 0:
            load.last_done = self.clock.now()

    async def wait_for_capacity(self, record: EndpointRecord) -> None:
        """A queued async job waits while its endpoint runs no instance (as SageMaker queues it)."""
        while self.emu.registry.endpoints.get(record.name.lower()) is record and _instances(record) == 0:
            await asyncio.sleep(0.05)

    # -- the clock ------------------------------------------------------------------------------------
    async def tick(self, now: float) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for target in list(self.targets.values()):
            record = self.emu.registry.endpoints.get(target.endpoint.lower())
            if record is None or not record.async_config:
                continue
            deployment = next((d for d in record.live if d.name == target.variant), None)
            if deployment is None:
                continue
            load = self._load(record, since=target.registered_at)
            if load.activity is not None:
                if now >= load.activity.ready_at and record.status == "Updating":
                    events.append(self._finish(record, deployment, load, now))
                continue
            if record.status != "InService":
                continue
            event = await self._decide(target, record, deployment, load, now)
            if event is not None:
                events.append(event)
                # Both phases can be due at once when the clock jumped: finish in the same tick if so.
                if load.activity is not None and now >= load.activity.ready_at:
                    events.append(self._finish(record, deployment, load, now))
        return events

    async def _decide(self, target: Target, record: EndpointRecord, deployment: Any, load: EndpointLoad,
                      now: float) -> dict[str, Any] | None:
        count = deployment.instance_count
        tracking = next((p for p in self.policies.values() if p.resource_id == target.resource_id
                         and p.type == "TargetTrackingScaling"
                         and (p.config.get("CustomizedMetricSpecification") or {}).get("MetricName") == BACKLOG_METRIC), None)
        per_instance = float((tracking.config if tracking else {}).get("TargetValue") or 1.0)
        cfg = self.emu.config.autoscaling
        if count == 0:
            if load.backlog == 0:
                load.waiting_since = None
                return None
            since = load.waiting_since if load.waiting_since is not None else now
            load.waiting_since = since
            step = await self._from_zero(target, record.name)
            if step is not None:
                policy, delay = step
                if now - since < delay:
                    return None
                adjustment = int((policy.config.get("StepAdjustments") or [{}])[0].get("ScalingAdjustment", 1))
                wanted = max(target.min, min(target.max, count + adjustment))
                return self._start(record, deployment, load, wanted, since + delay, cfg.scale_out_s,
                                   f"alarm on {NO_CAPACITY_METRIC} ran policy {policy.name}")
            if tracking is not None and load.backlog > per_instance:
                wanted = max(target.min, min(target.max, math.ceil(load.backlog / per_instance)))
                return self._start(record, deployment, load, wanted, now, cfg.scale_out_s,
                                   f"policy {tracking.name}: backlog {load.backlog} over its target")
            return None
        if tracking is None:
            return None
        wanted = max(target.min, min(target.max, math.ceil(load.backlog / per_instance) if load.backlog else 0))
        if wanted > count:
            load.low_since = None
            return self._start(record, deployment, load, wanted, now, cfg.scale_out_s,
                               f"policy {tracking.name}: backlog {load.backlog} per {count} instance(s) over the target")
        if wanted < count:
            idle_from = max(load.last_done, target.registered_at) if load.backlog == 0 else now
            load.low_since = load.low_since if load.low_since is not None else idle_from
            if now - load.low_since >= cfg.scale_in_after_s:
                return self._start(record, deployment, load, wanted, load.low_since + cfg.scale_in_after_s,
                                   cfg.scale_in_s, f"policy {tracking.name}: "
                                   + ("no job for a while" if load.backlog == 0 else "backlog under the target"))
            return None
        load.low_since = None
        return None

    async def _from_zero(self, target: Target, endpoint: str) -> tuple[Policy, float] | None:
        """The step policy an alarm on HasBacklogWithoutCapacity runs, and the alarm's delay."""
        steps = {p.arn: p for p in self.policies.values() if p.resource_id == target.resource_id and p.type == "StepScaling"}
        if not steps:
            return None
        try:
            found = await self.moto.call("cloudwatch", "describe_alarms_for_metric", MetricName=NO_CAPACITY_METRIC,
                                         Namespace="AWS/SageMaker", Dimensions=[{"Name": "EndpointName", "Value": endpoint}])
        except Exception as exc:
            log.warning("cannot read the alarms of %s: %s", endpoint, exc)
            return None
        for alarm in found.get("MetricAlarms", []):
            policy = next((steps[a] for a in alarm.get("AlarmActions", []) if a in steps), None)
            if policy is not None and alarm.get("ActionsEnabled", True):
                override = self.emu.config.autoscaling.alarm_delay_s
                delay = override if override is not None else float(
                    alarm.get("Period", 60)) * int(alarm.get("DatapointsToAlarm") or alarm.get("EvaluationPeriods", 1))
                return policy, delay
        return None

    def _start(self, record: EndpointRecord, deployment: Any, load: EndpointLoad, count: int, started: float,
               duration: float, cause: str) -> dict[str, Any]:
        load.activity = Activity(count, started + duration, cause)
        deployment.desired_count = count
        self.emu.registry._set_status(record, "Updating")
        event = {"kind": "scaling", "endpoint": record.name, "from": deployment.instance_count, "to": count,
                 "phase": "started", "cause": cause}
        self.activities.append(event)
        log.info("endpoint %s scaling %d -> %d: %s", record.name, deployment.instance_count, count, cause)
        return event

    def _finish(self, record: EndpointRecord, deployment: Any, load: EndpointLoad, now: float) -> dict[str, Any]:
        activity = load.activity
        assert activity is not None
        load.activity = None
        before = deployment.instance_count
        problem = None
        if before == 0 and activity.count > 0:
            problem = self._pick_instance_type(deployment, activity.count, record)
        if problem is None:
            deployment.instance_count = activity.count
        deployment.desired_count = None
        self.emu.registry._set_status(record, "InService")
        if activity.count == 0:
            load.waiting_since = None
        load.low_since = None
        event = {"kind": "scaling", "endpoint": record.name, "from": before,
                 "to": before if problem else activity.count, "phase": "failed" if problem else "done",
                 "cause": problem or activity.cause}
        self.activities.append(event)
        log.info("endpoint %s scaled %d -> %d%s", record.name, before, event["to"], f" ({problem})" if problem else "")
        return event

    def _pick_instance_type(self, deployment: Any, count: int, record: EndpointRecord) -> str | None:
        """Scale out from zero: the first pool entry with capacity and quota (None), or why none could."""
        variant = deployment.variant
        entries = (sorted(variant["InstancePools"], key=lambda e: e["Priority"]) if variant.get("InstancePools")
                   else [{"InstanceType": variant.get("InstanceType"), "Priority": 1}])
        reg = self.emu.registry
        unavailable = set(reg.config.faults.capacity_unavailable)
        usage = reg.usage(exclude=record)
        for entry in entries:
            itype = entry["InstanceType"]
            if itype in unavailable:
                continue
            if usage.get(itype, 0) + count > reg.config.quota_for(itype):
                continue
            deployment.instance_type = itype
            return None
        return "InsufficientInstanceCapacity or quota: no pool entry could take the instance; retried later"


def _instances(record: EndpointRecord) -> int:
    return sum(d.instance_count for d in record.live)
