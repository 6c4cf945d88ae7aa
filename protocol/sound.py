"""Sound generation: `POST /v1/audio/generate`, JSON in, the audio file itself out — docs/protocols.md, "Sound".

vLLM-Omni 0.30 serves diffusion audio models on this route (Stable Audio Open 1.0 for the studio): the request is
`OpenAICreateAudioGenerateRequest` (vllm_omni/entrypoints/openai/protocol/audio.py), the handler
`serving_audio_generate.py`, the limits those of the model's pipeline (diffusion/models/stable_audio/
pipeline_stable_audio.py). The answer is the raw file with its media type and no JSON; a refusal is vLLM's
`{"error": {...}}` body (protocol.common.ErrorResponse).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from protocol.limits import (
    PROMPT_MAX_CHARS,
    SOUND_GUIDANCE,
    SOUND_SAMPLE_RATE,
    SOUND_SECONDS,
    SOUND_SEED,
    SOUND_STEPS,
    SOUND_WINDOW_FRAMES,
    SPEED,
)

SOUND_PATH = "/v1/audio/generate"
SOUND_MODEL = "stabilityai/stable-audio-open-1.0"  # the model the studio deploys and the offline engine stands in for

SoundFormat = Literal["wav", "pcm", "flac", "mp3", "opus"]
SOUND_FORMATS: tuple[str, ...] = get_args(SoundFormat)  # what the request model accepts (vLLM-Omni's list)
# The answer's Content-Type per format (vLLM-Omni's AudioMixin.create_audio). `pcm` is raw s16le, interleaved
# stereo at 44.1 kHz with no header; wav and flac hold 16-bit samples (soundfile's default subtype).
SOUND_MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac", "mp3": "audio/mpeg",
                     "opus": "audio/ogg"}
# Opus only carries 8, 12, 16, 24 or 48 kHz: Stable Audio's 44.1 kHz cannot be written as Opus (vLLM-Omni's
# soundfile write fails and the route answers 400 "Audio generation failed: …"), so a client offers these.
SOUND_SERVED_FORMATS = ("wav", "flac", "mp3", "pcm")
OPUS_RATES = (8_000, 12_000, 16_000, 24_000, 48_000)

# What the pipeline uses when a field is absent (pipeline_stable_audio.py): 50 steps, guidance 7.0, and without
# `audio_length` the whole window (47.55 s), `audio_start` then being ignored.
DEFAULT_STEPS = 50
DEFAULT_GUIDANCE = 7.0

# Response headers. vLLM-Omni sends neither: it reports no seed (without one, torch's global generator is used
# and the sound cannot be made again). The offline engine draws a seed when none is sent and returns it in
# SEED_HEADER, and says what its preview is in PREVIEW_HEADER (as its speech and listen previews do).
SEED_HEADER = "X-Seed"
PREVIEW_HEADER = "X-Offline-Preview"


def _seconds(x: float) -> str:
    return f"{x:.6g}"


class AudioGenerateRequest(BaseModel):
    """`POST /v1/audio/generate` (JSON). Field names, order and defaults are vLLM-Omni 0.30's; unknown keys are
    ignored as its model ignores them. The bounds are vLLM-Omni's, plus the model's window (audio_length and
    audio_start + audio_length at most SOUND_SECONDS.hi, which vLLM-Omni's pipeline enforces or cuts to) and the
    studio's prompt cap; each refusal names its field."""

    model_config = ConfigDict(extra="ignore")

    input: str = Field(max_length=PROMPT_MAX_CHARS, description="what the sound should be")
    model: str | None = None
    response_format: SoundFormat = "wav"
    speed: float | None = Field(default=1.0, ge=SPEED.lo, le=SPEED.hi)  # time-stretch of the result, pitch kept
    stream_format: Literal["sse", "audio"] | None = "audio"
    audio_length: float | None = Field(default=None, gt=SOUND_SECONDS.lo)  # seconds; None: the whole window
    audio_start: float | None = Field(default=0.0, ge=0.0)  # seconds into the window (only with audio_length)
    negative_prompt: str | None = Field(default=None, max_length=PROMPT_MAX_CHARS)
    guidance_scale: float | None = Field(default=None, ge=SOUND_GUIDANCE.lo, le=SOUND_GUIDANCE.hi)
    num_inference_steps: int | None = Field(default=None, ge=SOUND_STEPS.lo, le=SOUND_STEPS.hi)
    seed: int | None = Field(default=None, ge=SOUND_SEED.lo, le=SOUND_SEED.hi)

    @field_validator("input")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("input cannot be empty")  # vLLM-Omni's words
        return v

    @field_validator("stream_format")
    @classmethod
    def _no_sse(cls, v: str | None) -> str | None:
        if v == "sse":
            raise ValueError("'sse' is not a supported stream_format yet. Please use 'audio'.")  # vLLM-Omni's words
        return v

    @field_validator("audio_length")
    @classmethod
    def _fits_the_model(cls, v: float | None) -> float | None:
        if v is not None and v > SOUND_SECONDS.hi:
            raise ValueError(f"audio_length must be at most {_seconds(SOUND_SECONDS.hi)} seconds, the longest clip "
                             f"Stable Audio Open makes; got {v:g}")
        return v

    @field_validator("audio_start")
    @classmethod
    def _inside_the_window(cls, v: float | None, info: ValidationInfo) -> float | None:
        length = info.data.get("audio_length")  # declared before audio_start, so already checked
        if v is not None and length is not None and v + length > SOUND_SECONDS.hi:
            raise ValueError(f"audio_start + audio_length must be at most {_seconds(SOUND_SECONDS.hi)} seconds "
                             f"(the model's window); got {v:g} + {length:g} — start earlier or ask for less")
        return v

    def wire(self) -> dict[str, Any]:
        """The JSON a client sends: every field that is set (None left out)."""
        return self.model_dump(exclude_none=True)

    def frames(self) -> int:
        """How many frames (per channel) the answer holds, by vLLM-Omni's rule: the window is cut from
        int(start·44100) to int((start + length)·44100) (the whole window without a length), then stretched to
        int(frames / speed)."""
        return answer_frames(self.audio_length, self.audio_start, self.speed)


def answer_frames(audio_length: float | None, audio_start: float | None = 0.0, speed: float | None = 1.0) -> int:
    """Frames per channel of vLLM-Omni's answer to these fields (see AudioGenerateRequest.frames). A start past
    the window's end leaves nothing; vLLM-Omni then answers an empty file."""
    if audio_length is None:
        frames = SOUND_WINDOW_FRAMES
    else:
        start = audio_start or 0.0
        end = min(int((start + audio_length) * SOUND_SAMPLE_RATE), SOUND_WINDOW_FRAMES)
        frames = max(0, end - int(start * SOUND_SAMPLE_RATE))
    pace = speed or 1.0
    return frames if pace == 1.0 else int(frames / pace)
