"""The emulator's ASGI application: one app behind both listeners (plain HTTP and TLS with h2).

Routes:
- `POST /` — SageMaker, Service Quotas, the Price List API (JSON 1.1, by `X-Amz-Target`) and STS (query protocol)
- `POST /endpoints/{name}/invocations`, `/async-invocations` — SageMaker Runtime; `/invocations-response-stream`
  — its response stream (emulator/response_stream.py)
- `POST /endpoints/{name}/invocations-bidirectional-stream` — the HTTP/2 bidirectional stream
- `/schedules`, `/schedule-groups`, `/tags/...` — EventBridge Scheduler; Application Auto Scaling, CloudWatch
  and IAM on `POST /` — passed on to moto with its gaps filled (emulator/lifecycle.py)
- `/_emulator/...` — admin: health, config and faults, reset, state, clock (not AWS APIs; never counted)
"""

from __future__ import annotations

import fnmatch
import json
import logging
import urllib.parse
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from emulator import bidi, control, lifecycle, pricing, response_stream, runtime
from emulator.config import EmulatorConfig, describe_validation_error
from emulator.core import Emulator
from emulator.errors import (
    AwsError,
    json_protocol_response,
    query_xml_response,
    request_id,
)

log = logging.getLogger("emulator")

TARGETS = {"SageMaker": "sagemaker", "ServiceQuotasV20190624": "service-quotas", "AWSPriceListService": "pricing"}


def create_app(emu: Emulator) -> Any:
    api = FastAPI(title="Omni Studio local SageMaker emulator", docs_url=None, redoc_url=None, openapi_url=None)

    @api.post("/")
    async def aws_json_or_query(request: Request) -> Response:
        target = request.headers.get("x-amz-target")
        if target and lifecycle.json_target(emu, target):  # Application Auto Scaling, CloudWatch (to moto)
            return await lifecycle.json_call(emu, request, target)
        if target:
            return await _json_protocol(emu, request, target)
        if service := lifecycle.query_service(request):  # IAM, CloudWatch's query protocol (to moto)
            return await lifecycle.query_call(emu, request, service)
        return await _sts(emu, request)

    lifecycle.mount(api, emu)  # EventBridge Scheduler's REST routes, /_emulator/clock, /_emulator/lifecycle

    @api.post("/endpoints/{name}/invocations")
    async def invocations(name: str, request: Request) -> Response:
        return await runtime.invoke(emu, request, name)

    @api.post("/endpoints/{name}/invocations-response-stream")
    async def invocations_response_stream(name: str, request: Request) -> Response:
        return await response_stream.invoke_stream(emu, request, name)

    @api.post("/endpoints/{name}/async-invocations")
    async def async_invocations(name: str, request: Request) -> Response:
        return await runtime.invoke_async(emu, request, name)

    _add_admin(api, emu)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        # The bidirectional stream needs raw ASGI: request and response bodies flow at the same time.
        if scope["type"] == "http" and bidi.PATH.match(scope["path"]):
            await bidi.handle(emu, scope, receive, send)
            return
        await api(scope, receive, send)

    return app


def _add_admin(api: FastAPI, emu: Emulator) -> None:
    """`/_emulator/...`: health, config and faults, reset, state (not AWS APIs; never counted)."""
    @api.get("/_emulator/health")
    async def health() -> dict[str, Any]:
        return {"status": "healthy", "engine": emu.engine_url, "s3": emu.s3_endpoint}

    @api.get("/_emulator/config")
    async def get_config() -> dict[str, Any]:
        return emu.config.model_dump()

    @api.put("/_emulator/config")
    async def patch_config(request: Request) -> Response:
        """Merge a partial config (nested objects merge; `quotas`, `fail_endpoints` and lists replace)."""
        try:
            patch = await request.json()
            if not isinstance(patch, dict):
                raise ValueError("the body must be a JSON object")
            emu.config = emu.config.merged(patch)
        except ValidationError as exc:
            return JSONResponse({"error": describe_validation_error(exc)}, status_code=400)
        except ValueError as exc:
            return JSONResponse({"error": f"invalid config patch: {exc}"}, status_code=400)
        return JSONResponse(emu.config.model_dump())

    @api.post("/_emulator/faults")
    async def set_faults(request: Request) -> Response:
        """Replace the faults (an empty object clears them)."""
        try:
            faults = await request.json()
            emu.config = EmulatorConfig.model_validate({**emu.config.model_dump(), "faults": faults})
        except ValidationError as exc:
            return JSONResponse({"error": describe_validation_error(exc)}, status_code=400)
        except ValueError as exc:
            return JSONResponse({"error": f"invalid faults: {exc}"}, status_code=400)
        return JSONResponse(emu.config.faults.model_dump())

    @api.post("/_emulator/reset")
    async def reset() -> dict[str, str]:
        emu.reset()
        await emu.lifecycle.reset_services()
        return {"status": "reset"}

    @api.get("/_emulator/state")
    async def state() -> dict[str, Any]:
        reg = emu.registry
        return {
            "models": sorted(m.name for m in reg.models.values()),
            "endpoint_configs": sorted(c.name for c in reg.configs.values()),
            "endpoints": {e.name: e.status for e in reg.endpoints.values()},
            "usage": reg.usage(),
            "calls": dict(emu.meter.calls),
            "async_jobs_running": len(emu.jobs),
        }


