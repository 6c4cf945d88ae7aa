"""Is this replica's storage there? The history's database answers a read, its media store takes a probe.

A team studio's replicas share a database and a bucket; a replica whose database or bucket does not answer must
leave its load balancer's rotation, and say which one. `storage_problem(settings)` names what is wrong (None when
both answer): the image's HEALTHCHECK (`scripts/healthcheck.py --storage`) asks it, and so does every request
for `/_stcore/health` when the studio is served by `serve.py` (`StorageHealth`, an ASGI middleware in front of
Streamlit, which serves that route itself): 503 and the line naming it, else Streamlit's own answer.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from protocol.errors import StudioError
from services.settings import Settings, load_settings

HEALTH_PATH = "/_stcore/health"
CACHE_S = 2.0  # a burst of checks (several balancers, a browser) costs one probe


def storage_problem(settings: Settings, history: Any = None) -> str | None:
    """What is wrong with the history's database or media, as `settings` name them; None when both answer.
    `history`: one already open (a replica's own), else one is opened and closed here."""
    from services.history import History
    from services.history.base import reason
    from services.history.migrate import revision

    opened = history is None
    try:
        history = history or History.of(settings, migrate=False)  # opening it reads the database once
    except StudioError as exc:
        return f"the history: {exc}"
    try:
        revision(history)
    except Exception as exc:  # noqa: BLE001 — a check answers, it does not raise
        return f"the history's database at {history.where} does not answer ({reason(exc)})"
    finally:
        if opened:
            history.close()
    media = history.media.check()
    return None if media.ok else f"the media at {media.where}: {media.problem}"


class StorageHealth:
    """ASGI middleware: `/_stcore/health` (under any base path) answers 503 naming the database or bucket that does
    not answer; otherwise the request goes on to Streamlit, whose own check (its runtime ready) then answers."""

    def __init__(self, app: Any, settings: Settings | None = None) -> None:
        self.app = app
        self._settings = settings
        self._history: Any = None
        self._lock = threading.Lock()
        self._last: tuple[float, str | None] | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith(HEALTH_PATH):
            import anyio

            problem = await anyio.to_thread.run_sync(self.problem)
            if problem is not None:
                from starlette.responses import PlainTextResponse

                await PlainTextResponse(f"unhealthy: {problem}", status_code=503)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def problem(self) -> str | None:
        with self._lock:  # one probe at a time; a fresh answer is reused
            if self._last is not None and time.monotonic() - self._last[0] < CACHE_S:
                return self._last[1]
            self._last = (time.monotonic(), self._check())
            return self._last[1]

    def _check(self) -> str | None:
        try:
            settings = self._settings or load_settings()
        except StudioError as exc:
            return f"the settings: {exc}"
        if self._history is None:
            from services.history import History

            try:
                self._history = History.of(settings, migrate=False)
            except StudioError as exc:
                return f"the history: {exc}"
        return storage_problem(settings, self._history)
