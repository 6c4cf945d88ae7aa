"""SageMaker Runtime: `POST /endpoints/{name}/invocations` and `/async-invocations`.

Like the vLLM-Omni DLC, the container routes on the custom attributes: `route=/v1/images/generations`
sends the body to that path of the engine; without a route it goes to `/invocations`. The body and its
Content-Type go through untouched, whatever the route (JSON, a multipart upload to `/v1/audio/voices` or
`/v1/images/edits`). Engine failures come back as SageMaker does it: HTTP 424 `ModelError` carrying
`OriginalStatusCode` and `OriginalMessage` (an unknown route: the engine's own 404). A realtime body over
6 MiB is refused before the container sees it, as SageMaker does: HTTP 413 "HTTP content length exceeded
6291456 bytes." with no error type (boto3 reports the code "413").

Async requests are accepted with 202 (OutputLocation, FailureLocation, InferenceId), queued per endpoint
(`MaxConcurrentInvocationsPerInstance` x instances) and run in the background; the engine's response
body is written as is to `<S3OutputPath>/<InferenceId>.out`, or the error text to
`<S3FailurePath>/<InferenceId>-error.out`. An InputLocation that cannot be read, or is an empty object, is
refused at submission with a ValidationError naming it (an empty request is nothing a container could run).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from emulator import versions
from emulator.core import Emulator, parse_s3_uri
from emulator.errors import AwsError, request_id, rest_json_response, runtime_validation
from emulator.records import SERVING, Deployment, EndpointRecord
from protocol.limits import ASYNC_INLINE_LIMIT, REALTIME_PAYLOAD_MAX_BYTES
from protocol.sagemaker import route_from_attributes

log = logging.getLogger("emulator")

MAX_REALTIME_BODY = REALTIME_PAYLOAD_MAX_BYTES  # 6 MiB
DEFAULT_ASYNC_TIMEOUT_S = 900
DEFAULT_REQUEST_TTL_S = 21_600
_ROUTE = re.compile(r"^/[A-Za-z0-9._~/-]*$")


def model_error(emu: Emulator, endpoint: str, status: int | None, text: str, *, summary: str | None = None) -> AwsError:
    region, account = emu.config.region, emu.config.account_id
    group = f"/aws/sagemaker/Endpoints/{endpoint}"
    log_url = f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logEventViewer:group={group}"
    if summary is None:
        kind = "client" if status is not None and 400 <= status < 500 else "server"
        summary = f'Received {kind} error ({status}) from primary with message "{text}"'
        code = f"{kind.upper()}_ERROR_FROM_MODEL"
    else:
        code = "MODEL_ERROR"
    return AwsError(
        "ModelError",
        f"{summary}. See {log_url} in account {account} for more information.",
        424,
        OriginalStatusCode=status,
        OriginalMessage=text,
        LogStreamArn=f"arn:aws:logs:{region}:{account}:log-group:{group}",
        ErrorCode=code,
    )


def serving_endpoint(emu: Emulator, name: str) -> EndpointRecord:
    record = emu.registry.endpoints.get(name.lower())
    if record is None:
        raise runtime_validation(f"Endpoint {name} of account {emu.config.account_id} not found.")
    if record.status not in SERVING:
        raise runtime_validation(
            f"Endpoint {name} of account {emu.config.account_id} is {record.status}, not InService; "
            "it accepts invocations once InService."
        )
    return record


def pick_variant(record: EndpointRecord, target: str | None) -> Deployment:
    if target:
        for d in record.live:
            if d.name == target:
                return d
        raise runtime_validation(f"The variant {target} does not exist on endpoint {record.name}; it has {[d.name for d in record.live]}")
    weights = [float(d.variant.get("InitialVariantWeight", 1.0)) for d in record.live]
    if sum(weights) <= 0:
        return record.live[0]
    return random.choices(record.live, weights=weights)[0]


@dataclass
class EngineReply:
    status: int
    body: bytes
    content_type: str | None
    custom_attributes: str | None


def container_request(
    emu: Emulator, endpoint: str, route: str, body: bytes, *, base_url: str | None,
    content_type: str | None, accept: str | None, attributes: str | None, timeout: httpx.Timeout,
) -> httpx.Request:
    """The POST of the body to the container's route (checked, and refused as the broken-image fault says)."""
    if not _ROUTE.match(route) or "/../" in f"{route}/":
        raise model_error(emu, endpoint, 400, f"invalid route {route!r} in CustomAttributes")
    if (broken := versions.broken_reason(emu.registry, endpoint)) is not None:  # faults.broken_images
        raise model_error(emu, endpoint, 500, versions.broken_body(broken))
    headers = {"Content-Type": content_type or "application/octet-stream", "Accept": accept or "*/*"}
    if attributes:
        headers["X-Amzn-SageMaker-Custom-Attributes"] = attributes
    assert emu.http is not None
    return emu.http.build_request("POST", f"{base_url or emu.engine_url}{route}", content=body, headers=headers,
                                  timeout=timeout)


