"""The recognizer's thread side: one `Worker` is a pocketsphinx decoder (CMU's US English acoustic model,
dictionary and language model, inside the pocketsphinx wheel) with its own Silero VAD. A worker serves one
request or stream at a time on the engine's listen threads (offline.listen.engine leases them out).

- `Worker.transcribe(samples)`: a whole file — the VAD finds the regions of speech, each is recognized on its
  own and becomes a segment with its start and end seconds.
- `Utterances`: a realtime stream — audio is decoded as it arrives; the partial hypothesis gives the deltas
  (offline.listen.partials), and a pause of MIN_SILENCE_S (or MAX_UTTERANCE_S of audio) closes the utterance,
  whose final hypothesis is then rescored and kept.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hearing.vad import SPEECH_PROB, WINDOW_S, WindowedVad
from offline.listen.partials import Captions, StablePrefix
from offline.listen.vad import MIN_SILENCE_S, speech_regions
from protocol.listen import LISTEN_SAMPLE_RATE

log = logging.getLogger(__name__)

MAX_UTTERANCE_S = 8.0  # a stream without pauses is still cut here, so one utterance's search stays bounded
# Audio goes to the decoder in pieces this long: pocketsphinx holds the GIL while it decodes, so short calls let the
# event loop run between them (an utterance's end, its rescoring, is one call: utterances are kept short for it).
PIECE_BYTES = 8000  # 0.25 s of PCM16 at 16 kHz


def pcm16(samples: np.ndarray) -> bytes:
    """float32 samples in [-1, 1] as PCM16 little-endian bytes (what pocketsphinx reads)."""
    return (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def floats(pcm: bytes) -> np.ndarray:
    """PCM16 little-endian bytes as float32 samples in [-1, 1]."""
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0


@dataclass(frozen=True)
class Segment:
    """One region of speech and what was recognized in it."""

    start: float
    end: float
    text: str
    no_speech_prob: float  # 1 - the region's mean VAD probability

    @property
    def compression_ratio(self) -> float:
        return compression_ratio(self.text)


def compression_ratio(text: str) -> float:
    """How well `text` compresses (zlib): Whisper's test for a decoder going round in a loop (above 2.4)."""
    raw = text.encode("utf-8")
    return len(raw) / len(zlib.compress(raw)) if raw else 0.0


@dataclass(frozen=True)
class FileTranscript:
    """A file's recognition: its segments (empty: no speech found) and its length in seconds."""

    segments: list[Segment]
    duration_s: float

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.segments if s.text)


class Cancelled(Exception):
    """The request's client went away; the rest of the file is not recognized."""


def by_regions(vad: WindowedVad, samples: np.ndarray, duration_s: float,
               hear: Callable[[np.ndarray, np.ndarray], tuple[str, float]],
               cancel: threading.Event | None = None) -> FileTranscript:
    """A file recognized region by region (either recognizer): the VAD finds the regions of speech, `hear(region
    samples, its VAD scores)` gives each one's text and no-speech probability; `cancel` set stops before the next."""
    probs = vad.score(samples)
    segments: list[Segment] = []
    for start, end in speech_regions(probs, duration_s):
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"{len(segments)} of the file's speech regions")
        region = samples[int(start * LISTEN_SAMPLE_RATE):int(end * LISTEN_SAMPLE_RATE)]
        window = probs[int(start / WINDOW_S):max(int(end / WINDOW_S), int(start / WINDOW_S) + 1)]
        text, no_speech = hear(region, window)
        segments.append(Segment(round(start, 3), round(end, 3), text, round(no_speech, 3)))
    return FileTranscript(segments, duration_s)


