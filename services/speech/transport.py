"""Speech transports: how JSON text messages and binary PCM frames travel to and from a speech server.

A transport is deliberately tiny (httpx-style), so the session logic is written once:

    await t.connect()          # BackendUnreachable / ServerError naming the target
    await t.send_text(json)    # one JSON message
    await t.receive()          # str (JSON text frame) | bytes (binary PCM) | None (stream ended cleanly)
    await t.close()

Implementations: services/speech/websocket.py (vLLM-Omni's native `/v1/audio/speech/stream`),
services/speech/sagemaker_http2.py (SageMaker's HTTP/2 bidirectional stream), services/speech/mock.py (a
scripted in-memory server for unit tests, like `httpx.MockTransport`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class SpeechTransport(Protocol):
    target: str  # where the stream goes, for messages ("ws://127.0.0.1:8091/v1/audio/speech/stream")

    async def connect(self) -> None: ...
    async def send_text(self, message: str) -> None: ...
    async def receive(self) -> str | bytes | None: ...
    async def close(self) -> None: ...