def container_failure(emu: Emulator, endpoint: str, exc: httpx.HTTPError) -> AwsError:
    """The ModelError of a container that did not answer: timed out, or not reached."""
    if isinstance(exc, httpx.TimeoutException):
        return model_error(
            emu, endpoint, None, "timeout",
            summary="Your invocation timed out while waiting for a response from container primary. "
            "Review the latency metrics for each container in Amazon CloudWatch, resolve the issue, and try again",
        )
    return model_error(
        emu, endpoint, None, str(exc), summary=f"Could not reach container primary ({type(exc).__name__}: {exc})"
    )


async def call_engine(
    emu: Emulator, endpoint: str, route: str, body: bytes, *,
    content_type: str | None, accept: str | None, attributes: str | None, timeout_s: float,
    base_url: str | None = None,
) -> EngineReply:
    """POST the body to the route of the container at `base_url` (default: the engine); a transport failure or
    timeout is a ModelError."""
    request = container_request(emu, endpoint, route, body, base_url=base_url, content_type=content_type,
                                accept=accept, attributes=attributes, timeout=httpx.Timeout(timeout_s))
    assert emu.http is not None
    try:
        r = await emu.http.send(request)
    except httpx.HTTPError as exc:
        raise container_failure(emu, endpoint, exc) from exc
    return EngineReply(r.status_code, r.content, r.headers.get("content-type"), r.headers.get("x-amzn-sagemaker-custom-attributes"))


def _text(body: bytes, limit: int = 4096) -> str:
    return body[:limit].decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------------
def payload_too_large() -> Response:
    """SageMaker's answer to a realtime body over the limit: a bare 413 (no error type: boto3's code is "413")."""
    return Response(json.dumps({"message": f"HTTP content length exceeded {MAX_REALTIME_BODY} bytes."}),
                    status_code=413, media_type="application/json", headers={"x-amzn-RequestId": request_id()})


@dataclass
class RealtimeCall:
    """What a realtime invocation (InvokeEndpoint, its response-stream form) carries, checked: the body, the
    serving variant, the custom attributes."""

    body: bytes
    variant: Any
    attributes: str | None


async def realtime_call(emu: Emulator, request: Request, name: str) -> RealtimeCall | Response:
    """The checks both realtime invocations make first: the caller, the body's size (over it: the bare 413 as a
    Response), an endpoint serving a realtime config (AwsError otherwise), the target variant."""
    emu.authorize(request.headers)
    body = await request.body()
    if len(body) > MAX_REALTIME_BODY:
        return payload_too_large()
    record = serving_endpoint(emu, name)
    if record.async_config:
        raise runtime_validation(
            f"Endpoint {name} is an asynchronous endpoint (its config has AsyncInferenceConfig); "
            "call InvokeEndpointAsync instead"
        )
    variant = pick_variant(record, request.headers.get("x-amzn-sagemaker-target-variant"))
    return RealtimeCall(body, variant, request.headers.get("x-amzn-sagemaker-custom-attributes"))


