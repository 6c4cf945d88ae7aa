"""One background asyncio event loop per process.

The transports (websockets, the HTTP/2 SDK, aiortc) are asyncio; Streamlit's script thread is not.
The script thread hands coroutines to this loop and reads progress back, so it never blocks on I/O.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str = "omni-studio-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coro` on the loop; returns a thread-safe future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result from a non-loop thread."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("BackgroundLoop.run() called from the loop's own thread")
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


_default: BackgroundLoop | None = None
_lock = threading.Lock()


def background_loop() -> BackgroundLoop:
    """The process-wide loop, created on first use."""
    global _default
    with _lock:
        if _default is None or not _default._thread.is_alive():
            _default = BackgroundLoop()
        return _default
