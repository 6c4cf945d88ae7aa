"""The SageMaker AI backend: the three endpoints of one vLLM-Omni DLC image, behind the studio's clients.

- speech: the HTTP/2 bidirectional stream (`services._sagemaker_speech.Http2SpeechTransport`) to the
  realtime voice endpoint's `v1/audio/speech/stream`;
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

import json
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import botocore.exceptions as bx
from pydantic import ValidationError

from services._aws import AwsSession, aws_error, http2_endpoint
from services._sagemaker_speech import SPEECH_INVOCATION_PATH, Http2Clients, Http2SpeechTransport
from services.backend import Backend, BackendHealth
from services.errors import ConfigError, JobFailed, ServerError, StudioError
from services.images import IMAGES_PATH, ImageClient, TransportTimings
from services.protocol import QWEN3_TTS_LANGUAGES, VIDEO_SYNC_PATH, ImageGenerationRequest, ImageGenerationResponse
from services.settings import Settings
from services.speech import SpeechClient
from services.videos import JobHandle, JobState, VideoClient, VideoPayload

ASYNC_INLINE_LIMIT = 128_000  # bytes: larger async payloads must go through S3
ASYNC_INVOCATION_TIMEOUT_S = 3600  # SageMaker async allows up to an hour
# Polling S3: the output object is looked for at most VIDEO_POLL_MAX_S apart, the failure object every
# FAILURE_POLL_S. HEADs cost $0.0004 per 1000, so an hour-long job costs under a cent of polling, and every
# moment between polls is time the user waits for a video that is already there.
VIDEO_POLL_MAX_S = 0.25
FAILURE_POLL_S = 1.0
QWEN3_TTS_SPEAKERS = ["vivian", "serena", "uncle_fu", "dylan", "eric", "ryan", "aiden", "ono_anna", "sohee"]
ROLES = ("voice", "image", "video")


# ---------------------------------------------------------------------------------------------------------
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

    def label(self) -> str:
        names = ", ".join(f"{role}={name}" for role, name in self.endpoints.items() if name) or "no endpoints"
        return f"SageMaker {self.region}: {names}"


def read_state_file(path: Path) -> dict[str, Any] | None:
    """The flat keys of an infra state file, or None when there is none. ConfigError when it is unreadable."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the deployment state file {path} cannot be read ({exc}); fix or remove it, or set the "
                          "endpoint names in the settings") from None
    if not isinstance(data, dict):
        raise ConfigError(f"the deployment state file {path} is not a JSON object")
    return data


def resolve_targets(settings: Settings) -> SageMakerTargets:
    """Settings first (what was set explicitly), then the infra state file, then defaults."""
    explicit = settings.model_fields_set
    state = read_state_file(settings.state_file) or {}
    names = state.get("endpoint_names") if isinstance(state.get("endpoint_names"), dict) else {}
    endpoints = {role: getattr(settings, f"{role}_endpoint") or names.get(role) or None for role in ROLES}

    def pick(field: str) -> Any:
        if field in explicit or field not in state or state.get(field) in (None, ""):
            return getattr(settings, field)
        return state[field]

    from_state = any(not getattr(settings, f"{role}_endpoint") and names.get(role) for role in ROLES)
    return SageMakerTargets(
        region=pick("region"), profile=settings.profile, endpoints=endpoints, bucket=pick("bucket"),
        prefix=str(pick("prefix")).strip("/"), kms_key=pick("kms_key"),
        source=str(settings.state_file) if from_state else "settings",
    )


def _missing(role: str) -> ConfigError:
    return ConfigError(
        f"no {role} endpoint is configured for the SageMaker backend: set OMNI_STUDIO_{role.upper()}_ENDPOINT "
        f"(or {role}_endpoint in studio.toml), or deploy it with `python -m infra deploy`, which writes the state "
        "file the studio reads"
    )


