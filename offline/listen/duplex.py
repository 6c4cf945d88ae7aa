"""The duplex (speech-to-speech) session on `/v1/realtime?duplex=1` (protocol/duplex.py), the offline engine's
stand-in for vLLM-Omni's: a scripted reply spoken by the Piper voice, never a model.

The first `session.update` opens it (`session.created`, `session.updated`): its `turn_detection` (server_vad:
threshold, silence_duration_ms, prefix_padding_ms; or semantic_vad: the end-of-turn model decides, with
eot_threshold) drives the listen engine's Silero VAD (offline/listen/turns.py,
minimum speech 100 ms); its `instructions` are the scripted reply's rules (protocol/script.py; none → the
default script; a bad line is an `error` naming it). Then, for each turn in the appended audio (16 kHz PCM16):
`input_audio_buffer.speech_started` / `speech_stopped` → the recognizer hears the turn (from prefix_padding_ms
before its start) → `conversation.item.input_audio_transcription.completed` → when the transcript has words:
`response.created`, per clause a `response.output_audio_transcript.delta` then its audio as
`response.output_audio.delta` chunks (24 kHz PCM16, ~100 ms each, sent no more than LEAD_S ahead of real-time
playback, as a model generating at real time would), `response.done` (completed).

Barge-in: speech starting while a response plays stops it: `response.done` with status `cancelled`, reason
`barge_in`. `response.cancel` does the same with reason `client_cancelled` (`response_cancel_not_active` when none
plays); `conversation.item.truncate` of an assistant item records what was heard and answers
`conversation.item.truncated`. Bad events get `error`: `invalid_json`, `unknown_event`, `invalid_event` (fields),
`invalid_audio`, `session_not_started` (audio before session.update), `invalid_instructions`, `item_not_found`.

The engine's bounds (offline.listen.limits): the session keeps a VAD of its own and takes a decoder only to hear a
finished turn (`server_busy` when none comes free within the lease wait: that turn goes unheard); at most
`duplex_sessions` are open at once (another is answered `server_busy` and closed); a turn is ended at the turn
limit (`speech_stopped`, then an `error` with code `turn_too_long` saying so); a session idle for the idle limit
(no event, no reply being heard or spoken) or open for the maximum session length is closed after an `error`
with code `session_idle` or `session_expired`. Appends shorter than a VAD window are scored together, and a
session handling messages back to back yields the event loop every few milliseconds.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import re
import time
import uuid

from fastapi import WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ValidationError

from hearing.vad import WINDOW, WindowedVad
from offline.listen.engine import Busy, ListenEngine
from offline.listen.limits import BUSY_CODE, IDLE_CODE, TURN_LIMIT_CODE, SessionClock
from offline.listen.recognizer import floats
from offline.listen.turns import WINDOW_MS, TurnDetector
from protocol.common import loads
from protocol.duplex import (
    ConversationItemTruncate,
    DuplexError,
    ErrorDetail,
    InputAudioBufferAppend,
    InputTranscriptionCompleted,
    ItemTruncated,
    OutputAudioDelta,
    OutputAudioTranscriptDelta,
    ResponseCancel,
    ResponseCreated,
    ResponseDone,
    SessionCreated,
    SessionUpdate,
    SessionUpdated,
    SpeechStarted,
    SpeechStopped,
    TurnDetection,
    response_body,
)
from protocol.errors import InvalidInput
from protocol.limits import PCM_SAMPLE_RATE
from protocol.listen import LISTEN_BYTES_PER_S
from protocol.script import DEFAULT_SCRIPT, Script, parse_script

log = logging.getLogger(__name__)

LEAD_S = 0.3  # audio is sent at most this far ahead of its real-time playback
CHUNK_BYTES = PCM_SAMPLE_RATE * 2 // 10  # 100 ms of 24 kHz PCM16 per audio delta
TAIL_MS = 200  # heard after a turn's last voiced window (word endings)
MAX_APPEND_BYTES = 10 * LISTEN_BYTES_PER_S  # one append carries at most 10 s
CLAUSE = re.compile(r"[^,;:.!?…]+[,;:.!?…]*\s*")


def _ms(nbytes: int) -> int:
    return nbytes * 1000 // LISTEN_BYTES_PER_S


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


class DuplexSession:
    """One `/v1/realtime?duplex=1` connection (see the module's doc)."""

    def __init__(self, websocket: WebSocket, listen: ListenEngine, voice) -> None:  # type: ignore[no-untyped-def]
        self.ws = websocket
        self.listen = listen
        self.voice = voice  # offline.voice.VoiceEngine
        self.vad: WindowedVad | None = None  # the session's own, made at its first session.update
        self.unscored = bytearray()  # appended audio shorter than a VAD window, not scored yet
        self.session_id = "duplex-" + uuid.uuid4().hex
        self.config: SessionUpdate | None = None
        self.script: Script = parse_script(DEFAULT_SCRIPT, "the default script")
        self.detector = TurnDetector()
        self.audio = bytearray()  # input audio kept from `audio_base` bytes into the session
        self.audio_base = 0
        self.item_id = ""
        self.turn_start_ms = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.response: tuple[str, asyncio.Task[None]] | None = None  # the response playing
        self.items: dict[str, dict] = {}  # assistant items: their transcript, audio sent and heard (ms)
        self.connected = False
        self.send_lock = asyncio.Lock()

    async def run(self) -> None:
        await self.ws.accept()
        self.connected = True
        try:
            with self.listen.duplex_slot():
                await self.serve()
        except Busy as exc:
            await self.error(BUSY_CODE, str(exc))
            self.connected = False
            await self.ws.close(code=1000)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        finally:
            self.connected = False
            await self._stop_response(None)
            for task in list(self.tasks):
                task.cancel()
            for task in list(self.tasks):
                with contextlib.suppress(BaseException):
                    await task

    async def serve(self) -> None:
        """Events until the client goes, or a limit ends the session (an error saying which, then the close)."""
        clock = SessionClock(self.listen.limits)
        while True:
            message = await clock.receive(self.ws, lambda: bool(self.tasks) or self.response is not None)
            if isinstance(message, str):
                limits = self.listen.limits
                await self.error(message, limits.idle_text() if message == IDLE_CODE else limits.expired_text())
                self.connected = False
                await self.ws.close(code=1000)
                return
            if message["type"] == "websocket.disconnect" or message.get("text") is None:
                return
            await self.handle(message["text"])
            await clock.share()  # other clients get their turn, however fast the messages come

    async def send(self, event: BaseModel) -> None:
        if self.connected:
            async with self.send_lock:
                with contextlib.suppress(Exception):
                    await self.ws.send_text(event.model_dump_json(exclude_none=True))

    async def error(self, code: str, message: str, event_id: str | None = None) -> None:
        kind = "server_error" if code == "processing_error" else "invalid_request_error"
        await self.send(DuplexError(error=ErrorDetail(type=kind, code=code, message=message, event_id=event_id)))

    async def handle(self, text: str) -> None:
        try:
            event = loads(text)
        except json.JSONDecodeError:
            await self.error("invalid_json", "an event is one JSON object per text frame")
            return
        if not isinstance(event, dict):
            await self.error("invalid_json", f"an event is a JSON object, not {type(event).__name__}")
            return
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        try:
            await self.route(event)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            await self.error("invalid_event", f"{event.get('type')}: {where}: {first['msg']}", event_id)

    async def route(self, event: dict) -> None:
        kind = event.get("type")
        event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
        if kind == "session.update":
            await self.update(SessionUpdate.model_validate(event), event_id)
        elif kind == "input_audio_buffer.append":
            await self.append(InputAudioBufferAppend.model_validate(event), event_id)
        elif kind == "response.cancel":
            cancel = ResponseCancel.model_validate(event)
            playing = self.response is not None and cancel.response_id in (None, self.response[0])
            if not playing:
                await self.error("response_cancel_not_active", "no response is playing to cancel", event_id)
            else:
                await self._stop_response("client_cancelled")
        elif kind == "conversation.item.truncate":
            await self.truncate(ConversationItemTruncate.model_validate(event), event_id)
        else:
            await self.error("unknown_event", f"unknown event type {kind!r}: the duplex session takes "
                             "session.update, input_audio_buffer.append, response.cancel and "
                             "conversation.item.truncate", event_id)

    async def update(self, update: SessionUpdate, event_id: str | None) -> None:
        if update.session.turn_detection is None:
            await self.error("unsupported_turn_detection", "turn_detection: give {\"type\": \"server_vad\"} or "
                             "{\"type\": \"semantic_vad\"}; the offline engine decides the turns itself (it takes "
                             "no input_audio_buffer.commit)", event_id)
            return
        try:
            if update.session.instructions and update.session.instructions.strip():
                self.script = parse_script(update.session.instructions, "instructions")
        except InvalidInput as exc:
            await self.error("invalid_instructions", f"{exc} (the offline engine's instructions are its scripted "
                             "reply's rules: PATTERN => REPLY)", event_id)
            return
        self.detector.configure(update.session.turn_detection)
        first = self.config is None
        self.config = update
        body = {"id": self.session_id, "object": "realtime.session", **update.session.model_dump(),
                "instructions_are": "scripted reply rules (offline engine)"}
        if first:
            self.vad = await asyncio.wrap_future(self.listen.submit(WindowedVad))
            await self.send(SessionCreated(session=body))
        await self.send(SessionUpdated(session=body))

    async def append(self, append: InputAudioBufferAppend, event_id: str | None) -> None:
        if self.config is None or self.vad is None:
            await self.error("session_not_started", "send session.update before any audio", event_id)
            return
        try:
            pcm = base64.b64decode(append.audio, validate=True)
        except (binascii.Error, ValueError):
            pcm = b""
        if not pcm or len(pcm) % 2 or len(pcm) > MAX_APPEND_BYTES:
            await self.error("invalid_audio", "audio: base64 PCM16 (16 kHz, mono), whole samples, at most 10 s "
                             "per append", event_id)
            return
        self.audio += pcm
        self.unscored += pcm
        if len(self.unscored) < WINDOW * 2:  # not a whole VAD window yet: scored with the next append
            return
        scored, self.unscored = floats(bytes(self.unscored)), bytearray()
        probs = await asyncio.wrap_future(self.listen.submit(self.vad.feed, scored))
        for what, at_ms in self.detector.feed(probs, self._turn_pcm):
            if what == "started":
                await self._started(at_ms)
            else:
                await self._stopped(at_ms)
        turn_ms = self.detector.windows * WINDOW_MS - self.turn_start_ms
        if self.detector.speaking and turn_ms >= self.listen.limits.turn_max_s * 1000:
            await self._stopped(self.detector.cut())
            await self.error(TURN_LIMIT_CODE, self.listen.limits.turn_text())
        if not self.detector.speaking:  # keep what a next turn's prefix padding may need
            keep = (self.detector.settings.prefix_padding_ms + 1000) * LISTEN_BYTES_PER_S // 1000 // 2 * 2
            drop = max(0, len(self.audio) - keep)
            del self.audio[:drop]
            self.audio_base += drop

    def _turn_pcm(self, end_ms: int) -> bytes:
        """The turn being spoken, from its start to `end_ms` (what the end-of-turn model scores)."""
        lo = max(0, self.turn_start_ms * LISTEN_BYTES_PER_S // 1000 // 2 * 2 - self.audio_base)
        hi = max(lo, end_ms * LISTEN_BYTES_PER_S // 1000 // 2 * 2 - self.audio_base)
        return bytes(self.audio[lo:hi])

    async def _started(self, at_ms: int) -> None:
        self.item_id, self.turn_start_ms = _id("item"), at_ms
        if self.response is not None:
            await self._stop_response("barge_in")
        await self.send(SpeechStarted(audio_start_ms=at_ms, item_id=self.item_id))

    async def _stopped(self, at_ms: int) -> None:
        await self.send(SpeechStopped(audio_end_ms=at_ms, item_id=self.item_id))
        start_ms = max(0, self.turn_start_ms - self.detector.settings.prefix_padding_ms)
        lo = max(0, start_ms * LISTEN_BYTES_PER_S // 1000 // 2 * 2 - self.audio_base)
        hi = max(lo, (at_ms + TAIL_MS) * LISTEN_BYTES_PER_S // 1000 // 2 * 2 - self.audio_base)
        task = asyncio.create_task(self._answer(self.item_id, bytes(self.audio[lo:hi])))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, item_id: str, pcm: bytes) -> None:
        """The turn heard, then the scripted reply spoken."""
        try:
            lease = await self.listen.lease()  # a decoder only while the turn is heard
        except Busy as exc:
            await self.error(BUSY_CODE, f"the turn was not heard: {exc}")
            return
        try:
            transcript = " ".join(await lease.call(lease.worker.recognize, pcm))
        except Exception as exc:  # the recognizer failed: said, and the session goes on
            log.exception("duplex: recognition failed")
            await self.error("processing_error", f"the recognizer failed: {exc}")
            return
        finally:
            lease.release()
        await self.send(InputTranscriptionCompleted(item_id=item_id, transcript=transcript))
        if not transcript.strip() or self.detector.speaking:
            return  # nothing heard, or the person already speaks again: no reply
        try:
            reply = self.script.reply_to(transcript)
        except InvalidInput as exc:
            await self.error("invalid_instructions", str(exc))
            return
        response_id = _id("resp")
        task = asyncio.create_task(self._speak(response_id, "item_" + response_id, reply))
        self.response = (response_id, task)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _speak(self, response_id: str, item_id: str, reply: str) -> None:
        item = self.items[item_id] = {"id": item_id, "transcript": reply, "sent_ms": 0, "heard_ms": None}
        await self.send(ResponseCreated(response_id=response_id, response=response_body(response_id, "in_progress")))
        begun = time.perf_counter()
        sent = 0  # bytes of 24 kHz PCM16 sent
        for clause in CLAUSE.findall(reply):
            if not clause.strip():
                continue
            await self.send(OutputAudioTranscriptDelta(response_id=response_id, item_id=item_id, delta=clause))
            pending = b""
            async with contextlib.aclosing(self.voice.stream_pcm(clause.strip())) as frames:
                async for frame in frames:
                    pending += frame
                    while len(pending) >= CHUNK_BYTES:
                        sent = await self._audio(response_id, item, pending[:CHUNK_BYTES], sent, begun)
                        pending = pending[CHUNK_BYTES:]
            if pending:
                sent = await self._audio(response_id, item, pending, sent, begun)
        self.response = None
        await self.send(ResponseDone(response_id=response_id, response=response_body(response_id, "completed")))

    async def _audio(self, response_id: str, item: dict, pcm: bytes, sent: int, begun: float) -> int:
        ahead = sent / (PCM_SAMPLE_RATE * 2) - (time.perf_counter() - begun)
        if ahead > LEAD_S:
            await asyncio.sleep(ahead - LEAD_S)
        await self.send(OutputAudioDelta(response_id=response_id, item_id=item["id"],
                                         delta=base64.b64encode(pcm).decode("ascii")))
        item["sent_ms"] = (sent + len(pcm)) * 1000 // (PCM_SAMPLE_RATE * 2)
        return sent + len(pcm)

    async def _stop_response(self, reason: str | None) -> None:
        """Cancel the response playing; `response.done` (cancelled, `reason`) unless the connection is gone."""
        if self.response is None:
            return
        response_id, task = self.response
        self.response = None
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        if reason is not None:
            await self.send(ResponseDone(response_id=response_id,
                                         response=response_body(response_id, "cancelled", reason=reason)))

    async def truncate(self, truncate: ConversationItemTruncate, event_id: str | None) -> None:
        item = self.items.get(truncate.item_id)
        if item is None:
            await self.error("item_not_found", f"item_id {truncate.item_id!r}: no assistant item of this session "
                             "has that id", event_id)
            return
        item["heard_ms"] = min(truncate.audio_end_ms, item["sent_ms"])
        await self.send(ItemTruncated(item_id=truncate.item_id, content_index=truncate.content_index,
                                      audio_end_ms=item["heard_ms"]))


__all__ = ["DuplexSession", "TurnDetection"]
