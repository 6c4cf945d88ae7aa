"""When a person is done speaking: the end-of-turn rule a conversation takes turns by (docs/converse.md, "End of
turn").

Two kinds, chosen per conversation (`TurnDetection.kind`):
- `silence`: the turn ends after `silence_ms` of silence — the rule everyone starts with. It waits that long after
  every finished sentence, and cuts off a person who pauses longer mid-sentence ("a table for … four").
- `learned` (the default): at each pause of at least `floor_ms` (200), an end-of-turn model scores the turn so far
  (its last 8 s) — Pipecat's Smart Turn v3.2 (BSD-2-Clause), an 8 MB int8 ONNX model on the audio itself, so it
  hears intonation and an unfinished phrase, not only silence. The turn ends when its probability of being
  complete reaches `threshold` (0.5: the model's own cut); else the rule waits and scores again every `rescore_ms`
  of silence, up to `cap_ms` (1500), after which the turn ends anyway. Speech resuming cancels the wait.

The model: the ONNX file and the numpy feature extractor (Whisper's log-mel features) are read from the installed
`pipecat-ai` wheel by path — pinned by hash in requirements-models.txt and installed without its dependencies,
since Pipecat's own analyzer would bring aiohttp, numba, openai and more for what is an onnxruntime session and a
numpy function. Nothing is downloaded. It is loaded once per process (one intra-op thread) and scores on a thread
of its own, so the microphone's frames never wait for it; a score that takes longer than `deadline_ms` (or a model
that cannot load) leaves that pause to the silence rule, counted as a fallback (`EndOfTurn.fallbacks`).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np

from protocol.errors import InvalidInput, StudioError
from protocol.listen import LISTEN_BYTES_PER_S, LISTEN_SAMPLE_RATE

log = logging.getLogger(__name__)

Kind = Literal["learned", "silence"]
KINDS: tuple[Kind, ...] = ("learned", "silence")
PACKAGE = "pipecat-ai"  # the wheel the model comes in (requirements-models.txt)
MODEL_FILE = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
FEATURES_FILE = "pipecat/audio/turn/smart_turn/_whisper_features.py"
MODEL_NAME = "Smart Turn v3.2 (Pipecat)"
WINDOW_S = 8.0  # the model hears the last 8 s of the turn (shorter turns are padded with silence before them)


class TurnModelMissing(StudioError):
    """The end-of-turn model is not installed or cannot be read (the message names the package to reinstall)."""


@dataclass(frozen=True)
class TurnDetection:
    """How a conversation decides a turn is over (see the module's doc). `check()` refuses values out of range."""

    kind: Kind = "learned"
    silence_ms: int = 500  # silence: the window; learned: the rule a fallback pause uses
    threshold: float = 0.5  # learned: the probability of "complete" that ends the turn
    floor_ms: int = 200  # learned: the first score, this long into a pause
    cap_ms: int = 1500  # learned: the turn ends after this much silence whatever the model says
    rescore_ms: int = 200  # learned: scored again after this much more silence
    deadline_ms: int = 400  # learned: a score later than this leaves the pause to the silence rule

    def check(self) -> TurnDetection:
        if self.kind not in KINDS:
            raise InvalidInput(f"the turn detector is learned or silence, not {self.kind!r}")
        if not (isinstance(self.threshold, int | float) and 0.0 <= self.threshold <= 1.0):
            raise InvalidInput(f"the end-of-turn threshold is a probability from 0 to 1, not {self.threshold!r}")
        if not 100 <= self.silence_ms <= 5000:
            raise InvalidInput(f"the silence window is 100–5000 ms, not {self.silence_ms}")
        if not 20 <= self.floor_ms <= self.cap_ms <= 10_000:
            raise InvalidInput(f"the end-of-turn floor ({self.floor_ms} ms) must be at least 20 ms and at most the cap "
                               f"({self.cap_ms} ms, at most 10000)")
        return self

    def label(self) -> str:
        if self.kind == "silence":
            return f"silence {self.silence_ms} ms"
        return f"learned ({MODEL_NAME}, threshold {self.threshold:g}, floor {self.floor_ms} ms, cap {self.cap_ms} ms)"


class EndOfTurnModel:
    """The Smart Turn model, loaded once per process from the installed wheel."""

    _shared: EndOfTurnModel | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        import onnxruntime as ort

        model, features = _installed(MODEL_FILE), _installed(FEATURES_FILE)
        spec = importlib.util.spec_from_file_location("omni_smart_turn_features", features)
        if spec is None or spec.loader is None:
            raise TurnModelMissing(f"the end-of-turn model's feature extractor at {features} cannot be loaded: "
                                   f"reinstall {PACKAGE} (`make setup`)")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            self._session = ort.InferenceSession(str(model), sess_options=options)
        except Exception as exc:  # noqa: BLE001 — a damaged file: named, with what to do
            raise TurnModelMissing(f"the end-of-turn model at {model} cannot be read ({type(exc).__name__}: {exc}): "
                                   f"reinstall {PACKAGE} (`make setup`)") from None
        self._features = module.compute_whisper_log_mel_features

    @classmethod
    def shared(cls) -> EndOfTurnModel:
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def probability(self, pcm16k: bytes) -> float:
        """The probability that the turn in `pcm16k` (16 kHz PCM16, the turn so far) is complete."""
        samples = np.frombuffer(pcm16k, dtype="<i2").astype(np.float32) / 32768.0
        keep = int(WINDOW_S * LISTEN_SAMPLE_RATE)
        samples = samples[-keep:]
        if samples.size < keep:
            samples = np.pad(samples, (keep - samples.size, 0))
        features = self._features(samples, do_normalize=True)[None].astype(np.float32)
        return float(self._session.run(None, {"input_features": features})[0].reshape(-1)[0])


def _installed(relative: str) -> Path:
    try:
        path = Path(str(metadata.distribution(PACKAGE).locate_file(relative)))
    except metadata.PackageNotFoundError:
        raise TurnModelMissing(f"the end-of-turn model is not installed: install {PACKAGE} (`make setup`: "
                               "requirements-models.txt)") from None
    if not path.is_file():
        raise TurnModelMissing(f"the end-of-turn model's file {path} is missing: reinstall {PACKAGE} (`make setup`)")
    return path


_scoring = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn-end")  # one score at a time per process


@dataclass(frozen=True)
class Decision:
    """A turn's end, as decided: by which rule, after how much silence, with the model's last probability."""

    rule: Literal["learned", "silence", "cap", "fallback"]
    wait_ms: float  # the person's speech end → the turn decided (the silence heard)
    probability: float | None = None


class EndOfTurn:
    """One conversation's end-of-turn rule, fed the pauses of its microphone: `speech()` when a voiced frame comes,
    `pause(quiet_ms, turn_pcm)` on each silent one — a Decision when the turn is over, else None. `turn_pcm` (the
    turn so far, 16 kHz PCM16) may be a function giving it: it is then read only when a score is asked, not on every
    silent frame. `blocking`: wait
    for each score where it is asked (a recording fed faster than real time); else scores run on the scoring
    thread and are picked up by a later frame."""

    def __init__(self, detection: TurnDetection, *, blocking: bool = False, model: Any = None) -> None:
        self.detection = detection.check()
        self.blocking = blocking
        self.fallbacks = 0  # pauses left to the silence rule (a late score, a model that would not load)
        self.scores = 0
        self.last_score_ms = 0.0  # how long the last score took (a recording fed faster than real time adds it)
        self.problem: str | None = None  # why the model is not used (it would not load)
        self._model = model
        self._pending: Future[float] | None = None
        self._asked_at = 0.0
        self._next_ms = 0.0
        self._fallback = False
        self._last: float | None = None

    def speech(self) -> None:
        """The person speaks again: a wait in progress is cancelled."""
        if self._pending is not None:
            self._pending.cancel()
        self._pending, self._fallback, self._last = None, False, None
        self._next_ms = self.detection.floor_ms

    def pause(self, quiet_ms: float, turn_pcm: bytes | Callable[[], bytes]) -> Decision | None:
        d = self.detection
        if d.kind == "silence" or self._fallback:
            if quiet_ms >= d.silence_ms:
                return Decision("fallback" if self._fallback else "silence", quiet_ms, self._last)
            return None
        if quiet_ms >= d.cap_ms:
            return Decision("cap", quiet_ms, self._last)
        if self._pending is None and quiet_ms >= max(self._next_ms, d.floor_ms):
            if not self._ask(turn_pcm):
                return self.pause(quiet_ms, turn_pcm)  # no model: the silence rule, from here
        if self._pending is not None and (self._pending.done() or self.blocking):
            try:
                p = self._pending.result()
            except Exception as exc:  # noqa: BLE001 — a score that failed: this pause is the silence rule's
                log.warning("the end-of-turn score failed (this pause ends by silence): %s", exc)
                self._pending, self._fallback = None, True
                self.fallbacks += 1
                return self.pause(quiet_ms, turn_pcm)
            self._pending, self._last = None, p
            self.scores += 1
            if p >= d.threshold:
                return Decision("learned", quiet_ms, p)
            self._next_ms = quiet_ms + d.rescore_ms
        elif self._pending is not None and (time.perf_counter() - self._asked_at) * 1000 > d.deadline_ms:
            self._pending.cancel()
            self._pending, self._fallback = None, True
            self.fallbacks += 1
            return self.pause(quiet_ms, turn_pcm)
        return None

    def _ask(self, turn_pcm: bytes | Callable[[], bytes]) -> bool:
        """Send the turn so far to be scored; False (and the silence rule for this pause) when there is no model."""
        if self._model is None and self.problem is None:
            try:
                self._model = EndOfTurnModel.shared()
            except TurnModelMissing as exc:
                self.problem = str(exc)
        if self._model is None:  # said once (`problem`); every pause is the silence rule's, counted
            self._fallback = True
            self.fallbacks += 1
            return False
        self._asked_at = time.perf_counter()
        audio = turn_pcm() if callable(turn_pcm) else turn_pcm
        self._pending = _scoring.submit(self._timed, self._model, bytes(audio[-int(WINDOW_S * LISTEN_BYTES_PER_S):]))
        return True

    def _timed(self, model: Any, pcm: bytes) -> float:
        started = time.perf_counter()
        try:
            return model.probability(pcm)
        finally:
            self.last_score_ms = (time.perf_counter() - started) * 1000

