"""Video's load part: each request one whole job through `VideoClient.generate` — submit, poll, fetch (S3 on
SageMaker), the MP4 decoded; a sample counts the video's seconds and bytes."""

from __future__ import annotations

import asyncio
from typing import Any

from services.load.family import LoadFamily, UnitOfWork, WorkInput, construct, request_fields, rounded
from services.videos import VideoRequest

DEFAULT_PROMPT = "the camera pans slowly across a quiet harbour"


class VideoLoad(LoadFamily):
    name = "video"
    work_fields = request_fields(VideoRequest, leave_out=("reference", "reference_name"))
    inputs = (WorkInput("prompt", "Motion prompt", DEFAULT_PROMPT, key="cap_prompt_video", flag="prompt",
                        flag_help="the motion prompt of every request"),)
    work_figure = "video_s"

    def fill(self, work: dict[str, Any], recording: Any | None) -> dict[str, Any]:
        work.setdefault("prompt", DEFAULT_PROMPT)
        construct(VideoRequest, work).validated()
        return work

    async def unit(self, backend: Any, plan: Any, target: Any, pool: Any) -> UnitOfWork:
        loop = asyncio.get_running_loop()

        async def send() -> dict[str, Any]:
            result = await loop.run_in_executor(pool, backend.client("video").generate, VideoRequest(**plan.work))
            return {"video_s": rounded(result.info.duration_s), "bytes": len(result.mp4)}

        return UnitOfWork(send)

    def extra_cost_note(self, target: Any) -> str:
        return " S3 requests for each video come on top (cents)." if target.backend == "sagemaker" else ""
