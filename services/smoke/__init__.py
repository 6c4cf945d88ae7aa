"""Smoke checks: one short request per family through the studio's own clients — the code path the pages use.

Each family's check lives in its own module here (services/smoke/<family>.py) and its family module
(services/families/<family>.py) registers it; `python -m infra smoke` (infra/smoke.py) runs the checks of the
families asked for in catalog order, each given the `SmokeContext`: where to save, what earlier checks made (the
listen and omni checks hear the voice check's recording; the video check is conditioned on the image check's
PNG), and the options a deployment sets (the voice model's task type, the omni session's opener, timeouts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIN_AUDIO_BYTES = 2000
SMOKE_TEXT = "Hello from Omni Studio. This is the smoke test of the voice endpoint."
SMOKE_STEPS = 4  # image: FLUX.2-klein's own count; video: smoke-only (the default is 30)
VOICE_TIMEOUT_S = 180.0
VIDEO_TIMEOUT_S = 900.0
OMNI_TIMEOUT_S = 120.0  # the whole one-turn conversation: the turn at real time, the silence window, the reply


@dataclass
class SmokeCheck:
    role: str  # the family checked
    ok: bool
    detail: str
    path: Path | None = None
    bytes: int = 0
    elapsed_s: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "ok": self.ok, "detail": self.detail,
                "path": None if self.path is None else str(self.path), "bytes": self.bytes,
                "elapsed_s": round(self.elapsed_s, 3), "figures": self.figures}


@dataclass
class SmokeContext:
    """What one run of smoke checks shares: where to save, the checks so far, and the run's options."""

    out_dir: Path
    label: str  # the target, in words ("SageMaker AI", "Offline engine")
    url: str | None = None  # the server the backend's requests go to, when it is one URL
    voice_task: str | None = None  # the task type the voice model serves (None: the server's default)
    duplex: Any = None  # where the omni check holds its session: a URL or an opener (None: `url`)
    timeouts: dict[str, float] = field(default_factory=dict)  # by family; a check has its own default
    checks: list[SmokeCheck] = field(default_factory=list)

    def made(self, family: str) -> bytes | None:
        """What an earlier check of `family` saved, when it passed in this run; else None."""
        check = next((c for c in self.checks if c.role == family and c.ok and c.path), None)
        return check.path.read_bytes() if check is not None and check.path is not None else None

    def timeout(self, family: str, default: float) -> float:
        return self.timeouts.get(family, default)
