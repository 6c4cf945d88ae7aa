"""WebSocket `/v1/realtime` (docs/listen.md), as vLLM serves it for a realtime transcription model.

On connect the server sends `session.created`. Then, in any order the client likes: `session.update` validates
the model (`invalid_event` without one, `model_not_found` for another), `input_audio_buffer.append` queues base64
PCM16 (16 kHz, mono; `invalid_audio` when it is not), `input_audio_buffer.commit` starts generation
(`model_not_validated` before a valid session.update; ignored while one runs) and, with `final: true`, ends the
audio. Generation sends `transcription.delta` while audio arrives and `transcription.done` with the text and
usage; afterwards a new commit starts the next utterance. Texts and codes are vLLM's; a message that is not
JSON is `invalid_json`, an unknown type `unknown_event`, anything else that fails `processing_error`.

Deliberate differences: deltas are the recognizer's early words — live captions, never taken back even when its
hypothesis changes (offline.listen.partials); `transcription.done` carries its final, rescored text, which can
differ from the deltas joined (vLLM's is always their sum). At most 25 MB of audio may wait to be decoded (more is
`invalid_audio`; vLLM sets no bound). Usage counts the
audio as prompt tokens at Voxtral's rate (12.5 per second) and the words as completion tokens. Nothing of the
audio or of its text is logged.

The engine's bounds (offline.listen.limits; vLLM sets none): a generation takes a decoder at its first audio, not
at its commit, and gives it back at `transcription.done`; one that finds every decoder busy for the lease wait is
an `error` with code `server_busy`. A session whose client sent nothing for the idle limit (with nothing left to
decode) is closed, as is one open for the maximum session length: what was heard is finished first
(`transcription.done`), then an `error` with code `session_idle` or `session_expired` says why. A session handling
messages back to back yields the event loop every few milliseconds, so a flood of tiny appends cannot starve
other clients.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import math

from fastapi import WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ValidationError

from offline.listen.engine import Busy, Lease, ListenEngine
from offline.listen.limits import BUSY_CODE, IDLE_CODE, SessionClock
from offline.listen.models import listen_model_error
from offline.listen.recognizer import Utterances
from protocol.common import loads
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from protocol.listen import (
    INVALID_AUDIO_TEXT,
    INVALID_JSON_TEXT,
    MAX_FILE_TEXT,
    MISSING_MODEL_TEXT,
    MODEL_NOT_VALIDATED_TEXT,
    InputAudioBufferAppend,
    InputAudioBufferCommit,
    RealtimeError,
    SessionCreated,
    TranscriptionDelta,
    TranscriptionDone,
    UsageInfo,
    unknown_event_text,
)

log = logging.getLogger(__name__)

AUDIO_TOKENS_PER_S = 12.5  # Voxtral's audio frames: one token per 80 ms


def pcm_of(append: InputAudioBufferAppend) -> bytes:
    """The PCM16 bytes of an append; ValueError when they are not (vLLM answers `invalid_audio`)."""
    try:
        pcm = base64.b64decode(append.audio, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not base64") from None
    if not pcm or len(pcm) % 2:
        raise ValueError("no whole PCM16 samples")
    if len(pcm) > TRANSCRIPTION_FILE_MAX_BYTES:
        raise ValueError("Maximum file size exceeded")
    return pcm


class RealtimeSession:
    """One `/v1/realtime` connection: any number of utterances, one generation at a time."""

    def __init__(self, websocket: WebSocket, engine: ListenEngine) -> None:
        self.ws = websocket
        self.engine = engine
        self.audio: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.waiting = 0  # bytes of audio queued and not yet decoded (at most TRANSCRIPTION_FILE_MAX_BYTES)
        self.generation: asyncio.Task[None] | None = None
        self.validated = False
        self.connected = False
        self.decoding = False  # audio is on the decoder now

    async def run(self) -> None:
        await self.ws.accept()
        self.connected = True
        clock = SessionClock(self.engine.limits)
        try:
            await self.send(SessionCreated())
            while True:
                message = await clock.receive(self.ws, lambda: self.decoding or self.waiting > 0)
                if isinstance(message, str):  # a limit came first
                    await self.end(message)
                    break
                if message["type"] == "websocket.disconnect":
                    break
                if message.get("text") is None:  # vLLM reads text frames only; anything else ends the connection
                    log.info("realtime: a binary frame ends the connection")
                    break
                await self.handle(message["text"])
                await clock.share()  # other clients get their turn, however fast the messages come
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        finally:
            self.connected = False
            self.audio.put_nowait(None)
            if self.generation is not None and not self.generation.done():
                self.generation.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self.generation

    async def end(self, code: str) -> None:
        """A limit ended the session: what was heard is finished (`transcription.done`), then an error says why
        and the socket closes."""
        self.audio.put_nowait(None)
        if self.generation is not None and not self.generation.done():
            await asyncio.wait((self.generation,))
        limits = self.engine.limits
        await self.error(limits.idle_text() if code == IDLE_CODE else limits.expired_text(), code)
        self.connected = False
        await self.ws.close(code=1000)

    async def send(self, event: BaseModel) -> None:
        if self.connected:
            await self.ws.send_text(event.model_dump_json())

    async def error(self, message: str, code: str) -> None:
        await self.send(RealtimeError(error=message, code=code))

    async def handle(self, text: str) -> None:
        try:
            event = loads(text)
        except json.JSONDecodeError:
            await self.error(INVALID_JSON_TEXT, "invalid_json")
            return
        try:
            if not isinstance(event, dict):
                raise TypeError(f"an event is a JSON object, not {type(event).__name__}")
            await self.route(event)
        except (ValidationError, TypeError, ValueError) as exc:
            await self.error(str(exc), "processing_error")

    async def route(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "session.update":
            model = event.get("model")
            if model is None:
                await self.error(MISSING_MODEL_TEXT, "invalid_event")
            elif (problem := listen_model_error(str(model))) is not None:
                await self.error(problem, "model_not_found")
            else:
                self.validated = True
        elif kind == "input_audio_buffer.append":
            append = InputAudioBufferAppend.model_validate(event)
            try:
                pcm = pcm_of(append)
            except ValueError:
                await self.error(INVALID_AUDIO_TEXT, "invalid_audio")
                return
            if self.waiting + len(pcm) > TRANSCRIPTION_FILE_MAX_BYTES:  # the engine's bound, not vLLM's
                await self.error(f"{MAX_FILE_TEXT}: more than {TRANSCRIPTION_FILE_MAX_BYTES:,} bytes of audio wait "
                                 "to be transcribed; commit to start, or send it slower", "invalid_audio")
                return
            self.waiting += len(pcm)
            self.audio.put_nowait(pcm)
        elif kind == "input_audio_buffer.commit":
            if not self.validated:
                await self.error(MODEL_NOT_VALIDATED_TEXT, "model_not_validated")
                return
            if InputAudioBufferCommit.model_validate(event).final:
                self.audio.put_nowait(None)
            elif self.generation is None or self.generation.done():
                self.generation = asyncio.create_task(self.generate())
        else:
            await self.error(unknown_event_text(kind), "unknown_event")

    async def next_audio(self) -> tuple[bytes, bool]:
        """What has arrived (waiting for at least one append), and whether the audio is over."""
        chunk = await self.audio.get()
        if chunk is None:
            return b"", True
        parts, over = [chunk], False
        while not self.audio.empty():  # a client ahead of the recognizer: decode what waits in one go
            more = self.audio.get_nowait()
            if more is None:
                over = True
                break
            parts.append(more)
        pcm = b"".join(parts)
        self.waiting -= len(pcm)
        return pcm, over

    async def generate(self) -> None:
        lease: Lease | None = None
        try:
            pcm, over = await self.next_audio()  # the decoder is taken when there is audio to decode
            lease, utterances = await self.engine.stream()
            await self.transcribe(lease, utterances, pcm, over)
        except asyncio.CancelledError:
            raise
        except Busy as exc:
            self.drop_waiting()
            await self.error(str(exc), BUSY_CODE)
        except Exception as exc:
            log.exception("realtime transcription failed")
            with contextlib.suppress(Exception):
                await self.error(str(exc), "processing_error")
        finally:
            if lease is not None:
                lease.release()

    async def transcribe(self, lease: Lease, utterances: Utterances, pcm: bytes, over: bool) -> None:
        """The utterance from its first audio (`pcm`, and whether that was all) to `transcription.done`."""
        while True:
            if pcm:
                self.decoding = True
                try:
                    delta = await lease.call(utterances.feed, pcm)
                finally:
                    self.decoding = False
                if delta:
                    await self.send(TranscriptionDelta(delta=delta))
            if over or not self.connected:
                break
            pcm, over = await self.next_audio()
        delta, text = await lease.call(utterances.finish)
        if delta:
            await self.send(TranscriptionDelta(delta=delta))
        audio_tokens = math.ceil(utterances.audio_s * AUDIO_TOKENS_PER_S)
        words = len(text.split())
        await self.send(TranscriptionDone(text=text, usage=UsageInfo(
            prompt_tokens=audio_tokens, completion_tokens=words, total_tokens=audio_tokens + words)))
        self.drop_waiting()  # as vLLM: what is left belongs to no utterance

    def drop_waiting(self) -> None:
        while not self.audio.empty():
            self.waiting -= len(self.audio.get_nowait() or b"")

