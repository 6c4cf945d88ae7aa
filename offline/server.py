"""The embedded offline engine: a FastAPI app speaking vLLM-Omni 0.30's routes on loopback.

Speech routes live in `offline.speech` (a real Piper voice on CPU, with labelled style and cloning previews),
the voices routes in `offline.voices`, the listen routes (speech recognition: a real Whisper tiny.en recognizer on
CPU, labelled a preview) in `offline.listen`, image and video routes in `offline.media` (labelled, deterministic
previews), sound generation in `offline.sound` (a labelled procedural sound). This module only assembles them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from protocol.catalog import FAMILIES, family
from protocol.common import HealthResponse, ModelCard, ModelList
from protocol.sound import SOUND_MODEL

ENGINE_NAME = "omni-studio-offline"
# The models the engine stands in for: each family's default, named as the DLC endpoints name them, and the sound
# model, which the engine serves whether or not the catalog has its family yet (once it has, it is listed once).
MODELS = list(dict.fromkeys([*(f.default_model for f in FAMILIES), SOUND_MODEL]))


# What each stand-in really is, on its card in /v1/models (a client can show it next to the output).
PREVIEW_NOTES = {
    family("voice").default_model: (
        "Offline preview: a Piper voice. Each of the model's preset speakers is that voice at its own pitch and "
        "rate; every language is accepted and spoken with its English voice. All three Qwen3-TTS task types are "
        "accepted; style instructions, voice descriptions and voice references change its rate, pitch, pauses and "
        "level (see X-Offline-Preview)."
    ),
}


def create_app() -> FastAPI:
    from offline import listen, media, sound, speech, voices
    from offline.guards import BodyLimit
    from offline.voice import VoiceEngine

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.voice.preload()  # load Piper on its worker thread while the engine starts answering
        app.state.listen.preload()  # and the recognizer on a listen thread
        yield
        app.state.voice.shutdown()
        app.state.listen.shutdown()

    app = FastAPI(title="Omni Studio offline engine", version="0.30-compatible", lifespan=lifespan)
    app.add_middleware(BodyLimit)  # an oversized body is refused before any route reads it
    app.state.voice = VoiceEngine()  # the Piper voice, its synthesis workers and their scheduler
    app.state.speech_stream = speech.SpeechStreamHandler.from_env()  # the WebSocket's timeouts
    app.state.voices = voices.VoiceStore.from_env()  # uploaded voices (in memory; OMNI_ENGINE_VOICES_DIR keeps them)
    app.state.listen = listen.ListenEngine.from_env()  # the recognizer's workers and threads

    @app.get("/health")
    async def health() -> HealthResponse:
        return HealthResponse()

    notes = {**PREVIEW_NOTES, SOUND_MODEL: sound.PREVIEW_NOTE,
             **dict.fromkeys(listen.LISTEN_MODELS, app.state.listen.preview_note)}

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        body = ModelList(data=[ModelCard(id=m, owned_by=ENGINE_NAME) for m in MODELS]).model_dump()
        for card in body["data"]:
            if (note := notes.get(card["id"])) is not None:
                card["preview"] = note
            if card["id"] in listen.LISTEN_MODELS:  # what really answers for it (a client names it, not the model)
                card["served_by"] = app.state.listen.served_by
        return JSONResponse(body)

    app.include_router(speech.router)
    app.include_router(voices.router)
    app.include_router(listen.router)
    app.include_router(media.router)
    app.include_router(sound.router)
    return app
