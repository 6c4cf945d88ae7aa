"""Barge-in's parts: the voice detector (the Silero VAD, hearing/vad.py) against what it must and must not call
speech — fed in pieces that split frames —, its minimum run, and the agent's audio cut at the moment playback
stops, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from services.converse.bargein import SpeechStart, TurnTaking, lay_out, play_end
from services.listen import load_audio
from services.listen.sample import spoken_sample_at
from services.speech import PcmChunk


def _pieces(detector, pcm: bytes, size: int = 1000) -> list:  # type: ignore[no-untyped-def]
    """`pcm` fed in pieces that do not fall on the detector's 20 ms frames (640 bytes) nor its 32 ms windows."""
    return [found for at in range(0, len(pcm), size) if (found := detector.feed(pcm[at:at + size])) is not None]


@pytest.fixture(scope="module")
def speech(engine_url: str) -> bytes:
    """The engine's voice, 16 kHz PCM16, with its own leading quiet trimmed to the first loud 20 ms frame."""
    pcm = np.frombuffer(load_audio(spoken_sample_at(engine_url, "Thank you very much.")).pcm, "<i2")
    frames = pcm[: pcm.size // 320 * 320].reshape(-1, 320).astype(np.float64)
    first = int(np.argmax(np.sqrt((frames ** 2).mean(axis=1)) > 0.01 * 32768))
    return pcm[first * 320:].tobytes()


def test_speech_starts_at_a_run_as_long_as_the_minimum(speech: bytes) -> None:
    pcm = bytes(16_000) + speech  # 0.5 s of silence, then the voice (its first loud frame at 0.5 s)
    [(onset, decided)] = _pieces(SpeechStart(0.5, 100), pcm)
    assert 0.5 - 0.04 <= onset <= 0.5 + 0.2, onset  # within a window or so of the first loud frame
    assert decided == pytest.approx(onset + 0.1)  # five 20 ms frames: the minimum run


def test_a_tone_a_hum_or_noise_is_not_speech_however_loud() -> None:
    t = np.arange(32_000) / 16_000
    for name, signal in (("a 440 Hz tone", np.sin(2 * np.pi * 440 * t) * 0.3),
                         ("a 50 Hz hum with harmonics", sum(np.sin(2 * np.pi * 50 * k * t) / k for k in (1, 2, 3)) * 0.2),
                         ("white noise", np.random.default_rng(1).standard_normal(t.size) * 0.05)):
        pcm = (signal * 32767).astype("<i2").tobytes()
        assert _pieces(SpeechStart(0.5, 100), pcm) == [], name  # the energy rule took each of these for a voice


def test_a_turn_ends_in_a_room_that_hums(speech: bytes) -> None:
    """A hum under the voice (−26 dBFS, louder than the energy rule's −40 dBFS speech level): the turn still
    starts at the voice and ends after the silence window of hum."""
    voice = np.frombuffer(speech + bytes(32_000), "<i2").astype(np.float64)  # and 1 s more
    t = np.arange(voice.size) / 16_000
    hum = np.sin(2 * np.pi * 100 * t) * 0.05 * 32767
    pcm = np.clip(voice + hum, -32768, 32767).astype("<i2").tobytes()
    events = [e for found in _pieces(TurnTaking(0.5, 100, 500), pcm) for e in found]
    assert [kind for kind, _ in events] == ["start", "end"], events


def test_the_agents_audio_is_cut_where_playback_stopped() -> None:
    second = bytes(2 * 24000)  # 1 s at 24 kHz
    chunks = [(1.0, PcmChunk(second, 0, 0, 24000)), (1.2, PcmChunk(second, 0, 1, 24000)),
              (1.3, PcmChunk(second, 0, 2, 24000))]
    assert [(at, unit) for at, _, _, unit in lay_out(chunks)] == [(1.0, (0, 0)), (2.0, (0, 1)), (3.0, (0, 2))]
    cut = lay_out(chunks, 2.5)  # half of the second clause played; the third never started
    assert [(at, len(data), unit) for at, data, _, unit in cut] == [(1.0, 48000, (0, 0)), (2.0, 24000, (0, 1))]
    assert play_end(cut) == 2.5
