"""What the studio, infra and the emulator agree on about SageMaker: the three roles, how a request names
its container route, the speech stream's invocation path, and where a deployment's state file lives and
what it holds (`DeploymentStateFile`: one pydantic model that infra and the services layer both validate).

docs/protocols.md, "SageMaker", has the contract (CustomAttributes routing, the HTTP/2 stream, async jobs).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from protocol.catalog import DEFAULT_FAMILY_NAMES, FAMILY_NAMES

# A role is a model family with an endpoint of its own: the catalog names them (protocol/catalog.py).
Role = Literal[FAMILY_NAMES]  # type: ignore[valid-type]  # Literal of the catalog's names, checked by pydantic
ROLES: tuple[Role, ...] = FAMILY_NAMES
# The roles a deployment has when none are named: the opt-in families (listen) are added by name.
DEFAULT_ROLES: tuple[Role, ...] = DEFAULT_FAMILY_NAMES

# A SageMaker endpoint's name, as SageMaker takes it: letters, digits and hyphens, at most 63 (checked before
# anything is sent)
ENDPOINT_NAME = re.compile(r"[A-Za-z0-9](-*[A-Za-z0-9]){0,62}")

DEFAULT_REGION = "us-east-1"  # where a person who names no region works: boto3's profile first, then this

# The container route rides in CustomAttributes (`route=/v1/...`); without one the DLC answers /invocations.
DEFAULT_ROUTE = "/invocations"
SPEECH_INVOCATION_PATH = "v1/audio/speech/stream"  # the bidi stream's model invocation path: no leading slash

# The deployment state file `python -m infra deploy` writes and the services layer reads.
DEFAULT_STATE_FILE = Path(".vllm_omni_media_state.json")  # the published sample's name
STATE_FILE_ENV = "OMNI_STUDIO_STATE_FILE"
STATE_FORMAT = "omni-studio-deployment/1"

ResourceStatus = Literal["planned", "created", "reused", "deleted"]
Phase = Literal["planned", "creating", "deployed", "failed", "incomplete", "deleting"]
EndpointKind = Literal["realtime", "async"]  # the endpoint config: async has an AsyncInferenceConfig


class _StateModel(BaseModel):
    # Strict: the file is written by `python -m infra`, so `"smoke": "yes"` or `"region": 123` means damage,
    # never something to coerce. Unknown keys are ignored (a newer writer may add some).
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class ResourceState(_StateModel):
    """One SageMaker resource of an endpoint: its name (chosen before creating), ARN and status."""

    name: str = Field(min_length=1)
    arn: str | None = None
    status: ResourceStatus = "planned"


class EndpointState(_StateModel):
    """What infra knows about one endpoint's model, endpoint config and endpoint."""

    role: Role
    model: ResourceState
    endpoint_config: ResourceState
    endpoint: ResourceState
    endpoint_status: str | None = None
    instance_type: str | None = None
    failure_reason: str | None = None
    creation_time: str | None = None
    in_service_at: str | None = None
    smoke: dict[str, Any] | None = None


class EndpointPlan(_StateModel):
    role: Role
    endpoint_name: str = Field(min_length=1)
    config_name: str = Field(min_length=1)
    model_name: str = Field(min_length=1)
    model_id: str
    instance_types: list[str]
    kind: EndpointKind
    startup_timeout_s: int
    environment: dict[str, str] = Field(default_factory=dict)
    model_data_uri: str | None = None
    image_tag: str | None = None  # the image this endpoint runs when `infra upgrade` moved it off the spec's


class DeploymentPlan(_StateModel):
    """The deployment's spec as planned: enough to rebuild exactly the same create requests."""

    deployment_id: str = Field(min_length=1)
    region: str
    account: str
    creator: str
    created_at: str
    image_tag: str
    role_arn: str
    bucket: str | None = None
    prefix: str
    name_prefix: str
    kms_key: str | None = None
    subnets: list[str] = Field(default_factory=list)
    security_groups: list[str] = Field(default_factory=list)
    user_tags: dict[str, str] = Field(default_factory=dict)
    endpoints: list[EndpointPlan]