async def invoke(emu: Emulator, request: Request, name: str) -> Response:
    try:
        call = await realtime_call(emu, request, name)
        if isinstance(call, Response):
            return call
        body, variant, attributes = call.body, call.variant, call.attributes
        reply = await call_engine(
            emu, name, route_from_attributes(attributes), body,
            content_type=request.headers.get("content-type"), accept=request.headers.get("accept"),
            attributes=attributes, timeout_s=emu.config.invocation_timeout_s,
            base_url=versions.container_url(emu.registry, variant, emu.engine_url),
        )
        if not 200 <= reply.status < 300:
            raise model_error(emu, name, reply.status, _text(reply.body))
    except AwsError as err:
        return rest_json_response(err)
    headers = {"x-Amzn-Invoked-Production-Variant": variant.name, "x-amzn-RequestId": str(uuid.uuid4())}
    if reply.custom_attributes:
        headers["X-Amzn-SageMaker-Custom-Attributes"] = reply.custom_attributes
    return Response(reply.body, status_code=200, media_type=reply.content_type or "application/octet-stream", headers=headers)


# --------------------------------------------------------------------------------------------------
def _join_s3(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts if p)])


@dataclass
class AsyncJob:
    endpoint: str
    inference_id: str
    body: bytes | None
    input_location: str | None
    content_type: str | None
    accept: str | None
    attributes: str | None
    output_location: str
    failure_location: str
    kms_key: str | None
    timeout_s: float
    ttl_s: float
    accepted_at: float


def _int_header(request: Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.headers.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise runtime_validation(f"{name} must be an integer between {lo} and {hi} (got {raw!r})") from None
    if not lo <= value <= hi:
        raise runtime_validation(f"{name} must be between {lo} and {hi} (got {value})")
    return value


async def invoke_async(emu: Emulator, request: Request, name: str) -> Response:
    try:
        emu.authorize(request.headers)
        body = await request.body()
        location = request.headers.get("x-amzn-sagemaker-inputlocation")
        if body and location:
            raise runtime_validation("Body and InputLocation are mutually exclusive: provide exactly one of them")
        if not body and not location:
            raise runtime_validation("Provide the request payload: either InputLocation (an S3 URI) or an inline Body")
        if len(body) > ASYNC_INLINE_LIMIT:
            raise runtime_validation(
                "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must have length "
                f"less than or equal to {ASYNC_INLINE_LIMIT} (inline Body is limited to {ASYNC_INLINE_LIMIT} bytes; "
                "upload larger payloads to S3 and pass InputLocation)"
            )
        record = serving_endpoint(emu, name)
        if not record.async_config:
            raise runtime_validation(
                f"Endpoint {name} is not an asynchronous endpoint: its config has no AsyncInferenceConfig; "
                "call InvokeEndpoint instead"
            )
        if location:
            await _check_input(emu, location)
        output_cfg = record.async_config["OutputConfig"]
        inference_id = request.headers.get("x-amzn-sagemaker-inference-id") or str(uuid.uuid4())
        extension = request.headers.get("x-amzn-sagemaker-s3outputpathextension", "")
        filename = request.headers.get("x-amzn-sagemaker-filename") or f"{inference_id}.out"
        output_location = _join_s3(output_cfg["S3OutputPath"], extension, filename)
        failure_base = output_cfg.get("S3FailurePath") or output_cfg["S3OutputPath"]
        failure_location = _join_s3(failure_base, extension, f"{inference_id}-error.out")
        job = AsyncJob(
            endpoint=record.name, inference_id=inference_id, body=body or None, input_location=location,
            content_type=request.headers.get("x-amzn-sagemaker-content-type"),
            accept=request.headers.get("x-amzn-sagemaker-accept"),
            attributes=request.headers.get("x-amzn-sagemaker-custom-attributes"),
            output_location=output_location, failure_location=failure_location,
            kms_key=output_cfg.get("KmsKeyId"),
            timeout_s=_int_header(request, "x-amzn-sagemaker-invocationtimeoutseconds", DEFAULT_ASYNC_TIMEOUT_S, 1, 3600),
            ttl_s=_int_header(request, "x-amzn-sagemaker-requestttlseconds", DEFAULT_REQUEST_TTL_S, 60, 21_600),
            accepted_at=time.monotonic(),
        )
    except AwsError as err:
        return rest_json_response(err)
    task = asyncio.get_running_loop().create_task(_run_job(emu, record, job))
    emu.jobs.add(task)
    task.add_done_callback(emu.jobs.discard)
    emu.lifecycle.autoscaling.arrived(record)  # the backlog autoscaling reads (ApproximateBacklogSize)
    task.add_done_callback(lambda _: emu.lifecycle.autoscaling.finished(record))
    headers = {"X-Amzn-SageMaker-OutputLocation": output_location, "X-Amzn-SageMaker-FailureLocation": failure_location}
    return Response(json.dumps({"InferenceId": inference_id}), status_code=202, media_type="application/json", headers=headers)


async def _check_input(emu: Emulator, location: str) -> None:
    try:
        bucket, key = parse_s3_uri(location)
    except ValueError as exc:
        raise runtime_validation(f"InputLocation {location!r} is not an S3 URI (expected s3://bucket/key)") from exc
    try:
        head = await asyncio.to_thread(emu.s3.head_object, Bucket=bucket, Key=key)
    except AwsError:
        raise
    except Exception as exc:
        raise runtime_validation(f"Could not read InputLocation {location}: {exc}") from exc
    if head.get("ContentLength") == 0:  # an empty request: nothing a container could run
        raise runtime_validation(
            f"InputLocation {location} is an empty object (0 bytes): upload the request payload to it, then "
            "call InvokeEndpointAsync again"
        )


def _queue(emu: Emulator, record: EndpointRecord) -> asyncio.Semaphore:
    instances = max(1, sum(d.instance_count for d in record.live))
    key = (record.arn, record.generation, instances)  # autoscaling changes the count: a queue per fleet size
    if key not in emu.queues:
        per_instance = (record.async_config or {}).get("ClientConfig", {}).get("MaxConcurrentInvocationsPerInstance", 4)
        emu.queues[key] = asyncio.Semaphore(int(per_instance) * instances)
    return emu.queues[key]


async def _put(emu: Emulator, location: str, data: bytes, content_type: str, kms_key: str | None) -> None:
    bucket, key = parse_s3_uri(location)
    extra: dict[str, Any] = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key} if kms_key else {}
    await asyncio.to_thread(emu.s3.put_object, Bucket=bucket, Key=key, Body=data, ContentType=content_type, **extra)


