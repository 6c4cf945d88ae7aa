"""A live conversation in native mode: the microphone streamed into one speech-to-speech session (vLLM-Omni's
duplex `/v1/realtime?duplex=1`, over a WebSocket or SageMaker's bidirectional stream: services/converse/native.py),
the agent's audio played as it comes (services/playback.py).

The server decides the turns (its VAD: `turn_detection` with the page's silence window). Its events are read onto
the conversation's clock (the newest microphone audio is "now"; an `audio_start_ms`/`audio_end_ms` is placed back
from there):

- `input_audio_buffer.speech_started` while the agent talks — or `response.done` with status `cancelled`, when the
  server stopped the response itself on hearing the person — is a barge-in: the player is silenced at once,
  `response.cancel` is sent when the server had not cancelled, and `conversation.item.truncate` tells the server
  how much of the agent's item was actually played (`audio_end_ms`). The turn keeps the text that had been sent
  with the audio played before the cut (each audio delta carries the transcript so far: the approximation).
- `speech_stopped` places the person's speech end; the input transcription's completion is the final transcript
  (empty: no turn — and if it had stopped the agent, a suspected echo, as in pipeline mode);
  `response.output_audio_transcript.delta` the first token; `response.output_audio.delta` the audio.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from protocol.duplex import ConversationItemTruncate, InputAudioBufferAppend, ResponseCancel, error_of
from protocol.errors import StudioError
from protocol.listen import LISTEN_BYTES_PER_S
from services.converse.native import ANSWER_TIMEOUT_S, Channel, Native
from services.converse.timeline import Conversation, Turn
from services.playback import Playback

IGNORED_ERRORS = ("response_cancel_not_active",)  # the server had already stopped what the client cancels


@dataclass
class Answer:
    """The agent's answer to one turn while it streams and plays."""

    turn: Turn
    text: str = ""
    item_id: str | None = None
    chunks: list[tuple[float, bytes, int, str]] = field(default_factory=list)  # (play_s, PCM16, rate, text so far)
    done: bool = False
    cut_s: float | None = None
    barged: bool = False  # cut because the person spoke (the onset comes with speech_started)

    def play_end(self) -> float:
        return max((at + len(pcm) / 2 / rate for at, pcm, rate, _ in self.chunks), default=0.0)

    def heard(self, cut_s: float) -> tuple[str, int]:
        """(the text sent with the last audio that had started playing at `cut_s`, the ms of audio played)."""
        text, played = "", 0.0
        for at, pcm, rate, so_far in self.chunks:
            if at >= cut_s:
                break
            text, played = so_far, played + min(len(pcm) / 2 / rate, cut_s - at)
        return text.strip(), int(played * 1000)


