"""An endpoint's versions and its rollback alarm, as the state file keeps them.

Every endpoint has versions (`state.versions[role]`, shaped as protocol.sagemaker.EndpointVersions): version 1
is what `deploy` made (the deployment's names), each `infra upgrade` adds `<endpoint>-v<n>` — a model with the
new image and an endpoint config like the last one — and `current` is the one the endpoint runs. The spec's
model and config names (and its image tag) always name the current version, so `resume`, `status` and the
studio see what runs; the others stay listed here with their status until their resources are removed.

The rollback alarm is a CloudWatch metric-math alarm on the endpoint's `Invocation5XXErrors` plus
`InvocationModelErrors` (plus `InvocationFailures` for the async endpoint), ≥ 1 in a minute; deploy puts it,
a blue/green update names it in `AutoRollbackConfiguration`, delete removes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, error_code, is_not_found, translate
from infra.model import VARIANT_NAME, Role
from infra.state import DeploymentState, utc_now

MAX_NAME = 63  # SageMaker model, endpoint config and endpoint names
ALARM_SUFFIX = "-errors-rollback"
Notify = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


# ---------------------------------------------------------------------------------------------------------
# The record
def version_name(base: str, number: int) -> str:
    """`<base>-v<n>` for n ≥ 2 (version 1 keeps the deployment's names), shortened with a hash of the whole
    name when it would pass SageMaker's 63 characters."""
    if number == 1:
        return base
    suffix = f"-v{number}"
    if len(base) + len(suffix) <= MAX_NAME:
        return base + suffix
    digest = hashlib.sha256(base.encode()).hexdigest()[:6]
    return f"{base[:MAX_NAME - len(suffix) - 7].rstrip('-')}-{digest}{suffix}"


def history(state: DeploymentState, role: Role) -> dict[str, Any]:
    """The endpoint's versions, recording version 1 from the spec the first time (files from before versions
    existed, and deploy itself). Call with `state.lock` held when changing what it returns."""
    with state.lock:
        if role not in state.versions:
            ep = state.spec.endpoint(role)
            rec = state.endpoints.get(role)
            state.versions[role] = {
                "current": 1, "alarm": None, "alarm_created": False,
                "versions": [{"number": 1, "image_tag": state.spec.image_tag_of(ep), "model_name": ep.model_name,
                              "config_name": ep.config_name, "created_at": state.spec.created_at,
                              "status": "in service", "strategy": "deploy",
                              "smoke": rec.smoke if rec is not None else None, "detail": None,
                              "resources_deleted": False}],
            }
        return state.versions[role]


def version(state: DeploymentState, role: Role, number: int) -> dict[str, Any]:
    return next(v for v in history(state, role)["versions"] if v["number"] == number)


def current(state: DeploymentState, role: Role) -> dict[str, Any]:
    return version(state, role, history(state, role)["current"])


def previous(state: DeploymentState, role: Role) -> dict[str, Any] | None:
    """The version a rollback returns to: the newest older one that was superseded and still exists."""
    h = history(state, role)
    older = [v for v in h["versions"] if v["number"] < h["current"] and v["status"] == "superseded"
             and not v["resources_deleted"]]
    return max(older, key=lambda v: v["number"], default=None)


def label(state: DeploymentState, role: Role) -> str:
    """`v2 (omni-sagemaker-cuda-v1.7, blue/green, since 2026-12-03T10:00:00Z); v1 kept for rollback`."""
    h = history(state, role)
    cur = current(state, role)
    text = f"v{cur['number']} ({cur['image_tag']}"
    if cur["number"] > 1:
        text += f", {cur['strategy']}, since {cur['created_at']}"
    text += ")"
    if (prev := previous(state, role)) is not None:
        text += f"; v{prev['number']} ({prev['image_tag']}) kept for rollback"
    failed = [v for v in h["versions"] if v["number"] > cur["number"] and v["status"] in ("rolled back", "failed")]
    if failed:
        last = failed[-1]
        text += f"; v{last['number']} ({last['image_tag']}) {last['status']}"
    return text


def summary(state: DeploymentState, role: Role) -> dict[str, Any]:
    """What status shows: the version in use, the one a rollback would return to, every version."""
    h = history(state, role)
    prev = previous(state, role)
    return {"current": h["current"], "image_tag": current(state, role)["image_tag"],
            "previous": None if prev is None else prev["number"], "label": label(state, role),
            "alarm": h.get("alarm"), "versions": [dict(v) for v in h["versions"]]}


# ---------------------------------------------------------------------------------------------------------
# The rollback alarm
def alarm_name(endpoint_name: str) -> str:
    return endpoint_name + ALARM_SUFFIX


def alarm_request(state: DeploymentState, role: Role) -> dict[str, Any]:
    """PutMetricAlarm: the endpoint's 5XX and model errors (and async failures), ≥ 1 in one minute."""
    ep = state.spec.endpoint(role)
    dims = [{"Name": "EndpointName", "Value": ep.endpoint_name}, {"Name": "VariantName", "Value": VARIANT_NAME}]
    names = ["Invocation5XXErrors", "InvocationModelErrors"] + (["InvocationFailures"] if ep.kind == "async" else [])
    metrics: list[dict[str, Any]] = [
        {"Id": f"m{i}", "ReturnData": False, "MetricStat": {
            "Metric": {"Namespace": "AWS/SageMaker", "MetricName": name, "Dimensions": dims},
            "Period": 60, "Stat": "Sum"}}
        for i, name in enumerate(names, start=1)]
    expression = " + ".join(f"FILL(m{i}, 0)" for i in range(1, len(names) + 1))
    metrics.append({"Id": "errors", "Expression": expression, "Label": "invocation errors", "ReturnData": True})
    return {
        "AlarmName": alarm_name(ep.endpoint_name),
        "AlarmDescription": (f"Omni Studio: errors on the {role} endpoint {ep.endpoint_name}; a blue/green update "
                             "(python -m infra upgrade) rolls back when this goes into ALARM during its bake."),
        "ActionsEnabled": False, "Metrics": metrics, "EvaluationPeriods": 1, "DatapointsToAlarm": 1,
        "Threshold": 1.0, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
        "Tags": state.spec.tags(role),
    }


def ensure_alarm(ctx: AwsContext, state: DeploymentState, role: Role, notify: Notify = _quiet) -> str | None:
    """The endpoint's rollback alarm, put when missing (PutMetricAlarm is idempotent). None, with the reason
    passed to `notify`, when CloudWatch refuses (an upgrade then runs without automatic rollback)."""
    h = history(state, role)
    request = alarm_request(state, role)
    name = request["AlarmName"]
    cw = ctx.client("cloudwatch")
    try:
        if h.get("alarm") == name and cw.describe_alarms(AlarmNames=[name]).get("MetricAlarms"):
            return name
        cw.put_metric_alarm(**request)
    except AWS_ERRORS as exc:
        err = translate(exc, f"put the CloudWatch alarm {name} (cloudwatch:PutMetricAlarm, cloudwatch:TagResource)")
        notify(f"no rollback alarm for the {role} endpoint: {err}")
        return None
    with state.lock:
        h["alarm"], h["alarm_created"] = name, True
    state.save()
    notify(f"rollback alarm {name} on the endpoint's 5XX and model errors")
    return name


def delete_alarm(ctx: AwsContext, state: DeploymentState, role: Role) -> str | None:
    """Remove the alarm infra put; returns "deleted" / "already gone" (None when there was none)."""
    h = state.versions.get(role) or {}
    name = h.get("alarm")
    if not name or not h.get("alarm_created"):
        return None
    cw = ctx.client("cloudwatch")
    try:
        exists = bool(cw.describe_alarms(AlarmNames=[name]).get("MetricAlarms"))
        if exists:
            cw.delete_alarms(AlarmNames=[name])
    except AWS_ERRORS as exc:
        if error_code(exc) == "ResourceNotFound":
            exists = False
        else:
            raise
    with state.lock:
        h["alarm"] = None
    return "deleted" if exists else "already gone"


# ---------------------------------------------------------------------------------------------------------
# Removing versions
def delete_version_resources(ctx: AwsContext, state: DeploymentState, role: Role, numbers: list[int],
                             notify: Notify = _quiet) -> list[tuple[str, str, str]]:
    """Delete the model and config of these versions (never the current one). Returns (kind, name, outcome)."""
    sm = ctx.sagemaker
    done: list[tuple[str, str, str]] = []
    cur = history(state, role)["current"]
    for n in numbers:
        v = version(state, role, n)
        if n == cur or v["resources_deleted"]:
            continue
        for kind, name in (("endpoint config", v["config_name"]), ("model", v["model_name"])):
            try:
                if kind == "endpoint config":
                    sm.delete_endpoint_config(EndpointConfigName=name)
                else:
                    sm.delete_model(ModelName=name)
                outcome = "deleted"
            except AWS_ERRORS as exc:
                if not is_not_found(exc):
                    raise
                outcome = "already gone"
            done.append((kind, name, outcome))
            notify(f"v{n} {kind} {name}: {outcome}")
        with state.lock:
            v["resources_deleted"] = True
        state.save()
    return done


def after_deploy(ctx: AwsContext, state: DeploymentState, role: Role, notify: Notify = _quiet) -> None:
    """Once an endpoint is InService after deploy/resume: its version 1 recorded and its rollback alarm put.
    Never raises: the endpoint is up; a missing alarm only means an upgrade cannot roll back on its own."""
    try:
        with state.lock:
            cur = current(state, role)
            if cur["number"] == 1:
                cur["created_at"] = cur["created_at"] or utc_now()
        ensure_alarm(ctx, state, role, notify)
    except Exception as exc:  # noqa: BLE001 - anything here must not turn a good deploy into a failure
        notify(f"could not record the {role} endpoint's version or put its rollback alarm: {exc}")


def delete_all(ctx: AwsContext, state: DeploymentState, role: Role, notify: Notify = _quiet) -> tuple[list[tuple[str, str, str]], list[str]]:
    """For `delete`, once the endpoint and its current model and config are gone: every other version's
    model and config, and the rollback alarm. Returns ((kind, name, outcome), what still exists)."""
    h = state.versions.get(role)
    if not h:
        return [], []
    others = [v["number"] for v in h["versions"] if v["number"] != h["current"] and not v["resources_deleted"]]
    done = delete_version_resources(ctx, state, role, others, notify)
    if (outcome := delete_alarm(ctx, state, role)) is not None:
        name = alarm_name(state.record(role).endpoint.name)
        done.append(("alarm", name, outcome))
        notify(f"alarm {name}: {outcome}")
    left = [f"{kind} {name}" for v in h["versions"] if v["number"] != h["current"]
            for kind, name in (("endpoint config", v["config_name"]), ("model", v["model_name"]))
            if _exists(ctx, kind, name)]
    if not left:
        with state.lock:
            state.versions.pop(role, None)  # nothing of them is left
    state.save()
    return done, left


def _exists(ctx: AwsContext, kind: str, name: str) -> bool:
    try:
        if kind == "endpoint config":
            ctx.sagemaker.describe_endpoint_config(EndpointConfigName=name)
        else:
            ctx.sagemaker.describe_model(ModelName=name)
        return True
    except AWS_ERRORS as exc:
        if is_not_found(exc):
            return False
        raise
