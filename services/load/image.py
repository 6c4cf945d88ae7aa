"""Image's load part: each request one generation through `ImageClient.generate` (the image checked as the Image
page checks it); a sample counts its images and their bytes."""

from __future__ import annotations

import asyncio
from typing import Any

from services.images import DEFAULT_SIZE, ImageRequest
from services.load.family import LoadFamily, UnitOfWork, WorkInput, construct, request_fields

DEFAULT_PROMPT = "a lighthouse on a cliff at dawn, soft light"


class ImageLoad(LoadFamily):
    name = "image"
    work_fields = request_fields(ImageRequest)
    inputs = (WorkInput("prompt", "Prompt", DEFAULT_PROMPT, key="cap_prompt_image", width=3, flag="prompt",
                        flag_help="the prompt of every request"),
              WorkInput("size", "Size (WxH)", DEFAULT_SIZE, key="cap_size", width=1))
    work_figure = "images"

    def fill(self, work: dict[str, Any], recording: Any | None) -> dict[str, Any]:
        work.setdefault("prompt", DEFAULT_PROMPT)
        construct(ImageRequest, work).validated()
        return work

    async def unit(self, backend: Any, plan: Any, target: Any, pool: Any) -> UnitOfWork:
        loop = asyncio.get_running_loop()

        async def send() -> dict[str, Any]:
            result = await loop.run_in_executor(pool, backend.client("image").generate, ImageRequest(**plan.work))
            return {"images": len(result.images), "bytes": sum(len(i) for i in result.images)}

        return UnitOfWork(send)
