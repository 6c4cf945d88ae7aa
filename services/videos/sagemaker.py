"""Video jobs on SageMaker: `invoke_endpoint_async` with the video studio's multipart body.

Inline when it is at most 128 000 bytes (protocol.limits.ASYNC_INLINE_LIMIT), else uploaded to
`s3://<bucket>/<prefix>/requests/<id>.multipart` (server-side encryption; KMS when a key is configured) and
passed as `InputLocation`; the output and failure objects are polled with backoff and the MP4 read the moment
it exists; the request object is removed after. Handles are resumable: a restarted studio polls the same
objects again. Implements the video transport interface of services/videos/transports.py.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from typing import Any

import botocore.exceptions as bx

from protocol.errors import ConfigError, JobFailed, ServerError, StudioError
from protocol.limits import ASYNC_INLINE_LIMIT, ASYNC_INVOCATION_TIMEOUT_S
from protocol.sagemaker import route_attribute
from protocol.videos import VIDEO_SYNC_PATH
from services.aws import AwsSession, aws_error, missing_endpoint
from services.endpoint_view import describe_endpoint
from services.videos import JobHandle, JobState, VideoPayload

# Polling S3: the output object is looked for at most VIDEO_POLL_MAX_S apart, the failure object every
# FAILURE_POLL_S. HEADs cost $0.0004 per 1000, so an hour-long job costs under a cent of polling, and every
# moment between polls is time the user waits for a video that is already there.
VIDEO_POLL_MAX_S = 0.25


FAILURE_POLL_S = 1.0
# A video endpoint scaled to zero (python -m infra deploy scales it so when idle) starts an instance for a job
# that arrives: about this long (the alarm's two minutes, a GPU instance, the image, the model). While it does,
# the job says so (JobState.notice) instead of looking stuck; DescribeEndpoint is asked at most every
# CAPACITY_CHECK_S (a missing sagemaker:DescribeEndpoint permission only loses the notice).
COLD_START_S = 600.0
CAPACITY_CHECK_S = 5.0
STARTING = "starting an instance"


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
        self._capacity: dict[str, tuple[float, bool]] = {}  # job id -> (when checked, an instance runs)
        self._lock = threading.Lock()

    # -- submit ------------------------------------------------------------------------------------
    def submit(self, body: bytes, content_type: str) -> JobHandle:
        if self.endpoint is None:
            raise missing_endpoint("video")
        inference_id = uuid.uuid4().hex
        call: dict[str, Any] = {
            "EndpointName": self.endpoint, "ContentType": content_type, "Accept": "video/mp4",
            "CustomAttributes": route_attribute(VIDEO_SYNC_PATH), "InferenceId": inference_id,
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
        if self._instances() == 0:  # scaled to zero: the job waits for an instance to start
            data["cold_since"] = f"{time.time():.3f}"
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
        return JobState("running", detail=f"waiting for {output}", notice=self._starting(handle))

    # -- an endpoint scaled to zero ------------------------------------------------------------------
    def _instances(self) -> int | None:
        """Instances the video endpoint runs now (DescribeEndpoint); None when it cannot be told."""
        try:
            return describe_endpoint(self.aws.client("sagemaker"), self.endpoint).current_instances
        except (StudioError, bx.BotoCoreError, bx.ClientError):
            return None

    def _starting(self, handle: JobHandle) -> str | None:
        """"starting an instance (about N min)" while a job submitted at zero instances waits for one."""
        since = handle.data.get("cold_since")
        if not since:
            return None
        now = time.monotonic()
        with self._lock:
            checked, warm = self._capacity.get(handle.id, (float("-inf"), False))
        if warm:
            return None
        if now - checked >= CAPACITY_CHECK_S:
            warm = bool(self._instances())
            with self._lock:
                self._capacity[handle.id] = (now, warm)
            if warm:
                return None
        return starting_notice(time.time() - float(since))

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
            self._capacity.pop(handle.id, None)
        output = handle.data.get("output")
        if not output:
            raise JobFailed(f"the job record for {handle.id} has no output location")
        mp4 = self._read(output)
        self._remove(handle.data.get("input"))
        return VideoPayload(mp4=mp4, model_s=None, request_id=handle.id)

    def can_resume(self, handle: JobHandle) -> bool:
        return handle.transport == self.kind and handle.target == self.target and bool(handle.data.get("output"))


def starting_notice(waited_s: float) -> str:
    """`starting an instance (about 8 min)`, counting down from COLD_START_S; past it, says so."""
    left = COLD_START_S - waited_s
    if left <= 0:
        return f"{STARTING} (taking longer than the usual {COLD_START_S / 60:.0f} min)"
    return f"{STARTING} (about {max(1, math.ceil(left / 60))} min)"
