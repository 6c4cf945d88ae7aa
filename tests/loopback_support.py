"""Small servers on free 127.0.0.1 ports for one test: an HTTP stand-in for a model server or an internal service
(`serving`, `internal_service`), a websockets one for a speech-to-speech session (`ws_serving`), an ASGI app (an
in-process offline engine, a chat peer) under uvicorn (`serving_asgi`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from offline.launch import free_port


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` in a thread; yields the base URL (http://127.0.0.1:PORT), stops the server afterwards."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class InternalService(BaseHTTPRequestHandler):
    """An internal service a hostile tester aims the studio at: every request is recorded in `seen` ("GET /path");
    each is answered `reply(path)` — by default `answer`, a 500 with a page nobody outside should read. A subclass
    per test (`internal_service`) keeps its own `seen`."""

    seen: list[str] = []
    answer = (500, "text/html", "<html><body>db_password=hunter2 <internal stack trace></body></html>")

    def reply(self, path: str) -> tuple[int, str, str]:
        return type(self).answer

    def _any(self) -> None:
        type(self).seen.append(f"{self.command} {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status, kind, body = self.reply(self.path)
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _any

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def internal_service(base: type[InternalService] = InternalService) -> Iterator[tuple[str, type[InternalService]]]:
    """`base` served on a free loopback port with a `seen` list of its own: (its URL, its handler class)."""
    handler = type("Handler", (base,), {"seen": []})
    with serving(handler) as url:
        yield url, handler


@contextmanager
def ws_serving(handler: Callable[[Any], Awaitable[None]]) -> Iterator[str]:
    """A websockets server on a free loopback port whose connections `handler(ws)` serves, on a thread of its own;
    yields its http:// URL (the clients derive ws://), stops it afterwards."""
    from websockets.asyncio.server import serve

    port = free_port()
    ready, stop = threading.Event(), threading.Event()

    async def main() -> None:
        async with serve(handler, "127.0.0.1", port):
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        thread.join(5)


@contextmanager
def serving_asgi(app: Any, *, lifespan: Literal["auto", "on", "off"] = "auto") -> Iterator[str]:
    """Serve the ASGI `app` with uvicorn in a thread; yields the base URL (http://127.0.0.1:PORT) once it
    answers (within 10 s), stops the server afterwards."""
    import uvicorn


    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the in-process server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
