"""A live conversation in pipeline mode: a microphone's audio (a browser's, over WebRTC) in, the agent's speech out
to a player (services/playback.py), turn by turn, on one clock.

The microphone streams without pause; its newest audio is "now" on the conversation's clock (a moment found in it
is placed back from there: a browser's frames come in bursts at times). The turn-taking detector (services/converse/bargein.py `TurnTaking`: the
energy VAD at `vad_threshold`, `min_speech_ms`, `silence_ms`) decides where the person's speech starts and ends.
At a start, a realtime transcription session opens and gets the audio from `PREROLL_S` before the onset on, as it
comes; at the end (the silence window elapsed) it is committed and its final text is the turn — then the same
reply and speech stages as recorded turns (services/converse/pipeline.py). The agent's audio is pushed to the
player as it arrives; a start while the agent talks is a barge-in: the player is silenced at once (what it had
queued is dropped), the reply and the speech session are cancelled, and the reply keeps the text that was heard.

A barge-in whose transcript has no words is counted in `echo_suspects`: the agent was most likely stopped by its
own voice coming back through the microphone (loudspeakers, no echo cancellation) — the page suggests headphones.

    live = LiveConversation(LivePipeline(url, url, ScriptedReply(...), playback=playback), loop)
    live.feed(frame)              # from the WebRTC thread, per frame
    live.view()                   # from the page: the status, the partial text, the timeline so far
    live.stop(); conv = live.result(60)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from protocol.errors import StudioError
from protocol.listen import LISTEN_BYTES_PER_S
from services.converse.bargein import Reply, TurnTaking
from services.converse.pipeline import Pipeline, listen_model
from services.converse.reply import Message
from services.converse.timeline import Conversation, Turn
from services.listen.client import ws_url_of
from services.listen.live import MicrophoneFeed
from services.listen.realtime import queue_source, stream_pcm
from services.playback import Playback
from services.runtime import BackgroundLoop
from services.speech import PcmChunk

PREROLL_S = 0.2  # sent with a turn from before its detected onset: the detector's first frames, a soft start
IDLE_S = 10.0  # a browser sends a frame every 20 ms while connected: this long without one, the call is gone


class LivePipeline(Pipeline):
    """Pipeline mode over a live microphone (see the module's doc); `playback` plays the agent."""

    def __init__(self, *args: Any, playback: Playback, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.playback = playback
        self.conv = Conversation(mode="pipeline", reply_label=self.reply.label)
        self.partial = ""  # the turn being heard, so far
        self.hearing = False  # the person is speaking (a turn is open)
        self.echo_suspects = 0

    def _arrived(self, reply: Reply, chunk: PcmChunk) -> None:
        super()._arrived(reply, chunk)
        if reply.cut_s is not None:
            return  # cut: what still arrives is never played
        ahead = self.playback.push(chunk.data, chunk.sample_rate, chunk.channels)
        turn = reply.turn
        if turn.first_audio_s is None:
            turn.first_audio_s = reply.chunks[0][0]
        if ahead is not None and turn.first_audio_played_s is None:
            turn.first_audio_played_s = self.clock() + ahead
            turn.finish()  # its voice-to-voice now, while the call goes on (not when the next turn settles it)

    def _barge_in(self, onset: float) -> bool:
        if super()._barge_in(onset):
            self.playback.stop()
            return True
        return False

    def agent_talking(self) -> bool:
        reply = self._speaking
        return reply is not None and reply.cut_s is None and reply.talking(self.clock())

    async def hold(self, chunks: AsyncIterator[bytes]) -> Conversation:
        """The conversation until `chunks` (16 kHz mono PCM16 as the microphone sends it) ends; then the turn
        being heard is committed and answered, and the agent's last reply runs to its end."""
        if self.listener is None:
            self._model = await listen_model(self.listen_url)
        detector = TurnTaking(self.vad_threshold, self.min_speech_ms, self.silence_ms, detection=self.turn_detection)
        messages: list[Message] = []
        mic, mic_start = bytearray(), 0.0
        hearing: asyncio.Queue[bytes | None] | None = None
        turn, last = Turn(), None
        self._t0 = time.perf_counter()
        async for pcm in chunks:
            if not mic:
                mic_start = self.clock() - len(pcm) / LISTEN_BYTES_PER_S
            mic += pcm
            sent, now = False, self.clock()
            for kind, at in detector.feed(pcm):
                at_s = now - (len(mic) / LISTEN_BYTES_PER_S - at)  # on the clock: the newest audio is now
                if kind == "start":
                    barged = self._barge_in(self._t0 + at_s)
                    hearing, turn, sent = asyncio.Queue(), Turn(), True
                    hearing.put_nowait(bytes(mic[int(max(0.0, at - PREROLL_S) * LISTEN_BYTES_PER_S) // 2 * 2:]))
                    last = asyncio.create_task(self._turn(
                        lambda t, q=hearing, b=barged: self._hear_live(q, b, t), self.conv, messages, turn=turn,
                        after=last))
                elif hearing is not None:  # the end: the rule decided (the silence window, or the model)
                    turn.user_speech_end_s = at_s
                    decided = detector.decisions[-1]
                    turn.eot_rule, turn.eot_wait_ms, turn.eot_probability = (decided.rule, decided.wait_ms,
                                                                             decided.probability)
                    if not sent:
                        hearing.put_nowait(pcm)
                    hearing.put_nowait(None)
                    hearing, sent = None, True
            if hearing is not None and not sent:
                hearing.put_nowait(pcm)
            self.hearing = hearing is not None
        self.conv.person = [(mic_start, bytes(mic))]  # once, at the end: a copy per frame would grow as n²
        if hearing is not None:  # stopped while speaking: the turn ends here
            turn.user_speech_end_s = self.clock()
            hearing.put_nowait(None)
        if last is not None:
            await asyncio.gather(last, return_exceptions=True)
        if self._speaking is not None:
            await self._settle(self._speaking, self.conv, messages)
        self.hearing = False
        self.conv.reply_label = self.reply.label  # a model not named was looked up by the first reply: named now
        return self.conv

    async def _hear_live(self, queue: asyncio.Queue[bytes | None], barged: bool, turn: Turn) -> str | None:
        """One turn's transcription from the live queue: its final text, or None when it has no words."""
        def partial(text: str) -> None:
            self.partial = text

        self.partial = ""
        try:
            if self.listener is not None:
                out = await self.listener.outcome(queue_source(queue), on_partial=partial)
            else:
                out = await stream_pcm(ws_url_of(self.listen_url), queue_source(queue), model=self._model,
                                       on_partial=partial)
        except StudioError:
            self.conv.turns.append(turn)
            raise
        finally:
            self.partial = ""
        if not out.text:
            self.echo_suspects += barged  # the agent stopped, and nobody had spoken
            return None
        turn.user_text = out.text
        turn.transcript_final_s = self.clock(out.done_t)
        return out.text

    def view(self) -> dict[str, Any]:
        """What the page shows while the conversation goes on (read on the loop's thread: see LiveConversation):
        `status` hearing (the person speaks), answering (the reply is on its way), agent (its audio plays) or
        listening; the partial text, the suspected echoes, the timeline so far, the seconds on the clock."""
        reply = self._speaking
        answering = reply is not None and reply.cut_s is None and reply.task is not None and not reply.task.done()
        status = ("hearing" if self.hearing else "agent" if self.agent_talking() else "answering" if answering
                  else "listening")
        return {"status": status, "partial": self.partial, "echo_suspects": self.echo_suspects,
                "timeline": self.conv.as_json(), "seconds": round(self.clock(), 1) if self._t0 else 0.0}


class LiveConversation:
    """One live conversation, driven from other threads: `feed` from the WebRTC media thread, `view`, `stop` and
    `result` from the page's. The conversation itself — `runner.hold(chunks)`: a LivePipeline, or a LiveNative
    (services/converse/live_native.py) — runs on `loop`."""

    def __init__(self, runner: Any, loop: BackgroundLoop) -> None:
        self.runner = runner
        self._loop = loop
        self.mic = MicrophoneFeed(loop, idle_s=IDLE_S)  # the bridge Listen uses too
        self.feed, self.feed_pcm, self.stop = self.mic.feed, self.mic.feed_pcm, self.mic.stop
        self._future = loop.submit(runner.hold(self.mic.source()))
        self.kept: Any = None  # the studio's KeptCall writing it to the history as it goes (services/converse/kept.py)

    @property
    def done(self) -> bool:
        return self._future.done()

    def view(self) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            return self.runner.view()

        return self._loop.run(read(), timeout=5)

    def result(self, timeout: float | None = None) -> Conversation:
        """The conversation once it ended (a target's error on opening raises it)."""
        return self._future.result(timeout)

    def cancel(self) -> None:
        self.stop()
        self._future.cancel()
