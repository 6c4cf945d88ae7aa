"""Converse on SageMaker endpoints: the reply stage through a response stream, and native mode's session over the
HTTP/2 bidirectional stream.

- `EndpointReply`: the reply from an endpoint serving OpenAI-compatible chat (vLLM, vLLM-Omni — Qwen3-Omni in
  text mode): `invoke_endpoint_with_response_stream` with the `POST /v1/chat/completions` body (`stream: true`)
  and `CustomAttributes="route=/v1/chat/completions"`. Its `PayloadPart` bytes carry the server-sent events, split
  anywhere; they are read by the same code as ChatReply's HTTP body (reply.py `sse_lines`, `StreamedChat`), with
  the same caps (tokens, wall time, bytes in all and per line: whatever the container sends) and the same refusal
  of an answer that is not server-sent events (the container's ContentType). boto3 reads on a thread of its own;
  each part is handed to the event loop as it arrives, and the thread stops reading past the byte cap. A
  failure (no such endpoint, a ModelError, a ModelStreamError mid-reply, throttling, AWS out of reach) is one
  line naming the endpoint (services/aws.py `aws_error`).
- `EndpointSession`: vLLM-Omni's duplex session (`/v1/realtime?duplex=1`) on an endpoint, over the bidirectional
  stream with invocation path `v1/realtime` and query string `duplex=1` — each JSON event one UTF8 PayloadPart,
  as Listen's realtime session travels (services/listen/sagemaker.py) — handed to `Native` as a channel.

`aws_session(settings)` is the region, profile and timeouts `--listen-endpoint` uses (the settings, the infra
state file, `--region`, `--profile`). `ConverseEndpoints.of(settings)`: the endpoints a conversation on the SageMaker
backend talks to, by role, and what a mode is missing, said in one line naming what to do (the Converse page).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from protocol.catalog import BY_NAME
from protocol.duplex import DUPLEX_QUERY
from protocol.errors import BackendUnreachable, ConfigError, ServerError, StreamError
from protocol.listen import REALTIME_PATH
from protocol.sagemaker import route_attribute
from services.aws import AwsSession, aws_error, http2_endpoint
from services.converse.reply import (
    CHAT_PATH,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_MAX_SECONDS,
    DEFAULT_MAX_TOKENS,
    Message,
    StreamedChat,
    check_event_stream,
    now,
)
from services.aws import endpoint_model
from services.sagemaker import resolve_targets
from services.settings import Settings
from services.speech.sagemaker_http2 import Http2SpeechTransport

REALTIME_INVOCATION_PATH = REALTIME_PATH.lstrip("/")  # SageMaker wants it without the leading slash


def aws_session(settings: Settings) -> AwsSession:
    """The AWS session the SageMaker backend would use for these settings (region checked, profile found)."""
    targets = resolve_targets(settings)
    return AwsSession(targets.region, targets.profile, connect_timeout=settings.connect_timeout_s,
                      read_timeout=max(settings.request_timeout_s, 60.0))


class _Parts:
    """The PayloadPart bytes of one response stream, read by boto3 on a daemon thread and queued on the event loop
    as they arrive — no more than `max_bytes` of them, so the queue stays bounded however fast the container
    sends; `stop()` lets go of the stream (a cap, a barge-in)."""

    def __init__(self, start: Callable[[], Any], doing: str, profile: str | None, max_bytes: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._start = start
        self._doing = doing
        self._profile = profile
        self._max_bytes = max_bytes
        self._stream: Any = None
        self._stopped = threading.Event()
        threading.Thread(target=self._read, name="converse-reply-stream", daemon=True).start()

    def _put(self, kind: str, value: Any = None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (kind, value))

    def _read(self) -> None:
        try:
            answer = self._start()
            self._stream = answer["Body"]
            if self._stopped.is_set():
                self._stream.close()
                return
            self._put("type", answer.get("ContentType"))
            queued = 0
            for event in self._stream:
                if self._stopped.is_set():
                    return
                if data := (event.get("PayloadPart") or {}).get("Bytes"):
                    self._put("data", data)
                    queued += len(data)
                    if queued > self._max_bytes:
                        return  # the reader is past the cap too: it says so and stops the stream
            self._put("end")
        except Exception as exc:  # botocore's, raised on this thread: the reader turns it into a message
            if not self._stopped.is_set():
                self._put("error", exc)

    async def chunks(self, where: str) -> AsyncIterator[bytes]:
        """The parts' bytes until the stream ends (the caller waits for each under the reply's caps); an answer
        that is not server-sent events is refused, naming its ContentType."""
        while True:
            kind, value = await self._queue.get()
            if kind == "end":
                return
            if kind == "error":
                raise aws_error(value, self._doing, profile=self._profile)
            if kind == "type":
                check_event_stream(value, where)
                continue
            yield value

    def stop(self) -> None:
        self._stopped.set()
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.close()


class EndpointReply(StreamedChat):
    """The reply streamed from a SageMaker endpoint's `/v1/chat/completions` (see the module's doc). Without a
    model name, the endpoint's own is looked up once (DescribeEndpoint → config → model); when that cannot be read
    the request names none and the server answers with the model it serves."""

    def __init__(self, aws: AwsSession, endpoint: str, *, model: str | None = None, system_prompt: str | None = None,
                 max_tokens: int = DEFAULT_MAX_TOKENS, max_seconds: float = DEFAULT_MAX_SECONDS,
                 max_bytes: int = DEFAULT_MAX_BYTES, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        super().__init__(model=model, system_prompt=system_prompt, max_tokens=max_tokens, max_seconds=max_seconds,
                         max_bytes=max_bytes, max_line_bytes=max_line_bytes)
        self.aws = aws
        self.endpoint = endpoint
        self.where = f"SageMaker endpoint {endpoint} ({aws.region})"
        self.label = f"{model or 'the served model'} on {self.where}"
        self._looked_up = model is not None

    async def _model(self) -> str | None:
        if not self._looked_up:
            self._looked_up = True
            try:
                found = await asyncio.to_thread(endpoint_model, self.aws, self.endpoint)
            except (ServerError, BackendUnreachable):  # invoke-only credentials: let the server name its model
                found = "unknown"
            self.model = None if found == "unknown" else found
            self.label = f"{self.model or 'the served model'} on {self.where}"
        return self.model

    async def stream(self, messages: list[Message]) -> AsyncIterator[str]:
        self.capped, self.bytes_read = None, 0
        deadline = now() + self.max_seconds
        body = json.dumps(self._body(await self._model(), messages)).encode("utf-8")
        client = self.aws.client("sagemaker-runtime")
        parts = _Parts(lambda: client.invoke_endpoint_with_response_stream(
            EndpointName=self.endpoint, Body=body, ContentType="application/json", Accept="text/event-stream",
            CustomAttributes=route_attribute(CHAT_PATH)),
            f"streaming the reply from {self.where}", self.aws.profile, self.max_bytes)
        where = f"{self.where} ({CHAT_PATH})"
        try:
            async for piece in self._pieces(self._lines(parts.chunks(where), deadline, where), deadline, where):
                yield piece
        finally:
            parts.stop()


class _DuplexChannel:
    """The HTTP/2 stream as native mode's channel: JSON text events in and out."""

    def __init__(self, transport: Http2SpeechTransport) -> None:
        self.transport = transport

    async def recv(self) -> str:
        while True:
            message = await self.transport.receive()
            if message is None:
                raise StreamError(f"{self.transport.target} ended the speech-to-speech session")
            if isinstance(message, str):
                return message  # a duplex session sends JSON only; binary parts are skipped

    async def send(self, text: str) -> None:
        await self.transport.send_text(text)

    async def close(self) -> None:
        await self.transport.close()


