"""The SageMaker AI backend: the endpoints of one vLLM-Omni DLC image, behind the studio's clients.

How each family's client speaks to its endpoint is in its module (services/families/<family>.py): the HTTP/2
bidirectional stream for voice and listen streams, `invoke_endpoint` with the route in CustomAttributes for images,
voices and files, `invoke_endpoint_async` through S3 for videos. This module resolves where requests go and
assembles the backend; the clients share one AWS session and one HTTP/2 connection per event loop.

Endpoint names, region, bucket and prefix come from the settings, or else from the infra state file
(`python -m infra deploy` writes it). Credentials come from boto3's chain; `AWS_ENDPOINT_URL_<SERVICE>`
and `AWS_CA_BUNDLE` are honoured by boto3 and by the HTTP/2 transport (the local emulator is reached so).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import botocore.exceptions as bx

from protocol.errors import ConfigError, InvalidInput, ServerError
from protocol.limits import STATE_FILE_MAX_BYTES
from protocol.sagemaker import (
    DEFAULT_ROLES,
    ROLES,
    DeploymentStateFile,
    StateFileInvalid,
    parse_state_file,
    voice_model_of,
)
from services.aws import AwsSession, aws_error, http2_endpoint, missing_endpoint, validate_region
from services.base import Backend, BackendHealth
from services.endpoint_view import describe_endpoint
from services.files import read_user_file
from services.history import History
from services.settings import Settings
from services.speech.http2_clients import Http2Clients


@dataclass(frozen=True)
class SageMakerTargets:
    """Where the SageMaker backend sends requests, and where that was read from."""

    region: str
    profile: str | None
    endpoints: dict[str, str | None]  # role -> endpoint name (None: not configured)
    bucket: str | None
    prefix: str
    kms_key: str | None
    source: str  # "settings", or the state file path
    voice_model: str | None = None  # the voice endpoint's model id, when the state file says (else: ask SageMaker)

    def label(self) -> str:
        names = ", ".join(f"{role}={name}" for role, name in self.endpoints.items() if name) or "no endpoints"
        return f"SageMaker {self.region}: {names}"


def read_state_file(path: Path) -> DeploymentStateFile | None:
    """An infra state file validated as protocol.sagemaker.DeploymentStateFile (the shape infra reads too), or
    None when there is none. ConfigError naming the file and the field when it is unreadable or damaged."""
    if not path.is_file():
        return None
    try:
        return parse_state_file(read_user_file(path, what="the state file", limit=STATE_FILE_MAX_BYTES))
    except (InvalidInput, StateFileInvalid) as exc:
        problem = str(exc)
        raise ConfigError(f"the deployment state file {path} cannot be read: {problem}; fix or remove it, or set the "
                          "endpoint names in the settings") from None


def resolve_targets(settings: Settings) -> SageMakerTargets:
    """Settings first (what was set explicitly), then the infra state file, then defaults. The region is
    checked against botocore's regions (ConfigError naming where it came from and the closest region)."""
    explicit = settings.model_fields_set
    state = read_state_file(settings.state_file)
    names = state.endpoint_names if state is not None else {}
    endpoints = {role: getattr(settings, f"{role}_endpoint") or names.get(role) or None for role in ROLES}

    def from_file(field: str) -> bool:
        return field not in explicit and getattr(state, field, None) not in (None, "")

    def pick(field: str) -> Any:
        return getattr(state, field) if from_file(field) else getattr(settings, field)

    where = f"the region in the state file {settings.state_file}" if from_file("region") else "the region setting"
    region = validate_region(pick("region"), what=where)
    from_state = any(not getattr(settings, f"{role}_endpoint") and names.get(role) for role in ROLES)
    # The state file's voice model is that of its own voice endpoint: not of one the settings name instead.
    same_voice = state is not None and endpoints["voice"] is not None and endpoints["voice"] == names.get("voice")
    return SageMakerTargets(
        region=region, profile=settings.profile, endpoints=endpoints, bucket=pick("bucket"),
        prefix=str(pick("prefix")).strip("/"), kms_key=pick("kms_key"),
        source=str(settings.state_file) if from_state else "settings",
        voice_model=settings.voice_model or (voice_model_of(state) if same_voice and state is not None else None),
    )


def sagemaker_health(aws: AwsSession, targets: SageMakerTargets) -> BackendHealth:
    """DescribeEndpoint for each configured endpoint: all InService is healthy."""
    configured = {role: name for role, name in targets.endpoints.items() if name}
    if not configured:
        return BackendHealth(False, "no SageMaker endpoints are configured: deploy them with `python -m infra deploy` "
                                    "(it writes the state file the studio reads), or set OMNI_STUDIO_VOICE_ENDPOINT, "
                                    "OMNI_STUDIO_IMAGE_ENDPOINT and OMNI_STUDIO_VIDEO_ENDPOINT", undeployed=True)
    parts, ok = [], True
    sm = aws.client("sagemaker")
    for role, name in configured.items():
        try:
            view = describe_endpoint(sm, name)
            status = f"{name} not found" if view.gone else view.status
        except (bx.BotoCoreError, bx.ClientError) as exc:
            err = aws_error(exc, f"{role} endpoint {name}", profile=aws.profile)
            if not isinstance(err, ServerError):  # credentials or network: one message says it all
                return BackendHealth(False, str(err))
            status = f"{name} not found" if err.status == 400 else f"{name}: {err}"
        ok = ok and status == "InService"
        parts.append(f"{role} {status}")
    missing = [role for role in DEFAULT_ROLES if role not in configured]  # an opt-in one is not missed
    if missing:
        parts.append(f"not configured: {', '.join(missing)}")
    return BackendHealth(ok, " · ".join(parts))


def sagemaker_backend(settings: Settings) -> Backend:
    """The SageMaker backend for the settings (and the infra state file when names are not set)."""
    from services import families

    targets = resolve_targets(settings)
    aws = AwsSession(targets.region, targets.profile, connect_timeout=settings.connect_timeout_s,
                     read_timeout=max(settings.request_timeout_s, 60.0))
    uri = http2_endpoint(targets.region)
    parts = families.SageMakerParts(aws=aws, targets=targets, settings=settings, uri=uri,
                                    http2=Http2Clients(aws, uri),  # sessions share one HTTP/2 connection per loop
                                    history=lambda: History.of(settings))
    return Backend(name="sagemaker", target=targets.label(),
                   _build=lambda part: families.build(part, "SageMaker", parts),
                   _health=lambda: sagemaker_health(aws, targets),
                   _missing=lambda family: None if targets.endpoints.get(family) else missing_endpoint(family))