class TtlState(_StateModel):
    """The deployment's time to live: one EventBridge Scheduler one-time schedule per endpoint (in a schedule
    group named for the deployment) that deletes it at `expires_at`. `enabled` false: deployed with --no-ttl,
    the endpoints keep running (and billing) until deleted."""

    enabled: bool
    expires_at: str | None = None  # ISO 8601, UTC
    set_at: str | None = None  # when deploy or extend last set it
    schedule_group: str | None = None
    schedules: dict[Role, str] = Field(default_factory=dict)  # endpoint -> schedule name (created)
    role_arn: str | None = None  # the role Scheduler assumes to call sagemaker:DeleteEndpoint
    role_created: bool = False  # deploy created that role (delete removes it)


class ScalingState(_StateModel):
    """One endpoint's Application Auto Scaling set-up: its scalable target, policies and alarms."""

    resource_id: str = Field(min_length=1)  # endpoint/<name>/variant/<variant>
    min_instances: int = Field(ge=0)
    max_instances: int = Field(ge=1)
    registered: bool = False
    policies: list[str] = Field(default_factory=list)  # policy names put
    alarms: list[str] = Field(default_factory=list)  # CloudWatch alarm names put


VersionStatus = Literal["creating", "updating", "in service", "superseded", "rolled back", "failed"]


class VersionState(_StateModel):
    """One version of an endpoint (`infra upgrade` / `rollback`): the image it runs, its model and endpoint
    config (version 1 has the deployment's names, later ones `<endpoint>-v<n>`), when it was made, how it
    went and its smoke test."""

    number: int = Field(ge=1)
    image_tag: str = Field(min_length=1)
    model_name: str = Field(min_length=1)
    config_name: str = Field(min_length=1)
    created_at: str
    status: VersionStatus
    strategy: str | None = None  # how the endpoint moved to it: deploy | blue/green | plain update | rollback
    smoke: dict[str, Any] | None = None
    detail: str | None = None  # why it failed or was rolled back
    resources_deleted: bool = False  # its model and config were removed (kept until the next good upgrade)


class EndpointVersions(_StateModel):
    """Every version of one endpoint, `current` the one in use, and the CloudWatch alarm (on its 5XX and
    model errors) that a blue/green update's AutoRollbackConfiguration watches."""

    current: int = Field(ge=1)
    versions: list[VersionState] = Field(min_length=1)
    alarm: str | None = None
    alarm_created: bool = False  # infra put the alarm (delete removes it)

    @model_validator(mode="after")
    def _current_is_recorded(self) -> EndpointVersions:
        numbers = [v.number for v in self.versions]
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"versions records a version number twice ({', '.join(map(str, numbers))})")
        if self.current not in numbers:
            raise ValueError(f"current is version {self.current}, which versions does not record")
        return self


class DeploymentStateFile(_StateModel):
    """The deployment state file, as one shape for every reader.

    The flat keys at the top (`region`, `endpoint_names`, `voice_model`, `bucket`, `prefix`, `kms_key`) are
    what the services layer reads, and all a hand-written file needs. `python -m infra` writes the whole
    record as well (`format`, `deployment_id`, `phase`, `endpoints`, `spec`, ...) and reads only files that
    have it (`is_deployment_record`). `voice_model` is the voice endpoint's model id (what it can do:
    protocol.speech.task_types_for_model); files written before it existed have none (`voice_model_of`)."""

    format: str | None = None
    region: str | None = None
    endpoint_names: dict[Role, str | None] = Field(default_factory=dict)
    voice_model: str | None = Field(default=None, min_length=1)
    bucket: str | None = None
    prefix: str | None = None
    kms_key: str | None = None
    deployment_id: str | None = None
    phase: Phase = "planned"
    updated_at: str = ""
    bucket_created: bool = False
    endpoints: dict[Role, EndpointState] | None = None
    spec: DeploymentPlan | None = None
    versions: dict[Role, EndpointVersions] = Field(default_factory=dict)  # empty: written before versions existed
    ttl: TtlState | None = None  # None: written before TTLs existed (no schedules)
    scaling: dict[Role, ScalingState] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _roles_agree(self) -> DeploymentStateFile:
        for role, record in (self.endpoints or {}).items():
            if record.role != role:
                raise ValueError(f"endpoints.{role} is the record of the {record.role} endpoint")
        if self.spec is not None:
            roles = [e.role for e in self.spec.endpoints]
            if len(set(roles)) != len(roles):
                raise ValueError(f"spec.endpoints plans an endpoint twice ({', '.join(roles)})")
            planned = planned_model(self, "voice")
            if self.voice_model is not None and self.voice_model != planned:
                plans = f"the voice endpoint with {planned!r}" if planned else "no voice endpoint"
                raise ValueError(f"voice_model is {self.voice_model!r} but spec.endpoints plans {plans}")
        return self

    @property
    def is_deployment_record(self) -> bool:
        """Written by `python -m infra` (this format, with the spec and the endpoint records)."""
        return self.format == STATE_FORMAT and self.spec is not None and self.endpoints is not None