class Worker:
    """A pocketsphinx decoder and a VAD; used by one thread at a time."""

    name = "pocketsphinx"

    def __init__(self, workers: int = 1) -> None:  # noqa: ARG002 — each worker has its own decoder
        from pocketsphinx import Decoder

        self.decoder = Decoder(loglevel="FATAL")  # the bundled en-us model: pocketsphinx.get_model_path()
        self.vad = WindowedVad()
        self._cmn = self.decoder.get_cmn(False)  # the model's initial cepstral mean
        self._in_utterance = False

    def begin(self) -> None:
        """Start an utterance, heard afresh: one a stream left open (its client went away) is dropped, and the
        cepstral mean the decoder adapts while it listens goes back to the model's own, so one request's audio
        (a silent file, say) never changes how the next is heard."""
        if self._in_utterance:
            self.end()
        self.decoder.set_cmn(self._cmn)
        self.decoder.start_utt()
        self._in_utterance = True

    def end(self) -> None:
        self._in_utterance = False
        self.decoder.end_utt()

    def words(self) -> list[str]:
        hyp = self.decoder.hyp()
        return hyp.hypstr.split() if hyp is not None and hyp.hypstr else []

    def recognize(self, pcm: bytes) -> list[str]:
        """The words of one complete utterance, heard afresh."""
        self.begin()
        for at in range(0, len(pcm), PIECE_BYTES):
            self.decoder.process_raw(pcm[at:at + PIECE_BYTES], False, False)
        self.end()
        return self.words()

    def stream(self) -> Utterances:
        return Utterances(self)

    def transcribe(self, samples: np.ndarray, duration_s: float, cancel: threading.Event | None = None) -> FileTranscript:
        def hear(region: np.ndarray, window: np.ndarray) -> tuple[str, float]:  # no_speech: 1 - the mean VAD score
            return " ".join(self.recognize(pcm16(region))), 1.0 - float(window.mean())

        return by_regions(self.vad, samples, duration_s, hear, cancel)


@dataclass
class Utterances:
    """A realtime stream on one worker: `feed` audio as it arrives (returns the delta to send, "" for none),
    then `finish` (the whole text). An utterance in which the VAD heard no speech sends nothing and keeps
    nothing."""

    worker: Worker
    words: list[str] = field(default_factory=list)  # the final words of the closed utterances
    audio_s: float = 0.0
    heard_speech: bool = False
    _open: bool = False
    _utterance_s: float = 0.0
    _speech: bool = False  # the open utterance has had speech in it
    _quiet_s: float = 0.0
    _prefix: StablePrefix = field(default_factory=StablePrefix)
    _captions: Captions = field(default_factory=Captions)  # the deltas sent

    def __post_init__(self) -> None:
        self.worker.vad.reset()

    def feed(self, pcm: bytes) -> str:
        samples = floats(pcm)
        seconds = samples.size / LISTEN_SAMPLE_RATE
        self.audio_s += seconds
        if not self._open:
            self.worker.begin()
            self._open, self._utterance_s, self._speech, self._prefix = True, 0.0, False, StablePrefix()
        for p in self.worker.vad.feed(samples):
            if p >= SPEECH_PROB:
                self.heard_speech = self._speech = True
                self._quiet_s = 0.0
            else:
                self._quiet_s += WINDOW_S
        for at in range(0, len(pcm), PIECE_BYTES):
            self.worker.decoder.process_raw(pcm[at:at + PIECE_BYTES], False, False)
        self._utterance_s += seconds
        if self._utterance_s >= MAX_UTTERANCE_S or (self._speech and self._quiet_s >= MIN_SILENCE_S):
            return self._close()
        return self._delta(self._prefix.update(self.worker.words())) if self._speech else ""

    def finish(self) -> tuple[str, str]:
        """The stream is over: the last utterance is closed. Its last delta ("" for none) and the whole text
        ("" when no speech was heard)."""
        self.worker.vad.reset()
        delta = self._close() if self._open else ""
        return delta, " ".join(self.words) if self.heard_speech else ""

    def _close(self) -> str:
        self.worker.end()
        self._open = False
        final = self.worker.words() if self._speech else []  # what it made of noise alone is dropped
        self.words.extend(final)
        return self._delta(self._prefix.finish(final))

    def _delta(self, new: list[str]) -> str:
        return self._captions.text(new)