async def _run_job(emu: Emulator, record: EndpointRecord, job: AsyncJob) -> None:
    failure: str | None = None
    try:
        await emu.lifecycle.autoscaling.wait_for_capacity(record)  # scaled to zero: queued until one runs
        async with _queue(emu, record):
            if time.monotonic() - job.accepted_at > job.ttl_s:
                failure = f"Request {job.inference_id} expired: it waited in the queue longer than RequestTTLSeconds={job.ttl_s:.0f}"
            elif emu.registry.endpoints.get(job.endpoint.lower()) is not record:
                failure = f"Endpoint {job.endpoint} was deleted before request {job.inference_id} ran"
            else:
                if emu.config.delays.async_s:
                    await asyncio.sleep(emu.config.delays.async_s)
                body = job.body
                if body is None:
                    bucket, key = parse_s3_uri(job.input_location or "")
                    obj = await asyncio.to_thread(emu.s3.get_object, Bucket=bucket, Key=key)
                    body = await asyncio.to_thread(obj["Body"].read)
                reply = await call_engine(
                    emu, job.endpoint, route_from_attributes(job.attributes), body,
                    content_type=job.content_type, accept=job.accept, attributes=job.attributes, timeout_s=job.timeout_s,
                    base_url=versions.container_url(emu.registry, record.live[0], emu.engine_url) if record.live else None,
                )
                if 200 <= reply.status < 300:
                    await _put(emu, job.output_location, reply.body, reply.content_type or "application/octet-stream", job.kms_key)
                    log.info("async %s -> %s (%d bytes)", job.inference_id, job.output_location, len(reply.body))
                    return
                failure = model_error(emu, job.endpoint, reply.status, _text(reply.body)).message
    except asyncio.CancelledError:
        raise
    except AwsError as err:
        failure = err.message
    except Exception as exc:  # S3 or engine trouble: the request fails, the failure object says why
        log.exception("async request %s failed", job.inference_id)
        failure = f"Asynchronous inference {job.inference_id} failed: {type(exc).__name__}: {exc}"
    try:
        await _put(emu, job.failure_location, failure.encode("utf-8"), "text/plain; charset=utf-8", job.kms_key)
    except Exception:
        log.exception("could not write the failure object %s", job.failure_location)
