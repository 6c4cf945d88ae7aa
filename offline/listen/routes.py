"""The listen routes, declared as vLLM declares its own. Each reaches the app's recognizer (`app.state.listen`, a
ListenEngine) through its request; `offline.server.create_app` puts it there."""

from __future__ import annotations

from fastapi import APIRouter, Request, WebSocket
from fastapi.responses import Response

from offline.listen.realtime import RealtimeSession
from offline.listen.rest import transcribe
from protocol.listen import REALTIME_PATH, TRANSCRIPTIONS_PATH

router = APIRouter()


@router.websocket(REALTIME_PATH)
async def realtime(websocket: WebSocket) -> None:
    await RealtimeSession(websocket, websocket.app.state.listen).run()


@router.post(TRANSCRIPTIONS_PATH)
async def transcriptions(request: Request) -> Response:
    return await transcribe(request, request.app.state.listen)
