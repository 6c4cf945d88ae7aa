"""vLLM-Omni's native speech stream, `/v1/audio/speech/stream`, over the `websockets` library.

Implements the transport interface of services/speech/transport.py.
"""

from __future__ import annotations

import asyncio

from protocol.errors import BackendUnreachable, ServerError, StreamError


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
