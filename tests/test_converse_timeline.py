"""The conversation clock's pieces: where speech ends (energy threshold), voice-to-voice with the one percentile
method, against hand-computed values."""

from __future__ import annotations

import numpy as np

from services.converse.pipeline import split_clauses
from services.converse.timeline import Conversation, Turn, speech_end_s


def test_speech_end_is_the_last_frame_above_the_threshold() -> None:
    tone = (np.sin(np.arange(16000) * 0.1) * 8000).astype("<i2")  # 1 s loud
    quiet = (np.ones(8000) * 50).astype("<i2")  # 0.5 s at about -56 dBFS: below -40
    assert speech_end_s(np.concatenate([tone, quiet]).tobytes()) == 1.0
    assert speech_end_s(quiet.tobytes()) == 0.0


def test_voice_to_voice_nearest_rank() -> None:
    conv = Conversation(mode="pipeline", reply_label="x")
    for end, first in [(1.0, 1.7), (5.0, 5.4), (9.0, 9.9), (12.0, None)]:
        conv.turns.append(Turn(user_speech_end_s=end, first_audio_s=first).finish())
    # 700, 400, 900 ms (the turn without audio has none): sorted 400, 700, 900 → p50 = 2nd, p95 = 3rd
    assert conv.voice_to_voice() == {"n": 3, "p50": 700.0, "p95": 900.0}


def test_clauses_leave_as_soon_as_they_end() -> None:
    assert split_clauses("We open at nine, every") == ("We open at nine,", " every")
    assert split_clauses("We open") == ("", "We open")
    assert split_clauses("Hi. Yes! And") == ("Hi. Yes!", " And")
