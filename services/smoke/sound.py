"""The sound family's smoke check: a 2-second, 8-step clip; passes with a WAV that decodes to 44.1 kHz stereo of
the asked length; saves `smoke-sound.wav`."""

from __future__ import annotations

from typing import Any

from services.smoke import SmokeCheck, SmokeContext

SOUND_FILE = "smoke-sound.wav"
SOUND_PROMPT = "a short bright bell, smoke test"
SOUND_SECONDS = 2.0
SOUND_STEPS = 8


def smoke_sound(backend: Any, ctx: SmokeContext) -> SmokeCheck:
    from services.sound import SoundRequest

    result = backend.client("sound").generate(SoundRequest(SOUND_PROMPT, seconds=SOUND_SECONDS, steps=SOUND_STEPS,
                                                           seed=7))  # checks rate, channels and length
    path = ctx.out_dir / SOUND_FILE
    path.write_bytes(result.audio)
    figures = {"seconds": round(result.seconds, 3), "sample_rate": result.sample_rate, "channels": result.channels,
               "steps": SOUND_STEPS, "preview": result.preview is not None, **result.timings()}
    return SmokeCheck("sound", True, f"{result.seconds:.2f} s at {result.sample_rate} Hz, {result.channels} channels, "
                                     f"{len(result.audio)} bytes; saved {path.name}", path, len(result.audio),
                      figures=figures)