def voice_model_of(state: DeploymentStateFile) -> str | None:
    """The voice endpoint's model id a validated state file records: its flat `voice_model`, else (a file
    infra wrote before that key existed) the voice endpoint's planned model, else None (a hand-written file
    that does not say: ask SageMaker, `model_id_of_container`)."""
    if state.voice_model:
        return state.voice_model
    return planned_model(state, "voice")


def planned_model(state: DeploymentStateFile, role: str) -> str | None:
    """The model the state file's spec plans for the `role` endpoint (None: no spec, or no such endpoint)."""
    if state.spec is None:
        return None
    return next((e.model_id for e in state.spec.endpoints if e.role == role), None)


# The DLC reads the model from the container's environment. With model files from S3, SM_VLLM_MODEL is the
# folder they land in and SM_VLLM_SERVED_MODEL_NAME keeps the public id (what the model can do is known by it).
MODEL_ENV = "SM_VLLM_MODEL"
SERVED_MODEL_NAME_ENV = "SM_VLLM_SERVED_MODEL_NAME"


def model_id_of_container(environment: dict[str, str] | None) -> str | None:
    """The model id a container serves, from DescribeModel's `PrimaryContainer.Environment`."""
    env = environment or {}
    return env.get(SERVED_MODEL_NAME_ENV) or env.get(MODEL_ENV) or None


class StateFileInvalid(ValueError):
    """The state file's bytes are not the shape above; `str()` names the field, e.g.
    "region: Input should be a valid string"."""


def parse_state_file(raw: bytes | str) -> DeploymentStateFile:
    """Validate a state file's bytes. Raises StateFileInvalid naming the first few problems by field."""
    if isinstance(raw, bytes):
        raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM some editors add when saving
    try:
        return DeploymentStateFile.model_validate_json(raw)
    except ValidationError as exc:
        raise StateFileInvalid(validation_text(exc)) from None


def validation_text(exc: ValidationError, limit: int = 3) -> str:
    """"field.path: message; ..." for the first `limit` errors (and how many more there are)."""
    parts = []
    for err in exc.errors(include_url=False)[:limit]:
        loc = [str(p) for p in err["loc"]]
        if err["type"] == "json_invalid":
            parts.append(f"not JSON ({err['msg']})")
        elif not loc and err["type"] == "model_type":
            parts.append("not a JSON object: the file must hold {...} with the deployment's keys")
        elif loc and loc[-1] == "[key]":
            parts.append(f"{'.'.join(loc[:-2]) or 'key'}: key {loc[-2]!r}: {err['msg']}")
        else:
            parts.append(f"{'.'.join(loc)}: {err['msg']}" if loc else err["msg"].removeprefix("Value error, "))
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def route_attribute(path: str) -> str:
    """The CustomAttributes value that sends a request to the container's `path`."""
    return f"route={path}"


def route_from_attributes(attributes: str | None) -> str:
    """The container path a request goes to: `route=/v1/...` in the custom attributes, else /invocations."""
    for item in (attributes or "").replace(";", ",").split(","):
        key, sep, value = item.strip().partition("=")
        if sep and key.strip() == "route":
            return "/" + value.strip().lstrip("/")
    return DEFAULT_ROUTE
