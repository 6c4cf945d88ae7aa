"""The studio's core, UI-free: clients for speech, images and videos over any target.

    from services import create_backend
    backend = create_backend(load_settings())      # offline engine, a vLLM-Omni URL, or SageMaker AI
    backend.speech, backend.images, backend.videos

Sub-packages by modality (speech/, images/, videos/), each with its transports behind one interface;
aws.py (the one AWS session maker), sagemaker.py (the SageMaker assembly), history, settings, playback,
runtime, cli/. docs/architecture.md has the picture.
"""

from services.backend import create_backend, omni_backend
from services.base import Backend, BackendHealth

__all__ = ["Backend", "BackendHealth", "create_backend", "omni_backend"]
