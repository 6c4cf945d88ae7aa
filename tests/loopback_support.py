"""A small server on a free 127.0.0.1 port for one test: a stand-in for a model server or an internal service, or
an ASGI app (an in-process offline engine, a chat peer) under uvicorn."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal


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


@contextmanager
def serving_asgi(app: Any, *, lifespan: Literal["auto", "on", "off"] = "auto") -> Iterator[str]:
    """Serve the ASGI `app` with uvicorn in a thread; yields the base URL (http://127.0.0.1:PORT) once it
    answers (within 10 s), stops the server afterwards."""
    import uvicorn

    from offline.launch import free_port

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
