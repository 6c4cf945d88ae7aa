"""Video's part in evaluations: a prompt animated by a variant's target (`POST /v1/videos/sync`), rated blind in
pairs; the Video page's finished videos as a variant's outputs."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from protocol import limits
from protocol.limits import Range
from services.eval.family import EvalFamily, JobResults, Variant


class VideoVariant(Variant):
    EXAMPLE: ClassVar[str] = "frames = 17\nsteps = 4"
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {
        "width": (limits.VIDEO_SIZE, True), "height": (limits.VIDEO_SIZE, True),
        "frames": (limits.VIDEO_FRAMES, True), "fps": (limits.VIDEO_FPS, True), "steps": (limits.VIDEO_STEPS, True),
        "guidance": (limits.VIDEO_GUIDANCE, False), "seed": (limits.SEED, True)}
    width: int | None = None
    height: int | None = None
    frames: int | None = None
    fps: int | None = None
    steps: int | None = None
    guidance: float | None = None
    seed: int | None = None
    negative_prompt: str | None = None


class VideoEval(JobResults, EvalFamily):
    name = "video"
    variant = VideoVariant
    makes = "video/mp4"
    keeps = "videos"

    def request(self, prompt: str, settings: dict[str, Any]) -> Any:
        from services.videos import VideoRequest
        fields = {k: settings[k] for k in self.settings if settings.get(k) is not None}
        return VideoRequest(prompt=prompt, **fields).validated()

    def generate(self, backend: Any, prompt: str, settings: dict[str, Any], **_: Any) -> tuple[bytes, dict[str, Any]]:
        started = time.perf_counter()
        result = backend.client(self.name).generate(self.request(prompt, settings))
        return result.mp4, {"latency_s": time.perf_counter() - started, **result.timings()}


EVALUATION = VideoEval()
