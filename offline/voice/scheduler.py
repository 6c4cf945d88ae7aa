"""What the voice synthesizes next, and how much of it: first audio first, then whoever would run dry soonest.

Pure bookkeeping: no threads, no model. The engine (offline.voice.engine) calls it from its event loop and its
workers under one lock of its own; tests drive it with a fake clock and a fake synthesiser.

The worker makes one piece at a time. Which stream's piece comes next is chosen when the worker is free
(not when it was asked), the way a serving engine schedules prefill for time-to-first-token; by key:
- a listener still waiting for its first audio: when it asked (first come, first served);
- a listener already playing: GUARD_S before its buffered audio runs out, so one about to run dry comes
  before new arrivals, and one far ahead of playback waits while others are served;
- a whole file (nobody plays it before it is complete): FILE_SLACK_S after it asked.
A piece that was cut long because the engine was idle is stopped (onnxruntime's RunOptions.terminate) when
a newcomer asks for its first audio, and cut again: arrivals a few milliseconds apart do not queue behind a
whole clause.
How much text a piece takes is decided at that moment too. With other listeners active (busy), a first piece
is FIRST_PIECE_WORDS words cut at the most natural boundary (offline.splitter.next_piece); a later one is as
long as the other playing listeners can wait for it without running dry (their least buffered audio, less
their own next piece, at the synthesis speed measured so far), at most MAX_BUSY_PIECE_S of audio, and only
LATER_MIN_WORDS while a newcomer waits for its first audio. Alone, a first piece is the first clause and
later pieces whole sentences, as before. No piece is longer than the splitter's unit caps (SPEECH_UNIT_MAX_WORDS
words, SPEECH_UNIT_MAX_CHARS characters; offline.splitter.cap_cut): unpunctuated text is not one long model run.
The pieces tile the text: all of it is spoken, nothing twice.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from offline.splitter import CLAUSE, SENTENCE, WORD, cap_cut, cut_points, next_piece

if TYPE_CHECKING:
    from offline.voice.speaker import Voicing

FIRST_PIECE_WORDS = (1, 3)  # (min, max) words of a first piece while the engine is busy
LATER_MIN_WORDS = 1
MAX_BUSY_PIECE_S = 1.5  # audio of a later piece while busy: what a newcomer may have to wait for
GUARD_S = 0.4  # a playing listener comes before newcomers this long before its audio would run out
FILE_SLACK_S = 1.0
SLACK_SHARE = 0.5  # of the others' least slack, what one busy piece may take (estimates err; others grow too)
COVER = 1.5  # a piece made while newcomers wait lasts this many times their first pieces' expected time
LINGER_S = 2.0  # a lasting listener with no stream open counts this long at most (it waits for text)
SECONDS_PER_WORD = 0.35  # a listener's audio per word until its own pieces say otherwise
OVERHEAD_START_S = 0.015  # a piece's fixed synthesis time, until pieces are measured
RTF_START = 0.07  # synthesis seconds per audio second beyond it, until pieces are measured


class Playback:
    """A listener's clock: when its first audio was ready and how much audio it has had since.

    One per utterance (a WebSocket session's units share it: `lasting`, closed when the utterance ends; a REST
    request has its own, over when its one stream ends). The audio is taken
    to play in real time from the moment the first piece was ready, so `started + audio_s` is when the listener's
    buffer runs out unless more comes; after a gap the clock moves on by the gap, as a player that waited would.
    `streaming=False`: a whole file, which nobody plays before it is complete.
    """

    def __init__(self, *, streaming: bool = True, lasting: bool = False) -> None:
        self.streaming = streaming
        self.lasting = lasting  # more streams follow (a WebSocket utterance's units): active until close()
        self.closed = False
        self.started: float | None = None
        self.audio_s = 0.0
        self.words = 0

    def close(self) -> None:
        """The utterance is over: the engine stops counting this listener as one it serves."""
        self.closed = True

    def ahead(self, now: float) -> float:
        """Seconds of audio the listener has that it has not played yet."""
        return 0.0 if self.started is None else max(0.0, self.started + self.audio_s - now)

    def seconds_per_word(self) -> float:
        return self.audio_s / self.words if self.words and self.audio_s > 0 else SECONDS_PER_WORD


class Cancel(Protocol):
    """Set when the stream's client is gone (a threading.Event)."""

    def is_set(self) -> bool: ...