class EndpointSession:
    """Opens native mode's duplex session on a SageMaker endpoint (see the module's doc): `Native(session)`."""

    def __init__(self, aws: AwsSession, endpoint: str, *, connect_timeout: float = 10.0,
                 receive_timeout: float = 120.0) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.receive_timeout = receive_timeout
        self.target = (f"SageMaker endpoint {endpoint} ({aws.region}, HTTP/2 {REALTIME_INVOCATION_PATH}"
                       f"?{DUPLEX_QUERY}=1)")

    async def open(self) -> _DuplexChannel:
        transport = Http2SpeechTransport(self.aws, self.endpoint, path=REALTIME_INVOCATION_PATH,
                                         query=f"{DUPLEX_QUERY}=1", endpoint_uri=http2_endpoint(self.aws.region),
                                         connect_timeout=self.connect_timeout, receive_timeout=self.receive_timeout)
        await transport.connect()
        return _DuplexChannel(transport)


# What each mode needs on SageMaker, by role, and what that endpoint does in it
NEEDS = {"pipeline": (("listen", "listens through a listen endpoint"), ("voice", "speaks through a voice endpoint")),
         "native": (("omni", "holds its session on an omni endpoint (Qwen3-Omni's speech-to-speech)"),)}


@dataclass(frozen=True)
class ConverseEndpoints:
    """The endpoints a conversation on the SageMaker backend talks to, by name — the settings', else the infra state
    file's (resolve_targets: no AWS call) — and the AWS session its reply endpoint and native session use."""

    aws: AwsSession
    listen: str | None
    voice: str | None
    omni: str | None
    connect_timeout: float = 10.0
    receive_timeout: float = 120.0

    @classmethod
    def of(cls, settings: Settings) -> ConverseEndpoints:
        names = resolve_targets(settings).endpoints
        return cls(aws_session(settings), names.get("listen"), names.get("voice"), names.get("omni"),
                   connect_timeout=settings.connect_timeout_s, receive_timeout=settings.request_timeout_s)

    def missing(self, mode: str) -> ConfigError | None:
        """What `mode` needs that is neither deployed nor named, as one line saying what to do; None when all is."""
        for role, does in NEEDS.get(mode, ()):
            if getattr(self, role) is None:
                family = BY_NAME.get(role)
                command = "python -m infra deploy" + (" --with " + role if family is not None and family.opt_in else "")
                other = "pipeline" if mode == "native" else None
                return ConfigError(
                    f"{mode.capitalize()} mode on SageMaker {does}, and none is deployed or named: deploy it: "
                    f"`{command}`, or name a running one in the settings (OMNI_STUDIO_{role.upper()}_ENDPOINT)"
                    + (f" — or choose {other} mode" if other else ""))
        return None

    def session(self) -> EndpointSession | None:
        """Native mode's session opener on the omni endpoint (None when there is none); it opens on the first turn."""
        if self.omni is None:
            return None
        return EndpointSession(self.aws, self.omni, connect_timeout=self.connect_timeout,
                               receive_timeout=self.receive_timeout)
