"""The SageMaker AI backend: the three endpoints of one vLLM-Omni DLC image, behind the studio's clients.

- speech: the HTTP/2 bidirectional stream (`services._sagemaker_speech.Http2SpeechTransport`) to the
  realtime voice endpoint's `v1/audio/speech/stream`;
- voices: uploads through `invoke_endpoint` with `CustomAttributes="route=/v1/audio/voices"` and the multipart
  body (services/speech/voices.py); listed from the studio's own records, as SageMaker forwards only POSTs;
- images: `invoke_endpoint` with the JSON body and `CustomAttributes="route=/v1/images/generations"`;
- videos: `invoke_endpoint_async` with the video studio's multipart body — inline when it is at most
  128 000 bytes, else uploaded to `s3://<bucket>/<prefix>/requests/<id>.multipart` (server-side
  encryption; KMS when a key is configured) and passed as `InputLocation`; the output and failure objects
  are polled with backoff and the MP4 read the moment it exists; the request object is removed after.
  Handles are resumable: a restarted studio polls the same objects again.

Endpoint names, region, bucket and prefix come from the settings, or else from the infra state file
(`python -m infra deploy` writes it). Credentials come from boto3's chain; `AWS_ENDPOINT_URL_<SERVICE>`
and `AWS_CA_BUNDLE` are honoured by boto3 and by the HTTP/2 transport (the local emulator is reached so).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import botocore.exceptions as bx

from protocol.errors import BackendUnreachable, ConfigError, InvalidInput, ServerError
from protocol.limits import STATE_FILE_MAX_BYTES
from protocol.sagemaker import (
    DEFAULT_ROLES,
    ROLES,
    DeploymentStateFile,
    StateFileInvalid,
    model_id_of_container,
    parse_state_file,
    voice_model_of,
)
from protocol.speech import QWEN3_TTS_LANGUAGES, QWEN3_TTS_SPEAKERS, TaskType, task_types_for_model
from services.aws import AwsSession, aws_error, http2_endpoint, missing_endpoint, validate_region
from services.base import Backend, BackendHealth
from services.endpoint_view import describe_endpoint
from services.files import read_user_file
from services.history import History
from services.images import ImageClient
from services.images.sagemaker import SageMakerImageTransport
from services.settings import Settings
from services.speech import SpeechClient
from services.speech.sagemaker_http2 import (
    SPEECH_INVOCATION_PATH,
    Http2Clients,
    Http2SpeechTransport,
)
from services.listen.sagemaker import SageMakerListen
from services.speech.voices import SageMakerVoices
from services.videos import VideoClient
from services.videos.sagemaker import SageMakerVideoTransport


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


UNKNOWN_MODEL = "unknown"


class SageMakerCatalog:
    """Voices, languages and task types of the voice endpoint's model: the state file's `voice_model` when it
    names this endpoint's model, else its container's model id (control plane describes, read once).

    SageMaker only forwards POSTs to a container, so vLLM-Omni's `GET /v1/audio/voices` is out of reach;
    the model id names the speakers. "default" (the model's own default speaker) always comes first."""

    def __init__(self, aws: AwsSession, endpoint: str | None, model: str | None = None) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self._model: str | None = model
        self._lock = threading.Lock()
        self.problem: str | None = None  # what could not be read, when the model id is unknown

    def model_id(self) -> str:
        """The model id, looked up once when neither the settings nor the state file say; "unknown" when the
        control plane cannot be read (credentials that may only invoke): `problem` then says what and why."""
        if self.endpoint is None:
            raise missing_endpoint("voice")
        with self._lock:
            if self._model is None:
                try:
                    self._model = endpoint_model(self.aws, self.endpoint)
                except (ServerError, BackendUnreachable) as exc:  # denied, or no control plane: invoking may work
                    self._model = UNKNOWN_MODEL
                    self.problem = (f"could not read which model endpoint {self.endpoint} serves ({exc}); every "
                                    "Qwen3-TTS voice and language is offered and sent as chosen — set voice_model "
                                    "in the settings to name it")
            return self._model

    @property
    def known(self) -> bool:
        return self.model_id() != UNKNOWN_MODEL

    def voices(self) -> list[str]:
        model = self.model_id().lower()
        if not self.known or ("qwen3-tts" in model and "customvoice" in model):
            return ["default", *QWEN3_TTS_SPEAKERS]
        return ["default"]

    def languages(self) -> list[str]:
        return list(QWEN3_TTS_LANGUAGES) if not self.known or "qwen3-tts" in self.model_id().lower() else ["Auto"]

    def task_types(self) -> tuple[TaskType, ...]:
        return task_types_for_model(self.model_id()) if self.known else ("CustomVoice",)

    def deploy_hint(self, models: list[str]) -> str:
        return f"deploy one as the voice endpoint: `python -m infra deploy --voice-model {models[-1]}`"


def endpoint_model(aws: AwsSession, endpoint: str) -> str:
    """The model id behind `endpoint` (describe endpoint → config → model): the container's served model name
    or SM_VLLM_MODEL (protocol.sagemaker.model_id_of_container)."""
    sm = aws.client("sagemaker")
    doing = f"looking up the model behind endpoint {endpoint}"
    try:
        config_name = sm.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
        variants = sm.describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"]
        model = sm.describe_model(ModelName=variants[0]["ModelName"])
    except (bx.BotoCoreError, bx.ClientError) as exc:
        raise aws_error(exc, doing, profile=aws.profile) from None
    container = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
    return model_id_of_container(container.get("Environment")) or "unknown"


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
    targets = resolve_targets(settings)
    aws = AwsSession(targets.region, targets.profile, connect_timeout=settings.connect_timeout_s,
                     read_timeout=max(settings.request_timeout_s, 60.0))
    voice = targets.endpoints["voice"]
    uri = http2_endpoint(targets.region)
    clients = Http2Clients(aws, uri)  # sessions share one HTTP/2 connection per event loop

    def speech_transport() -> Http2SpeechTransport:
        if voice is None:
            raise missing_endpoint("voice")
        return Http2SpeechTransport(aws, voice, path=SPEECH_INVOCATION_PATH, endpoint_uri=uri,
                                    connect_timeout=settings.connect_timeout_s,
                                    receive_timeout=settings.request_timeout_s, clients=clients)

    def listen_transport(path: str) -> Http2SpeechTransport:
        assert targets.endpoints["listen"] is not None
        return Http2SpeechTransport(aws, targets.endpoints["listen"], path=path, endpoint_uri=uri,
                                    connect_timeout=settings.connect_timeout_s,
                                    receive_timeout=settings.request_timeout_s, clients=clients)

    return Backend(
        name="sagemaker",
        target=targets.label(),
        speech=SpeechClient(speech_transport, SageMakerCatalog(aws, voice, targets.voice_model),
                            target=f"SageMaker endpoint {voice} ({targets.region})" if voice else "SageMaker (no voice endpoint)"),
        images=ImageClient(SageMakerImageTransport(aws, targets.endpoints["image"])),
        videos=VideoClient(SageMakerVideoTransport(aws, targets.endpoints["video"], bucket=targets.bucket,
                                                   prefix=targets.prefix, kms_key=targets.kms_key)),
        voices=SageMakerVoices(aws, voice, lambda: History.of(settings)),  # opened on first use
        # the listen endpoint: files through invoke_endpoint, streams on the same HTTP/2 client as speech
        listen=SageMakerListen(aws, targets.endpoints["listen"], transport=listen_transport,
                               lookup_model=lambda: endpoint_model(aws, str(targets.endpoints["listen"])),
                               timeout=settings.request_timeout_s),
        _health=lambda: sagemaker_health(aws, targets),
    )


