"""Realtime images: `ImageClient` over an `ImageTransport`.

- request.py     ImageRequest (checked field by field), defaults
- client.py      ImageClient (checks what comes back), ImageResult, record_image (kept in the history)
- transports.py  the one-method interface; vLLM-Omni over httpx; a mock
- sagemaker.py   invoke_endpoint with the container route in CustomAttributes
"""

from services.images.client import ImageClient, ImageResult, omni_client, record_image
from services.images.request import DEFAULT_SIZE, DEFAULT_STEPS, FORMATS, ImageRequest
from services.images.transports import (
    ImageTransport,
    MockImageTransport,
    OmniImageTransport,
    TransportTimings,
)

__all__ = [
    "DEFAULT_SIZE", "DEFAULT_STEPS", "FORMATS", "ImageClient", "ImageRequest", "ImageResult", "ImageTransport",
    "MockImageTransport", "OmniImageTransport", "TransportTimings", "omni_client", "record_image",
]
