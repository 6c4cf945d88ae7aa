"""The playback queue: how much speech the player's track still has to play, and Stop dropping it.

The track is streamlit-webrtc's real PCM source (`PcmAudioSource`, what `create_pcm_audio_source_track` returns);
its frames are taken with the track's own `recv()`, as aiortc's sender takes them (20 ms each, paced to real time).
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from streamlit_webrtc.pcm_source import PcmAudioSource

from services.playback import Playback

RATE = 24_000


def _pcm(seconds: float, rate: int = RATE, channels: int = 1) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    x = (np.sin(2 * np.pi * 440 * t) * 8000).astype("<i2")
    return np.repeat(x, channels).tobytes()


def _play(source: PcmAudioSource, frames: int) -> list[np.ndarray]:
    """Take `frames` 20 ms frames from the track, as the WebRTC sender does."""

    async def take() -> list[np.ndarray]:
        return [(await source.track.recv()).to_ndarray().ravel() for _ in range(frames)]

    return asyncio.run(take())


def test_what_is_pushed_is_queued_until_the_track_plays_it() -> None:
    source, playback = PcmAudioSource(sample_rate=RATE), Playback()
    playback.attach(source)
    assert playback.queued_seconds() == 0
    playback.push(_pcm(1.0))
    playback.push(_pcm(0.5))
    assert playback.queued_seconds() == pytest.approx(1.5)
    played = _play(source, 10)  # 200 ms leave the queue
    assert playback.queued_seconds() == pytest.approx(1.3)
    assert all(np.abs(f).max() > 1000 for f in played)  # the speech itself, not padding
    source.track.stop()


def test_stop_drops_what_is_still_queued_and_the_track_plays_silence() -> None:
    source, playback = PcmAudioSource(sample_rate=RATE), Playback()
    playback.attach(source)
    playback.push(_pcm(12.0))  # generation ended with 12 s still to play
    assert playback.queued_seconds() == pytest.approx(12.0)
    playback.stop()
    assert playback.queued_seconds() == 0
    assert all(np.abs(f).max() == 0 for f in _play(source, 3))
    playback.push(_pcm(0.2))  # the next utterance plays at once
    assert playback.queued_seconds() == pytest.approx(0.2)
    source.track.stop()


def test_converted_audio_is_queued_at_the_tracks_rate() -> None:
    source, playback = PcmAudioSource(sample_rate=RATE), Playback()
    playback.attach(source)
    playback.push(_pcm(1.0, 48_000, 2), sample_rate=48_000, channels=2)
    assert playback.queued_seconds() == pytest.approx(1.0, abs=0.05)  # the resampler keeps ~30 ms back
    source.track.stop()


def test_nothing_is_queued_without_a_player_or_after_it_is_replaced() -> None:
    playback = Playback()
    playback.push(_pcm(1.0))
    assert playback.queued_seconds() == 0 and playback.dropped_chunks == 1
    old, new = PcmAudioSource(sample_rate=RATE), PcmAudioSource(sample_rate=RATE)
    playback.attach(old)
    playback.push(_pcm(1.0))
    playback.attach(new)  # the player reconnected: its new track has nothing yet
    assert playback.queued_seconds() == 0

    class Plain:  # a source that cannot say how much it holds
        def push(self, pcm) -> None: ...
        def clear(self) -> None: ...

    playback.attach(Plain())
    playback.push(_pcm(1.0))
    assert playback.queued_seconds() == 0
    old.track.stop()
    new.track.stop()
