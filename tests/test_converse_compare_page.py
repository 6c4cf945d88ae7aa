"""The Converse page's "Compare two setups" (ui/converse_compare.py) with Streamlit's AppTest, against the real
offline engine: one uploaded turn through A (the page's settings, silence window 300 ms) then B (700 ms); the table's
rows hold each side's figures with n and B/A as the comparison computed them; B the same as A is refused with one
line; nothing of a comparison is kept in the history."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from services.history import History
from tests.test_converse_page import _open, turn_wav, webrtc_inert  # noqa: F401  (fixtures; webrtc_inert autouse)

FIGURES = ["voice-to-voice p50", "voice-to-voice p95", "final transcript, median from speech end",
           "first reply token, median from speech end", "first audio received, median from speech end"]


def nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def _upload(at: AppTest, wav: bytes) -> None:
    at.file_uploader(key="converse_uploads").set_value([("turn1.wav", wav, "audio/wav")]).run()


def test_two_silence_windows_side_by_side(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str,
                                          turn_wav: bytes) -> None:  # noqa: F811
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    assert any(e.label == "Compare two setups" for e in at.expander)
    at.slider(key="converse_silence_ms").set_value(300).run()
    at.slider(key="cmp_silence_ms").set_value(700).run()
    _upload(at, turn_wav)
    at.button(key="cmp_go").click().run()
    assert not at.exception, at.exception[0].message if at.exception else ""
    assert not at.error, [e.value for e in at.error]
    last = at.session_state["cmp_last"]
    d = last["json"]
    assert d["a"]["setup"]["silence_ms"] == 300 and d["b"]["setup"]["silence_ms"] == 700
    assert d["a"]["inputs"] == d["b"]["inputs"] == ["turn1.wav"]
    table = at.dataframe[0].value
    assert list(table["figure"]) == FIGURES
    assert list(table["n A"]) == [1] * 5 and list(table["n B"]) == [1] * 5
    for side, col in (("a", "A (ms)"), ("b", "B (ms)")):
        [turn] = d[side]["conversation"]["turns"]
        assert turn["error"] is None and turn["reply_text"] == "We open at nine in the morning, every day."
        v2v = d[side]["voice_to_voice_ms"]
        assert v2v["n"] == 1 and v2v["p50"] == v2v["p95"] == pytest.approx(turn["voice_to_voice_ms"], abs=0.11)
        assert table[col][0] == v2v["p50"] and table[col][1] == v2v["p95"]
        stages = [turn["transcript_final_s"], turn["reply_first_token_s"], turn["first_audio_s"]]
        for row, at_s in zip(range(2, 5), stages):  # one turn: the median is that turn's own stage
            expected = nearest_rank([(at_s - turn["user_speech_end_s"]) * 1000], 50)
            assert table[col][row] == pytest.approx(expected, abs=0.25)
    ratio = round(d["b"]["voice_to_voice_ms"]["p50"] / d["a"]["voice_to_voice_ms"]["p50"], 3)
    assert d["ratio_p50"] == ratio and table["B/A"][0] == ratio
    assert any(c.value.startswith(f"B/A of voice-to-voice p50: {ratio:g}.") for c in at.caption)
    assert any("A: pipeline, silence window 300 ms" in c.value for c in at.caption)
    assert History(tmp_path / "data").conversations.list() == []  # a comparison is not kept


def test_b_the_same_as_a_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str,
                                    turn_wav: bytes) -> None:  # noqa: F811
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    at.slider(key="cmp_silence_ms").set_value(500).run()  # A's silence window is 500 too
    _upload(at, turn_wav)
    at.button(key="cmp_go").click().run()
    assert any("setup B is the same as A" in e.value for e in at.error)
    assert at.session_state["cmp_last"] is None
