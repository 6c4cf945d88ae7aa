"""Autoscaling: the async video endpoint scales to zero when idle; realtime endpoints scale between 1 and N.

Application Auto Scaling, resource `endpoint/<name>/variant/AllTraffic`, dimension
`sagemaker:variant:DesiredInstanceCount`:

- video (async): min 0 (1 with `--no-scale-to-zero`), max `--max-instances` (default 1); a target-tracking
  policy on `ApproximateBacklogSizePerInstance` (namespace AWS/SageMaker, dimension EndpointName; target 1
  job waiting per instance: a video takes minutes) that scales in to 0 when nothing waits, and — because
  target tracking cannot scale out from 0 instances (no instance, no backlog per instance) — a step-scaling
  policy (+1 instance) driven by a CloudWatch alarm on `HasBacklogWithoutCapacity` (Average ≥ 1 for 2 of
  2 one-minute periods): the pattern AWS documents for asynchronous endpoints. With min 1 and max 1
  nothing is registered (the endpoint keeps its one instance).
- voice and image (realtime): `--max-instances N` > 1 registers min 1 / max N with target tracking on the
  predefined `SageMakerVariantInvocationsPerInstance`; N = 1 registers nothing. (Realtime instance-based
  endpoints cannot scale to zero; only asynchronous ones and inference components can.)

With instance pools, scaling adds instances from the highest-priority pool entry with capacity and removes
them from the lowest-priority entry first (AWS: "Auto-scaling with instance pools").

Registering needs the endpoint InService, so it runs after the wait, per endpoint; `delete` deletes the
alarms and policies and deregisters the target BEFORE it deletes the endpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, error_code, error_message, translate
from infra.errors import UsageError
from infra.model import VARIANT_NAME, DeploymentSpec, EndpointSpec, Role
from infra.state import DeploymentState
from protocol.catalog import FAMILIES

MAX_INSTANCES = 10
NAMESPACE = "sagemaker"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"
BACKLOG_TARGET = 1.0  # video jobs waiting per instance
# Invocations per instance per minute a realtime endpoint is held at (a voice line takes seconds, an image ~10 s).
INVOCATIONS_TARGET: dict[str, float] = {  # the catalog's, for the realtime families
    f.name: f.invocations_target for f in FAMILIES if f.invocations_target is not None}
SCALE_IN_COOLDOWN_S = 600
SCALE_OUT_COOLDOWN_S = 300
BACKLOG_ALARM_PERIOD_S = 60
BACKLOG_ALARM_PERIODS = 2

ProgressText = Callable[[str], None]


def check_max_instances(value: int | str) -> int:
    """1..10 instances per endpoint; UsageError naming the option otherwise."""
    try:
        n = int(str(value).strip())
    except ValueError:
        raise UsageError(f"--max-instances {value!r} is not a whole number: give 1 to {MAX_INSTANCES}") from None
    if not 1 <= n <= MAX_INSTANCES:
        raise UsageError(f"--max-instances {n}: give 1 to {MAX_INSTANCES} instances per endpoint (each one is a GPU "
                         "billed by the hour; more than that needs a quota increase and a conversation first)")
    return n


def resource_id(endpoint_name: str) -> str:
    return f"endpoint/{endpoint_name}/variant/{VARIANT_NAME}"


@dataclass(frozen=True)
class Names:
    """The deterministic names of one endpoint's policies and alarm."""

    backlog_policy: str
    from_zero_policy: str
    invocations_policy: str
    backlog_alarm: str

    @classmethod
    def of(cls, endpoint_name: str) -> Names:
        return cls(f"{endpoint_name}-backlog-per-instance", f"{endpoint_name}-scale-out-from-zero",
                   f"{endpoint_name}-invocations-per-instance", f"{endpoint_name}-has-backlog-without-capacity")


def plan_scaling(spec: DeploymentSpec, max_instances: int = 1, scale_to_zero: bool = True) -> dict[Role, dict[str, Any]]:
    """protocol.sagemaker.ScalingState per endpoint that scales (none for a fixed single instance)."""
    max_instances = check_max_instances(max_instances)
    out: dict[Role, dict[str, Any]] = {}
    for ep in spec.endpoints:
        low = (0 if scale_to_zero else 1) if ep.kind == "async" else 1
        if low == max_instances == 1:
            continue
        out[ep.role] = {"resource_id": resource_id(ep.endpoint_name), "min_instances": low,
                        "max_instances": max_instances, "registered": False, "policies": [], "alarms": []}
    return out


def _backlog_metric(endpoint: str, name: str) -> dict[str, Any]:
    return {"MetricName": name, "Namespace": "AWS/SageMaker", "Dimensions": [{"Name": "EndpointName", "Value": endpoint}],
            "Statistic": "Average"}


