"""A tiny vLLM-protocol chat peer for the converse tests: a real FastAPI app served by uvicorn on a free
127.0.0.1 port, streaming a fixed answer from `POST /v1/chat/completions` as server-sent events (one word per
chunk, then `data: [DONE]`), and keeping every request body it received. It answers `GET /health` too, so the
SageMaker emulator can run it as an endpoint's container (its `containers` config)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from tests.loopback_support import serving_asgi

MODEL = "peer/chat-model"


def chat_app(answer: str, *, forever: bool = False, delay_s: float = 0.0,
             fail_after: int | None = None) -> tuple[FastAPI, list[dict[str, Any]]]:
    """`fail_after`: the server falls over after that many words (its connection breaks mid-answer)."""
    app = FastAPI()
    seen: list[dict[str, Any]] = []

    @app.get("/health")  # what SageMaker's health check asks (the emulator's too, when it plays a container)
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL, "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> StreamingResponse:
        seen.append(await request.json())

        async def events():  # type: ignore[no-untyped-def]
            first = {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
            yield f"data: {json.dumps(first)}\n\n"
            words = answer.split(" ")
            i = 0
            while forever or i < len(words):
                if fail_after is not None and i >= fail_after:
                    raise RuntimeError("the chat server fell over mid-answer")
                piece = (words[i % len(words)] + " ") if forever or i < len(words) - 1 else words[i]
                chunk = {"id": "c1", "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                yield f"data: {json.dumps(chunk)}\n\n"
                i += 1
                await asyncio.sleep(delay_s)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app, seen


@contextmanager
def serving_app(app: FastAPI) -> Iterator[str]:
    with serving_asgi(app, lifespan="off") as url:
        yield url
