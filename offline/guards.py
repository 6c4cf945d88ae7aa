"""What keeps the offline engine bounded whatever a client sends or does.

- `BodyLimit`: an ASGI middleware that refuses a request body over its limit (ENGINE_JSON_BODY_BYTES for JSON,
  ENGINE_FORM_BODY_BYTES for forms) with a 413 before anything parses it — from `Content-Length` when the
  client declares one, else as the bytes stream in — so a 300 MB body is never held in memory.
- `seconds_setting` / `count_setting`: the engine's bounds that are settings (OMNI_ENGINE_… in its environment),
  read once when it starts; a bad value stops it with a message naming the variable and what it takes.
- `unless_disconnected` / `render_unless_disconnected`: work whose HTTP client has gone is stopped. A plain
  response is only sent at the end and nothing else reads the connection while it is made, so without this
  an abandoned render would keep a worker thread busy to its last frame and slow every other request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, TypeVar

from protocol.common import ErrorInfo, ErrorResponse
from protocol.limits import ENGINE_FORM_BODY_BYTES, ENGINE_JSON_BODY_BYTES

log = logging.getLogger(__name__)
T = TypeVar("T")
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


# ---------------------------------------------------------------------------------------------------------
# Settings
def seconds_setting(name: str, default: float) -> float:
    """A number of seconds above 0 from the environment variable `name` (`default` when unset)."""
    return _setting(name, default, whole=False)


def count_setting(name: str, default: int) -> int:
    """A whole number of at least 1 from the environment variable `name` (`default` when unset)."""
    return int(_setting(name, default, whole=True))


def _setting(name: str, default: float, *, whole: bool) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number <= 0 or (whole and not number.is_integer()):
        kind = "a whole number of at least 1" if whole else "a positive number of seconds"
        raise ValueError(f"{name}={value!r} must be {kind}")
    return number


# ---------------------------------------------------------------------------------------------------------
# Request bodies
def body_limit(content_type: str) -> int:
    """The most bytes a body of this Content-Type may have: forms carry files, everything else is JSON-sized."""
    return ENGINE_FORM_BODY_BYTES if content_type.lower().lstrip().startswith(FORM_TYPES) else ENGINE_JSON_BODY_BYTES


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB"


def too_large_message(size: int | None, limit: int, content_type: str) -> str:
    what = "forms (multipart/form-data)" if limit == ENGINE_FORM_BODY_BYTES else "JSON bodies"
    got = f"is {size:,} bytes" if size is not None else "is larger than that"
    kind = content_type.split(";", 1)[0].strip() or "no Content-Type"
    return (f"Request body too large: the offline engine accepts {what} of at most {limit:,} bytes ({_mib(limit)}); "
            f"this {kind} body {got}. Send a shorter prompt or smaller files.")


class _TooLarge(Exception):
    """Raised from `receive` once a streamed body passes its limit; BodyLimit answers 413 (never seen by routes
    that catch their own errors: they catch narrower types)."""


class BodyLimit:
    """Pure ASGI middleware: 413 for HTTP request bodies over `body_limit(content type)`, before parsing."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        content_type = headers.get("content-type", "")
        limit = body_limit(content_type)
        declared = headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > limit:
            # Answered without reading a byte; the server then closes the connection (the body is left unread).
            await self._refuse(send, too_large_message(int(declared), limit, content_type))
            return

        received = 0
        started = False

        async def limited_receive() -> dict[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge
            return message

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except _TooLarge:
            kind = content_type.split(";", 1)[0].strip() or "untyped"
            log.warning("refused a %s request body over %d bytes (%s)", kind, limit, scope["path"])
            if not started:
                await self._refuse(send, too_large_message(None, limit, content_type))

    @staticmethod
    async def _refuse(send: Callable[[dict[str, Any]], Awaitable[None]], message: str) -> None:
        status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
        info = ErrorInfo(message=message, type=status.phrase, param="body", code=int(status))
        body = json.dumps(ErrorResponse(error=info).model_dump()).encode()
        await send({"type": "http.response.start", "status": int(status),
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------------------------------------------------
# Clients that go away
async def until_disconnected(receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """Return once the HTTP client has gone (its body is read by then, so only a disconnect can come)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(receive: Callable[[], Awaitable[dict[str, Any]]], work: Awaitable[T],
                              on_gone: Callable[[], None] | None = None) -> T | None:
    """`work`'s result, or None when the client disconnects first: then `on_gone()` is called (to tell a worker
    thread to stop) and `work` is cancelled."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.create_task(until_disconnected(receive))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            if on_gone is not None:
                on_gone()
            task.cancel()
            await asyncio.wait((task,))  # let it unwind; never raises
    return None if task.cancelled() else task.result()


class Cancelled(Exception):
    """A render stopped because its client went away; `done` says how far it got."""

    def __init__(self, done: str) -> None:
        super().__init__(done)
        self.done = done


async def render_unless_disconnected(receive: Callable[[], Awaitable[dict[str, Any]]], what: str,
                                     render: Callable[[threading.Event], T]) -> T | None:
    """`render(cancel)` on a worker thread; None when the client disconnects first. `render` checks `cancel`
    between its steps (images, frames) and raises Cancelled; the engine logs that line when the thread stops."""
    cancel = threading.Event()

    def run() -> T | None:
        try:
            return render(cancel)
        except Cancelled as exc:
            log.warning("%s cancelled after %s: the client disconnected", what, exc.done)
            return None

    return await unless_disconnected(receive, asyncio.to_thread(run), on_gone=cancel.set)