def denied(emu: Emulator, service: str, op_name: str) -> None:
    """AccessDeniedException when the `deny_actions` fault names this action (an IAM policy that lacks it)."""
    action = f"{service}:{op_name}"
    if any(fnmatch.fnmatchcase(action, pattern) for pattern in emu.config.faults.deny_actions):
        raise AwsError("AccessDeniedException",
                       f"User: arn:aws:iam::{emu.config.account_id}:user/emulated is not authorized to perform: "
                       f"{action} because no identity-based policy allows the {action} action", 400)


async def _json_protocol(emu: Emulator, request: Request, target: str) -> Response:
    prefix, _, op_name = target.partition(".")
    service = TARGETS.get(prefix)
    try:
        if service is None:
            raise AwsError("UnknownOperationException", f"Unknown X-Amz-Target {target!r}; the emulator serves SageMaker.*, ServiceQuotasV20190624.* and AWSPriceListService.*")
        if service == "pricing":  # signed for a Price List region, whatever region the emulator serves
            pricing.authorize(request.headers, emu.meter, emu.config.faults.expire_credentials_after_calls)
        else:
            emu.authorize(request.headers)
        raw = await request.body()
        try:
            params = json.loads(raw) if raw else {}
        except json.JSONDecodeError as exc:
            raise AwsError("SerializationException", f"The request body is not valid JSON: {exc}") from exc
        if not isinstance(params, dict):
            raise AwsError("SerializationException", "The request body must be a JSON object")
        denied(emu, service, op_name)
        if service == "sagemaker":
            result = control.sagemaker_call(emu.registry, op_name, params)
        elif service == "pricing":
            result = pricing.pricing_call(emu.config.prices, op_name, params)
        else:
            result = control.quotas_call(emu.registry, op_name, params)
    except AwsError as err:
        if err.code not in ("ValidationException", "ResourceNotFound"):
            log.info("%s -> %s: %s", target, err.code, err.message[:300])
        return json_protocol_response(err)
    return Response(
        json.dumps(result), media_type="application/x-amz-json-1.1", headers={"x-amzn-RequestId": request_id()}
    )


async def _sts(emu: Emulator, request: Request) -> Response:
    raw = await request.body()
    form = urllib.parse.parse_qs(raw.decode("utf-8", errors="replace"))
    action = (form.get("Action") or [""])[0]
    try:
        if not action:
            raise AwsError("InvalidAction", "POST / needs X-Amz-Target (SageMaker, Service Quotas) or an STS Action form field")
        caller = emu.authorize(request.headers)
    except AwsError as err:
        return query_xml_response(err)
    if action == "GetCallerIdentity":
        rid = request_id()
        return Response(control.caller_identity_xml(emu.registry, caller.access_key_id, rid), media_type="text/xml",
                        headers={"x-amzn-RequestId": rid})
    if emu.s3_endpoint is None:
        return query_xml_response(AwsError("InvalidAction", f"STS action {action} needs moto (start with --s3-endpoint or let the emulator start moto)"))
    # Anything else (AssumeRole, GetSessionToken...) goes to moto's STS, which the S3 double also is.
    assert emu.http is not None
    headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
    try:
        upstream = await emu.http.post(emu.s3_endpoint, content=raw, headers=headers)
    except httpx.HTTPError as exc:
        return query_xml_response(AwsError("ServiceUnavailable", f"moto did not answer: {exc}", 503), sender_fault=False)
    return Response(upstream.content, status_code=upstream.status_code, media_type=upstream.headers.get("content-type", "text/xml"))
