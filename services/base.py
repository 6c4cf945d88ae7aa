"""What a backend is: one target (the offline engine, a vLLM-Omni server, SageMaker AI) and the clients its
families have there, each built the first time it is asked for: `backend.client("listen")` builds the listener
and nothing else. The family modules (services/families) say how each client is built on each kind of target.

What the target's voice model can do is `backend.client("voice").task_types()` (CustomVoice, VoiceDesign, Base).

The factory that builds a backend is services/backend.py; the SageMaker assembly is services/sagemaker.py.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import StudioError
from services.kinds import BackendName, Capabilities, kind


@dataclass(frozen=True)
class BackendHealth:
    ok: bool
    detail: str  # what a person reads in the sidebar: "healthy", or what is wrong and what to do
    # Nothing is deployed (SageMaker with no endpoint named): not a fault, nothing to reach yet — e.g. after a delete
    undeployed: bool = False


@dataclass
class Backend:
    name: BackendName
    target: str  # where requests go, for display: a URL, or "SageMaker us-east-1: voice=…, image=…"
    _build: Any = field(repr=False)  # (client name) -> the client, built on this target
    _health: Any = field(repr=False, default=None)  # () -> BackendHealth
    _close: Any = field(repr=False, default=None)  # () -> None
    _missing: Any = field(repr=False, default=None)  # (family) -> StudioError | None: what the target lacks for it
    _made: dict[str, Any] = field(repr=False, default_factory=dict)
    _lock: threading.Lock = field(repr=False, default_factory=threading.Lock)

    def client(self, name: str) -> Any:
        """The client called `name` (a family's name, or another a family registers, e.g. "voices"), built once
        on first use. ConfigError when the target has none."""
        with self._lock:
            if name not in self._made:
                self._made[name] = self._build(name)
            return self._made[name]

    def missing(self, family: str) -> StudioError | None:
        """Why `family` cannot be used on this target, known before anything is sent — SageMaker with no endpoint
        for it: the message naming how to deploy one and the setting naming one (services.aws.missing_endpoint) —
        so a page can say so before anyone uploads or presses anything. None when it can be tried."""
        return None if self._missing is None else self._missing(family)

    def built(self) -> tuple[str, ...]:
        """The clients built so far (what using the backend has cost)."""
        with self._lock:
            return tuple(self._made)

    @property
    def label(self) -> str:
        return kind(self.name).label

    @property
    def capabilities(self) -> Capabilities:
        """What this target can do: pages ask this, never the backend's name (services/kinds.py)."""
        return kind(self.name).capabilities

    def health(self) -> BackendHealth:
        return self._health()

    def close(self) -> None:
        if self._close is not None:
            self._close()