# ---------------------------------------------------------------------------------------------------------
class SageMakerCatalog:
    """Voices and languages of the voice endpoint's model, from its SM_VLLM_MODEL (control plane describes).

    SageMaker only forwards POSTs to a container, so vLLM-Omni's `GET /v1/audio/voices` is out of reach;
    the model id names the speakers. "default" (the model's own default speaker) always comes first."""

    def __init__(self, aws: AwsSession, endpoint: str | None) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self._model: str | None = None
        self._lock = threading.Lock()

    def model_id(self) -> str:
        if self.endpoint is None:
            raise _missing("voice")
        with self._lock:
            if self._model is None:
                self._model = endpoint_model(self.aws, self.endpoint)
            return self._model

    def voices(self) -> list[str]:
        model = self.model_id().lower()
        if "qwen3-tts" in model and "customvoice" in model:
            return ["default", *QWEN3_TTS_SPEAKERS]
        return ["default"]

    def languages(self) -> list[str]:
        return list(QWEN3_TTS_LANGUAGES) if "qwen3-tts" in self.model_id().lower() else ["Auto"]


def endpoint_model(aws: AwsSession, endpoint: str) -> str:
    """SM_VLLM_MODEL of the model behind `endpoint` (describe endpoint → config → model)."""
    sm = aws.client("sagemaker")
    doing = f"looking up the model behind endpoint {endpoint}"
    try:
        config_name = sm.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
        variants = sm.describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"]
        model = sm.describe_model(ModelName=variants[0]["ModelName"])
    except (bx.BotoCoreError, bx.ClientError) as exc:
        raise aws_error(exc, doing, profile=aws.profile) from None
    container = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
    return str((container.get("Environment") or {}).get("SM_VLLM_MODEL") or "unknown")


# ---------------------------------------------------------------------------------------------------------
class SageMakerImageTransport:
    """`invoke_endpoint` on the realtime image endpoint, routed to `/v1/images/generations`."""

    def __init__(self, aws: AwsSession, endpoint: str | None) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self.target = f"SageMaker endpoint {endpoint} ({aws.region}, {IMAGES_PATH})" if endpoint else "SageMaker (no image endpoint)"

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]:
        if self.endpoint is None:
            raise _missing("image")
        t0 = time.perf_counter()
        try:
            resp = self.aws.client("sagemaker-runtime").invoke_endpoint(
                EndpointName=self.endpoint, Body=json.dumps(request.wire()).encode(), ContentType="application/json",
                Accept="application/json", CustomAttributes=f"route={IMAGES_PATH}",
            )
            body = resp["Body"].read()
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, f"generating on image endpoint {self.endpoint}", profile=self.aws.profile) from None
        request_s = time.perf_counter() - t0
        try:
            payload = ImageGenerationResponse.model_validate_json(body)
        except ValidationError:
            raise ServerError(f"image endpoint {self.endpoint} answered something that is not an image generation "
                              f"result: {body[:200]!r}") from None
        return payload, TransportTimings(model_s=None, request_s=request_s)


# ---------------------------------------------------------------------------------------------------------
def parse_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ServerError(f"SageMaker returned {uri!r}, which is not an s3://bucket/key location")
    bucket, key = uri[5:].split("/", 1)
    return bucket, key


