"""The emulator's SageMaker resources and their life cycle.

Models and endpoint configs are plain records (emulator/records.py). Endpoints move through real statuses on
timers: Creating -> InService | Failed, Updating -> InService (rolled back with a FailureReason when the update
fails), Deleting -> gone. An endpoint whose variant has `InstancePools` provisions ONE instance type: the first
entry, by priority, that has capacity (see `Faults.capacity_unavailable`); DescribeEndpoint reports it as
`ProductionVariants[].InstancePools[].CurrentInstanceCount`, as SageMaker does.

Quotas follow SageMaker (emulator/capacity.py): CreateEndpoint/UpdateEndpoint check "ml.<type> for endpoint
usage" for EVERY pool entry, counting the instances other endpoints hold, and refuse with ResourceLimitExceeded.

Everything here runs on the server's one event loop, so no locks are needed.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from emulator import versions
from emulator.capacity import check_quotas, check_variant, plan_capacity
from emulator.config import EmulatorConfig
from emulator.errors import AwsError, validation
from emulator.records import IN_PROGRESS, Deployment, EndpointConfigRecord, EndpointRecord, ModelRecord

log = logging.getLogger("emulator")
MAX_TAGS = 50

# A probe runs when provisioning finishes; it returns a FailureReason, or None when the variant is healthy.
Probe = Callable[[EndpointRecord, list[Deployment]], Awaitable[str | None]]


class Registry:
    def __init__(self, config: EmulatorConfig, probe: Probe | None = None) -> None:
        self.config = config
        self.probe = probe
        self.models: dict[str, ModelRecord] = {}
        self.configs: dict[str, EndpointConfigRecord] = {}
        self.endpoints: dict[str, EndpointRecord] = {}
        self.tags: dict[str, dict[str, str]] = {}  # ARN -> {key: value}
        # CloudWatch, for the rollback alarms of blue/green updates (set by the Emulator; None: no CloudWatch).
        self.alarm_reader: versions.AlarmReader | None = None
        self.alarm_tripper: versions.AlarmTripper | None = None

    # -- naming ------------------------------------------------------------------------------------
    def arn(self, kind: str, name: str) -> str:
        # SageMaker ARNs carry the name in lower case; names are unique regardless of case.
        return f"arn:aws:sagemaker:{self.config.region}:{self.config.account_id}:{kind}/{name.lower()}"

    def _missing(self, kind: str, label: str, name: str) -> AwsError:
        return validation(f'Could not find {label} "{self.arn(kind, name)}".')

    def reset(self) -> None:
        for ep in self.endpoints.values():
            if ep.task:
                ep.task.cancel()
        self.models.clear()
        self.configs.clear()
        self.endpoints.clear()
        self.tags.clear()

    # -- models ------------------------------------------------------------------------------------
    def create_model(self, name: str, spec: dict[str, Any], tags: list[dict[str, str]]) -> ModelRecord:
        if name.lower() in self.models:
            raise validation(f'Cannot create already existing model "{self.arn("model", name)}".')
        if not spec.get("PrimaryContainer") and not spec.get("Containers"):
            raise validation("Either PrimaryContainer or Containers must be specified for model " + name)
        if not spec.get("ExecutionRoleArn"):
            raise validation(f"ExecutionRoleArn is required: SageMaker assumes this role to run model {name}")
        record = ModelRecord(name, self.arn("model", name), time.time(), spec)
        self.models[name.lower()] = record
        self._set_tags(record.arn, tags)
        return record

    def model(self, name: str) -> ModelRecord:
        record = self.models.get(name.lower())
        if record is None:
            raise self._missing("model", "model", name)
        return record

    def delete_model(self, name: str) -> None:
        record = self.model(name)
        del self.models[name.lower()]
        self.tags.pop(record.arn, None)

    # -- endpoint configs --------------------------------------------------------------------------
    def create_endpoint_config(self, name: str, spec: dict[str, Any], tags: list[dict[str, str]]) -> EndpointConfigRecord:
        if name.lower() in self.configs:
            raise validation(f'Cannot create already existing endpoint configuration "{self.arn("endpoint-config", name)}".')
        seen_variants: set[str] = set()
        for variant in spec.get("ProductionVariants", []):
            vname = variant.get("VariantName", "")
            if vname.lower() in seen_variants:
                raise validation(f"Production variant names must be unique; {vname!r} appears more than once")
            seen_variants.add(vname.lower())
            check_variant(variant)
            self.model(variant["ModelName"])  # SageMaker checks the model exists here
        async_cfg = spec.get("AsyncInferenceConfig")
        if async_cfg is not None and not async_cfg.get("OutputConfig", {}).get("S3OutputPath"):
            raise validation("AsyncInferenceConfig.OutputConfig.S3OutputPath is required for asynchronous endpoints")
        record = EndpointConfigRecord(name, self.arn("endpoint-config", name), time.time(), spec)
        self.configs[name.lower()] = record
        self._set_tags(record.arn, tags)
        return record

    def endpoint_config(self, name: str) -> EndpointConfigRecord:
        record = self.configs.get(name.lower())
        if record is None:
            raise self._missing("endpoint-config", "endpoint configuration", name)
        return record

    def delete_endpoint_config(self, name: str) -> None:
        record = self.endpoint_config(name)
        del self.configs[name.lower()]
        self.tags.pop(record.arn, None)

    # -- endpoints ---------------------------------------------------------------------------------
    def endpoint(self, name: str) -> EndpointRecord:
        record = self.endpoints.get(name.lower())
        if record is None:
            raise self._missing("endpoint", "endpoint", name)
        return record

    def create_endpoint(self, name: str, config_name: str, tags: list[dict[str, str]]) -> EndpointRecord:
        if name.lower() in self.endpoints:
            raise validation(f'Cannot create already existing endpoint "{self.arn("endpoint", name)}".')
        cfg = self.endpoint_config(config_name)
        plan = plan_capacity(cfg, set(self.config.faults.capacity_unavailable))
        check_quotas(cfg, self.usage(), self.config.quota_for)
        now = time.time()
        record = EndpointRecord(
            name, self.arn("endpoint", name), cfg.name, now, now, pending=plan, status_since=now,
            async_config=copy.deepcopy(cfg.async_config),
        )
        self.endpoints[name.lower()] = record
        self._set_tags(record.arn, tags)
        record.task = asyncio.get_running_loop().create_task(self._provision(record, update=False))
        log.info("endpoint %s Creating (config %s)", name, cfg.name)
        return record

    def update_endpoint(self, name: str, config_name: str, deployment_config: dict[str, Any] | None = None,
                        retain_deployment_config: bool = False) -> EndpointRecord:
        record = self.endpoint(name)
        if record.status in IN_PROGRESS:
            raise validation(f'Cannot update in-progress endpoint "{record.arn}".')
        if record.status != "InService":
            raise validation(f'Cannot update endpoint "{record.arn}" in status {record.status}; delete and recreate it.')
        cfg = self.endpoint_config(config_name)
        plan = plan_capacity(cfg, set(self.config.faults.capacity_unavailable))
        check_quotas(cfg, self.usage(), self.config.quota_for)  # blue/green: the new fleet comes up beside the old one
        record.pending, record.pending_config = plan, cfg.name
        record.pending_async_config = copy.deepcopy(cfg.async_config)
        if deployment_config is not None or not retain_deployment_config:
            record.deployment_config = copy.deepcopy(deployment_config)
        self._set_status(record, "Updating")
        record.task = asyncio.get_running_loop().create_task(self._provision(record, update=True))
        return record

    def delete_endpoint(self, name: str) -> None:
        record = self.endpoint(name)
        if record.status == "Deleting":
            return
        if record.status in IN_PROGRESS:
            raise validation(f'Cannot delete in-progress endpoint "{record.arn}"; wait until it is InService or Failed.')
        self._set_status(record, "Deleting")
        record.task = asyncio.get_running_loop().create_task(self._remove_later(record))

    def _set_status(self, record: EndpointRecord, status: str) -> None:
        record.status = status
        record.modified = record.status_since = time.time()

    def usage(self, exclude: EndpointRecord | None = None) -> dict[str, int]:
        """Instance type -> instances held by endpoints (what Service Quotas compares against)."""
        total: dict[str, int] = {}
        for ep in self.endpoints.values():
            if ep is exclude:
                continue
            for itype, n in ep.instances_held().items():
                total[itype] = total.get(itype, 0) + n
        return total
    async def _provision(self, record: EndpointRecord, *, update: bool) -> None:
        try:
            await self._wait_transition(record, "update_s" if update else "create_s")
            reason = next((d.failure for d in record.pending if d.failure), None)
            reason = reason or self._injected_failure(record.name) or versions.failing_image(self, record.pending)
            if reason is None:
                missing = [d.model_name for d in record.pending if d.model_name.lower() not in self.models]
                if missing:
                    reason = f'Could not find model "{self.arn("model", missing[0])}".'
            if reason is None and self.probe is not None:
                reason = await self.probe(record, record.pending)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a probe that breaks must not leave the endpoint Creating forever
            log.exception("provisioning %s failed", record.name)
            reason = f"Internal emulator error while provisioning: {exc}"
        if self.endpoints.get(record.name.lower()) is not record:
            return  # deleted or reset meanwhile
        record.generation += 1
        if reason is None:
            for d in record.pending:
                d.images = self._deployed_images(d)
                d.status_message = f"Serving on {d.instance_count} x {d.instance_type}" if d.instance_type else "Serving"
            if update and versions.bakes(record):
                await versions.shift_and_bake(self, record)  # ends InService: on the new fleet, or rolled back
                return
            record.live, record.pending = record.pending, []
            if update and record.pending_config:
                record.config_name, record.pending_config = record.pending_config, None
                record.async_config = record.pending_async_config
            record.failure_reason = None
            self._set_status(record, "InService")
            log.info("endpoint %s InService on %s", record.name, [d.instance_type for d in record.live])
        elif update:
            # SageMaker rolls a failed update back: the old fleet keeps serving, FailureReason explains.
            record.pending, record.pending_config = [], None
            record.failure_reason = reason
            self._set_status(record, "InService")
        else:
            record.pending = [Deployment(d.variant, d.instance_type, d.instance_count, reason, failure=reason) for d in record.pending]
            record.failure_reason = reason
            self._set_status(record, "Failed")
            log.info("endpoint %s Failed: %s", record.name, reason)

    async def _wait_transition(self, record: EndpointRecord, delay_name: str) -> None:
        """Sleep until the transition's delay has passed, reading the delay as it is NOW, so a test can
        hold an endpoint in Creating/Updating/Deleting (a long delay) and release it (a short one)."""
        def delay() -> float:
            delays = self.config.delays
            return delays.create_for(record.name) if delay_name == "create_s" else getattr(delays, delay_name)

        while (remaining := record.status_since + delay() - time.time()) > 0:
            await asyncio.sleep(min(remaining, 0.05))

    def _deployed_images(self, deployment: Deployment) -> list[dict[str, Any]]:
        model = self.models.get(deployment.model_name.lower())
        if model is None:
            return []
        containers = [model.spec["PrimaryContainer"]] if model.spec.get("PrimaryContainer") else model.spec.get("Containers", [])
        images = []
        for c in containers:
            if image := c.get("Image"):
                digest = hashlib.sha256(image.encode()).hexdigest()
                images.append({"SpecifiedImage": image, "ResolvedImage": f"{image.split(':')[0]}@sha256:{digest}", "ResolutionTime": time.time()})
        return images

    def _injected_failure(self, name: str) -> str | None:
        faults = self.config.faults.fail_endpoints
        for key, reason in faults.items():
            if key == "*" or key.lower() == name.lower():
                return reason
        return None

    async def _remove_later(self, record: EndpointRecord) -> None:
        await self._wait_transition(record, "delete_s")
        if self.endpoints.get(record.name.lower()) is record:
            del self.endpoints[record.name.lower()]
            self.tags.pop(record.arn, None)
            log.info("endpoint %s deleted", record.name)

    # -- tags --------------------------------------------------------------------------------------
    def resource_for_arn(self, arn: str) -> object:
        prefix = f"arn:aws:sagemaker:{self.config.region}:{self.config.account_id}:"
        kind, _, name = arn.removeprefix(prefix).partition("/")
        lookup = {"model": self.models, "endpoint-config": self.configs, "endpoint": self.endpoints}.get(kind)
        if not arn.startswith(prefix) or lookup is None or not name:
            raise validation(f"Invalid resource ARN {arn!r}: expected {prefix}<model|endpoint-config|endpoint>/<name>")
        record = lookup.get(name.lower())
        if record is None:
            label = {"endpoint-config": "endpoint configuration"}.get(kind, kind)
            raise validation(f'Could not find {label} "{arn}".')
        return record

    def _set_tags(self, arn: str, tags: list[dict[str, str]]) -> None:
        merged = dict(self.tags.get(arn, {}))
        for tag in tags:
            merged[tag["Key"]] = tag["Value"]
        if len(merged) > MAX_TAGS:
            raise validation(f"A resource can have at most {MAX_TAGS} tags; {arn} would have {len(merged)}")
        self.tags[arn] = merged

    def add_tags(self, arn: str, tags: list[dict[str, str]]) -> None:
        self.resource_for_arn(arn)
        self._set_tags(arn, tags)

    def delete_tags(self, arn: str, keys: list[str]) -> None:
        self.resource_for_arn(arn)
        for key in keys:
            self.tags.get(arn, {}).pop(key, None)

    def list_tags(self, arn: str) -> list[dict[str, str]]:
        self.resource_for_arn(arn)
        return [{"Key": k, "Value": v} for k, v in self.tags.get(arn, {}).items()]