class Stream:
    """One unit's text on its way to audio: the next piece is cut from `pos` when the scheduler picks it."""

    def __init__(self, text: str, playback: Playback, voicing: Voicing | None = None,
                 cancel: Cancel | None = None) -> None:
        self.text = text
        self.cuts = cut_points(text)
        self._strength = {cut.end: cut.strength for cut in self.cuts}
        self.pos = 0
        self.playback = playback
        self.voicing = voicing
        self.cancel = cancel
        self._pause = True  # whether the next piece follows a natural pause (a clause or sentence end)

    @property
    def finished(self) -> bool:
        return self.pos >= len(self.text)

    def least_words(self) -> int:
        """Words in the shortest next piece a busy engine could cut."""
        end = next_piece(self.cuts, self.pos, min_words=LATER_MIN_WORDS, max_words=LATER_MIN_WORDS)
        return max(1, len(self.text[self.pos : end].split()))

    def cut(self, *, busy: bool, limit_s: float = MAX_BUSY_PIECE_S, cover_s: float = 0.0) -> tuple[int, int]:
        """The next piece's (start, end) in `text`; `pos` moves past it. While busy, a later piece has about
        `limit_s` of audio at most, and a first piece enough words for `cover_s` (within FIRST_PIECE_WORDS)."""
        start, playback = self.pos, self.playback
        if not playback.streaming:
            end = next_piece(self.cuts, start, min_strength=SENTENCE)
        elif playback.started is None:
            if busy:
                lo, hi = FIRST_PIECE_WORDS
                least = min(hi, max(lo, math.ceil(cover_s / playback.seconds_per_word())))
                end = next_piece(self.cuts, start, min_words=least, max_words=hi)
            else:
                end = next_piece(self.cuts, start, min_strength=CLAUSE, rank=False)  # the first clause
        elif busy:
            words = int(min(limit_s, 1e6) / playback.seconds_per_word())
            end = next_piece(self.cuts, start, min_words=LATER_MIN_WORDS, max_words=max(LATER_MIN_WORDS, words),
                             prefer="long")
        else:
            end = next_piece(self.cuts, start, min_strength=SENTENCE)
        capped = cap_cut(self.text, start, end)  # no model run on more than the unit caps allow
        self.pos = end = end if capped is None else capped
        return start, end

    def synthesize(self, start: int, end: int, piper=None) -> list[bytes]:
        """The PCM frames of text[start:end] (the resampler's tail too, after the last piece), made by `piper`
        (one of the speaker's sessions; default its 2-thread one)."""
        assert self.voicing is not None
        frames = list(self.voicing.speak(self.text[start:end], pause=self._pause, piper=piper))
        self._pause = self._strength.get(end, WORD) >= CLAUSE
        if end >= len(self.text):
            frames += self.voicing.end()
        return [frame for frame in frames if frame]


class CostModel:
    """How long a piece takes: `overhead + rtf x audio seconds`, fitted to the pieces made (recent ones weigh
    more, so a machine that gets busier is followed within a few dozen pieces)."""

    DECAY = 0.95

    def __init__(self) -> None:
        self.overhead, self.rtf = OVERHEAD_START_S, RTF_START
        # Decayed sums of 1, x, y, xx, xy over (audio seconds, synthesis seconds), seeded with two points.
        self._sums = [0.0] * 5
        for x in (0.4, 2.0):
            self._add(x, self.overhead + self.rtf * x, 1.0)

    def _add(self, x: float, y: float, weight: float) -> None:
        n, sx, sy, sxx, sxy = (v * self.DECAY for v in self._sums)
        self._sums = [n + weight, sx + weight * x, sy + weight * y, sxx + weight * x * x, sxy + weight * x * y]

    def add(self, audio_s: float, seconds: float) -> None:
        self._add(audio_s, seconds, 1.0)
        n, sx, sy, sxx, sxy = self._sums
        variance = sxx / n - (sx / n) ** 2
        if variance > 0.01:  # pieces of different lengths: both terms can be told apart
            rtf = (sxy / n - sx / n * sy / n) / variance
            self.rtf = min(1.0, max(0.01, rtf))
            self.overhead = min(0.3, max(0.002, sy / n - self.rtf * sx / n))
        else:
            self.overhead = min(0.3, max(0.002, sy / n - self.rtf * sx / n))

    def cost(self, audio_s: float) -> float:
        return self.overhead + self.rtf * audio_s

    def audio_for(self, seconds: float) -> float:
        """The audio a piece can have to be made within `seconds`."""
        return max(0.0, (seconds - self.overhead) / self.rtf)

    def sustainable(self, listeners: int, workers: int = 1) -> float:
        """The piece length at which `listeners` pieces, made by `workers` at a time, take no longer to make
        than one plays for, with a quarter to spare (infinite when the machine cannot keep up with that many
        listeners at any length)."""
        load = listeners * self.rtf / workers
        if load >= 0.8:
            return float("inf")
        return 1.25 * listeners * self.overhead / workers / (1.0 - 1.25 * load) if listeners > 1 else 0.0


