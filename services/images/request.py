"""What the user asks of the image model: `ImageRequest`, checked field by field with a message that names
what to fix (limits from protocol.limits). FLUX.2-klein is distilled and wants about 4 steps while the server
default is 50, so steps are always sent explicitly; the seed is always sent too, drawn here when the caller
gives none, so the result records the seed that made it.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from protocol.errors import InvalidInput
from protocol.images import ImageGenerationRequest, ImageOutputFormat, parse_size
from protocol.limits import IMAGE_GUIDANCE, IMAGE_N, IMAGE_SIZE, IMAGE_STEPS, SEED, check_length

if TYPE_CHECKING:
    pass


DEFAULT_SIZE = "1024x1024"


DEFAULT_STEPS = 4  # FLUX.2-klein is distilled: ~4 steps; the server's own default is 50


FORMATS: tuple[ImageOutputFormat, ...] = ("png", "jpeg", "webp")


@dataclass(frozen=True)
class ImageRequest:
    """What the user asks for. `validated()` checks every field and names what to fix."""

    prompt: str
    negative_prompt: str | None = None
    size: str = DEFAULT_SIZE
    steps: int = DEFAULT_STEPS
    guidance: float | None = None
    seed: int | None = None
    n: int = 1
    output_format: ImageOutputFormat = "png"
    model: str | None = None

    def validated(self) -> ImageRequest:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInput("the prompt is empty: describe the image you want")
        check_length("the prompt", self.prompt)
        check_length("the negative prompt", self.negative_prompt)
        size = check_settings(self.size, self.steps, self.n, self.guidance, self.seed, self.output_format)
        neg = self.negative_prompt.strip() if isinstance(self.negative_prompt, str) else None
        return replace(self, prompt=self.prompt.strip(), size=size, negative_prompt=neg or None)

    @property
    def width(self) -> int:
        return parse_size(self.size)[0]

    @property
    def height(self) -> int:
        return parse_size(self.size)[1]

    def with_seed(self) -> ImageRequest:
        """This request with a seed: the caller's, or a fresh random one (so the result can say which)."""
        return self if self.seed is not None else replace(self, seed=random.randint(0, int(SEED.hi)))

    def wire(self) -> ImageGenerationRequest:
        return ImageGenerationRequest(
            prompt=self.prompt, model=self.model, n=self.n, size=self.size, num_inference_steps=self.steps,
            guidance_scale=self.guidance, negative_prompt=self.negative_prompt, seed=self.seed,
            output_format=self.output_format,
        )

    def params(self) -> dict[str, Any]:
        """The parameters as plain values (history, --json, "reuse these settings")."""
        return asdict(self)


def check_settings(size: Any, steps: Any, n: Any, guidance: Any, seed: Any, output_format: Any) -> str | None:
    """The settings generations and edits share, each checked (InvalidInput naming what to fix); the size
    normalised to "WxH" (None stays None: an edit then takes its first reference's proportions)."""
    if size is not None:
        try:
            w, h = parse_size(str(size).strip())
        except ValueError as exc:
            raise InvalidInput(f"{exc}; width and height between {IMAGE_SIZE.lo:g} and {IMAGE_SIZE.hi:g}") from None
        size = f"{w}x{h}"
    IMAGE_STEPS.check("steps", steps, hint="FLUX.2-klein wants about 4")
    IMAGE_N.check("n (images per request)", n)
    if guidance is not None:
        IMAGE_GUIDANCE.check("guidance", guidance, integer=False)
    if seed is not None:
        SEED.check("seed", seed)
    if output_format not in FORMATS:
        raise InvalidInput(f"output format {output_format!r} is not one of {', '.join(FORMATS)}")
    return size
