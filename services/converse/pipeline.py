"""Pipeline mode: each recorded input streamed at real time to the listen target, as a microphone would send it
(the recording, then the silence window), → the transcript's final (the end of the turn) → the reply streamed
(services/converse/reply.py) → its text fed into a speech session clause by clause as it arrives (so the first
audio does not wait for the whole reply) → the agent's audio. The next input starts when the agent's audio has
finished playing (received audio laid end to end from its first chunk). Times are on the conversation's clock
(services/converse/timeline.py).

A turn that fails keeps its stages up to where it stopped, with its error's message, and the conversation goes
on. An input whose transcript is empty has no reply and is no turn (its name is in `Conversation.skipped`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

import httpx

from protocol.errors import StudioError
from protocol.listen import DEFAULT_LISTEN_MODEL, LISTEN_BYTES_PER_S
from services.converse.reply import Message, ReplyStage
from services.converse.timeline import Conversation, Turn, speech_end_s
from services.listen import ListenAudio
from services.listen.client import ws_url_of
from services.listen.realtime import stream_pcm
from services.speech import PcmChunk, SpeechSession, omni_client, speech_config

CLAUSE_END = re.compile(r"[,;:.!?…](?=\s)")  # a clause ends at punctuation followed by a space


def split_clauses(buffer: str) -> tuple[str, str]:
    """(the complete clauses at the start of `buffer`, the rest still growing)."""
    ends = [m.end() for m in CLAUSE_END.finditer(buffer)]
    if not ends:
        return "", buffer
    return buffer[: ends[-1]], buffer[ends[-1]:]


async def listen_model(url: str) -> str:
    """The listen model to name at `url`: the catalog's when listed (or when the list is not one model), else the
    server's only model — the rule services/listen's client follows."""
    try:
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            ids = [str(m["id"]) for m in (await http.get(url.rstrip("/") + "/v1/models")).json().get("data", [])]
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        ids = []
    return DEFAULT_LISTEN_MODEL if DEFAULT_LISTEN_MODEL in ids or len(ids) != 1 else ids[0]


class Pipeline:
    """One conversation in pipeline mode over a listen URL, a reply stage and a speech URL."""

    def __init__(self, listen_url: str, speak_url: str, reply: ReplyStage, *, voice: str | None = None,
                 silence_ms: int = 500) -> None:
        self.listen_url = listen_url.rstrip("/")
        self.speech = omni_client(speak_url)
        self.reply = reply
        self.config = speech_config(voice=voice)
        self.silence_ms = silence_ms
        self._t0 = 0.0
        self._model = DEFAULT_LISTEN_MODEL

    def clock(self, t: float | None = None) -> float:
        return (time.perf_counter() if t is None else t) - self._t0

    async def run(self, inputs: list[ListenAudio]) -> Conversation:
        self._model = await listen_model(self.listen_url)
        conv = Conversation(mode="pipeline", reply_label=self.reply.label)
        messages: list[Message] = []
        self._t0 = time.perf_counter()
        for audio in inputs:
            play_end = await self._turn(audio, conv, messages)
            await asyncio.sleep(max(0.0, play_end - self.clock()))  # the agent finishes; then the next input
        return conv

    async def _turn(self, audio: ListenAudio, conv: Conversation, messages: list[Message]) -> float:
        """One input and its reply; returns when (on the clock) the agent's audio will have finished playing."""
        chunks: list[tuple[float, PcmChunk]] = []
        session = self.speech.open(self.config, on_audio=lambda c: chunks.append((self.clock(), c)))
        connecting = asyncio.create_task(session.connect())  # ready by the time the reply comes
        turn = Turn()
        try:
            heard = await self._hear(audio, conv, turn)
            if heard is None:
                return self.clock()
            conv.turns.append(turn)
            messages.append({"role": "user", "content": heard})
            await self._answer(session, connecting, messages, turn, chunks)
        except StudioError as exc:
            turn.error = str(exc)
        finally:
            connecting.cancel()
            with contextlib.suppress(BaseException):
                await connecting
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.aclose(), 5)
        if turn.reply_text:
            messages.append({"role": "assistant", "content": turn.reply_text.strip()})
        turn.finish()
        return self._place(chunks, conv)

    async def _hear(self, audio: ListenAudio, conv: Conversation, turn: Turn) -> str | None:
        """Stream the input (and the silence window) at real time; the transcript's final text, or None when it
        is empty (no turn). A failure is the turn's error, with the speech end still placed."""
        silence = bytes(int(self.silence_ms / 1000 * LISTEN_BYTES_PER_S) // 2 * 2)
        sent_at = self.clock()
        end_in_input = speech_end_s(audio.pcm)
        try:
            out = await stream_pcm(ws_url_of(self.listen_url), audio.pcm + silence, model=self._model, pace=True)
        except StudioError:
            conv.person.append((sent_at, audio.pcm))
            turn.user_speech_end_s = sent_at + end_in_input
            conv.turns.append(turn)
            raise
        start = self.clock(out.first_audio_t) if out.first_audio_t is not None else sent_at
        conv.person.append((start, audio.pcm))
        turn.user_speech_end_s = start + end_in_input
        if not out.text:
            conv.skipped.append(audio.name)
            return None
        turn.user_text = out.text
        turn.transcript_final_s = self.clock(out.done_t)
        return out.text

    async def _answer(self, session: SpeechSession, connecting: asyncio.Task, messages: list[Message], turn: Turn,
                      chunks: list[tuple[float, PcmChunk]]) -> None:
        """The reply streamed into the speech session clause by clause, then its audio to the end."""
        buffer = ""
        async for piece in self.reply.stream(messages):
            if turn.reply_first_token_s is None:
                turn.reply_first_token_s = self.clock()
            turn.reply_text += piece
            clauses, buffer = split_clauses(buffer + piece)
            if clauses.strip():
                await connecting
                await session.feed(clauses)
        if buffer.strip():
            await connecting
            await session.feed(buffer)
        if not turn.reply_text.strip():
            return  # nothing to say
        await connecting
        try:
            async for _ in session.finish():
                pass
        finally:
            if chunks:
                turn.first_audio_s = chunks[0][0]

    def _place(self, chunks: list[tuple[float, PcmChunk]], conv: Conversation) -> float:
        """Lay the agent's audio end to end from its first chunk's arrival (no chunk plays before it arrives);
        returns when it ends on the clock."""
        end = self.clock()
        play = 0.0
        for arrived, chunk in chunks:
            play = max(play, arrived)
            conv.agent.append((play, chunk.data, chunk.sample_rate))
            play += len(chunk.data) / 2 / chunk.sample_rate
        return max(end, play)