class SageMakerVideoTransport:
    """`invoke_endpoint_async` on the video endpoint; results polled in S3 (JobHandle data: locations)."""

    kind = "sagemaker-async"
    poll_max_s = VIDEO_POLL_MAX_S

    def __init__(self, aws: AwsSession, endpoint: str | None, *, bucket: str | None, prefix: str,
                 kms_key: str | None = None, inline_limit: int = ASYNC_INLINE_LIMIT) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.kms_key = kms_key
        self.inline_limit = inline_limit
        self.target = f"sagemaker://{aws.region}/{endpoint}" if endpoint else "SageMaker (no video endpoint)"
        self._failure_checked: dict[str, float] = {}  # job id -> when its failure object was last looked for
        self._lock = threading.Lock()

    # -- submit ------------------------------------------------------------------------------------
    def submit(self, body: bytes, content_type: str) -> JobHandle:
        if self.endpoint is None:
            raise _missing("video")
        inference_id = uuid.uuid4().hex
        call: dict[str, Any] = {
            "EndpointName": self.endpoint, "ContentType": content_type, "Accept": "video/mp4",
            "CustomAttributes": f"route={VIDEO_SYNC_PATH}", "InferenceId": inference_id,
            "InvocationTimeoutSeconds": ASYNC_INVOCATION_TIMEOUT_S,
        }
        data: dict[str, str] = {}
        if len(body) <= self.inline_limit:
            call["Body"] = body
        else:
            data["input"] = self._upload(inference_id, body)
            call["InputLocation"] = data["input"]
        try:
            resp = self.aws.client("sagemaker-runtime").invoke_endpoint_async(**call)
        except (bx.BotoCoreError, bx.ClientError) as exc:
            if "input" in data:
                self._remove(data["input"])
            raise aws_error(exc, f"submitting to video endpoint {self.endpoint}", profile=self.aws.profile) from None
        data["output"] = resp["OutputLocation"]
        data["failure"] = resp.get("FailureLocation") or ""
        return JobHandle(self.kind, self.target, resp.get("InferenceId") or inference_id, resumable=True, data=data)

    def _upload(self, inference_id: str, body: bytes) -> str:
        if not self.bucket:
            raise ConfigError(
                f"this video request is {len(body):,} bytes, over SageMaker's {self.inline_limit:,}-byte limit for an "
                "inline async body, so it goes through S3: set OMNI_STUDIO_BUCKET (or bucket in studio.toml), or "
                "deploy with `python -m infra deploy`, which creates one; a smaller reference image also fits inline"
            )
        key = "/".join(p for p in (self.prefix, "requests", f"{inference_id}.multipart") if p)
        extra: dict[str, Any] = ({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self.kms_key} if self.kms_key
                                 else {"ServerSideEncryption": "AES256"})
        try:
            # The container gets the invocation's ContentType, not the object's; stored as octet-stream (a
            # multipart/form-data object type also makes moto's server parse the body as a form and lose it).
            self.aws.client("s3").put_object(Bucket=self.bucket, Key=key, Body=body,
                                             ContentType="application/octet-stream", **extra)
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, f"uploading the video request to s3://{self.bucket}/{key}",
                            profile=self.aws.profile) from None
        return f"s3://{self.bucket}/{key}"

    # -- poll / fetch ------------------------------------------------------------------------------
    def _exists(self, uri: str) -> bool:
        bucket, key = parse_s3_uri(uri)
        try:
            self.aws.client("s3").head_object(Bucket=bucket, Key=key)
            return True
        except bx.ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise aws_error(exc, f"checking {uri}", profile=self.aws.profile) from None
        except bx.BotoCoreError as exc:
            raise aws_error(exc, f"checking {uri}", profile=self.aws.profile) from None

    def _read(self, uri: str) -> bytes:
        bucket, key = parse_s3_uri(uri)
        try:
            return self.aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, f"reading {uri}", profile=self.aws.profile) from None

    def _remove(self, uri: str | None) -> None:
        """Delete the request object (best effort: a leftover costs cents, and the bucket's lifecycle may age it out)."""
        if not uri:
            return
        try:
            bucket, key = parse_s3_uri(uri)
            self.aws.client("s3").delete_object(Bucket=bucket, Key=key)
        except (StudioError, bx.BotoCoreError, bx.ClientError):
            pass

    def poll(self, handle: JobHandle, wait_s: float = 0.0) -> JobState:
        output, failure = handle.data.get("output"), handle.data.get("failure")
        if not output:
            return JobState("lost", error=f"the job record for {handle.id} has no output location to poll")
        try:
            for attempt in range(2):  # look now, and once more after waiting
                if self._exists(output):
                    return JobState("succeeded")
                if failure and self._failure_due(handle.id) and self._exists(failure):
                    text = self._read(failure).decode("utf-8", errors="replace").strip()
                    self._remove(handle.data.get("input"))
                    return JobState("failed", error=f"video endpoint {self.endpoint or handle.target} failed: "
                                                    f"{text or '(empty failure object)'} — {failure}")
                if attempt == 0 and wait_s > 0:
                    time.sleep(wait_s)
        except StudioError as exc:
            return JobState("failed", error=str(exc))
        return JobState("running", detail=f"waiting for {output}")

    def _failure_due(self, job_id: str) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._failure_checked.get(job_id, float("-inf")) < FAILURE_POLL_S:
                return False
            self._failure_checked[job_id] = now
            return True

    def fetch(self, handle: JobHandle) -> VideoPayload:
        with self._lock:
            self._failure_checked.pop(handle.id, None)
        output = handle.data.get("output")
        if not output:
            raise JobFailed(f"the job record for {handle.id} has no output location")
        mp4 = self._read(output)
        self._remove(handle.data.get("input"))
        return VideoPayload(mp4=mp4, model_s=None, request_id=handle.id)

    def can_resume(self, handle: JobHandle) -> bool:
        return handle.transport == self.kind and handle.target == self.target and bool(handle.data.get("output"))


