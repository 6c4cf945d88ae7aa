"""What the emulator keeps of each SageMaker resource: models and endpoint configs as the requests that created
them, and endpoints with their fleets — the one serving, the one being provisioned, the old one held during a
blue/green bake — and their status. emulator/registry.py moves them through their life cycle.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

IN_PROGRESS = ("Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting")
SERVING = ("InService", "Updating", "SystemUpdating")  # statuses that accept invocations


@dataclass
class ModelRecord:
    name: str
    arn: str
    created: float
    spec: dict[str, Any]  # the CreateModel request without ModelName/Tags


@dataclass
class EndpointConfigRecord:
    name: str
    arn: str
    created: float
    spec: dict[str, Any]  # the CreateEndpointConfig request without EndpointConfigName/Tags

    @property
    def variants(self) -> list[dict[str, Any]]:
        return self.spec.get("ProductionVariants", [])

    @property
    def async_config(self) -> dict[str, Any] | None:
        return self.spec.get("AsyncInferenceConfig")


@dataclass
class Deployment:
    """One production variant as provisioned (or being provisioned)."""

    variant: dict[str, Any]  # the ProductionVariant from the endpoint config
    instance_type: str | None  # None for serverless variants
    instance_count: int
    status_message: str
    failure: str | None = None  # set when no pool entry has capacity
    images: list[dict[str, Any]] = field(default_factory=list)  # DeployedImages, once provisioned
    desired_count: int | None = None  # while autoscaling moves it (emulator/autoscaling.py)

    @property
    def name(self) -> str:
        return self.variant.get("VariantName", "AllTraffic")

    @property
    def model_name(self) -> str:
        return self.variant["ModelName"]


@dataclass
class EndpointRecord:
    name: str
    arn: str
    config_name: str
    created: float
    modified: float
    status: str = "Creating"
    failure_reason: str | None = None
    live: list[Deployment] = field(default_factory=list)  # serving now
    pending: list[Deployment] = field(default_factory=list)  # being provisioned (Creating/Updating)
    pending_config: str | None = None
    async_config: dict[str, Any] | None = None  # snapshot: the endpoint keeps it if its config is deleted
    pending_async_config: dict[str, Any] | None = None
    status_since: float = 0.0
    task: asyncio.Task[None] | None = None
    generation: int = 0  # bumps on every (re)provisioning, so per-endpoint runtime state can tell
    # Versions (emulator/versions.py): the last UpdateEndpoint's DeploymentConfig, the old (blue) fleet
    # held during a bake, and the invocation errors the live fleet answered since its traffic shift.
    deployment_config: dict[str, Any] | None = None
    blue: list[Deployment] = field(default_factory=list)
    errors_on_live: int = 0

    def instances_held(self) -> dict[str, int]:
        """Instance type -> count this endpoint holds against the quotas (blue/green: old and new)."""
        if self.status == "Failed":
            return {}
        held: dict[str, int] = {}
        for d in [*self.live, *self.pending, *self.blue]:
            if d.instance_type and d.failure is None:
                held[d.instance_type] = held.get(d.instance_type, 0) + d.instance_count
        return held
