"""A finished clip from its parts, made and kept: the narration spoken by the voice target, the soundtrack generated
by the sound target to the video's length (or either given as a file or a kept take/sound), mixed and muxed by
`make_clip`, and kept in the history as a video — its packets those of the video it was made from — with its parts.

    plan = ClipPlan(video=Path("take.mp4"), narration_text="Dawn over the harbour.", soundtrack_prompt="calm strings")
    outcome = make_finished_clip(backend, plan, out=Path("clip.mp4"), progress=print)
    job = keep_clip(history, outcome, of=video_job_id)     # a "video" job: video.mp4, narration.wav, soundtrack.wav

Each stage reports through `progress(stage, detail)` — "narration", "soundtrack", "mix" — with what it made and how
long it took, so a page or the CLI can show where the clip is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.errors import InvalidInput
from protocol.limits import SOUND_SECONDS
from services.clips.clip import ClipResult, Fit, make_clip
from services.clips.video import open_video

Progress = Callable[[str, str], None]
CLIP_FILE = "video.mp4"  # a clip is kept as a video: the gallery plays it, "Make a clip" works on it again


@dataclass(frozen=True)
class ClipPlan:
    """What the clip is made of. Narration: text the voice target speaks, or an audio file's bytes. Soundtrack: a
    prompt the sound target generates to the video's length, or an audio file's bytes."""

    video: Path
    narration_text: str | None = None
    narration_audio: bytes | None = None
    voice: str | None = None  # the voice that speaks the narration (None: the target's default)
    soundtrack_prompt: str | None = None
    soundtrack_audio: bytes | None = None
    seed: int | None = None  # the soundtrack's seed (None: one is drawn and reported)
    steps: int | None = None  # the soundtrack's diffusion steps (None: the model's default)
    duck_db: float = 12.0
    fit: Fit | None = None

    def checked(self) -> ClipPlan:
        if self.narration_text is not None and self.narration_audio is not None:
            raise InvalidInput("give the narration as text or as audio, not both")
        if self.soundtrack_prompt is not None and self.soundtrack_audio is not None:
            raise InvalidInput("give the soundtrack as a prompt or as audio, not both")
        if not any((self.narration_text, self.narration_audio, self.soundtrack_prompt, self.soundtrack_audio)):
            raise InvalidInput("a clip needs a narration (text or audio), a soundtrack (a prompt or audio), or both")
        if not self.video.is_file():
            raise InvalidInput(f"the video {self.video} does not exist")
        return self


@dataclass
class ClipOutcome:
    result: ClipResult
    narration: bytes | None = None  # the narration as used (WAV), kept with the clip
    soundtrack: bytes | None = None  # the soundtrack as used (its file), kept with the clip
    made: dict[str, Any] = field(default_factory=dict)  # what was generated: text, voice, prompt, seed, seconds
    stages_s: dict[str, float] = field(default_factory=dict)  # narration_s, soundtrack_s (generation), mux_s

    def as_json(self) -> dict[str, Any]:
        r = self.result
        return {"out": str(r.path), "video_s": round(r.video_s, 3), "clip_s": round(r.clip_s, 3),
                "audio_s": round(r.audio_s, 3), "narration_s": r.narration_s and round(r.narration_s, 3),
                "soundtrack_s": r.soundtrack_s and round(r.soundtrack_s, 3), "frames": r.frames, "fit": r.fit,
                "held_s": round(r.held_s, 3), "limiter_db": round(r.limiter_db, 2), "generated": self.made,
                "seed": self.made.get("soundtrack", {}).get("seed"),
                "timings": {k: round(v, 3) for k, v in self.stages_s.items()}}


def make_finished_clip(backend: Any, plan: ClipPlan, *, out: Path, progress: Progress | None = None) -> ClipOutcome:
    """Generate what the plan asks the targets for, then mux. Raises a StudioError naming what failed; nothing is
    written to `out` unless the clip is whole."""
    say = progress or (lambda stage, detail: None)
    plan = plan.checked()
    with open_video(plan.video) as source:
        video_s = source.seconds
    made: dict[str, Any] = {"duck_db": plan.duck_db}
    stages: dict[str, float] = {}
    narration = plan.narration_audio
    if plan.narration_text:
        from services.speech import speech_config

        t0 = time.perf_counter()
        say("narration", f"speaking {len(plan.narration_text.split())} words")
        utterance = asyncio.run(backend.client("voice").say(speech_config(plan.voice), plan.narration_text))
        utterance.raise_for_error()
        narration = utterance.wav()
        stages["narration_s"] = time.perf_counter() - t0
        seconds = len(utterance.pcm) / (2 * utterance.stats.sample_rate)
        made["narration"] = {"text": plan.narration_text, "voice": utterance.voice, "seconds": round(seconds, 3)}
        say("narration", f"{seconds:.1f} s spoken in {stages['narration_s']:.1f} s")
    soundtrack = plan.soundtrack_audio
    if plan.soundtrack_prompt:
        from services.sound import SoundRequest

        t0 = time.perf_counter()
        length = min(max(video_s, 0.1), SOUND_SECONDS.hi)  # a longer video loops the soundtrack (make_clip)
        say("soundtrack", f"generating {length:.1f} s")
        fields: dict[str, Any] = {"steps": plan.steps} if plan.steps is not None else {}
        result = backend.client("sound").generate(SoundRequest(plan.soundtrack_prompt, seconds=round(length, 3),
                                                               seed=plan.seed, **fields))
        soundtrack = result.audio
        stages["soundtrack_s"] = time.perf_counter() - t0
        made["soundtrack"] = {"prompt": plan.soundtrack_prompt, "seed": result.seed,
                              "seconds": round(result.seconds, 3), "preview": result.preview is not None,
                              "steps": plan.steps}
        say("soundtrack", f"{result.seconds:.1f} s generated in {stages['soundtrack_s']:.1f} s (seed {result.seed})")
    say("mix", "ducking, mixing and muxing")
    result = make_clip(plan.video, out, narration=narration, soundtrack=soundtrack, duck_db=plan.duck_db, fit=plan.fit)
    stages["mux_s"] = result.mux_s
    say("mix", f"{result.clip_s:.2f} s clip, {result.frames} frames copied, muxed in {result.mux_s:.2f} s")
    return ClipOutcome(result, narration, soundtrack, made, stages)


def keep_clip(history: Any, outcome: ClipOutcome, *, of: str | None, prompt: str, target: str,
              source_params: dict[str, Any] | None = None) -> Any:
    """Keep the clip as a video job (its parts as the job's inputs, what made it in `meta["clip"]`); the video's
    own settings (`source_params`, when it is a kept job) stay with it, so its summary and "Reuse" still work."""
    inputs = {}
    if outcome.narration is not None:
        inputs["narration.wav" if outcome.narration[:4] == b"RIFF" else "narration.audio"] = outcome.narration
    if outcome.soundtrack is not None:
        inputs["soundtrack" + _suffix(outcome.soundtrack)] = outcome.soundtrack
    described = outcome.as_json()
    params = {**(source_params or {}), "clip_of": of, "duck_db": outcome.made.get("duck_db"), "fit": described["fit"],
              "generated": described["generated"]}
    job = history.jobs.create("video", prompt, params, target=target, status="running", inputs=inputs,
                              meta={"clip": {"of": of, **described}})
    r = outcome.result
    meta = {"clip": {"of": of, **described}, "frames": r.frames, "duration_s": round(r.clip_s, 3)}
    return history.jobs.succeed(job.id, {CLIP_FILE: r.path.read_bytes()},
                                timings=outcome.stages_s, meta=meta)


def _suffix(data: bytes) -> str:
    if data[:4] == b"RIFF":
        return ".wav"
    if data[:4] == b"fLaC":
        return ".flac"
    if data[:3] == b"ID3" or data[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return ".mp3"
    return ".audio"
