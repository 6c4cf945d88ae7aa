"""InvokeEndpointWithBidirectionalStream: HTTP/2 event stream <-> the container's WebSocket.

`POST /endpoints/{name}/invocations-bidirectional-stream` (HTTP/2 over TLS only, as on port 8443).
SageMaker opens `ws://<container>/<X-Amzn-SageMaker-Model-Invocation-Path>[?<Model-Query-String>]`
(the path is given WITHOUT a leading slash; one is rejected by the API's pattern) and then bridges
both directions at once:

- client -> container: each outer frame is SigV4-signed (`:date`, `:chunk-signature`) and carries one
  inner `PayloadPart` event (`DataType` UTF8|BINARY, default BINARY; `CompletionState` PARTIAL|COMPLETE,
  default COMPLETE). A PARTIAL...COMPLETE run is one WebSocket message (text for UTF8). An empty outer
  payload means the client closed its input: the container's WebSocket is closed then, so clients
  close their input only after the last answer they want (e.g. after `session.done`).
- container -> client: text messages -> `PayloadPart` UTF8, binary -> BINARY, each COMPLETE (messages
  over 1 MiB are split into PARTIAL parts). The container closing normally ends the stream; an
  abnormal close becomes a `ModelStreamError` exception event.

Errors before the stream starts are HTTP errors the SDK raises (InputValidationError 400, ModelError 424).
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import Any

import websockets
from botocore.eventstream import EventStreamBuffer, ParserError
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidStatus

from emulator import versions
from emulator.core import Emulator
from emulator.errors import AwsError, rest_json_response
from emulator.eventstream import exception_event, payload_parts
from emulator.records import EndpointRecord
from emulator.runtime import model_error, pick_variant, serving_endpoint

log = logging.getLogger("emulator")

PATH = re.compile(r"^/endpoints/(?P<name>[^/]+)/invocations-bidirectional-stream/?$")
DEFAULT_INVOCATION_PATH = "invocations-bidirectional-stream"
INVOCATION_PATH_PATTERN = r"^[A-Za-z0-9\-._]+(?:/[A-Za-z0-9\-._]+)*$"
QUERY_STRING_PATTERN = (
    r"^[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+"
    r"(?:&[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+)*$"
)
STREAMING_PAYLOAD = "STREAMING-AWS4-HMAC-SHA256-EVENTS"
WS_MAX_MESSAGE = 16 * 1024 * 1024
CONNECT_TIMEOUT_S = 5.0


def input_error(message: str) -> AwsError:
    return AwsError("InputValidationError", message, 400)


def _constraint(value: str, member: str, pattern: str, max_len: int) -> None:
    if len(value) > max_len:
        raise input_error(
            f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
            f"Member must have length less than or equal to {max_len}"
        )
    if not re.fullmatch(pattern, value):
        hint = " (give the path without a leading slash, e.g. v1/audio/speech/stream)" if value.startswith("/") else ""
        raise input_error(
            f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
            f"Member must satisfy regular expression pattern: {pattern}{hint}"
        )


async def handle(emu: Emulator, scope: dict[str, Any], receive: Any, send: Any) -> None:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    name = PATH.match(scope["path"])["name"]  # type: ignore[index]
    try:
        if scope["method"] != "POST":
            raise input_error("InvokeEndpointWithBidirectionalStream is POST only")
        if scope.get("http_version") != "2":
            raise input_error(
                "InvokeEndpointWithBidirectionalStream needs HTTP/2 over TLS (https://...:8443); "
                f"this request came over HTTP/{scope.get('http_version')}"
            )
        emu.authorize(headers)
        if headers.get("x-amz-content-sha256") != STREAMING_PAYLOAD:
            raise input_error(f"The request body must be a signed event stream (x-amz-content-sha256: {STREAMING_PAYLOAD})")
        try:
            record = serving_endpoint(emu, name)
        except AwsError as err:
            raise input_error(err.message) from err
        if record.async_config:
            raise input_error(f"Endpoint {name} is asynchronous; bidirectional streams need a realtime endpoint")
        try:
            variant = pick_variant(record, headers.get("x-amzn-sagemaker-target-variant"))
        except AwsError as err:
            raise input_error(err.message) from err
        ami = variant.variant.get("InferenceAmiVersion")
        if ami not in emu.config.bidi_ami_versions:
            raise input_error(
                f"Endpoint {name} cannot stream bidirectionally: production variant {variant.name} runs "
                f"InferenceAmiVersion {ami or '(none)'}; bidirectional streaming needs one of "
                f"{', '.join(emu.config.bidi_ami_versions)} in the endpoint config"
            )
        path = headers.get("x-amzn-sagemaker-model-invocation-path", DEFAULT_INVOCATION_PATH)
        _constraint(path, "modelInvocationPath", INVOCATION_PATH_PATTERN, 100)
        query = headers.get("x-amzn-sagemaker-model-query-string")
        if query is not None:
            _constraint(query, "modelQueryString", QUERY_STRING_PATTERN, 2048)
        base = "ws" + versions.container_url(emu.registry, variant, emu.engine_url).removeprefix("http")
        url = f"{base}/{path}" + (f"?{query}" if query else "")
        ws = await _connect(emu, name, url)
    except AwsError as err:
        await rest_json_response(err)(scope, receive, send)
        return

    await send({
        "type": "http.response.start",
        "status": 200,
        "headers": [
            (b"content-type", b"application/vnd.amazon.eventstream"),
            (b"x-amzn-invoked-production-variant", variant.name.encode()),
            (b"x-amzn-requestid", str(uuid.uuid4()).encode()),
        ],
    })
    await _Bridge(emu, record, ws, receive, send).run()


async def _connect(emu: Emulator, endpoint: str, url: str) -> websockets.ClientConnection:
    if (broken := versions.broken_reason(emu.registry, endpoint)) is not None:  # faults.broken_images
        raise model_error(emu, endpoint, 500, versions.broken_body(broken))
    try:
        return await websockets.connect(
            url, open_timeout=CONNECT_TIMEOUT_S, max_size=WS_MAX_MESSAGE, compression=None, proxy=None
        )
    except InvalidStatus as exc:
        status = exc.response.status_code
        text = exc.response.body.decode("utf-8", errors="replace") if exc.response.body else exc.response.reason_phrase
        raise model_error(emu, endpoint, status, text or f"WebSocket upgrade to {url} refused") from exc
    except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
        raise model_error(
            emu, endpoint, None, str(exc), summary=f"Could not open a WebSocket to container primary at {url} ({exc})"
        ) from exc


class _Bridge:
    def __init__(self, emu: Emulator, record: EndpointRecord, ws: websockets.ClientConnection, receive: Any, send: Any) -> None:
        self.emu = emu
        self.record = record
        self.ws = ws
        self.receive = receive
        self.send = send
        faults = emu.config.faults
        self.expire_after_frames = faults.bidi_expire_after_frames
        self.cut_after_parts = faults.bidi_cut_after_output_parts
        self.frames_in = 0
        self.parts_out = 0
        self.ended = False  # the response body is finished; nothing more may be sent
        self.client_gone = False
        self._lock = asyncio.Lock()

    async def emit(self, data: bytes, *, last: bool = False) -> None:
        async with self._lock:
            if self.ended or self.client_gone:
                return
            await self.send({"type": "http.response.body", "body": data, "more_body": not last})
            if last:
                self.ended = True

    async def fail(self, exception_type: str, message: str, error_code: str) -> None:
        """End the stream with one modelled exception event, and let go of the container."""
        log.info("bidi stream %s: %s %s", self.record.name, exception_type, message)
        await self.emit(exception_event(exception_type, message, error_code), last=True)
        await self.ws.close(code=1011, reason=error_code[:100])

    async def _parsed(self, buffer: EventStreamBuffer, what: str) -> list[Any] | None:
        """The messages `buffer` holds, or None once the stream is failed for one that does not parse."""
        try:
            return list(buffer)
        except ParserError as exc:
            await self.fail("ModelStreamError", f"{what}: {exc}", "ValidationError")
            return None

    async def run(self) -> None:
        inbound = asyncio.create_task(self.pump_in())
        outbound = asyncio.create_task(self.pump_out())
        cut = False
        try:
            await outbound  # the stream lasts as long as the container's side
        except _Cut:
            cut = True
        finally:
            inbound.cancel()
            (outcome,) = await asyncio.gather(inbound, return_exceptions=True)
            if isinstance(outcome, Exception):
                log.error("bidi stream %s: reading the client's events failed", self.record.name, exc_info=outcome)
            await self.ws.close()
        if cut:
            return  # the response never ends: the server resets the HTTP/2 stream mid-answer
        await self.emit(b"", last=True)

    # client -> container ---------------------------------------------------------------------------
    async def pump_in(self) -> None:
        buffer = EventStreamBuffer()
        pending: list[bytes] = []
        pending_utf8: bool | None = None
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                self.client_gone = True
                await self.ws.close(code=1001, reason="client went away")
                return
            buffer.add_data(message.get("body", b""))
            frames = await self._parsed(buffer, "Invalid event-stream frame from the client")
            if frames is None:
                return
            for frame in frames:
                if not isinstance(frame.headers.get(":date"), int) or len(frame.headers.get(":chunk-signature", b"")) != 32:
                    await self.fail(
                        "ModelStreamError",
                        f"Event-stream frame {self.frames_in + 1} is not signed (missing :date or :chunk-signature)",
                        "InvalidSignatureException",
                    )
                    return
                if not frame.payload:
                    await self.ws.close()  # the client closed its input: close the container's socket
                    return
                self.frames_in += 1
                if self.expire_after_frames is not None and self.frames_in > self.expire_after_frames:
                    await self.fail("ModelStreamError", "The security token included in the request is expired", "ExpiredTokenException")
                    return
                inner = EventStreamBuffer()
                inner.add_data(frame.payload)
                events = await self._parsed(inner, f"Invalid inner event in frame {self.frames_in}")
                if events is None:
                    return
                for event in events:
                    if event.headers.get(":event-type") != "PayloadPart":
                        log.info("ignoring client event %s", event.headers.get(":event-type"))
                        continue
                    data_type = event.headers.get("DataType", "BINARY")
                    state = event.headers.get("CompletionState", "COMPLETE")
                    if data_type not in ("UTF8", "BINARY") or state not in ("PARTIAL", "COMPLETE"):
                        await self.fail(
                            "ModelStreamError",
                            f"PayloadPart with DataType={data_type!r}, CompletionState={state!r}: "
                            "expected DataType UTF8|BINARY and CompletionState PARTIAL|COMPLETE",
                            "ValidationError",
                        )
                        return
                    utf8 = data_type == "UTF8"
                    if pending_utf8 is not None and pending_utf8 != utf8:
                        await self.fail("ModelStreamError", "A PARTIAL run changed DataType before its COMPLETE part", "ValidationError")
                        return
                    pending.append(event.payload)
                    pending_utf8 = utf8
                    if state == "PARTIAL":
                        continue
                    data, pending, pending_utf8 = b"".join(pending), [], None
                    try:
                        await self.ws.send(data.decode("utf-8") if utf8 else data)
                    except UnicodeDecodeError:
                        await self.fail("ModelStreamError", "A UTF8 PayloadPart is not valid UTF-8", "ValidationError")
                        return
                    except ConnectionClosed:
                        return  # the container is gone; pump_out reports how it closed
            if not message.get("more_body", False):
                await self.ws.close()
                return

    # container -> client ---------------------------------------------------------------------------
    async def pump_out(self) -> None:
        try:
            async for message in self.ws:
                utf8 = isinstance(message, str)
                data = message.encode("utf-8") if utf8 else bytes(message)
                for part in payload_parts(data, utf8=utf8):
                    await self.emit(part)
                    self.parts_out += 1
                    if self.cut_after_parts is not None and self.parts_out >= self.cut_after_parts:
                        log.info("bidi stream %s: cutting after %d parts (fault)", self.record.name, self.parts_out)
                        raise _Cut()
        except ConnectionClosedError as exc:
            if self.client_gone or self.ended:
                return
            code = exc.rcvd.code if exc.rcvd else 1006
            reason = f": {exc.rcvd.reason}" if exc.rcvd and exc.rcvd.reason else ""
            await self.emit(
                exception_event(
                    "ModelStreamError",
                    f"The model container closed its WebSocket abnormally (close code {code}{reason})",
                    f"ContainerClosed{code}",
                ),
                last=True,
            )


class _Cut(Exception):
    """The 'stream cut' fault fired: stop without finishing the response."""
