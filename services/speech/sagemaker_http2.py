"""The SageMaker HTTP/2 bidirectional speech transport (`aws-sdk-sagemaker-runtime-http2`, CRT transport).

It implements the four methods of `services._speech_transport.SpeechTransport`, so the speech session
logic is the one the WebSocket path uses:

- every JSON message goes out as one COMPLETE `UTF8` PayloadPart; the container sees one WebSocket text
  message per part. `send_texts` hands several such events (each signed by the SDK, in order) to the HTTP/2
  stream in one write: the CRT client sends each write as its own small TCP segment without TCP_NODELAY, so
  a second small write waits for the first one's ACK, which the server delays (~40 ms); one write does not;
- a `UTF8` PayloadPart coming back is a JSON text message (PARTIAL runs are joined), any other is PCM;
- `ModelStreamError` / `InternalStreamFailure`, raised by the SDK's `receive()`, become the same session
  errors as on the WebSocket path (ServerError / StreamError); audio received before is kept by the session;
- every await has a timeout: a rejected certificate fails in `connect_timeout`, not the CRT's ~20 s;
- the streams share a backend's connections (`Http2Clients`, services/speech/http2_clients.py: one SDK client
  per event loop, boto3's credentials for every request, `AWS_CA_BUNDLE`'s TLS trust, TCP_NODELAY).
"""

from __future__ import annotations

import asyncio
from typing import Any

from protocol.common import error_text
from protocol.errors import (
    BackendUnreachable,
    ConfigError,
    ServerError,
    StreamError,
    StudioError,
)
from services.aws import AwsSession, aws_error, http2_endpoint
from services.speech.http2_clients import Http2Clients

SPEECH_INVOCATION_PATH = "v1/audio/speech/stream"
CLOSE_TIMEOUT_S = 2.0


def invocation_path(path: str) -> str:
    """SageMaker wants the model invocation path without a leading slash: normalise a user-given one."""
    clean = path.strip().lstrip("/")
    if not clean:
        raise ConfigError("the model invocation path is empty; the speech route is v1/audio/speech/stream")
    return clean


def _discard(task: asyncio.Future) -> None:
    """Collect the outcome of an attempt nobody waits for any more (no 'exception never retrieved')."""
    if not task.cancelled():
        task.exception()


