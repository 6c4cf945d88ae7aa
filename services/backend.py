"""One backend object per target: its families' clients, built when first asked for (services/base.py).

Targets: the embedded offline engine (a vLLM-Omni URL on 127.0.0.1 that the app started), any vLLM-Omni
server by URL, or SageMaker AI. Pages ask the backend; they never branch on which backend it is.
"""

from __future__ import annotations

from typing import Any

import httpx

from protocol.errors import ConfigError
from services.base import Backend, BackendHealth
from services.history import History
from services.kinds import BackendName
from services.settings import Settings

def server_health(url: str, timeout: float = 3.0) -> BackendHealth:
    """`GET /health` on a vLLM-Omni server."""
    try:
        resp = httpx.get(f"{url}/health", timeout=timeout)
    except httpx.HTTPError as exc:
        return BackendHealth(False, f"cannot reach {url} ({type(exc).__name__}: {exc}); is the server running?")
    if resp.status_code != 200:
        return BackendHealth(False, f"{url}/health answered HTTP {resp.status_code}")
    return BackendHealth(True, "healthy")


def server_backend(url: str, settings: Settings, *, name: BackendName = "server", close: Any = None) -> Backend:
    """A vLLM-Omni server's backend: each family's native client against `url`, built when first asked for."""
    from services import families

    parts = families.ServerParts(url=url, settings=settings, kind=name, history=lambda: History.of(settings))
    return Backend(name=name, target=url, _build=lambda part: families.build(part, name, parts),
                   _health=lambda: server_health(url), _close=close)


def create_backend(settings: Settings) -> Backend:
    """Build the backend the settings name. The offline engine is started (once per process) if needed."""
    if settings.backend == "offline":
        from offline.launch import shared_engine

        engine = shared_engine()
        return server_backend(engine.url, settings, name="offline")
    if settings.backend == "server":
        if not settings.server_url:
            raise ConfigError(
                "backend 'server' needs the server URL: set OMNI_STUDIO_SERVER_URL (e.g. http://gpu-box:8091) "
                "or server_url in studio.toml, or pass --url"
            )
        return server_backend(settings.server_url, settings)
    if settings.backend == "sagemaker":
        from services.sagemaker import sagemaker_backend

        return sagemaker_backend(settings)
    raise ConfigError(f"unknown backend {settings.backend!r}")



