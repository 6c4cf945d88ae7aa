"""What a backend is: the three clients (`speech`, `images`, `videos`) of one target, its voice library
(`voices`: saved voices for cloning, services/speech/voices.py), its listener (`listen`: speech recognition,
services/listen; None where the target has none yet), its health and its label.

What the target's voice model can do is `backend.speech.task_types()` (CustomVoice, VoiceDesign, Base).

The factory that builds one is services/backend.py; the SageMaker assembly is services/sagemaker.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services.kinds import BackendName, Capabilities, kind

if TYPE_CHECKING:
    from services.images import ImageClient
    from services.listen import Listener
    from services.speech import SpeechClient
    from services.speech.voices import VoiceLibrary
    from services.videos import VideoClient


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
    speech: SpeechClient
    images: ImageClient
    videos: VideoClient
    voices: VoiceLibrary
    listen: Listener | None = None
    _health: Any = field(repr=False, default=None)  # () -> BackendHealth
    _close: Any = field(repr=False, default=None)  # () -> None

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
