"""Image's part in evaluations: a prompt drawn by a variant's target (`POST /v1/images/generations`), rated blind in
pairs; the Image page's finished images as a variant's outputs."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from protocol import limits
from protocol.limits import Range
from services.eval.family import EvalFamily, JobResults, Variant


class ImageVariant(Variant):
    EXAMPLE: ClassVar[str] = "steps = 8\nseed = 1"
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {
        "steps": (limits.IMAGE_STEPS, True), "guidance": (limits.IMAGE_GUIDANCE, False), "seed": (limits.SEED, True)}
    size: str | None = None
    steps: int | None = None
    guidance: float | None = None
    seed: int | None = None
    negative_prompt: str | None = None


class ImageEval(JobResults, EvalFamily):
    name = "image"
    variant = ImageVariant
    makes = "image/png"
    keeps = "images"

    def request(self, prompt: str, settings: dict[str, Any]) -> Any:
        from services.images import DEFAULT_SIZE, DEFAULT_STEPS, ImageRequest
        return ImageRequest(prompt=prompt, size=settings.get("size") or DEFAULT_SIZE,
                            steps=settings.get("steps") or DEFAULT_STEPS, guidance=settings.get("guidance"),
                            seed=settings.get("seed"), negative_prompt=settings.get("negative_prompt")).validated()

    def generate(self, backend: Any, prompt: str, settings: dict[str, Any], **_: Any) -> tuple[bytes, dict[str, Any]]:
        started = time.perf_counter()
        result = backend.client(self.name).generate(self.request(prompt, settings))
        return result.images[0], {"latency_s": time.perf_counter() - started, **result.timings()}


EVALUATION = ImageEval()