class LiveNative(Native):
    """Native mode over a live microphone (see the module's doc); `playback` plays the agent."""

    def __init__(self, target: Any, *, playback: Playback, **kwargs: Any) -> None:
        super().__init__(target, **kwargs)
        self.playback = playback
        self.conv = Conversation(mode="native", reply_label=self.reply_label)
        self.partial = ""
        self.echo_suspects = 0
        self._sent, self._sent_at = 0, 0.0  # bytes of microphone sent, and when the last of them was
        self._hearing: Turn | None = None  # speech started, transcript not yet final
        self._speaking = False  # between speech_started and speech_stopped
        self._barged = False  # the turn being heard stopped the agent
        self._answer: Answer | None = None
        self._closed = False  # the server ended the session

    def _clock_of(self, ms: Any) -> float:
        """A position in the input audio (ms from its start) on the clock: the newest audio sent is "now"."""
        if not isinstance(ms, int | float):
            return self.clock()
        return self._sent_at - (self._sent - ms / 1000 * LISTEN_BYTES_PER_S) / LISTEN_BYTES_PER_S

    def agent_talking(self) -> bool:
        a = self._answer
        return a is not None and a.cut_s is None and bool(a.chunks) and (not a.done or self.clock() < a.play_end())

    async def hold(self, chunks: AsyncIterator[bytes]) -> Conversation:
        """The conversation until `chunks` ends; then silence for the server to end a turn being spoken, and the
        last answer to its end (bounded)."""
        mic, mic_start = bytearray(), 0.0
        async with self.session(self._handle) as channel:
            async for pcm in chunks:
                if not mic:
                    mic_start = self.clock() - len(pcm) / LISTEN_BYTES_PER_S
                mic += pcm
                await self._send_audio(channel, pcm)
            self.conv.person = [(mic_start, bytes(mic))]  # once, at the end: a copy per frame would grow as n²
            tail = int((self.update.session.turn_detection.silence_duration_ms + 300) / 1000 * LISTEN_BYTES_PER_S)
            await self._send_audio(channel, bytes(tail // 2 * 2))
            deadline = self.clock() + ANSWER_TIMEOUT_S
            while self.clock() < deadline and not self._closed and self._busy():
                await asyncio.sleep(0.05)
        if self._answer is not None and not self._answer.done:
            self._close_answer(self._answer, cancelled=True)
        return self.conv

    def _busy(self) -> bool:
        a = self._answer
        return self._hearing is not None or (a is not None and (not a.done or self.clock() < a.play_end()))

    async def _send_audio(self, channel: Channel, pcm: bytes) -> None:
        await channel.send(InputAudioBufferAppend(audio=base64.b64encode(pcm).decode("ascii")).model_dump_json())
        self._sent += len(pcm)
        self._sent_at = self.clock()

    async def _handle(self, channel: Channel) -> None:
        """The server's events, in order, until the session closes."""
        while True:
            at, event = await self._events.get()
            kind = str(event.get("type") or "")
            if kind == "input_audio_buffer.speech_started":
                await self._started(channel, self._clock_of(event.get("audio_start_ms")))
            elif kind == "input_audio_buffer.speech_stopped" and self._hearing is not None:
                self._speaking = False
                end = self._hearing.user_speech_end_s = self._clock_of(event.get("audio_end_ms"))
                self._hearing.eot_rule = self.turn_rule  # the server decided the turn here
                self._hearing.eot_wait_ms = max(0.0, (at - end) * 1000)
            elif kind == "conversation.item.input_audio_transcription.completed":
                self._heard(str(event.get("transcript") or "").strip(), at)
            elif self._answer is not None and kind.startswith("response."):
                await self._answering(channel, self._answer, kind, event, at)
            elif kind == "error" and error_of(event)[0] not in IGNORED_ERRORS:
                code, message = error_of(event)
                turn = self._answer.turn if self._answer is not None and not self._answer.done else self._hearing
                if turn is not None:
                    turn.error = f"{message} ({code})"
            elif kind == "closed":
                turn = self._hearing or (self._answer.turn if self._answer and not self._answer.done else None)
                if turn is not None:
                    turn.error = event.get("reason") or f"{self.url} closed the session"
                self._closed = True
                return

    async def _started(self, channel: Channel, onset: float) -> None:
        a = self._answer
        self._barged = False
        if a is not None and a.cut_s is None and self.agent_talking():  # the server did not stop it: we do
            await self._cut(channel, a, cancel=True)
        if a is not None and a.barged and a.turn.barge_in_stop_ms is None and a.cut_s is not None:
            a.turn.barge_in_stop_ms = max(0.0, (a.cut_s - onset) * 1000)
            self._barged = True
        self._hearing, self._speaking = Turn(), True

    def _heard(self, text: str, at: float) -> None:
        turn, self._hearing, self._speaking = self._hearing or Turn(), None, False
        if not text:
            self.echo_suspects += self._barged
            return
        turn.user_text, turn.transcript_final_s = text, at
        self.conv.turns.append(turn)
        self._answer = Answer(turn)

    async def _answering(self, channel: Channel, a: Answer, kind: str, event: dict[str, Any], at: float) -> None:
        if kind == "response.output_audio_transcript.delta" and a.cut_s is None:
            a.turn.reply_first_token_s = a.turn.reply_first_token_s or at
            a.text += str(event.get("delta") or "")
        elif kind == "response.output_audio.delta" and a.cut_s is None:
            pcm, rate = base64.b64decode(str(event.get("delta") or "")), int(event.get("sample_rate_hz") or 24000)
            a.item_id = a.item_id or event.get("item_id")
            ahead = self.playback.push(pcm, rate)
            play = max(at, a.play_end())
            a.chunks.append((play, pcm, rate, a.text))
            if a.turn.first_audio_s is None:
                a.turn.first_audio_s = at
                a.turn.first_audio_played_s = None if ahead is None else at + ahead
        elif kind == "response.done" and not a.done:
            cancelled = (event.get("response") or {}).get("status") == "cancelled"
            if cancelled and a.cut_s is None and a.chunks:  # the server stopped it on hearing the person
                await self._cut(channel, a, cancel=False)
            self._close_answer(a, cancelled=cancelled)

    async def _cut(self, channel: Channel, a: Answer, *, cancel: bool) -> None:
        """Barge-in: silence the player now; tell the server (cancel, when it had not) what was played."""
        self.playback.stop()
        a.cut_s, a.barged = self.clock(), True
        text, played_ms = a.heard(a.cut_s)
        a.turn.interrupted, a.turn.agent_stop_s, a.turn.reply_text = True, a.cut_s, text
        with contextlib.suppress(StudioError, OSError, RuntimeError):
            if cancel:
                await channel.send(ResponseCancel().model_dump_json(exclude_none=True))
            if a.item_id:
                await channel.send(ConversationItemTruncate(item_id=a.item_id, audio_end_ms=played_ms)
                                   .model_dump_json())

    def _close_answer(self, a: Answer, *, cancelled: bool) -> None:
        a.done = True
        a.turn.interrupted = a.turn.interrupted or cancelled
        if a.cut_s is None:
            a.turn.reply_text = a.text.strip()
        for play, pcm, rate, _ in a.chunks:
            if a.cut_s is not None and play >= a.cut_s:
                break
            keep = pcm if a.cut_s is None else pcm[: max(0, int((a.cut_s - play) * rate)) * 2]
            self.conv.agent.append((play, keep, rate))
        a.turn.finish()

    def view(self) -> dict[str, Any]:
        """As LivePipeline.view: the status, the suspected echoes, the timeline so far."""
        a = self._answer
        answering = self._hearing is not None and not self._speaking or (
            a is not None and not a.done and not a.chunks and a.cut_s is None)
        status = ("hearing" if self._speaking else "agent" if self.agent_talking() else "answering" if answering
                  else "listening")
        return {"status": status, "partial": "", "echo_suspects": self.echo_suspects,
                "timeline": self.conv.as_json(),
                "seconds": round(self.clock(), 1) if self._t0 else 0.0}
