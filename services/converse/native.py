"""Native mode: one speech-to-speech session (vLLM-Omni's duplex `WS /v1/realtime?duplex=1`, protocol/duplex.py)
holds the whole conversation. The client is the microphone: it sends 100 ms appends at real time — an input, then
silence (the server's VAD ends the turn after its silence window) until the agent's audio has finished playing,
then the next input. The server's events go onto the same clock and Turn/Conversation record as pipeline mode
(services/converse/timeline.py):

- `user_speech_end_s`: from the input's own audio, as pipeline mode does (placed where its first chunk was sent);
- `transcript_final_s`: `conversation.item.input_audio_transcription.completed` received;
- `reply_first_token_s`: the first `response.output_audio_transcript.delta`;
- `first_audio_s`: the first `response.output_audio.delta`; `interrupted`: `response.done` with status cancelled.

A server whose answer to `session.update` is an `error` with code `unsupported` has no speech-to-speech session:
NoDuplexSession (exit 1) says so and points at pipeline mode.

The session travels over a WebSocket (a URL) or any other channel of JSON text events — async `recv()`, `send()`,
`close()` — that a `SessionOpener` opens: on SageMaker, the HTTP/2 bidirectional stream
(services/converse/sagemaker.py `EndpointSession`). The conversation logic is the same on both.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Protocol

from protocol.duplex import (
    DUPLEX_QUERY,
    NO_DUPLEX_TEXT,
    UNSUPPORTED_CODE,
    SessionConfig,
    SessionUpdate,
    TurnDetection,
    error_of,
)
from protocol.errors import BackendUnreachable, StreamError, StudioError
from protocol.listen import LISTEN_BYTES_PER_S
from services.converse.timeline import Conversation, Turn, speech_end_s
from services.listen import ListenAudio
from services.listen.client import ws_url_of

log = logging.getLogger(__name__)

CHUNK_S = 0.1
CHUNK = int(CHUNK_S * LISTEN_BYTES_PER_S) // 2 * 2
ANSWER_TIMEOUT_S = 30.0  # after an input has been sent, the turn's end must come within this
# Opening the session: 15 s for the WebSocket handshake, then 15 s for the answer to session.update (a server
# loading its model answers within seconds; one that says nothing for this long will not, and the person is told).
OPEN_TIMEOUT_S = 15.0


def _why(exc: BaseException, timed_out: str) -> str:
    """What went wrong, in words: `timed_out` for a timeout (whose own text is empty), else the error's type and
    text."""
    return timed_out if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"


class NoDuplexSession(StudioError):
    exit_code = 1


class Channel(Protocol):
    """JSON text events both ways (a websockets connection is one; `recv` raises once the session has ended)."""

    async def recv(self) -> str | bytes: ...
    async def send(self, text: str) -> None: ...
    async def close(self) -> None: ...


class SessionOpener(Protocol):
    target: str  # where the session is, for messages

    async def open(self) -> Channel: ...


class Native:
    """One conversation in native mode at `target`: a server's URL (its `WS /v1/realtime?duplex=1`) or a
    SessionOpener (see the module's doc). `instructions`: a model's system prompt, or — for the offline engine —
    the scripted reply's rules."""

    def __init__(self, target: str | SessionOpener, *, instructions: str | None = None, voice: str | None = None,
                 silence_ms: int = 500, reply_label: str = "the server's speech-to-speech session",
                 vad_threshold: float | None = None, open_timeout_s: float = OPEN_TIMEOUT_S,
                 end_of_turn: float | None = None) -> None:
        """`end_of_turn`: ask the server to decide turns with its end-of-turn model at that threshold (`semantic_vad`,
        the offline engine's); a server that refuses it decides them by the silence window, said in `turn_note`."""
        self._opener = None if isinstance(target, str) else target
        self.open_timeout_s = open_timeout_s
        self.url = ws_url_of(target) + f"?{DUPLEX_QUERY}=1" if isinstance(target, str) else target.target
        learned = {} if end_of_turn is None else {"type": "semantic_vad", "eot_threshold": end_of_turn}
        self.update = SessionUpdate(session=SessionConfig(
            instructions=instructions, voice=voice, turn_detection=TurnDetection(
                silence_duration_ms=silence_ms, **({} if vad_threshold is None else {"threshold": vad_threshold}),
                **learned)))
        self.turn_note = ""  # set when the server refused the learned end of turn
        self.reply_label = reply_label
        self._t0 = 0.0
        self._mic = b""  # what the microphone still has to send before silence
        self._events: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()

    def clock(self) -> float:
        return time.perf_counter() - self._t0

    @property
    def turn_rule(self) -> str:
        """How the server was asked to end turns (and agreed): "learned" (semantic_vad) or "silence"."""
        detection = self.update.session.turn_detection
        return "learned" if detection is not None and detection.type == "semantic_vad" else "silence"

    @contextlib.asynccontextmanager
    async def session(self, *workers: Callable[[Channel], Coroutine[Any, Any, None]]) -> AsyncIterator[Channel]:
        """The session, open: connected, `session.update` answered, the clock started, the server's events read
        into `_events`, and each of `workers(channel)` running beside — all stopped, and the channel closed, at
        the end."""
        channel = await self._connect()
        try:
            await self._open(channel)
            self._t0 = time.perf_counter()
            tasks = [asyncio.create_task(work(channel)) for work in (self._read, *workers)]
            try:
                yield channel
            finally:
                for task in tasks:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(channel.close(), 5)

    async def run(self, inputs: list[ListenAudio]) -> Conversation:
        conv = Conversation(mode="native", reply_label=self.reply_label)
        async with self.session(self._microphone):
            for i, audio in enumerate(inputs):
                play_end = await self._turn(audio, conv)
                last = i == len(inputs) - 1  # after the last answer has come, nothing waits for it to play
                while not last and self.clock() < play_end:  # the agent finishes; the microphone sends silence
                    await asyncio.sleep(min(0.05, play_end - self.clock()))
        return conv

    async def _connect(self) -> Channel:
        if self._opener is not None:
            return await self._opener.open()
        from websockets.asyncio.client import connect
        from websockets.exceptions import WebSocketException

        try:
            return await connect(self.url, max_size=None, open_timeout=self.open_timeout_s)
        except (OSError, TimeoutError, WebSocketException) as exc:
            why = _why(exc, f"the WebSocket handshake timed out after {self.open_timeout_s:g} s")
            raise BackendUnreachable(f"cannot reach the speech-to-speech session at {self.url} ({why})") from None

    async def _open(self, channel: Channel) -> None:
        await channel.send(self.update.model_dump_json(exclude_none=True))
        while True:
            try:
                event = json.loads(await asyncio.wait_for(channel.recv(), self.open_timeout_s))
            except StudioError:
                raise  # the channel's own message (SageMaker: the endpoint refused the stream, and why)
            except (TimeoutError, ValueError, OSError) as exc:
                why = _why(exc, f"no session.updated within {self.open_timeout_s:g} s of session.update")
                raise StreamError(f"{self.url} did not open a speech-to-speech session ({why})") from None
            except Exception as exc:  # the connection closed
                raise StreamError(f"{self.url} closed before opening a speech-to-speech session ({exc})") from None
            kind = event.get("type") if isinstance(event, dict) else None
            if kind == "error":
                code, message = error_of(event)
                if code == UNSUPPORTED_CODE:
                    raise NoDuplexSession(NO_DUPLEX_TEXT)
                detection = self.update.session.turn_detection
                if detection is not None and detection.type == "semantic_vad":  # a server with server_vad only
                    silence = detection.silence_duration_ms
                    self.turn_note = (f"the server refused the learned end of turn ({message}); its turns end after "
                                      f"{silence} ms of silence")
                    log.warning("native mode: %s", self.turn_note)
                    self.update.session.turn_detection = detection.model_copy(
                        update={"type": "server_vad", "eot_threshold": None})
                    await channel.send(self.update.model_dump_json(exclude_none=True))
                    continue
                raise StreamError(f"{self.url} refused the session: {message} ({code})")
            if kind == "session.updated":
                return

    async def _read(self, channel: Channel) -> None:
        reason = ""
        try:
            while True:
                event = json.loads(await channel.recv())
                if isinstance(event, dict):
                    self._events.put_nowait((self.clock(), event))
        except StudioError as exc:  # the channel says why it ended (a WebSocket's close needs no words)
            reason = str(exc)
        except Exception:
            pass
        self._events.put_nowait((self.clock(), {"type": "closed", "reason": reason}))

    async def _microphone(self, channel: Channel) -> None:
        """100 ms appends at real time: what `_mic` holds, else silence."""
        start = time.perf_counter()
        sent = 0
        while True:
            chunk, self._mic = (self._mic[:CHUNK], self._mic[CHUNK:]) if self._mic else (bytes(CHUNK), b"")
            await channel.send(json.dumps({"type": "input_audio_buffer.append",
                                           "audio": base64.b64encode(chunk).decode("ascii")}))
            sent += 1
            await asyncio.sleep(max(0.0, start + sent * CHUNK_S - time.perf_counter()))

    async def _turn(self, audio: ListenAudio, conv: Conversation) -> float:
        """One input and the server's answer; returns when (on the clock) the agent's audio will have ended."""
        turn = Turn()
        sent_at = self.clock()
        self._mic = audio.pcm
        conv.person.append((sent_at, audio.pcm))
        turn.user_speech_end_s = sent_at + speech_end_s(audio.pcm)
        chunks: list[tuple[float, bytes, int]] = []
        deadline = sent_at + len(audio.pcm) / LISTEN_BYTES_PER_S + ANSWER_TIMEOUT_S
        try:
            await self._collect(turn, conv, audio, chunks, deadline)
        except StudioError as exc:
            turn.error = str(exc)
        if turn.user_text or turn.error:
            conv.turns.append(turn.finish())
        play = 0.0
        for arrived, pcm, rate in chunks:  # laid end to end from the first chunk's arrival
            play = max(play, arrived)
            conv.agent.append((play, pcm, rate))
            play += len(pcm) / 2 / rate
        return max(self.clock(), play)

    async def _collect(self, turn: Turn, conv: Conversation, audio: ListenAudio,
                       chunks: list[tuple[float, bytes, int]], deadline: float) -> None:
        while True:
            try:
                at, event = await asyncio.wait_for(self._events.get(), max(0.01, deadline - self.clock()))
            except TimeoutError:
                raise StreamError(f"no answer from {self.url} within {ANSWER_TIMEOUT_S:.0f} s of the input's "
                                  "end") from None
            kind = event.get("type")
            if kind == "input_audio_buffer.speech_stopped" and turn.eot_rule is None:  # the server decided the turn
                turn.eot_rule = self.turn_rule
                turn.eot_wait_ms = max(0.0, (at - (turn.user_speech_end_s or at)) * 1000)
            elif kind == "conversation.item.input_audio_transcription.completed":
                turn.user_text = str(event.get("transcript") or "").strip()
                turn.transcript_final_s = at
                if not turn.user_text:
                    conv.skipped.append(audio.name)
                    return
            elif kind == "response.output_audio_transcript.delta":
                turn.reply_first_token_s = at if turn.reply_first_token_s is None else turn.reply_first_token_s
                turn.reply_text += str(event.get("delta") or "")
            elif kind == "response.output_audio.delta":
                turn.first_audio_s = at if turn.first_audio_s is None else turn.first_audio_s
                chunks.append((at, base64.b64decode(str(event.get("delta") or "")),
                               int(event.get("sample_rate_hz") or 24000)))
            elif kind == "response.done":
                turn.interrupted = (event.get("response") or {}).get("status") == "cancelled"
                return
            elif kind == "error":
                code, message = error_of(event)
                raise StreamError(f"{message} ({code})")
            elif kind == "closed":
                raise StreamError(event.get("reason") or f"{self.url} closed the session")