# ---------------------------------------------------------------------------------------------------------
def sagemaker_health(aws: AwsSession, targets: SageMakerTargets) -> BackendHealth:
    """DescribeEndpoint for each configured endpoint: all InService is healthy."""
    configured = {role: name for role, name in targets.endpoints.items() if name}
    if not configured:
        return BackendHealth(False, "no SageMaker endpoints are configured: deploy them with `python -m infra deploy` "
                                    "(it writes the state file the studio reads), or set OMNI_STUDIO_VOICE_ENDPOINT, "
                                    "OMNI_STUDIO_IMAGE_ENDPOINT and OMNI_STUDIO_VIDEO_ENDPOINT")
    parts, ok = [], True
    sm = aws.client("sagemaker")
    for role, name in configured.items():
        try:
            status = sm.describe_endpoint(EndpointName=name)["EndpointStatus"]
        except (bx.BotoCoreError, bx.ClientError) as exc:
            err = aws_error(exc, f"{role} endpoint {name}", profile=aws.profile)
            if not isinstance(err, ServerError):  # credentials or network: one message says it all
                return BackendHealth(False, str(err))
            status = f"{name} not found" if err.status == 400 else f"{name}: {err}"
        ok = ok and status == "InService"
        parts.append(f"{role} {status}")
    missing = [role for role in ROLES if role not in configured]
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
            raise _missing("voice")
        return Http2SpeechTransport(aws, voice, path=SPEECH_INVOCATION_PATH, endpoint_uri=uri,
                                    connect_timeout=settings.connect_timeout_s,
                                    receive_timeout=settings.request_timeout_s, clients=clients)

    return Backend(
        name="sagemaker",
        target=targets.label(),
        speech=SpeechClient(speech_transport, SageMakerCatalog(aws, voice),
                            target=f"SageMaker endpoint {voice} ({targets.region})" if voice else "SageMaker (no voice endpoint)"),
        images=ImageClient(SageMakerImageTransport(aws, targets.endpoints["image"])),
        videos=VideoClient(SageMakerVideoTransport(aws, targets.endpoints["video"], bucket=targets.bucket,
                                                   prefix=targets.prefix, kms_key=targets.kms_key)),
        _health=lambda: sagemaker_health(aws, targets),
    )


__all__ = [
    "ASYNC_INLINE_LIMIT", "Http2SpeechTransport", "SageMakerCatalog", "SageMakerImageTransport", "SageMakerTargets",
    "SageMakerVideoTransport", "endpoint_model", "resolve_targets", "sagemaker_backend", "sagemaker_health",
]