class Interrupter(Protocol):
    """What stops the piece being made (offline.voice.speaker.InterruptibleSession)."""

    def begin(self) -> None: ...

    def interrupt(self) -> None: ...


@dataclass(eq=False)
class Request:
    """A stream's ask for its next piece. `handle` is the caller's (the engine's future for the piece's audio);
    the scheduler never touches it."""

    stream: Stream
    seq: int
    asked_at: float
    handle: Any = None
    taken_at: float = 0.0
    idle: bool = False  # its piece was cut for an idle engine (made on the 2-thread session, interruptible)


class Scheduler:
    """Which open stream the worker serves next, and how long that piece is (see above)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, interrupter: Interrupter | None = None
                 ) -> None:
        self.clock = clock
        self.interrupter = interrupter  # stops the piece being made (None: pieces are never stopped)
        self._open: set[Stream] = set()
        # Listeners with a stream open, or between the units of an utterance (a lasting Playback not closed,
        # for at most LINGER_S): [open streams, when the last one closed].
        self._listeners: dict[Playback, list[float]] = {}
        self._pending: list[Request] = []
        self._seq = itertools.count()
        self._running: dict[int, Request] = {}  # worker -> the piece it is making
        self._interruptible: Request | None = None  # a running piece that was cut for an idle engine
        self.model = CostModel()
        self.workers = 1  # pieces made at a time while busy (2 once the speaker has its 1-thread sessions)

    def open(self, stream: Stream) -> None:
        self._open.add(stream)
        self._listeners.setdefault(stream.playback, [0, 0.0])[0] += 1

    def close(self, stream: Stream) -> None:
        if stream in self._open:
            self._open.discard(stream)
            entry = self._listeners[stream.playback]
            entry[0] -= 1
            entry[1] = self.clock()
        self._pending = [r for r in self._pending if r.stream is not stream]

    def _active(self, now: float) -> list[Playback]:
        """The listeners the engine is serving: a stream open, or between the units of an utterance."""
        for playback in [p for p, (n, closed) in self._listeners.items()
                         if n <= 0 and (not p.lasting or p.closed or now - closed >= LINGER_S)]:
            del self._listeners[playback]
        return list(self._listeners)

    def ask(self, stream: Stream, handle: Any = None) -> Request:
        """Queue a request for `stream`'s next piece (`handle`: the caller's, kept on the request)."""
        request = Request(stream, next(self._seq), self.clock(), handle)
        self._pending.append(request)
        running = self._interruptible
        if (running is not None and self.interrupter is not None
                and stream.playback.streaming and stream.playback.started is None
                and running.stream.playback is not stream.playback):
            # The running piece was cut long because nobody else was there; a listener now waits for its
            # first audio: stop that piece, it is cut again (shorter, now that the engine is busy).
            self._interruptible = None
            self.interrupter.interrupt()
        return request

    def drop(self, request: Request) -> None:
        """Forget a request nobody waits for (a no-op once the worker has taken it)."""
        if request in self._pending:
            self._pending.remove(request)

    def key(self, request: Request) -> tuple[float, int]:
        playback = request.stream.playback
        if not playback.streaming:
            return request.asked_at + FILE_SLACK_S, request.seq
        if playback.started is None:
            return request.asked_at, request.seq
        return playback.started + playback.audio_s - GUARD_S, request.seq

    def take(self, worker: int = 0, *, busy_only: bool = False) -> tuple[Request, int, int] | None:
        """The most urgent request and its piece (start, end) for `worker` to make, or None when nothing is
        asked (or, with `busy_only`, when the engine serves only one listener: then one worker is enough)."""
        if not self._pending:
            return None
        request = min(self._pending, key=self.key)
        mine, now = request.stream.playback, self.clock()
        busy = any(p is not mine for p in self._active(now))
        if busy_only and not busy:
            return None
        self._pending.remove(request)
        limit_s = self._later_limit(mine, now) if busy and mine.started is not None else MAX_BUSY_PIECE_S
        start, end = request.stream.cut(busy=busy, limit_s=limit_s, cover_s=self._cover(mine))
        self._running[worker] = request
        request.taken_at, request.idle = now, not busy
        if worker == 0 and self.interrupter is not None:
            self.interrupter.begin()
            if not busy:
                self._interruptible = request
        return request, start, end

    def parallel(self, worker: int) -> bool:
        """Whether `worker`'s piece should run on a 1-thread session: another worker runs or work is waiting."""
        return any(w != worker for w in self._running) or bool(self._pending)

    def wanted(self) -> bool:
        """Whether a second worker has something to do now: the first is making a piece, the engine serves
        several listeners, and a request waits."""
        if 0 not in self._running or not self._pending:
            return False
        mine = self._running[0].stream.playback
        return any(p is not mine for p in self._active(self.clock())) or len(self._pending) > 1

    def cost(self, audio_s: float) -> float:
        """The synthesis time a piece of `audio_s` seconds is expected to take."""
        return self.model.cost(audio_s)

    def _newcomers(self, mine: Playback) -> int:
        return sum(1 for r in self._pending if r.stream.playback is not mine
                   and r.stream.playback.streaming and r.stream.playback.started is None)

    def _cover(self, mine: Playback) -> float:
        """Audio that lasts while the newcomers waiting now get their first pieces and this one its next."""
        first = self.cost(FIRST_PIECE_WORDS[0] * SECONDS_PER_WORD)
        return COVER * (self._newcomers(mine) * first / self.workers + self.cost(mine.seconds_per_word()))

    def _later_limit(self, mine: Playback, now: float) -> float:
        """Seconds of audio a later piece of `mine` may have while others are served too.

        At least what keeps every active listener going at real time (a round of pieces this long makes as
        much audio as it takes to make; shorter pieces would spend the time on overheads and everyone would
        fall behind). While newcomers wait for their first audio: what lasts until they have it, no more.
        Otherwise a share of the least slack the others have, so none of them runs dry meanwhile.
        """
        active = [p for p in self._active(now) if p.streaming]
        floor = self.model.sustainable(len(active), self.workers)
        if self._newcomers(mine):  # enough to last while they get their first pieces, and no more
            return max(floor, self._cover(mine))
        # The others in the order they would run dry, each needing at least its shortest next piece before it
        # does: this piece may take a share of what the tightest of them leaves after everyone's before it.
        least_words = {s.playback: s.least_words() for s in self._open if not s.finished}
        others = sorted(
            (p.started + p.audio_s, self.cost(least_words.get(p, LATER_MIN_WORDS) * p.seconds_per_word()))
            for p in active
            if p is not mine and p.started is not None
        )
        slack, queued = float("inf"), 0.0
        for dry_at, least in others:
            queued += least / self.workers
            slack = min(slack, dry_at - now - queued)
        return max(floor, min(MAX_BUSY_PIECE_S, self.model.audio_for(SLACK_SHARE * slack)))

    def _done(self, request: Request) -> None:
        for worker in [w for w, r in self._running.items() if r is request]:
            del self._running[worker]
        if self._interruptible is request:
            self._interruptible = None

    def requeue(self, request: Request, start: int) -> None:
        """The taken piece was interrupted: the request waits again (same place in line), its text uncut."""
        request.stream.pos = start
        self._done(request)
        if request.stream in self._open:
            self._pending.append(request)

    def release(self, request: Request) -> None:
        """The taken piece ended without audio (failed or nobody waits for it)."""
        self._done(request)

    def finished(self, request: Request, start: int, end: int, audio_s: float) -> None:
        """The piece is made: the listener's clock counts its audio from now."""
        self._done(request)
        playback, now = request.stream.playback, self.clock()
        if playback.started is None:
            playback.started = now
        elif playback.started + playback.audio_s < now:  # it ran dry: the player waited this long
            playback.started = now - playback.audio_s
        playback.audio_s += audio_s
        playback.words += len(request.stream.text[start:end].split())
        if audio_s > 0:
            self.model.add(audio_s, now - request.taken_at)

    def pending(self) -> int:
        return len(self._pending)


