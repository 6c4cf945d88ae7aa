"""Sound's load part: each request one clip through `SoundClient.generate` (the file checked for its rate, channels
and length as the Sound page checks it); a sample counts the audio seconds generated (the catalog's unit: throughput
in audio seconds per minute, cost per generated minute) and the clips, reported per level as clips per minute."""

from __future__ import annotations

import asyncio
from typing import Any

from services.load.family import LoadFamily, UnitOfWork, WorkInput, construct, rate
from services.sound import SoundRequest

DEFAULT_PROMPT = "rain on a tin roof, distant thunder"
DEFAULT_SECONDS = 5.0  # a short clip: a sweep measures the endpoint, not the longest clip


class SoundLoad(LoadFamily):
    name = "sound"
    work_fields = ("prompt", "seconds", "steps", "guidance", "seed", "negative_prompt")
    inputs = (WorkInput("prompt", "Prompt", DEFAULT_PROMPT, key="cap_prompt_sound", width=3, flag="prompt",
                        flag_help="the prompt of every clip"),)
    work_figure = "audio_s"
    level_columns = {"clips_per_min": ("clips per minute", "{:.1f}")}

    def fill(self, work: dict[str, Any], recording: Any | None) -> dict[str, Any]:
        work.setdefault("prompt", DEFAULT_PROMPT)
        work.setdefault("seconds", DEFAULT_SECONDS)
        construct(SoundRequest, work).validated()
        return work

    async def unit(self, backend: Any, plan: Any, target: Any, pool: Any) -> UnitOfWork:
        loop = asyncio.get_running_loop()

        async def send() -> dict[str, Any]:
            clip = await loop.run_in_executor(pool, backend.client("sound").generate, SoundRequest(**plan.work))
            return {"audio_s": clip.seconds, "clips": 1, "bytes": len(clip.audio)}

        return UnitOfWork(send)

    def level_figures(self, samples: Any) -> dict[str, Any]:
        return {"clips_per_min": rate(samples, "clips", 60)}
