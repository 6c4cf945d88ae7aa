"""The studio's core, UI-free: clients for speech, images and videos over any target.

    from services import create_backend
    backend = create_backend(load_settings())      # offline engine, a vLLM-Omni URL, or SageMaker AI
    backend.client("voice"), backend.client("image"), backend.client("video")

Sub-packages by modality (speech/, images/, videos/), each with its transports behind one interface;
aws.py (the one AWS session maker), sagemaker.py (the SageMaker assembly), history, settings, playback,
runtime, cli/. docs/architecture.md has the picture.
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
