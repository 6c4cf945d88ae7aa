"""What a speech session records of its current utterance: the figures (`SessionStats`) and the audio.

The session's reader writes here the moment a frame arrives; the UI thread reads at any time, so every
access goes through one lock. Time to first audio is taken here too, against the moment the text (or
`input.done`) went out, which the session reports with `sent`.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import asdict, dataclass
from typing import Any, Literal

from protocol.audio import wav_bytes
from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE
from services.speech.audio import pcm_seconds

TtfaFrom = Literal["input.done", "first_text"]


SessionState = Literal["idle", "streaming", "done", "failed", "cancelled"]


@dataclass
class SessionStats:
    """Figures of the current (or last) utterance."""

    # Time to first audio is measured from sending `input.done` when the whole text went out in one
    # message right before it (speak), else from sending the first text (feed, or text cut in parts).
    ttfa_from: TtfaFrom = "input.done"
    ttfa_ms: float | None = None
    chunks: int = 0
    bytes: int = 0
    sentences: int = 0  # units finished (audio.done)
    sample_rate: int = PCM_SAMPLE_RATE
    channels: int = PCM_CHANNELS
    generation_s: float = 0.0  # from the ttfa reference to the last audio chunk
    text_messages: int = 0  # input.text messages sent
    state: SessionState = "idle"
    error: str | None = None

    @property
    def audio_seconds(self) -> float:
        return pcm_seconds(self.bytes, self.sample_rate, self.channels)

    @property
    def rtf(self) -> float | None:
        """Real-time factor: generation time / audio duration (below 1 is faster than real time)."""
        return self.generation_s / self.audio_seconds if self.audio_seconds > 0 else None

    def figures(self) -> dict[str, Any]:
        """The figures as plain JSON-able values (the CLI's --json, the page's history)."""
        d = asdict(self)
        d.update(audio_seconds=round(self.audio_seconds, 4), rtf=None if self.rtf is None else round(self.rtf, 4))
        if d["ttfa_ms"] is not None:
            d["ttfa_ms"] = round(d["ttfa_ms"], 2)
        d["generation_s"] = round(d["generation_s"], 4)
        return d


class Recording:
    """The current (or last) utterance's figures and PCM, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stats = SessionStats()
        self._pcm = bytearray()
        self._t_first_text: float | None = None
        self._t_done: float | None = None
        self._t_ref = 0.0  # the ttfa reference actually used

    def begin(self, ttfa_from: TtfaFrom) -> None:
        """A new utterance: fresh figures, no audio."""
        with self._lock:
            self.stats = SessionStats(ttfa_from=ttfa_from, state="streaming")
            self._pcm = bytearray()
        self._t_first_text = self._t_done = None

    def sent(self, now: float, *, texts: int, done: bool) -> None:
        """`texts` input.text messages (and `input.done` when `done`) went out at `now`."""
        if self._t_first_text is None and texts:
            self._t_first_text = now
        if done:
            self._t_done = now
        self.stats.text_messages += texts

    def audio(self, data: bytes, rate: int, channels: int, now: float) -> None:
        """A PCM chunk arrived at `now`: the first one fixes time to first audio."""
        with self._lock:
            st = self.stats
            if st.ttfa_ms is None:
                ref = self._t_done if (st.ttfa_from == "input.done" and self._t_done is not None) else self._t_first_text
                if ref is None:
                    ref = now
                if st.ttfa_from == "input.done" and self._t_done is None:
                    st.ttfa_from = "first_text"  # audio before input.done went out: say so
                st.ttfa_ms = (now - ref) * 1000.0
                self._t_ref = ref
            st.chunks += 1
            st.bytes += len(data)
            st.sample_rate, st.channels = rate, channels
            st.generation_s = now - self._t_ref
            self._pcm += data

    def unit_done(self) -> None:
        with self._lock:
            self.stats.sentences += 1

    def server_error(self, message: str) -> None:
        """The first error the server sent is the utterance's error."""
        with self._lock:
            if self.stats.error is None:
                self.stats.error = message

    def end(self, state: SessionState, error: str | None = None) -> None:
        """The utterance ended in `state` (with `error`, when given)."""
        with self._lock:
            self.stats.state = state
            if error is not None:
                self.stats.error = error

    def cancel(self) -> None:
        with self._lock:
            if self.stats.state in ("idle", "streaming"):
                self.stats.state = "cancelled"

    def snapshot(self) -> SessionStats:
        with self._lock:
            return copy.copy(self.stats)

    def pcm(self) -> bytes:
        with self._lock:
            return bytes(self._pcm)

    def wav(self) -> bytes:
        with self._lock:
            return wav_bytes(bytes(self._pcm), self.stats.sample_rate, self.stats.channels)
