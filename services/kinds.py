"""The kinds of target a backend can be — their names, their labels and what each can do — in one place.

Pages and views ask a backend's `capabilities`, never its name: a new kind of target (or a server that can do
more) changes this table, not the pages. The factory that builds a backend of a kind is services/backend.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator


@dataclass(frozen=True)
class Capabilities:
    """What a target can do, as far as the studio's pages need to know."""

    previews: bool  # its images, videos and voices are the offline engine's labelled previews, not the models'
    billed: bool  # it bills by the hour while it runs (the cost banner shows; load tests confirm first)
    deploys_models: bool  # its models are picked when it is deployed (`python -m infra deploy --voice-model`)
    realtime_transcription: bool = False  # streaming speech recognition over /v1/realtime (Listen)
    duplex: bool = False  # a speech-to-speech session (Converse)


@dataclass(frozen=True)
class BackendKind:
    name: str
    label: str  # what the studio calls it in a sentence
    picker_label: str  # what the Target picker shows
    capabilities: Capabilities


BACKEND_KINDS: dict[str, BackendKind] = {k.name: k for k in (
    BackendKind("offline", "Offline engine", "Offline engine (this machine)",
                Capabilities(previews=True, billed=False, deploys_models=False, realtime_transcription=True)),
    BackendKind("server", "vLLM-Omni server", "vLLM-Omni server",
                Capabilities(previews=False, billed=False, deploys_models=False)),
    BackendKind("sagemaker", "SageMaker AI", "SageMaker AI",
                Capabilities(previews=False, billed=True, deploys_models=True, realtime_transcription=True)),
)}
BackendName = Literal[tuple(BACKEND_KINDS)]  # type: ignore[valid-type]  # "offline", "server", "sagemaker"
BACKEND_NAMES: tuple[str, ...] = tuple(BACKEND_KINDS)

# A kind's former names, still read wherever a person or a file names a kind (studio.toml, the environment, --backend,
# a SPEC, a kept evaluation, compare or load record): a vLLM-Omni server was "omni" until the Qwen3-Omni family
# (protocol/catalog.py) made that word mean a model family.
OLD_NAMES: dict[str, str] = {"omni": "server"}


def backend_name(value: Any) -> Any:
    """A kind as someone wrote it, under today's name ("omni" → "server"); anything else unchanged, for the
    caller's own check to name. The argparse `type` of --backend and the pydantic validator of a kind field."""
    return OLD_NAMES.get(value, value) if isinstance(value, str) else value


# A pydantic field holding a kind (the settings' `backend`, an evaluation variant's): old names read as today's.
BackendField = Annotated[BackendName, BeforeValidator(backend_name)]


def kind(name: str) -> BackendKind:
    try:
        return BACKEND_KINDS[backend_name(name)]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}: one of {', '.join(BACKEND_NAMES)}") from None