def apply_scaling(ctx: AwsContext, state: DeploymentState, ep: EndpointSpec,
                  progress: ProgressText = lambda _: None) -> bool:
    """Register the endpoint's scalable target, policies and alarm as planned (idempotent: put again on
    resume). False when the endpoint does not scale. AWS errors raise InfraError."""
    plan = state.scaling.get(ep.role)
    if not plan:
        return False
    aas = ctx.client("application-autoscaling")
    names = Names.of(ep.endpoint_name)
    rid, low, high = plan["resource_id"], int(plan["min_instances"]), int(plan["max_instances"])
    target = {"ServiceNamespace": NAMESPACE, "ResourceId": rid, "ScalableDimension": DIMENSION}
    tags = {t["Key"]: t["Value"] for t in state.spec.tags(ep.role)}
    try:
        aas.register_scalable_target(**target, MinCapacity=low, MaxCapacity=high, Tags=tags)
        policies, alarms = [], []
        if ep.kind == "async":
            aas.put_scaling_policy(**target, PolicyName=names.backlog_policy, PolicyType="TargetTrackingScaling",
                                   TargetTrackingScalingPolicyConfiguration={
                                       "TargetValue": BACKLOG_TARGET,
                                       "CustomizedMetricSpecification": _backlog_metric(ep.endpoint_name,
                                                                                        "ApproximateBacklogSizePerInstance"),
                                       "ScaleInCooldown": SCALE_IN_COOLDOWN_S, "ScaleOutCooldown": SCALE_OUT_COOLDOWN_S})
            policies.append(names.backlog_policy)
            if low == 0:
                arn = aas.put_scaling_policy(**target, PolicyName=names.from_zero_policy, PolicyType="StepScaling",
                                             StepScalingPolicyConfiguration={
                                                 "AdjustmentType": "ChangeInCapacity", "MetricAggregationType": "Average",
                                                 "Cooldown": SCALE_OUT_COOLDOWN_S,
                                                 "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}]},
                                             )["PolicyARN"]
                policies.append(names.from_zero_policy)
                metric = _backlog_metric(ep.endpoint_name, "HasBacklogWithoutCapacity")
                ctx.client("cloudwatch").put_metric_alarm(
                    AlarmName=names.backlog_alarm, AlarmDescription=f"{ep.endpoint_name}: a job waits and no instance "
                    "runs — scale out from zero (omni-studio)", **metric, Period=BACKLOG_ALARM_PERIOD_S,
                    EvaluationPeriods=BACKLOG_ALARM_PERIODS, DatapointsToAlarm=BACKLOG_ALARM_PERIODS, Threshold=1.0,
                    ComparisonOperator="GreaterThanOrEqualToThreshold", TreatMissingData="missing",
                    AlarmActions=[arn], Tags=state.spec.tags(ep.role))
                alarms.append(names.backlog_alarm)
        else:
            aas.put_scaling_policy(**target, PolicyName=names.invocations_policy, PolicyType="TargetTrackingScaling",
                                   TargetTrackingScalingPolicyConfiguration={
                                       "TargetValue": INVOCATIONS_TARGET.get(ep.role, 10.0),
                                       "PredefinedMetricSpecification": {
                                           "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
                                       "ScaleInCooldown": SCALE_IN_COOLDOWN_S, "ScaleOutCooldown": SCALE_OUT_COOLDOWN_S})
            policies.append(names.invocations_policy)
    except AWS_ERRORS as exc:
        raise translate(exc, f"set up autoscaling of the {ep.role} endpoint (Application Auto Scaling, CloudWatch)",
                        resumable=True) from None
    with state.lock:
        plan.update(registered=True, policies=policies, alarms=alarms)
    state.save()
    what = (f"scales {low}–{high} instances" + (" (to 0 when idle; a job arriving at 0 starts one)" if low == 0 else ""))
    progress(f"autoscaling: {ep.endpoint_name} {what}")
    return True


def is_gone(exc: BaseException) -> bool:
    """An Application Auto Scaling error that says the target or policy is not there."""
    code, text = error_code(exc), error_message(exc).lower()
    return code in ("ObjectNotFoundException", "ResourceNotFound", "ResourceNotFoundException") or (
        code == "ValidationException" and ("no scal" in text or "not found" in text or "does not exist" in text))


@dataclass(frozen=True)
class ScalingRemoval:
    kind: str  # "alarm" | "scaling policy" | "scalable target"
    name: str
    outcome: str  # "deleted" | "already gone"


def remove_scaling(ctx: AwsContext, state: DeploymentState, role: Role) -> list[ScalingRemoval]:
    """Alarm, policies, then the scalable target of one endpoint (every planned name, recorded or not)."""
    plan = state.scaling.get(role)
    if not plan:
        return []
    name = state.endpoints[role].endpoint.name
    names = Names.of(name)
    aas = ctx.client("application-autoscaling")
    target = {"ServiceNamespace": NAMESPACE, "ResourceId": plan["resource_id"], "ScalableDimension": DIMENSION}
    out: list[ScalingRemoval] = []
    try:
        alarms = sorted(set(plan.get("alarms") or []) | {names.backlog_alarm})
        cw = ctx.client("cloudwatch")
        present = {a["AlarmName"] for a in cw.describe_alarms(AlarmNames=alarms).get("MetricAlarms", [])}
        if present:
            cw.delete_alarms(AlarmNames=sorted(present))
        out += [ScalingRemoval("alarm", a, "deleted" if a in present else "already gone") for a in alarms]
        for policy in sorted(set(plan.get("policies") or []) | {names.backlog_policy, names.from_zero_policy,
                                                                 names.invocations_policy}):
            try:
                aas.delete_scaling_policy(**target, PolicyName=policy)
                out.append(ScalingRemoval("scaling policy", policy, "deleted"))
            except AWS_ERRORS as exc:
                if not is_gone(exc):
                    raise
                if policy in (plan.get("policies") or []):
                    out.append(ScalingRemoval("scaling policy", policy, "already gone"))
        try:
            aas.deregister_scalable_target(**target)
            out.append(ScalingRemoval("scalable target", plan["resource_id"], "deleted"))
        except AWS_ERRORS as exc:
            if not is_gone(exc):
                raise
            out.append(ScalingRemoval("scalable target", plan["resource_id"], "already gone"))
    except AWS_ERRORS as exc:
        raise translate(exc, f"remove the {role} endpoint's autoscaling", retry="run `python -m infra delete` again") from None
    with state.lock:
        plan.update(registered=False, policies=[], alarms=[])
    return out


def scaling_label(plan: dict[str, Any] | None) -> str:
    if not plan:
        return "fixed"
    return f"{plan['min_instances']}–{plan['max_instances']}"
