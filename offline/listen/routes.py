"""The listen routes, declared as vLLM declares its own. Each reaches the app's recognizer (`app.state.listen`, a
ListenEngine) through its request; `offline.server.create_app` puts it there."""

from __future__ import annotations

from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response

from offline.listen.duplex import DuplexSession
from offline.listen.realtime import RealtimeSession
from offline.listen.rest import transcribe
from protocol.duplex import DUPLEX_QUERY, wants_duplex
from protocol.listen import REALTIME_PATH, TRANSCRIPTIONS_PATH

router = APIRouter()


@router.websocket(REALTIME_PATH)
async def realtime(websocket: WebSocket) -> None:
    """vLLM's transcription session; with `?duplex=1` vLLM-Omni's duplex (speech-to-speech) session."""
    if wants_duplex(websocket.query_params.get(DUPLEX_QUERY)):
        await DuplexSession(websocket, websocket.app.state.listen, websocket.app.state.voice).run()
        return
    await RealtimeSession(websocket, websocket.app.state.listen).run()


@router.post(TRANSCRIPTIONS_PATH)
async def transcriptions(request: Request) -> Response:
    return await transcribe(request, request.app.state.listen)
