"""What a person asks the sound family for, checked before anything is sent, and as it goes on the wire.

`SoundRequest` holds the studio's words for vLLM-Omni's `POST /v1/audio/generate` fields (protocol/sound.py):
prompt → `input`, seconds → `audio_length`, steps → `num_inference_steps`, guidance → `guidance_scale`, seed,
negative prompt, format → `response_format`. vLLM-Omni reports no seed, so the studio always sends one (the
caller's, or one it draws): a kept sound can be made again.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from typing import Any

from pydantic import ValidationError

from protocol.errors import InvalidInput
from protocol.limits import PROMPT_MAX_CHARS, SEED, SOUND_GUIDANCE, SOUND_SECONDS, SOUND_STEPS
from protocol.sound import DEFAULT_GUIDANCE, DEFAULT_STEPS, AudioGenerateRequest

DEFAULT_SECONDS = 10.0
# The files the studio asks for and keeps: a person can play and download them (raw `pcm` has no header).
FORMATS = ("wav", "flac", "mp3")


@dataclass(frozen=True)
class SoundRequest:
    prompt: str
    seconds: float = DEFAULT_SECONDS
    steps: int = DEFAULT_STEPS
    guidance: float = DEFAULT_GUIDANCE
    seed: int | None = None
    negative_prompt: str | None = None
    format: str = "wav"
    model: str | None = None

    def validated(self) -> SoundRequest:
        """This request checked, each problem named with what to fix (InvalidInput)."""
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInput("the prompt is empty: describe the sound you want (e.g. 'rain on a tin roof')")
        if len(self.prompt) > PROMPT_MAX_CHARS:
            raise InvalidInput(f"the prompt is {len(self.prompt)} characters: at most {PROMPT_MAX_CHARS}")
        seconds = _number(self.seconds, "the length (seconds)")
        if not (SOUND_SECONDS.lo < seconds <= SOUND_SECONDS.hi):
            raise InvalidInput(f"the length is {seconds:g} s: it must be more than 0 and at most "
                               f"{SOUND_SECONDS.hi:.2f} s, the longest clip Stable Audio Open makes")
        steps = self.steps
        if isinstance(steps, bool) or not isinstance(steps, int) or not (SOUND_STEPS.lo <= steps <= SOUND_STEPS.hi):
            raise InvalidInput(f"steps is {steps!r}: a whole number from {int(SOUND_STEPS.lo)} to {int(SOUND_STEPS.hi)}")
        guidance = _number(self.guidance, "the guidance")
        if not (SOUND_GUIDANCE.lo <= guidance <= SOUND_GUIDANCE.hi):
            raise InvalidInput(f"the guidance is {guidance:g}: from {SOUND_GUIDANCE.lo:g} to {SOUND_GUIDANCE.hi:g}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not (SEED.lo <= self.seed <= SEED.hi)):
            raise InvalidInput(f"the seed is {self.seed!r}: a whole number from 0 to {int(SEED.hi)}")
        if self.format not in FORMATS:
            raise InvalidInput(f"the format {self.format!r} is not one the studio asks for: one of {', '.join(FORMATS)}")
        negative = self.negative_prompt.strip() if isinstance(self.negative_prompt, str) else None
        return replace(self, prompt=self.prompt.strip(), seconds=seconds, guidance=guidance,
                       negative_prompt=negative or None)

    def with_seed(self) -> SoundRequest:
        """This request with a seed: the caller's, or a fresh one (vLLM-Omni would not say which it used)."""
        return self if self.seed is not None else replace(self, seed=random.randint(0, int(SEED.hi)))

    def wire(self) -> AudioGenerateRequest:
        try:
            return AudioGenerateRequest(input=self.prompt, model=self.model, response_format=self.format,
                                        audio_length=self.seconds, num_inference_steps=self.steps,
                                        guidance_scale=self.guidance, seed=self.seed,
                                        negative_prompt=self.negative_prompt)
        except ValidationError as exc:  # validated() says it in the studio's words first; this is the backstop
            raise InvalidInput(f"the sound request is not valid: {exc.errors()[0]['msg']}") from None

    def params(self) -> dict[str, Any]:
        """The parameters as plain values (history, --json, "reuse these settings")."""
        return asdict(self)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{what} is {value!r}: a number")
    return float(value)
