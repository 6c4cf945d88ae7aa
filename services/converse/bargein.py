"""Barge-in in pipeline mode: the person's voice detected in what the microphone sends, and the agent's reply that
it stops.

The detector is the Silero VAD (hearing/vad.py, the model the offline engine hears by): it scores each 32 ms
window with the probability that it is speech, and a 20 ms frame is voice when the newest window that has ended by
the frame's end scored at least `threshold` (default 0.5, Silero's own cut). A room's hum, a fan or a tone is not
voice however loud — the energy rule this replaced (an RMS level) took them for speech, so a noisy room never let a
turn end. Speech starts at the first frame of a run of voiced frames at least `min_speech_ms` long (default
100 ms): a cough shorter than that is no speech. The run is decided when its last needed frame has been spoken —
on the clock, where that frame ends in the input as sent.

`Reply` is the agent's answer in progress: its speech session, the audio chunks as they arrive, and — when the
person barges in — the cut: playback stops there (nothing of the agent's audio is placed after it), the reply
stream and the speech session are cancelled, and the text kept is that of the clauses (the speech server's
units, by their `audio.start` sentence_text) whose audio had started playing before the cut: a clause cut in
the middle counts as heard — the approximation.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import numpy as np

from hearing.turn_end import WINDOW_S, Decision, EndOfTurn, TurnDetection
from hearing.vad import SPEECH_PROB, WINDOW, WindowedVad
from protocol.listen import LISTEN_BYTES_PER_S, LISTEN_SAMPLE_RATE
from services.converse.timeline import FRAME_S, Turn
from services.speech import PcmChunk, SpeechSession

DEFAULT_VAD_THRESHOLD = SPEECH_PROB
DEFAULT_MIN_SPEECH_MS = 100


class VoicedFrames:
    """Fed PCM piece by piece: whether each complete 20 ms frame is voice (see the module's doc)."""

    def __init__(self, threshold: float = DEFAULT_VAD_THRESHOLD) -> None:
        self.threshold = threshold
        self._vad = WindowedVad()
        self._frame_bytes = int(FRAME_S * LISTEN_SAMPLE_RATE) * 2
        self._frame_samples = self._frame_bytes // 2
        self._carry = b""
        self.index = 0  # frames seen
        self._framed = 0  # frames scored (the subclasses' `index` moves as they walk them)
        self._last = 0.0  # the newest window's probability

    def frames(self, pcm: bytes) -> list[bool]:
        data = self._carry + pcm
        n = len(data) // self._frame_bytes
        self._carry = data[n * self._frame_bytes:]
        if n == 0:
            return []
        samples = np.frombuffer(data[: n * self._frame_bytes], dtype="<i2").astype(np.float32) / 32768.0
        before = self._framed * self._frame_samples // WINDOW  # windows scored before these frames
        probs = self._vad.feed(samples)
        out = []
        for j in range(n):
            done = (self._framed + j + 1) * self._frame_samples // WINDOW  # windows ended by this frame's end
            if done > before:
                self._last = float(probs[done - before - 1])
            out.append(done > 0 and self._last >= self.threshold)
        self._framed += n
        return out


class SpeechStart(VoicedFrames):
    """Fed the input's PCM piece by piece: the first run of voiced 20 ms frames lasting `min_speech_ms`."""

    def __init__(self, threshold: float = DEFAULT_VAD_THRESHOLD, min_speech_ms: int = DEFAULT_MIN_SPEECH_MS) -> None:
        super().__init__(threshold)
        self.need = frames_for(min_speech_ms)
        self._run = 0
        self.found: tuple[float, float] | None = None  # (onset, decided) in seconds into the input

    def feed(self, pcm: bytes) -> tuple[float, float] | None:
        """(where the speech starts, where it is decided) in seconds into the input, once; else None."""
        voiced_frames = self.frames(pcm)
        if self.found is not None:
            return None
        for voiced in voiced_frames:
            self.index += 1
            self._run = self._run + 1 if voiced else 0
            if self._run >= self.need:
                self.found = ((self.index - self._run) * FRAME_S, self.index * FRAME_S)
                return self.found
        return None


def frames_for(ms: float) -> int:
    return max(1, math.ceil(ms / 1000 / FRAME_S - 1e-9))


class TurnTaking(VoicedFrames):
    """A live microphone's turns: speech starts at a run of voiced frames lasting `min_speech_ms` (shorter is no
    speech: a cough) and ends when the end-of-turn rule (hearing/turn_end.py: `detection`, by default the
    silence window `silence_ms`) says the pause after it is the turn's end. `feed` returns the events its piece
    decided: ("start", onset) and ("end", where the last voiced frame ended), in seconds into the stream; each end's
    Decision (its rule, the silence waited, the model's probability) is appended to `decisions`."""

    def __init__(self, threshold: float = DEFAULT_VAD_THRESHOLD, min_speech_ms: int = DEFAULT_MIN_SPEECH_MS,
                 silence_ms: int = 500, *, detection: TurnDetection | None = None, blocking: bool = False) -> None:
        super().__init__(threshold)
        self.need = frames_for(min_speech_ms)
        self.ender = EndOfTurn(detection or TurnDetection("silence", silence_ms=silence_ms), blocking=blocking)
        self.decisions: list[Decision] = []
        self.speaking = False
        self._run = 0  # voiced frames in a row (before speech starts)
        self._quiet = 0  # unvoiced frames in a row (while speaking)
        self._turn_start = 0  # the frame the turn being heard began at
        self._recent = bytearray()  # the last WINDOW_S of audio: what the end-of-turn model hears of the turn
        self._keep = int(WINDOW_S * LISTEN_BYTES_PER_S)

    def feed(self, pcm: bytes) -> list[tuple[str, float]]:
        events: list[tuple[str, float]] = []
        self._recent += pcm
        if len(self._recent) > self._keep:
            del self._recent[: len(self._recent) - self._keep]
        frame_bytes = self._frame_bytes
        voiced_frames = self.frames(pcm)
        seen_end = len(self._recent) - len(self._carry)  # where the last whole frame of this piece ends in _recent
        for i, voiced in enumerate(voiced_frames):
            self.index += 1
            if not self.speaking:
                self._run = self._run + 1 if voiced else 0
                if self._run >= self.need:
                    self.speaking, self._quiet = True, 0
                    self._turn_start = self.index - self._run
                    self.ender.speech()
                    events.append(("start", (self.index - self._run) * FRAME_S))
            elif voiced:
                self._quiet = 0
                self.ender.speech()
            else:
                self._quiet += 1
                at = seen_end - (len(voiced_frames) - 1 - i) * frame_bytes  # this frame's end
                decided = self.ender.pause(self._quiet * FRAME_S * 1000, lambda end=at: self._turn_audio(end))
                if decided is not None:
                    self.speaking, self._run = False, 0
                    self.decisions.append(decided)
                    events.append(("end", (self.index - self._quiet) * FRAME_S))
        return events

    def _turn_audio(self, end: int) -> bytes:
        """The turn so far (at most WINDOW_S), up to the frame being looked at (ending at `end` in _recent)."""
        frames_back = self.index - self._turn_start  # frames from the turn's start to this one
        return bytes(self._recent[max(0, end - frames_back * self._frame_bytes):end])


async def microphone(pcm: bytes, detector: SpeechStart, on_speech: Callable[[float], None], *,
                     chunk_s: float = 0.1) -> AsyncIterator[bytes]:
    """`pcm` sent as a microphone sends it: `chunk_s` pieces at real time, each once it has been spoken (piece i,
    audio from i·chunk_s, at start + (i + 1)·chunk_s, as services/listen's paced sender does; sent at its start, a
    recording ran a piece ahead of a microphone and its timeline showed the final transcript before the turn was
    decided). Each piece goes through `detector`; when it finds speech,
    `on_speech(onset)` (onset: time.perf_counter() where the speech started) is called when the clock reaches the
    moment the deciding frame was spoken."""
    step = max(2, int(chunk_s * LISTEN_BYTES_PER_S) // 2 * 2)
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    for i, at in enumerate(range(0, len(pcm), step)):
        piece = pcm[at:at + step]
        await asyncio.sleep(max(0.0, start + (at + len(piece)) / LISTEN_BYTES_PER_S - time.perf_counter()))
        yield piece
        found = detector.feed(piece)
        if found is not None:
            onset, decided = found
            loop.call_later(max(0.0, start + decided - time.perf_counter()), on_speech, start + onset)


Placed = tuple[float, bytes, int, tuple[int, int]]  # (play_s, PCM16 mono, rate, (utterance, sentence))


def lay_out(chunks: list[tuple[float, PcmChunk]], cut_s: float | None = None) -> list[Placed]:
    """The agent's audio laid end to end from its first chunk's arrival (no chunk plays before it arrives),
    nothing after `cut_s` (the chunk playing at the cut is cut there)."""
    out: list[Placed] = []
    play = 0.0
    for arrived, chunk in chunks:
        play = max(play, arrived)
        data, seconds = chunk.data, len(chunk.data) / 2 / chunk.sample_rate
        if cut_s is not None and play + seconds > cut_s:
            data = data[: max(0, int((cut_s - play) * chunk.sample_rate)) * 2]
        if data:
            out.append((play, data, chunk.sample_rate, (chunk.utterance_index, chunk.sentence_index)))
        if len(data) < len(chunk.data):
            break
        play += seconds
    return out


def play_end(placed: list[Placed]) -> float:
    return max((at + len(data) / 2 / rate for at, data, rate, _ in placed), default=0.0)


@dataclass
class Reply:
    """The agent's answer to one turn while it streams and plays (see the module's doc)."""

    turn: Turn
    session: SpeechSession
    connecting: asyncio.Task
    chunks: list[tuple[float, PcmChunk]] = field(default_factory=list)
    fed: list[str] = field(default_factory=list)  # the clauses fed, in order (when a server names no text)
    task: asyncio.Task | None = None
    first_audio: asyncio.Event = field(default_factory=asyncio.Event)
    cut_s: float | None = None  # where playback was stopped, on the clock
    onset_s: float | None = None  # where the person's speech started, on the clock
    cancelling: asyncio.Task | None = None

    def talking(self, now: float) -> bool:
        """Audible: audio has arrived, and the stream still runs or what arrived is still playing."""
        if not self.chunks:
            return False
        return (self.task is not None and not self.task.done()) or now < play_end(lay_out(self.chunks))

    def answering(self, now: float) -> bool:
        """Talking, or about to: its stream still runs though no audio has arrived yet (the reply is being
        thought of or spoken). A person who speaks then has moved on, as over the agent's speech: a barge-in."""
        return self.talking(now) or (self.task is not None and not self.task.done())

    def interrupt(self, now: float, onset_s: float) -> None:
        """Stop playback now, cancel the reply stream and the speech session."""
        self.cut_s, self.onset_s = now, onset_s
        if self.task is not None:
            self.task.cancel()
        self.cancelling = asyncio.get_running_loop().create_task(self.session.cancel())

    def heard_text(self, placed: list[Placed]) -> str:
        """The text of the units whose audio started playing before the cut, in order."""
        units: list[tuple[int, int]] = []
        for *_, unit in placed:
            if unit not in units:
                units.append(unit)
        texts = []
        for i, unit in enumerate(units):
            text = self.session.unit_texts.get(unit) or (self.fed[i] if i < len(self.fed) else "")
            texts.append(text.strip())
        return " ".join(t for t in texts if t)
