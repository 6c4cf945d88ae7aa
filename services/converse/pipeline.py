"""Pipeline mode: each recorded input streamed at real time to the listen target, as a microphone would send it
(with a turn detector, hearing/turn_end.py: each turn the detector finds in it, up to the moment it
decided the turn was over — a cut-off mid-input makes the rest the next turn; without one: the recording, then the
silence window), → the transcript's final (the end of the turn) → the reply streamed
(services/converse/reply.py) → its text fed into a speech session clause by clause as it arrives (so the first
audio does not wait for the whole reply) → the agent's audio. The next input starts when the agent's audio has
finished playing (received audio laid end to end from its first chunk); after the last input the conversation ends
once the last reply has been received. Times are on the conversation's clock
(services/converse/timeline.py).

A turn that fails keeps its stages up to where it stopped, with its error's message, and the conversation goes
on. An input whose transcript is empty has no reply and is no turn (its name is in `Conversation.skipped`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from hearing.turn_end import Decision, TurnDetection
from protocol.errors import StudioError
from protocol.listen import DEFAULT_LISTEN_MODEL, LISTEN_BYTES_PER_S
from protocol.limits import SPEECH_UNIT_MAX_CHARS, SPEECH_UNIT_MAX_WORDS
from services.converse.bargein import (
    DEFAULT_MIN_SPEECH_MS,
    DEFAULT_VAD_THRESHOLD,
    Reply,
    SpeechStart,
    lay_out,
    microphone,
    play_end,
)
from services.converse.reply import Message, ReplyStage
from services.converse.timeline import Conversation, Turn, speech_end_s
from services.converse.turn_split import split_turns
from services.listen import ListenAudio
from services.listen.client import ws_url_of
from services.listen.realtime import stream_pcm
from services.speech import PcmChunk, SpeechClient, omni_client, speech_config

CLAUSE_END = re.compile(r"[,;:.!?…](?=\s)")  # a clause ends at punctuation followed by a space


def split_clauses(buffer: str) -> tuple[str, str]:
    """(the complete clauses at the start of `buffer`, the rest still growing)."""
    ends = [m.end() for m in CLAUSE_END.finditer(buffer)]
    if not ends:
        return "", buffer
    return buffer[: ends[-1]], buffer[ends[-1]:]


def speakable_prefix(buffer: str) -> tuple[str, str]:
    """(the text at the start of `buffer` ready for the speech session, the rest still growing).

    Its complete clauses; and when the clause still growing after them is longer than a unit may be (more than
    SPEECH_UNIT_MAX_WORDS complete words, or SPEECH_UNIT_MAX_CHARS visible characters: protocol.limits), its
    complete words too — all of it when one word alone is that long — so a reply without punctuation is spoken
    as it arrives, not after its last token (the offline engine cuts such text into units by the same caps).
    """
    clauses, rest = split_clauses(buffer)
    words_end = max(rest.rfind(" "), rest.rfind("\n"), rest.rfind("\t")) + 1
    if len(rest[:words_end].split()) <= SPEECH_UNIT_MAX_WORDS and len(rest.strip()) <= SPEECH_UNIT_MAX_CHARS:
        return clauses, rest
    if len(rest[words_end:]) > SPEECH_UNIT_MAX_CHARS:
        return buffer, ""
    return clauses + rest[:words_end], rest[words_end:]


def feed_pieces(ready: str) -> list[str]:
    """`ready` (from `speakable_prefix`) as the pieces fed to the speech session: a clause each, then any words."""
    pieces = [m.group(0) for m in re.finditer(r".*?[,;:.!?…](?=\s|$)\s*", ready, re.S)]
    tail = ready[sum(map(len, pieces)):]
    return [piece for piece in [*pieces, tail] if piece.strip()]


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
    """One conversation in pipeline mode over a listen URL, a reply stage and a speech URL. `barge_in_at`: the next
    input starts that many seconds after the agent's first audio (else after the agent finished); the person's
    speech (services/converse/bargein.py: `vad_threshold`, `min_speech_ms`) while the agent talks interrupts it."""

    def __init__(self, listen: str | Any, speak: str | SpeechClient, reply: ReplyStage, *, voice: str | None = None,
                 silence_ms: int = 500, barge_in_at: float | None = None,
                 vad_threshold: float = DEFAULT_VAD_THRESHOLD, min_speech_ms: int = DEFAULT_MIN_SPEECH_MS,
                 turn_detection: TurnDetection | None = None) -> None:
        # a URL, or a SageMaker listen endpoint (services/listen/sagemaker.py: its `outcome` over HTTP/2)
        self.listener = None if isinstance(listen, str) else listen
        self.listen_url = listen.rstrip("/") if isinstance(listen, str) else listen.target
        # a URL, or any speech client (the SageMaker backend's: the voice endpoint's HTTP/2 session)
        self.speech = omni_client(speak) if isinstance(speak, str) else speak
        self.reply = reply
        self.config = speech_config(voice=voice)
        self.silence_ms = silence_ms
        self.barge_in_at = barge_in_at
        self.vad_threshold = vad_threshold
        self.min_speech_ms = min_speech_ms
        # None: a recorded input is one turn, ended by the silence window after it (the rule before turn detectors);
        # else each input goes through the detector as a microphone's audio would (turn_end.split_turns)
        self.turn_detection = turn_detection
        self._t0 = 0.0
        self._model = DEFAULT_LISTEN_MODEL
        self._speaking: Reply | None = None  # the agent's reply that a barge-in would stop

    def clock(self, t: float | None = None) -> float:
        return (time.perf_counter() if t is None else t) - self._t0

    async def run(self, inputs: list[ListenAudio]) -> Conversation:
        if self.listener is None:
            self._model = await listen_model(self.listen_url)
        conv = Conversation(mode="pipeline", reply_label=self.reply.label)
        messages: list[Message] = []
        self._t0 = time.perf_counter()
        for audio in inputs:
            for part, decision in await self._parts(audio):
                if self._speaking is not None:
                    await self._until_next_input(self._speaking, conv, messages)
                await self._turn(lambda turn, a=part, d=decision: self._hear(a, conv, turn, d), conv, messages)
        if self._speaking is not None:  # the last reply: all of it received (no need to wait while it would play)
            await self._settle(self._speaking, conv, messages)
        conv.reply_label = self.reply.label  # a model not named was looked up by the first reply: named now
        return conv

    async def _until_next_input(self, reply: Reply, conv: Conversation, messages: list[Message]) -> None:
        """Wait for when the next input starts: `barge_in_at` after the agent's first audio, or (without it) when
        the agent's audio has finished playing."""
        if self.barge_in_at is not None:
            assert reply.task is not None
            waiting = asyncio.ensure_future(reply.first_audio.wait())
            await asyncio.wait([waiting, reply.task], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if reply.chunks:
                await asyncio.sleep(max(0.0, reply.chunks[0][0] + self.barge_in_at - self.clock()))
                return
        end = await self._settle(reply, conv, messages)
        await asyncio.sleep(max(0.0, end - self.clock()))

    async def _turn(self, hear: Callable[[Turn], Awaitable[str | None]], conv: Conversation,
                    messages: list[Message], *, turn: Turn | None = None,
                    after: asyncio.Future | None = None) -> None:
        """One input heard (`hear(turn)`: its final text, None for no words), the agent's previous reply (maybe
        interrupted) settled after it — and after the previous turn's own handling (`after`), when turns
        overlap — and its reply started: it streams and plays while the next input waits."""
        turn = turn or Turn()
        reply = Reply(turn, session=None, connecting=None)  # type: ignore[arg-type]
        reply.session = self.speech.open(self.config, on_audio=lambda c: self._arrived(reply, c))
        reply.connecting = asyncio.create_task(reply.session.connect())  # ready by the time the reply comes
        heard = None
        try:
            heard = await hear(turn)
        except StudioError as exc:
            turn.error = str(exc)
        if after is not None:
            await asyncio.gather(after, return_exceptions=True)
        if self._speaking is not None:
            await self._settle(self._speaking, conv, messages)
        if heard is None:
            await _close(reply)
            turn.finish()
            return
        conv.turns.append(turn)
        messages.append({"role": "user", "content": heard})
        reply.task = asyncio.create_task(self._answering(reply, messages))
        self._speaking = reply

    def _arrived(self, reply: Reply, chunk: PcmChunk) -> None:
        reply.chunks.append((self.clock(), chunk))
        reply.first_audio.set()

    def _barge_in(self, onset: float) -> bool:
        """The person started speaking at `onset` (perf_counter): stop the agent if it is talking or about to — its
        reply still streaming with no audio yet (True then). Else the old answer would play after the person has
        moved on, and the new one queue behind it."""
        reply, now = self._speaking, self.clock()
        if reply is not None and reply.cut_s is None and reply.answering(now):
            reply.interrupt(now, self.clock(onset))
            return True
        return False

    async def _settle(self, reply: Reply, conv: Conversation, messages: list[Message]) -> float:
        """The reply to its end (or its cut): its audio placed, its turn's figures; returns when it stops playing."""
        if reply.task is not None:
            await asyncio.gather(reply.task, return_exceptions=True)
        if reply.cancelling is not None:
            await asyncio.gather(reply.cancelling, return_exceptions=True)
        await _close(reply)
        if self._speaking is reply:
            self._speaking = None
        turn = reply.turn
        if reply.chunks:
            turn.first_audio_s = reply.chunks[0][0]
        placed = lay_out(reply.chunks, reply.cut_s)
        conv.agent.extend((at, data, rate) for at, data, rate, _ in placed)
        if reply.cut_s is not None and reply.onset_s is not None:
            turn.interrupted = True
            turn.reply_text = reply.heard_text(placed)
            turn.agent_stop_s = reply.cut_s
            turn.barge_in_stop_ms = (reply.cut_s - reply.onset_s) * 1000
        if turn.reply_text.strip():
            messages.append({"role": "assistant", "content": turn.reply_text.strip()})
        turn.finish()
        return max(self.clock(), play_end(placed))

    async def _parts(self, audio: ListenAudio) -> list[tuple[ListenAudio, Decision | None]]:
        """The input's turns: itself (no detector), or the pieces the detector's cut-offs make of it."""
        if self.turn_detection is None:
            return [(audio, None)]
        parts = await asyncio.to_thread(split_turns, audio.pcm, self.turn_detection,
                                        vad_threshold=self.vad_threshold, min_speech_ms=self.min_speech_ms)
        return [(dataclasses.replace(audio, name=audio.name if p.index == 0 else f"{audio.name} (part {p.index + 1})",
                                     pcm=p.pcm), p.decision) for p in parts]

    async def _hear(self, audio: ListenAudio, conv: Conversation, turn: Turn,
                    decision: Decision | None = None) -> str | None:
        """Stream the input (and the silence after it: the window, or the detector's wait) at real time, as a
        microphone would, watching it for the person's speech (a barge-in); the transcript's final text, or None
        when it is empty (no turn). A failure is the turn's error, with the speech end still placed."""
        silence = bytes(int(self.silence_ms / 1000 * LISTEN_BYTES_PER_S) // 2 * 2)
        if decision is not None:  # the part holds the silence its rule waited
            turn.eot_rule, turn.eot_wait_ms, turn.eot_probability = decision.rule, decision.wait_ms, decision.probability
            silence = b""
        sent_at = self.clock()
        if decision is None:  # where the speech ends in the input: the energy rule's (no detector)
            end_in_input = speech_end_s(audio.pcm)
        else:  # the detector's own: the part ends where it decided, its wait after the speech (speech_end_s's energy
            # rule would place it later, in the voice's fading tail, and the final transcript before the decision)
            end_in_input = len(audio.pcm) / LISTEN_BYTES_PER_S - decision.wait_ms / 1000
        mic = microphone(audio.pcm + silence, SpeechStart(self.vad_threshold, self.min_speech_ms), self._barge_in)
        try:
            if self.listener is not None:
                out = await self.listener.outcome(mic)
            else:
                out = await stream_pcm(ws_url_of(self.listen_url), mic, model=self._model)
        except StudioError:
            conv.person.append((sent_at, audio.pcm))
            turn.user_speech_end_s = sent_at + end_in_input
            conv.turns.append(turn)
            raise
        start = self.clock(out.audio_start_t) if out.audio_start_t is not None else sent_at
        conv.person.append((start, audio.pcm))
        turn.user_speech_end_s = start + end_in_input
        if not out.text:
            conv.skipped.append(audio.name)
            return None
        turn.user_text = out.text
        turn.transcript_final_s = self.clock(out.done_t)
        return out.text

    async def _answering(self, reply: Reply, messages: list[Message]) -> None:
        try:
            await self._answer(reply, list(messages))
        except StudioError as exc:
            reply.turn.error = str(exc)

    async def _answer(self, reply: Reply, messages: list[Message]) -> None:
        """The reply streamed into the speech session clause by clause (each clause its own `feed`; a long run
        without punctuation by its words, `speakable_prefix`), then its audio to the end."""
        turn, session, buffer = reply.turn, reply.session, ""
        async for piece in self.reply.stream(messages):
            if turn.reply_first_token_s is None:
                turn.reply_first_token_s = self.clock()
            turn.reply_text += piece
            ready, buffer = speakable_prefix(buffer + piece)
            for clause in feed_pieces(ready):
                await reply.connecting
                reply.fed.append(clause)
                await session.feed(clause)
        if buffer.strip():
            await reply.connecting
            reply.fed.append(buffer)
            await session.feed(buffer)
        if not turn.reply_text.strip():
            return  # nothing to say
        await reply.connecting
        async for _ in session.finish():
            pass


async def _close(reply: Reply) -> None:
    reply.connecting.cancel()
    with contextlib.suppress(BaseException):
        await reply.connecting
    with contextlib.suppress(Exception):
        await asyncio.wait_for(reply.session.aclose(), 5)
