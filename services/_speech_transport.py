"""Speech transports: how JSON text messages and binary PCM frames travel to and from a speech server.

A transport is deliberately tiny (httpx-style), so the session logic is written once:

    await t.connect()          # BackendUnreachable / ServerError naming the target
    await t.send_text(json)    # one JSON message
    await t.receive()          # str (JSON text frame) | bytes (binary PCM) | None (stream ended cleanly)
    await t.close()

`WebSocketTransport` speaks vLLM-Omni's native `/v1/audio/speech/stream`. `MockTransport` runs a
scripted in-memory server for unit tests (like `httpx.MockTransport`). The SageMaker HTTP/2 bidi
transport (a later issue) implements the same four methods.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from services.errors import BackendUnreachable, ServerError, StreamError


@runtime_checkable
class SpeechTransport(Protocol):
    target: str  # where the stream goes, for messages ("ws://127.0.0.1:8091/v1/audio/speech/stream")

    async def connect(self) -> None: ...
    async def send_text(self, message: str) -> None: ...
    async def receive(self) -> str | bytes | None: ...
    async def close(self) -> None: ...


class WebSocketTransport:
    """vLLM-Omni's WebSocket route, over the `websockets` library."""

    def __init__(self, url: str, *, connect_timeout: float = 10.0, max_size: int = 64 * 1024 * 1024) -> None:
        self.target = url
        self._connect_timeout = connect_timeout
        self._max_size = max_size
        self._ws = None

    async def connect(self) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

        try:
            # No per-message deflate: PCM does not compress and deflate adds latency per chunk.
            self._ws = await connect(
                self.target, open_timeout=self._connect_timeout, max_size=self._max_size, compression=None
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise ServerError(
                f"{self.target} refused the speech stream (HTTP {status}); is this a vLLM-Omni server with a "
                "speech model?",
                status=status,
            ) from None
        except InvalidURI as exc:
            raise BackendUnreachable(f"cannot open a speech stream to {self.target!r}: {exc}") from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise BackendUnreachable(
                f"cannot reach the speech server at {self.target} ({type(exc).__name__}: {exc or 'timed out'}); "
                "is it running, and is the URL right?"
            ) from None

    async def send_text(self, message: str) -> None:
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise StreamError(f"the speech stream to {self.target} is not open")
        try:
            await self._ws.send(message)
        except ConnectionClosed as exc:
            raise StreamError(f"the speech stream to {self.target} closed while sending ({_close_text(exc)})") from None

    async def receive(self) -> str | bytes | None:
        from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK

        if self._ws is None:
            return None
        try:
            return await self._ws.recv()
        except ConnectionClosedOK:
            return None
        except ConnectionClosedError as exc:
            raise StreamError(f"the speech stream from {self.target} was cut ({_close_text(exc)})") from None
        except OSError as exc:
            raise StreamError(f"the speech stream from {self.target} was cut ({exc})") from None

    async def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                await asyncio.wait_for(ws.close(), timeout=2.0)
            except Exception:  # closing an already broken socket must not hide the real error
                pass


def _close_text(exc: Exception) -> str:
    rcvd = getattr(exc, "rcvd", None)
    if rcvd is None:
        return "no close frame: the connection dropped"
    return f"close code {rcvd.code}{': ' + rcvd.reason if rcvd.reason else ''}"


# -----------------------------------------------------------------------------------------------------
class MockPeer:
    """The server side of a MockTransport, handed to the test's handler."""

    def __init__(self) -> None:
        self._to_server: asyncio.Queue[str | None] = asyncio.Queue()
        self._to_client: asyncio.Queue[str | bytes | None | BaseException] = asyncio.Queue()
        self.closed_by_client = False
        self.received: list[str] = []

    async def receive(self) -> str | None:
        """The next JSON text the client sent, or None once the client closed."""
        msg = await self._to_server.get()
        if msg is not None:
            self.received.append(msg)
        return msg

    async def send(self, frame: str | bytes) -> None:
        await self._to_client.put(frame)

    async def close(self) -> None:
        """A clean close: the client's receive() returns None."""
        await self._to_client.put(None)

    async def cut(self, reason: str = "connection reset") -> None:
        """An abnormal end: the client's receive() raises StreamError."""
        await self._to_client.put(StreamError(f"the speech stream was cut ({reason})"))


class MockTransport:
    """An in-memory transport driven by `handler(peer)`, a coroutine playing the server."""

    def __init__(self, handler: Callable[[MockPeer], Awaitable[None]], *, target: str = "mock://speech",
                 refuse: BaseException | None = None) -> None:
        self.target = target
        self._handler = handler
        self._refuse = refuse
        self.peer = MockPeer()
        self._task: asyncio.Task | None = None
        self.connects = 0

    async def connect(self) -> None:
        if self._refuse is not None:
            raise self._refuse
        self.connects += 1
        self._task = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        try:
            await self._handler(self.peer)
        finally:
            await self.peer._to_client.put(None)

    async def send_text(self, message: str) -> None:
        if self._task is None or self.peer.closed_by_client:
            raise StreamError(f"the speech stream to {self.target} is not open")
        await self.peer._to_server.put(message)

    async def receive(self) -> str | bytes | None:
        if self._task is None:
            return None
        item = await self.peer._to_client.get()
        if isinstance(item, BaseException):
            raise item
        return item

    async def close(self) -> None:
        if self._task is None or self.peer.closed_by_client:
            return
        self.peer.closed_by_client = True
        await self.peer._to_server.put(None)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout=1.0)
        except (TimeoutError, asyncio.CancelledError):
            self._task.cancel()
        except Exception:
            pass
