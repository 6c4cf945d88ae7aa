"""The kinds of target a backend can be — their names, their labels and what each can do — in one place.

Pages and views ask a backend's `capabilities`, never its name: a new kind of target (or a server that can do
more) changes this table, not the pages. The factory that builds a backend of a kind is services/backend.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
    BackendKind("omni", "vLLM-Omni server", "vLLM-Omni server",
                Capabilities(previews=False, billed=False, deploys_models=False)),
    BackendKind("sagemaker", "SageMaker AI", "SageMaker AI",
                Capabilities(previews=False, billed=True, deploys_models=True, realtime_transcription=True)),
)}
BackendName = Literal[tuple(BACKEND_KINDS)]  # type: ignore[valid-type]  # "offline", "omni", "sagemaker"
BACKEND_NAMES: tuple[str, ...] = tuple(BACKEND_KINDS)


def kind(name: str) -> BackendKind:
    try:
        return BACKEND_KINDS[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}: one of {', '.join(BACKEND_NAMES)}") from None
