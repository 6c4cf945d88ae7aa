"""The embedded offline engine: a FastAPI app speaking vLLM-Omni 0.30's routes on loopback.

Speech routes live in `offline.speech` (a real Piper voice on CPU), image and video routes in
`offline.media` (labelled, deterministic previews). This module only assembles them.
"""

from __future__ import annotations

from fastapi import FastAPI

from protocol.common import HealthResponse, ModelCard, ModelList

ENGINE_NAME = "omni-studio-offline"
# The models the engine stands in for, named as the DLC endpoints name them, plus what really runs.
MODELS = [
    "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
    "black-forest-labs/FLUX.2-klein-4B",
    "Wan-AI/Wan2.1-VACE-1.3B-diffusers",
]


def create_app() -> FastAPI:
    from offline import media, speech

    app = FastAPI(title="Omni Studio offline engine", version="0.30-compatible")

    @app.get("/health")
    async def health() -> HealthResponse:
        return HealthResponse()

    @app.get("/v1/models")
    async def models() -> ModelList:
        return ModelList(data=[ModelCard(id=m, owned_by=ENGINE_NAME) for m in MODELS])

    app.include_router(speech.router)
    app.include_router(media.router)
    return app
