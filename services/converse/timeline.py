"""A conversation's record on its clock: the turns and their stage times, voice-to-voice, the stereo WAV.

The clock starts when the conversation starts (the start of `--out`'s WAV too); every time is seconds on it.
Per turn: `user_speech_end_s` — where the person's speech really ended: the end of the input's last 20 ms frame
whose RMS is above SPEECH_END_DBFS, placed where that input was sent (its first chunk on the wire) —,
`transcript_final_s` (the transcript's final arrived), `reply_first_token_s` (the reply's first text piece),
`first_audio_s` (the agent's first audio received by the client: the CLI has no playback, so "played" is
"received"), in a live conversation `first_audio_played_s` (when the studio's WebRTC track starts playing it:
received + the audio queued ahead of it; the browser's jitter buffer, tens of ms, comes after) and
`voice_to_voice_ms` = first audio played (else received) − speech end. voice-to-voice {n, p50, p95} over the turns that
have it, with services.stats' one percentile method (nearest-rank).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from protocol.audio import wav_bytes
from protocol.limits import PCM_SAMPLE_RATE
from protocol.listen import LISTEN_SAMPLE_RATE
from services.stats import PERCENTILE_METHOD, percentile

SPEECH_END_DBFS = -40.0  # a 20 ms frame with an RMS above this (relative to full scale) is the person speaking
FRAME_S = 0.02


def speech_end_s(pcm16k: bytes, *, threshold_dbfs: float = SPEECH_END_DBFS) -> float:
    """Seconds into 16 kHz PCM16 where speech ends: the end of the last 20 ms frame whose RMS is above the
    threshold (0.0 when no frame is)."""
    samples = np.frombuffer(pcm16k, dtype="<i2").astype(np.float64) / 32768.0
    frame = int(FRAME_S * LISTEN_SAMPLE_RATE)
    usable = samples[: len(samples) // frame * frame].reshape(-1, frame)
    if usable.size == 0:
        return 0.0
    rms = np.sqrt((usable ** 2).mean(axis=1))
    voiced = np.nonzero(rms > 10 ** (threshold_dbfs / 20))[0]
    return 0.0 if voiced.size == 0 else (int(voiced[-1]) + 1) * FRAME_S


@dataclass
class Turn:
    user_text: str = ""
    reply_text: str = ""
    user_speech_end_s: float | None = None
    transcript_final_s: float | None = None
    reply_first_token_s: float | None = None
    first_audio_s: float | None = None
    first_audio_played_s: float | None = None  # live: when the studio's WebRTC track began playing it
    voice_to_voice_ms: float | None = None
    interrupted: bool = False
    error: str | None = None
    barge_in_stop_ms: float | None = None  # interrupted: the person's speech start → the agent's audio stopped
    agent_stop_s: float | None = None  # interrupted: where the agent's audio stopped (the cut)
    # How the turn's end was decided (hearing/turn_end.py), where a turn detector took it: its rule
    # (learned, silence, cap, fallback), the silence waited from the speech end to the decision, the model's
    # last probability of "complete"
    eot_rule: str | None = None
    eot_wait_ms: float | None = None
    eot_probability: float | None = None

    def finish(self) -> Turn:
        heard = self.first_audio_played_s if self.first_audio_played_s is not None else self.first_audio_s
        if heard is not None and self.user_speech_end_s is not None:
            self.voice_to_voice_ms = (heard - self.user_speech_end_s) * 1000
        return self

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.interrupted:  # the barge-in keys are there for interrupted turns only
            del out["barge_in_stop_ms"], out["agent_stop_s"]
        if self.first_audio_played_s is None:  # only a live conversation plays the audio as it comes
            del out["first_audio_played_s"]
        if self.eot_rule is None:  # no turn detector decided it (an older record)
            del out["eot_rule"], out["eot_wait_ms"], out["eot_probability"]
        elif out["eot_probability"] is not None:
            out["eot_probability"] = round(out["eot_probability"], 3)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 1 if key.endswith("_ms") else 4)
        return out


@dataclass
class Conversation:
    mode: str
    reply_label: str
    turns: list[Turn] = field(default_factory=list)
    person: list[tuple[float, bytes]] = field(default_factory=list)  # (start_s, 16 kHz PCM16) per input sent
    agent: list[tuple[float, bytes, int]] = field(default_factory=list)  # (play_s, PCM16 mono, rate) per chunk
    skipped: list[str] = field(default_factory=list)  # inputs whose transcript was empty (no turn)

    def voice_to_voice(self) -> dict[str, Any]:
        values = [t.voice_to_voice_ms for t in self.turns if t.voice_to_voice_ms is not None]
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 1)
        return {"n": len(values), "p50": r(percentile(values, 50)), "p95": r(percentile(values, 95))}

    def as_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "turns": [t.as_json() for t in self.turns],
                "voice_to_voice_ms": self.voice_to_voice()}

    def stereo_wav(self, rate: int = PCM_SAMPLE_RATE) -> bytes:
        """Person left, agent right, on the conversation's clock, at `rate` (soxr where a source differs)."""
        left = _track([(at, pcm, LISTEN_SAMPLE_RATE) for at, pcm in self.person], rate)
        right = _track(self.agent, rate)
        n = max(len(left), len(right))
        both = np.zeros((n, 2), dtype=np.int16)
        both[: len(left), 0] = left
        both[: len(right), 1] = right
        return wav_bytes(both.tobytes(), rate, 2)


def _track(pieces: list[tuple[float, bytes, int]], rate: int) -> np.ndarray:
    import soxr

    placed: list[tuple[int, np.ndarray]] = []
    for at, pcm, source_rate in pieces:
        samples = np.frombuffer(pcm, dtype="<i2")
        if source_rate != rate and samples.size:
            resampled = soxr.resample(samples.astype(np.float32) / 32768.0, source_rate, rate)
            samples = (np.clip(resampled, -1.0, 1.0) * 32767.0).round().astype(np.int16)
        placed.append((max(0, math.floor(at * rate)), samples))
    out = np.zeros(max((start + len(s) for start, s in placed), default=0), dtype=np.int32)
    for start, samples in placed:
        out[start:start + len(samples)] += samples
    return np.clip(out, -32768, 32767).astype(np.int16)


__all__ = ["PERCENTILE_METHOD", "SPEECH_END_DBFS", "Conversation", "Turn", "speech_end_s"]
