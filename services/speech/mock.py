"""A scripted in-memory speech server for unit tests (like `httpx.MockTransport`): the session under test
talks to a `MockPeer` coroutine through a `MockTransport`, with no socket.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from protocol.errors import StreamError


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
