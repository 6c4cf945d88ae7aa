"""What the emulator can be told: timings, Service Quotas values and injected faults.

One JSON document (`--config faults.json`, or `PUT /_emulator/config` at run time) shaped like:

    {"region": "us-east-1", "account_id": "123456789012",
     "delays": {"create_s": 2, "update_s": 2, "delete_s": 1},
     "quotas": {"ml.g6.xlarge": 0}, "default_quota": 4,
     "containers": {":chat-": "http://127.0.0.1:8123"},
     "faults": {"capacity_unavailable": ["ml.g6.xlarge"],
                "fail_endpoints": {"voice-ep": "CUDA driver too old"},
                "expire_credentials_after_calls": 5,
                "bidi_expire_after_frames": 3, "bidi_cut_after_output_parts": 10}}

Every field has a default, so `{}` is a valid config. `POST /_emulator/reset` brings back the start-up
config and forgets every resource, so tests stay independent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from protocol.sagemaker import DEFAULT_REGION

DEFAULT_ACCOUNT_ID = "123456789012"  # moto's default account too, so S3/STS and SageMaker agree
# The AMIs whose host sidecar terminates HTTP/2 bidirectional streams (docs/protocols.md, "SageMaker").
BIDI_AMI_VERSIONS = ["al2023-ami-sagemaker-inference-gpu-4-1"]


class Delays(BaseModel):
    """How long each transition takes (seconds). Real endpoints take minutes; tests use fractions.

    Transitions in progress follow changes: a long delay holds an endpoint in Creating, a short one
    then releases it."""

    model_config = ConfigDict(extra="forbid")

    create_s: float = Field(default=2.0, ge=0, le=3600)  # Creating -> InService | Failed
    update_s: float = Field(default=2.0, ge=0, le=3600)  # Updating -> InService
    delete_s: float = Field(default=1.0, ge=0, le=3600)  # Deleting -> gone
    # The baking period of a blue/green UpdateEndpoint (its WaitIntervalInSeconds stands in real SageMaker):
    # the new fleet takes the traffic while the old one waits and the rollback alarms are watched.
    bake_s: float = Field(default=1.0, ge=0, le=3600)
    # Extra time every async request waits before it runs (a busy endpoint, a long video): lets tests
    # stop a studio while its job is still on the endpoint.
    async_s: float = Field(default=0.0, ge=0, le=3600)
    # Creating time per endpoint: a name, or a part of one, -> seconds (first match wins), e.g.
    # {"-voice-": 2.0, "-video-": 3.0}; others take create_s. Lets a bench give each endpoint its own pace.
    create_s_by_endpoint: dict[str, float] = Field(default_factory=dict)

    @field_validator("create_s_by_endpoint")
    @classmethod
    def _in_range(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, s in v.items() if not 0 <= s <= 3600]
        if bad:
            raise ValueError(f"create_s_by_endpoint values must be within 0..3600 s (not for {', '.join(bad)})")
        return v

    def create_for(self, endpoint_name: str) -> float:
        name = endpoint_name.lower()
        return next((s for part, s in self.create_s_by_endpoint.items() if part.lower() in name), self.create_s)


class Faults(BaseModel):
    """Failures to inject. All empty by default."""

    model_config = ConfigDict(extra="forbid")

    # Instance types with no capacity right now: a pool falls through to its next priority;
    # an endpoint whose every entry is listed here goes Failed.
    capacity_unavailable: list[str] = Field(default_factory=list)
    # Endpoint name (or "*" for any) -> FailureReason; the endpoint goes Failed after its create delay.
    fail_endpoints: dict[str, str] = Field(default_factory=dict)
    # A part of an image URI (e.g. a tag) -> FailureReason: a fleet whose model runs such an image fails its
    # health check — CreateEndpoint goes Failed, UpdateEndpoint is rolled back (InService on the old fleet).
    fail_images: dict[str, str] = Field(default_factory=dict)
    # A part of an image URI -> error text: such a fleet comes up, but every invocation it serves is a
    # ModelError (500 from the container); during a blue/green bake its errors trip the rollback alarms.
    broken_images: dict[str, str] = Field(default_factory=dict)
    # Each access key id may make this many AWS API calls; later calls get ExpiredTokenException.
    # A different access key (fresh credentials) starts its own count, so a `resume` can succeed.
    expire_credentials_after_calls: int | None = Field(default=None, ge=0)
    # A bidirectional stream accepts this many input frames, then ends with an ExpiredTokenException
    # ModelStreamError (credentials that expire mid-stream).
    bidi_expire_after_frames: int | None = Field(default=None, ge=0)
    # A bidirectional stream is reset (HTTP/2 RST_STREAM) after sending this many output parts.
    bidi_cut_after_output_parts: int | None = Field(default=None, ge=0)
    # Control-plane actions the caller's credentials may not call ("sagemaker:DescribeEndpoint",
    # "sagemaker:Describe*"): they answer AccessDeniedException, as for a user allowed to invoke endpoints only.
    deny_actions: list[str] = Field(default_factory=list)


class Autoscaling(BaseModel):
    """How long scaling takes on the emulator's clock (emulator/autoscaling.py); tests move the clock."""

    model_config = ConfigDict(extra="forbid")

    scale_in_after_s: float = Field(default=900.0, ge=0)  # no job this long: target tracking scales in
    scale_in_s: float = Field(default=120.0, ge=0)  # Updating while instances are released
    scale_out_s: float = Field(default=480.0, ge=0)  # Updating while an instance starts (GPU, image, model)
    # The HasBacklogWithoutCapacity alarm's delay; None: its own Period x DatapointsToAlarm.
    alarm_delay_s: float | None = Field(default=None, ge=0)


class EmulatorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    region: str = DEFAULT_REGION
    account_id: str = Field(default=DEFAULT_ACCOUNT_ID, pattern=r"^\d{12}$")
    delays: Delays = Field(default_factory=Delays)
    # Service Quotas "ml.<type> for endpoint usage" values, per instance type; others get default_quota.
    quotas: dict[str, float] = Field(default_factory=dict)
    default_quota: float = Field(default=4, ge=0)
    # Realtime invocations time out after this long (SageMaker: 60 s).
    invocation_timeout_s: float = Field(default=60.0, gt=0)
    # Health check of the engine when an endpoint finishes provisioning (the container's /ping).
    health_check_timeout_s: float = Field(default=10.0, gt=0)
    bidi_ami_versions: list[str] = Field(default_factory=lambda: list(BIDI_AMI_VERSIONS))
    # The Price List stand-in's figures: region -> instance type -> USD per hour of hosting (None: its own).
    prices: dict[str, dict[str, float]] | None = None
    # Which model server plays a container: a part of an image URI -> its base URL (http://127.0.0.1:8123), the
    # first match wins; any other image is played by the engine the emulator was started with. Lets one endpoint
    # run, say, a chat server while the others run the offline engine (SageMaker runs each image's own server).
    containers: dict[str, str] = Field(default_factory=dict)
    faults: Faults = Field(default_factory=Faults)
    autoscaling: Autoscaling = Field(default_factory=Autoscaling)

    @field_validator("quotas")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, q in v.items() if q < 0]
        if bad:
            raise ValueError(f"quota values must be >= 0 (got negative values for {', '.join(bad)})")
        return v

    @field_validator("containers")
    @classmethod
    def _urls(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [k for k, url in v.items() if not k or not url.startswith(("http://", "https://"))]
        if bad:
            raise ValueError(f"containers maps a non-empty part of an image URI to an http(s):// base URL (not for "
                             f"{', '.join(repr(b) for b in bad)})")
        return {k: url.rstrip("/") for k, url in v.items()}

    def quota_for(self, instance_type: str) -> float:
        return self.quotas.get(instance_type, self.default_quota)

    def merged(self, patch: dict[str, Any]) -> EmulatorConfig:
        """This config with `patch` merged in (nested objects merge, other values replace)."""
        return EmulatorConfig.model_validate(_deep_merge(self.model_dump(), patch))


_REPLACED = ("quotas", "fail_endpoints", "prices", "fail_images", "broken_images", "containers")  # whole tables


def _deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in _REPLACED:
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class ConfigFileError(ValueError):
    pass


def load_config(path: Path | None) -> EmulatorConfig:
    """The config in `path` (JSON), or the defaults; a bad file raises ConfigFileError naming the problem."""
    if path is None:
        return EmulatorConfig()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigFileError(f"cannot read emulator config {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"emulator config {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigFileError(f"emulator config {path} must hold a JSON object")
    try:
        return EmulatorConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigFileError(f"emulator config {path}: {describe_validation_error(exc)}") from exc


def describe_validation_error(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in exc.errors())
