"""InvokeEndpointWithResponseStream: `POST /endpoints/{name}/invocations-response-stream`.

Routed as InvokeEndpoint is (emulator/runtime.py): `route=/v1/...` in the custom attributes picks the
container's path (without one, `/invocations`), and the body and its Content-Type go through untouched. The
container's answer comes back as it arrives — each piece the container's connection delivers becomes one
`PayloadPart` event (application/vnd.amazon.eventstream), never buffered — so a model's server-sent events reach
the client as they are produced, split wherever the container's writes and the network split them (SageMaker
promises no boundaries either: a client joins the parts).

Before the stream, the errors are InvokeEndpoint's: ValidationError (an endpoint that does not exist, is not
InService or is asynchronous), ModelError 424 (the container answered non-2xx — its status and text ride along —
or was not reached, or did not start answering within the invocation timeout) and the bare 413 for a body over
6 MiB. Once streaming, a failure ends the stream with a `ModelStreamError` event: `StreamBroken` when the
container's connection breaks mid-answer, `ModelInvocationTimeExceeded` when it stays silent longer than the
invocation timeout (`invocation_timeout_s`).

Response headers: X-Amzn-SageMaker-Content-Type (the container's Content-Type),
x-Amzn-Invoked-Production-Variant, and X-Amzn-SageMaker-Custom-Attributes when the container set them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from emulator import versions
from emulator.core import Emulator
from emulator.errors import AwsError, rest_json_response
from emulator.eventstream import exception_event, response_part
from emulator.runtime import container_failure, container_request, model_error, realtime_call
from protocol.sagemaker import route_from_attributes

log = logging.getLogger("emulator")

EVENT_STREAM = "application/vnd.amazon.eventstream"


async def invoke_stream(emu: Emulator, request: Request, name: str) -> Response:
    try:
        call = await realtime_call(emu, request, name)
        if isinstance(call, Response):
            return call
        body, variant, attributes = call.body, call.variant, call.attributes
        outgoing = container_request(
            emu, name, route_from_attributes(attributes), body,
            base_url=versions.container_url(emu.registry, variant, emu.engine_url),
            content_type=request.headers.get("content-type"), accept=request.headers.get("x-amzn-sagemaker-accept"),
            attributes=attributes, timeout=httpx.Timeout(emu.config.invocation_timeout_s, connect=5.0),
        )
        answer = await _open(emu, name, outgoing)
    except AwsError as err:
        return rest_json_response(err)
    headers = {"x-Amzn-Invoked-Production-Variant": variant.name, "x-amzn-RequestId": str(uuid.uuid4()),
               "X-Amzn-SageMaker-Content-Type": answer.headers.get("content-type", "application/octet-stream")}
    if custom := answer.headers.get("x-amzn-sagemaker-custom-attributes"):
        headers["X-Amzn-SageMaker-Custom-Attributes"] = custom
    return StreamingResponse(_parts(emu, name, answer), media_type=EVENT_STREAM, headers=headers)


async def _open(emu: Emulator, name: str, outgoing: httpx.Request) -> httpx.Response:
    """The container's answer, its body still to come; a ModelError when it failed or answered non-2xx."""
    assert emu.http is not None
    try:
        answer = await emu.http.send(outgoing, stream=True)
    except httpx.HTTPError as exc:
        raise container_failure(emu, name, exc) from exc
    if 200 <= answer.status_code < 300:
        return answer
    try:
        text = (await answer.aread())[:4096].decode("utf-8", errors="replace")
    except httpx.HTTPError as exc:
        text = f"(the container's error body broke off: {exc})"
    finally:
        await answer.aclose()
    raise model_error(emu, name, answer.status_code, text)


async def _parts(emu: Emulator, name: str, answer: httpx.Response) -> AsyncIterator[bytes]:
    """Each piece of the container's body as it arrives, as one PayloadPart; a failure as ModelStreamError."""
    try:
        async for piece in answer.aiter_bytes():
            if piece:
                yield response_part(piece)
    except httpx.TimeoutException:
        log.info("response stream %s: the container went silent", name)
        yield exception_event(
            "ModelStreamError",
            f"Your invocation timed out while the model container was streaming its response: nothing came for "
            f"{emu.config.invocation_timeout_s:.0f} s",
            "ModelInvocationTimeExceeded",
        )
    except httpx.HTTPError as exc:
        log.info("response stream %s broke: %s", name, exc)
        yield exception_event("ModelStreamError", f"The model container's response stream broke off mid-answer "
                                                  f"({type(exc).__name__}: {exc or 'its connection closed'})",
                              "StreamBroken")
    finally:
        await answer.aclose()
