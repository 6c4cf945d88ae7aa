"""The studio's core, UI-free: each model family's client over any target, and the tools that use them.

    from services import create_backend
    backend = create_backend(load_settings())      # offline engine, a vLLM-Omni server by URL, or SageMaker AI
    backend.client("voice"), backend.client("sound")   # each family's client, built when first asked for

A family's behaviour is registered in families/ (one module each: its clients per target, its smoke check, its
parts in evaluations and load sweeps); its code lives in its own package (speech/, images/, videos/, listen/,
sound/), each with its transports behind one interface. aws.py (the one AWS session maker), sagemaker.py (the
SageMaker assembly), history, settings, playback, runtime, clips/ (finished clips), cli/. docs/architecture.md has
the picture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.backend import create_backend, server_backend
    from services.base import Backend, BackendHealth

__all__ = ["Backend", "BackendHealth", "create_backend", "server_backend"]

# The exports load on first use: `import services.settings` (every command, the engine's checks) must not pay for
# the backend's imports (httpx, the history's SQLAlchemy, boto3), about 0.3 s a process.
def __getattr__(name: str) -> Any:
    if name in ("create_backend", "server_backend"):
        from services import backend

        return getattr(backend, name)
    if name in ("Backend", "BackendHealth"):
        from services import base

        return getattr(base, name)
    raise AttributeError(f"module 'services' has no attribute {name!r}")
