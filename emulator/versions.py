"""Endpoint versions: what UpdateEndpoint does after the new fleet is provisioned, and the faults that make a
new version fail.

SageMaker updates an endpoint blue/green: the new (green) fleet is provisioned beside the old (blue) one.
With a `DeploymentConfig` whose `BlueGreenUpdatePolicy` shifts traffic ALL_AT_ONCE, the green fleet takes all
traffic, then a baking period (`WaitIntervalInSeconds`; here `delays.bake_s`) watches the CloudWatch alarms of
`AutoRollbackConfiguration`. An alarm in ALARM rolls the endpoint back (RollingBack, then InService on the
blue fleet and its config, with a FailureReason naming the alarm); otherwise the blue fleet goes and the
endpoint is InService on the new config. Without a DeploymentConfig the shift is all at once with no bake.
During the bake DescribeEndpoint keeps the old EndpointConfigName and shows the new one, Baking, in
`PendingDeploymentSummary`; `LastDeploymentConfig` is the DeploymentConfig of the last update.

The alarms are read from CloudWatch where the emulator's moto runs (`Emulator.alarm_states`). A fleet
running a "broken" image (`faults.broken_images`) answers every invocation with a ModelError; during a bake
those errors put the rollback alarms in ALARM (as CloudWatch would from the endpoint's
Invocation5XXErrors), so traffic on a broken version rolls it back. `faults.fail_images` makes a fleet fail
its health check instead (`failing_image`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from protocol.common import ErrorInfo, ErrorResponse, dumps

# The registry imports this module, so its types are not imported here: `reg` is an emulator.registry.Registry,
# `record` an emulator.records.EndpointRecord, `d` a Deployment.
Registry = EndpointRecord = Deployment = Any

log = logging.getLogger("emulator")

# Alarm names -> their state (OK | ALARM | INSUFFICIENT_DATA); `trip` sets the named ones to ALARM.
AlarmReader = Callable[[list[str]], Awaitable[dict[str, str]]]
AlarmTripper = Callable[[list[str], str], Awaitable[None]]
POLL_S = 0.1


def rollback_alarms(deployment_config: Mapping[str, Any] | None) -> list[str]:
    return [a["AlarmName"] for a in (deployment_config or {}).get("AutoRollbackConfiguration", {}).get("Alarms", [])]


def bakes(record: EndpointRecord) -> bool:
    """A blue/green policy or rollback alarms were asked for: the update shifts traffic and bakes."""
    cfg = record.deployment_config or {}
    return bool(cfg.get("BlueGreenUpdatePolicy") or rollback_alarms(cfg))


def _images(reg: Registry, d: Deployment) -> list[str]:
    model = reg.models.get(d.model_name.lower())
    if model is None:
        return [i.get("SpecifiedImage", "") for i in d.images]
    spec = model.spec
    containers = [spec["PrimaryContainer"]] if spec.get("PrimaryContainer") else spec.get("Containers", [])
    return [c.get("Image", "") for c in containers]


def _match(faults: Mapping[str, str], images: list[str]) -> str | None:
    for part, text in faults.items():
        if any(part and part in image for image in images):
            return text
    return None


def failing_image(reg: Registry, deployments: list[Deployment]) -> str | None:
    """The FailureReason of a fleet whose image `faults.fail_images` names (None: it comes up)."""
    for d in deployments:
        if (text := _match(reg.config.faults.fail_images, _images(reg, d))) is not None:
            return (f"The primary container for production variant {d.name} did not pass the ping health check: "
                    f"{text}. Please check CloudWatch logs for this endpoint.")
    return None


def container_url(reg: Registry, d: Deployment, engine_url: str) -> str:
    """The base URL of the model server playing `d`'s container: the first `config.containers` entry whose image
    part is in its image, else the engine the emulator was started with."""
    return _match(reg.config.containers, _images(reg, d)) or engine_url


def broken_body(reason: str) -> str:
    """What a broken image's vLLM server answers: its JSON error body (the container's OriginalMessage)."""
    return dumps(ErrorResponse(error=ErrorInfo(message=reason, type="InternalServerError", code=500)))


def broken_reason(reg: Registry, endpoint: str) -> str | None:
    """The error a live fleet on a `faults.broken_images` image answers with; the error is counted."""
    record = reg.endpoints.get(endpoint.lower())
    if record is None or not reg.config.faults.broken_images:
        return None
    for d in record.live:
        if (text := _match(reg.config.faults.broken_images, _images(reg, d))) is not None:
            record.errors_on_live += 1
            return text
    return None


async def shift_and_bake(reg: Registry, record: EndpointRecord) -> None:
    """All traffic to the green fleet, bake, then InService on it — or RollingBack to the blue fleet."""
    alarms = rollback_alarms(record.deployment_config)
    blue_live, blue_async = record.live, record.async_config
    record.live, record.pending, record.blue = record.pending, [], blue_live
    record.async_config = record.pending_async_config
    record.errors_on_live = 0
    record.status_since = time.time()  # the bake starts now
    log.info("endpoint %s: traffic on the new fleet (%s), baking", record.name, record.pending_config)
    reason = await _watch(reg, record, alarms)
    if reg.endpoints.get(record.name.lower()) is not record:
        return  # deleted or reset meanwhile
    if reason is None:
        record.blue = []
        record.config_name, record.pending_config = record.pending_config or record.config_name, None
        record.failure_reason = None
        reg._set_status(record, "InService")
        log.info("endpoint %s InService on %s after its bake", record.name, record.config_name)
        return
    log.info("endpoint %s rolling back: %s", record.name, reason)
    reg._set_status(record, "RollingBack")
    await reg._wait_transition(record, "update_s")
    if reg.endpoints.get(record.name.lower()) is not record:
        return
    record.live, record.blue, record.async_config = blue_live, [], blue_async
    record.pending_config = None
    record.generation += 1
    record.failure_reason = reason
    reg._set_status(record, "InService")


async def _watch(reg: Registry, record: EndpointRecord, alarms: list[str]) -> str | None:
    """Until the bake is over: None, or the FailureReason of a tripped alarm."""
    while True:
        if alarms and record.errors_on_live and reg.alarm_tripper is not None:
            # What CloudWatch does with the endpoint's Invocation5XXErrors: the alarms go to ALARM.
            await reg.alarm_tripper(alarms, f"{record.errors_on_live} invocation errors on the new fleet "
                                            "during the baking period")
        if alarms and reg.alarm_reader is not None:
            states = await reg.alarm_reader(alarms)
            tripped = [name for name in alarms if states.get(name) == "ALARM"]
            if tripped:
                return (f"Rolled back the deployment of endpoint configuration {record.pending_config}: "
                        f"CloudWatch alarm {', '.join(tripped)} went into ALARM state during the baking period.")
        remaining = record.status_since + reg.config.delays.bake_s - time.time()
        if remaining <= 0:
            return None
        await asyncio.sleep(min(remaining, POLL_S))


def describe_extras(record: EndpointRecord) -> dict[str, Any]:
    """DescribeEndpoint members of versions: LastDeploymentConfig."""
    return {"LastDeploymentConfig": record.deployment_config} if record.deployment_config else {}
