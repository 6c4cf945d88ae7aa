"""The shapes a family module fills in (services/families/<name>.py): how its clients are built on each kind of
target (`Build`, given `ServerParts` or `SageMakerParts`), and the parts the tools ask for (`FamilyCode`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.aws import AwsSession
    from services.history import History
    from services.settings import Settings
    from services.speech.http2_clients import Http2Clients
    from services.speech.sagemaker_http2 import Http2SpeechTransport


@dataclass(frozen=True)
class ServerParts:
    """What a family's client needs to speak to a vLLM-Omni server (the offline engine is one)."""

    url: str
    settings: Settings
    kind: str  # the backend kind: "offline" (the embedded engine) or a server named by URL
    history: Callable[[], History]


@dataclass(frozen=True)
class SageMakerParts:
    """What a family's client needs on SageMaker: one AWS session, the resolved endpoint names, and the HTTP/2
    clients every bidirectional stream of the backend shares (one connection per event loop)."""

    aws: AwsSession
    targets: Any  # services.sagemaker.SageMakerTargets
    settings: Settings
    uri: str  # the HTTP/2 runtime endpoint
    http2: Http2Clients
    history: Callable[[], History]

    def endpoint(self, family: str) -> str | None:
        return self.targets.endpoints.get(family)

    def stream(self, endpoint: str, path: str) -> Http2SpeechTransport:
        """A bidirectional stream to `endpoint`'s `path` on the shared HTTP/2 clients."""
        from services.speech.sagemaker_http2 import Http2SpeechTransport

        return Http2SpeechTransport(self.aws, endpoint, path=path, endpoint_uri=self.uri,
                                    connect_timeout=self.settings.connect_timeout_s,
                                    receive_timeout=self.settings.request_timeout_s, clients=self.http2)


@dataclass(frozen=True)
class Build:
    """How one client is built on each kind of target; None where that target has no such client."""

    server: Callable[[ServerParts], Any] | None = None
    sagemaker: Callable[[SageMakerParts], Any] | None = None


@dataclass(frozen=True)
class FamilyCode:
    """A family's behaviour, as its module registers it. Parts a family does not have are None: a tool that
    needs one refuses the family, naming those that have it (`having`)."""

    name: str
    # What a backend builds for the family, by the name a caller asks for: the family's own name is its client
    # (`backend.client("listen")`); a family may add others (voice: "voices", its voice library).
    clients: Mapping[str, Build] = field(default_factory=dict)
    evaluation: Any = None  # services/eval: its variant, generation and rating
    load: Any = None  # () -> services.load.family.LoadFamily (services/load/<family>.py): its work, inputs, figures
    smoke: Any = None  # (backend, SmokeContext) -> SmokeCheck: services/smoke/<family>.py, run by infra/smoke.py
    # Where the family's own code lives when its folder is not named for it (voice: services/speech): code there
    # may name the family. Elsewhere only paths named for it may (services/eval/voice.py, offline/listen/, …).
    home: tuple[str, ...] = ()
