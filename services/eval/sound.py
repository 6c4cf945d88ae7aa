"""Sound's part in evaluations: a prompt made into a clip by a variant's target (`POST /v1/audio/generate`), rated
blind in pairs by ear; the Sound page's kept sounds as a variant's outputs."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from protocol import limits
from protocol.limits import Range
from services.eval.family import EvalFamily, JobResults, Variant


class SoundVariant(Variant):
    EXAMPLE: ClassVar[str] = "seconds = 5\nsteps = 50\nseed = 1"
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {
        "seconds": (limits.SOUND_SECONDS, False), "steps": (limits.SOUND_STEPS, True),
        "guidance": (limits.SOUND_GUIDANCE, False), "seed": (limits.SEED, True)}
    seconds: float | None = None
    steps: int | None = None
    guidance: float | None = None
    seed: int | None = None
    negative_prompt: str | None = None


class SoundEval(JobResults, EvalFamily):
    name = "sound"
    variant = SoundVariant
    makes = "audio/wav"
    keeps = "sounds"

    def request(self, prompt: str, settings: dict[str, Any]) -> Any:
        from services.sound import SoundRequest
        return SoundRequest(prompt=prompt, **{k: settings[k] for k in self.settings
                                              if settings.get(k) is not None}).validated()

    def generate(self, backend: Any, prompt: str, settings: dict[str, Any], **_: Any) -> tuple[bytes, dict[str, Any]]:
        started = time.perf_counter()
        result = backend.client(self.name).generate(self.request(prompt, settings))
        return result.audio, {"latency_s": time.perf_counter() - started, **result.timings()}


EVALUATION = SoundEval()