class _Collector:
    """Stands in for the event publisher's writer while a batch of events is signed: keeps what it is given."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.chunks.append(bytes(data))

    async def close(self) -> None:  # the real writer is closed once the collected bytes are written
        pass



class Http2SpeechTransport:
    """One bidirectional stream to a realtime SageMaker endpoint's speech route."""

    def __init__(self, aws: AwsSession, endpoint: str, *, path: str = SPEECH_INVOCATION_PATH,
                 endpoint_uri: str | None = None, connect_timeout: float = 10.0, receive_timeout: float = 120.0,
                 target_variant: str | None = None, clients: Http2Clients | None = None,
                 query: str | None = None) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self.path = invocation_path(path)
        self.query = query  # the model query string the container's route gets (`duplex=1`), if any
        self.endpoint_uri = endpoint_uri or http2_endpoint(aws.region)
        self.clients = clients or Http2Clients(aws, self.endpoint_uri)
        self.connect_timeout = connect_timeout
        self.receive_timeout = receive_timeout
        self.target_variant = target_variant
        self.target = f"SageMaker endpoint {endpoint} ({aws.region}, HTTP/2 {self.path}{'?' + query if query else ''})"
        self._stream: Any = None
        self._output: Any = None
        self._output_task: asyncio.Task | None = None
        self._partial = bytearray()

    # -- connect ------------------------------------------------------------------------------------
    async def connect(self) -> None:
        from aws_sdk_sagemaker_runtime_http2.models import (
            InvokeEndpointWithBidirectionalStreamInput,
        )

        # Resolve the credentials first: a missing or broken chain is a message, not a signing error.
        await self._timed(asyncio.to_thread(self.aws.credentials), "resolving AWS credentials")
        client = await self._timed(self.clients.get(), "configuring the HTTP/2 client")
        request = InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=self.endpoint, model_invocation_path=self.path, model_query_string=self.query,
            target_variant=self.target_variant)
        try:
            self._stream = await self._timed(client.invoke_endpoint_with_bidirectional_stream(request),
                                             "opening the HTTP/2 stream")
        except StudioError:
            self.clients.discard()
            raise
        except Exception as exc:
            self.clients.discard()
            raise self._error(exc, "opening the speech stream") from None
        # The response headers may only come once the container took the stream: wait for them in receive().
        self._output_task = asyncio.get_running_loop().create_task(self._stream.await_output())

    async def _timed(self, aw: Any, doing: str) -> Any:
        # Shielded: cancelling a CRT connection attempt makes awscrt raise later, unraisably, when the
        # attempt ends; a timed-out attempt is left to finish (and be discarded) on its own.
        task = asyncio.ensure_future(aw)
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.connect_timeout)
        except TimeoutError:
            task.add_done_callback(_discard)
            raise BackendUnreachable(
                f"{doing} for {self.target} at {self.endpoint_uri} took longer than {self.connect_timeout:.0f} s; "
                "check the network and the region, and if a proxy re-signs TLS, point AWS_CA_BUNDLE at its CA"
            ) from None
        except StudioError:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith("botocore"):
                raise aws_error(exc, doing, profile=self.aws.profile) from None
            raise self._error(exc, doing) from None

    # -- send / receive -----------------------------------------------------------------------------
    async def send_text(self, message: str) -> None:
        await self.send_texts([message])

    async def send_texts(self, messages: list[str], *, end: bool = False) -> None:
        """Each message as its own COMPLETE UTF8 PayloadPart (the container still gets one WebSocket message per
        message, in order), all of them in one write to the HTTP/2 stream; with `end`, the signed end of the
        input stream too (a session's last words, session.close, and its end leave together: no small write
        is left behind the last one, waiting for its ACK in front of the next stream on the connection)."""
        if self._stream is None:
            raise StreamError(f"the speech stream to {self.target} is not open")
        try:
            await asyncio.wait_for(self._publish(messages, end=end), self.connect_timeout)
        except TimeoutError:
            raise StreamError(f"sending to {self.target} stalled for {self.connect_timeout:.0f} s") from None
        except Exception as exc:
            raise self._error(exc, "sending on the speech stream", stream=True) from None

    async def _publish(self, messages: list[str], *, end: bool = False) -> None:
        from aws_sdk_sagemaker_runtime_http2.models import (
            RequestPayloadPart,
            RequestStreamEventPayloadPart,
        )

        publisher = self._stream.input_stream
        events = [RequestStreamEventPayloadPart(value=RequestPayloadPart(
            bytes_=message.encode("utf-8"), data_type="UTF8", completion_state="COMPLETE")) for message in messages]
        # The SDK's publisher serializes, signs (each signature chains the one before) and writes one event per
        # send(). Its writer is swapped for a collector while they are signed, then the signed events go to the
        # real writer as one chunk. An SDK without that writer gets one write per event, as before.
        writer = getattr(publisher, "_writer", None)
        if (len(events) + end == 1 or writer is None
                or not asyncio.iscoroutinefunction(getattr(writer, "write", None))):
            for event in events:
                await publisher.send(event)
            if end:
                await publisher.close()
            return
        collected = _Collector()
        publisher._writer = collected
        try:
            for event in events:
                await publisher.send(event)
            if end:
                await publisher.close()  # signs the empty end frame into the collector
        finally:
            publisher._writer = writer
        await writer.write(b"".join(collected.chunks))
        if end and (close := getattr(writer, "close", None)) is not None:
            await close()  # the request body ends: the HTTP/2 stream's END_STREAM

    async def receive(self) -> str | bytes | None:
        from aws_sdk_sagemaker_runtime_http2.models import (
            ResponseStreamEventPayloadPart,
        )

        if self._output is None:
            if self._output_task is None:
                return None
            try:
                _, self._output = await asyncio.wait_for(asyncio.shield(self._output_task), self.connect_timeout)
            except TimeoutError:
                self.clients.discard()  # the next session starts from a fresh connection
                self._output_task.add_done_callback(_discard)
                self._output_task = None
                raise BackendUnreachable(
                    f"{self.target} at {self.endpoint_uri} did not answer within {self.connect_timeout:.0f} s: a TLS "
                    "certificate this machine does not trust (behind a proxy that re-signs TLS, point AWS_CA_BUNDLE at "
                    "its CA file), a blocked network, or a wrong endpoint URL"
                ) from None
            except Exception as exc:
                raise self._error(exc, "opening the speech stream") from None
        for _ in range(1_000_000):  # unknown event kinds are skipped; bounded all the same
            try:
                event = await asyncio.wait_for(self._output.receive(), self.receive_timeout)
            except TimeoutError:
                raise StreamError(f"no data from {self.target} for {self.receive_timeout:.0f} s") from None
            except Exception as exc:
                raise self._error(exc, "reading the speech stream", stream=True) from None
            if event is None:
                return None
            if not isinstance(event, ResponseStreamEventPayloadPart):
                continue
            part = event.value
            data = part.bytes_ or b""
            if part.data_type == "UTF8":
                if part.completion_state == "PARTIAL":
                    self._partial += data
                    continue
                text, self._partial = bytes(self._partial + data), bytearray()
                return text.decode("utf-8", errors="replace")
            if data:
                return data
        raise StreamError(f"{self.target} sent too many events that are not audio or messages")

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        task, self._output_task = self._output_task, None
        if stream is not None:
            try:
                await asyncio.wait_for(stream.input_stream.close(), CLOSE_TIMEOUT_S)
            except Exception:  # closing a broken stream must not hide the real error
                pass
        output, self._output = self._output, None
        if output is not None:
            try:
                await asyncio.wait_for(output.close(), CLOSE_TIMEOUT_S)
            except Exception:
                pass
        if task is not None:
            task.add_done_callback(_discard)  # not cancelled: see _timed

    # -- errors -------------------------------------------------------------------------------------
    def _error(self, exc: BaseException, doing: str, *, stream: bool = False) -> StudioError:
        """The SDK's exceptions as the studio's: what happened, where, and what to do."""
        from aws_sdk_sagemaker_runtime_http2.models import (
            InputValidationError,
            InternalStreamFailure,
            ModelError,
            ModelStreamError,
            ServiceError,
        )

        if isinstance(exc, StudioError):
            return exc
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        if isinstance(exc, ModelStreamError):
            code = exc.error_code or "ModelStreamError"
            if code in ("ExpiredTokenException", "ExpiredToken"):
                return ServerError(f"{self.target} ended the stream: the AWS credentials expired mid-stream "
                                   f"({message}); refresh them (e.g. `aws sso login`) and speak again")
            return ServerError(f"{self.target} ended the stream with a model error: {message} ({code})")
        if isinstance(exc, InternalStreamFailure):
            return StreamError(f"{self.target} failed mid-stream (InternalStreamFailure: {message})")
        if isinstance(exc, ModelError):
            original = error_text(exc.original_message or "") or message
            return ServerError(f"{doing} on {self.target}: the model answered HTTP {exc.original_status_code}: "
                               f"{original}", status=exc.original_status_code)
        if isinstance(exc, InputValidationError):
            return ServerError(f"{doing} on {self.target}: {message}", status=400)
        if isinstance(exc, ServiceError):
            return ServerError(f"{doing} on {self.target}: {type(exc).__name__}: {message}")
        if stream:
            return StreamError(f"the speech stream from {self.target} was cut ({type(exc).__name__}: {message})")
        return BackendUnreachable(f"{doing}: cannot reach {self.target} at {self.endpoint_uri} "
                                  f"({type(exc).__name__}: {message}); check the network, the region and TLS trust "
                                  "(AWS_CA_BUNDLE)")
