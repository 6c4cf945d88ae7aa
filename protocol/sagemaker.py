"""What the studio, infra and the emulator agree on about SageMaker: the three roles, how a request names
its container route, the speech stream's invocation path, and where a deployment's state file lives.

docs/protocols.md, "SageMaker", has the contract (CustomAttributes routing, the HTTP/2 stream, async jobs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Role = Literal["voice", "image", "video"]
ROLES: tuple[Role, ...] = ("voice", "image", "video")

# The container route rides in CustomAttributes (`route=/v1/...`); without one the DLC answers /invocations.
DEFAULT_ROUTE = "/invocations"
SPEECH_INVOCATION_PATH = "v1/audio/speech/stream"  # the bidi stream's model invocation path: no leading slash

# The deployment state file `python -m infra deploy` writes and the services layer reads.
DEFAULT_STATE_FILE = Path(".vllm_omni_media_state.json")  # the published sample's name
STATE_FILE_ENV = "OMNI_STUDIO_STATE_FILE"


def route_attribute(path: str) -> str:
    """The CustomAttributes value that sends a request to the container's `path`."""
    return f"route={path}"


def route_from_attributes(attributes: str | None) -> str:
    """The container path a request goes to: `route=/v1/...` in the custom attributes, else /invocations."""
    for item in (attributes or "").replace(";", ",").split(","):
        key, sep, value = item.strip().partition("=")
        if sep and key.strip() == "route":
            return "/" + value.strip().lstrip("/")
    return DEFAULT_ROUTE
