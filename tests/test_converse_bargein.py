"""Barge-in's parts against hand-computed values: the threshold's mapping onto dBFS, the detector's minimum run
(fed in pieces that split frames), and the agent's audio cut at the moment playback stops."""

from __future__ import annotations

import numpy as np
import pytest

from services.converse.bargein import SpeechStart, lay_out, play_end, vad_dbfs
from services.speech import PcmChunk


def _tone(ms: int, amplitude: float) -> bytes:
    n = 16 * ms  # 16 kHz
    return (np.sin(np.arange(n) * 2 * np.pi * 440 / 16000) * amplitude * 32767).astype("<i2").tobytes()


def test_the_threshold_maps_linearly_onto_dbfs() -> None:
    assert (vad_dbfs(0.0), vad_dbfs(0.5), vad_dbfs(1.0), vad_dbfs(0.25)) == (-60.0, -40.0, -20.0, -50.0)


def test_speech_starts_at_a_run_as_long_as_the_minimum() -> None:
    # 200 ms silence, a 60 ms burst (too short), 100 ms silence, then speech: the onset is at 360 ms, decided at
    # 460 ms (five 20 ms frames); a 0.1 amplitude sine is −23 dBFS RMS, above −40.
    pcm = _tone(200, 0) + _tone(60, 0.1) + _tone(100, 0) + _tone(300, 0.1)
    detector = SpeechStart(0.5, 100)
    found = [detector.feed(pcm[at:at + 1000]) for at in range(0, len(pcm), 1000)]  # pieces not on frame edges
    assert [f for f in found if f is not None] == [pytest.approx((0.36, 0.46))]


def test_a_quiet_voice_below_the_threshold_is_not_speech() -> None:
    quiet = _tone(500, 0.005)  # −49 dBFS RMS: below 0.5's −40 dBFS, above 0.2's −52 dBFS
    assert SpeechStart(0.5, 100).feed(quiet) is None
    assert SpeechStart(0.2, 100).feed(quiet) == pytest.approx((0.0, 0.1))


def test_the_agents_audio_is_cut_where_playback_stopped() -> None:
    second = bytes(2 * 24000)  # 1 s at 24 kHz
    chunks = [(1.0, PcmChunk(second, 0, 0, 24000)), (1.2, PcmChunk(second, 0, 1, 24000)),
              (1.3, PcmChunk(second, 0, 2, 24000))]
    assert [(at, unit) for at, _, _, unit in lay_out(chunks)] == [(1.0, (0, 0)), (2.0, (0, 1)), (3.0, (0, 2))]
    cut = lay_out(chunks, 2.5)  # half of the second clause played; the third never started
    assert [(at, len(data), unit) for at, data, _, unit in cut] == [(1.0, 48000, (0, 0)), (2.0, 24000, (0, 1))]
    assert play_end(cut) == 2.5
