"""The Sound page with Streamlit's AppTest (the real app.py navigation) against the real offline engine: a sound is
generated, kept and listed with its settings, player, waveform and download; its settings come back into the form;
bad input is one line naming what to fix, and nothing is kept."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import pytest

from services.history import History
from tests.test_media_pages import _button, _ok, _open

SOUND = "pages/sound.py"


def test_generate_keeps_the_sound_and_reuse_puts_its_settings_back(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, SOUND)
    assert any("No sounds yet" in i.value for i in at.info)
    at.text_area(key="sound_prompt").input("rain on a tin roof")
    at.number_input(key="sound_seconds").set_value(2.0)
    at.number_input(key="sound_steps").set_value(8)
    at.text_input(key="sound_seed").input("77")
    _button(at, "Generate").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    (job,) = History(tmp_path).jobs.list("sound")
    assert job.status == "succeeded" and job.params["seed"] == 77 and job.params["steps"] == 8
    with wave.open(io.BytesIO(job.file("sound.wav"))) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (44100, 2, 2 * 44100)
    captions = " ".join(c.value for c in at.caption).replace("\\", "")  # Markdown's escapes
    assert "2.00 s · 8 steps · guidance 7 · seed 77 · wav" in captions and "Offline preview" in captions
    assert len(at.get("audio")) == 1 and len(at.get("imgs") + at.get("image")) >= 1  # the player and the waveform
    assert [b.label for b in at.get("download_button")][0] == "Download WAV"  # then the Code panel's
    # the Code panel: the Python, curl and CLI that make this sound again, from its record
    python, curl, cli = (c.value for c in at.code)
    assert "/v1/audio/generate" in python and '"seed": 77' in python and 'os.environ.get("BASE_URL"' in python
    assert "curl" in curl and "python -m services sound" in cli and "--seed 77" in cli
    # what the Python needs, read from its imports: httpx alone, pinned as the studio pins it
    assert any("The Python needs httpx==0.28.1 (pip install them). Set BASE_URL" in c.value.replace("\\", "")
               for c in at.caption)
    at.text_area(key="sound_prompt").input("something else")
    at.text_input(key="sound_seed").input("")
    at.run()
    _button(at, "Reuse these settings").click().run()
    _ok(at)
    assert at.text_area(key="sound_prompt").value == "rain on a tin roof" and at.text_input(key="sound_seed").value == "77"


def test_an_empty_prompt_is_one_line_and_nothing_is_kept(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, SOUND)
    _button(at, "Generate").click().run()
    _ok(at)
    assert [e.value.replace("\\", "") for e in at.error] == ["the prompt is empty: describe the sound you want (e.g. 'rain on a tin "
                                           "roof')"]
    assert History(tmp_path).jobs.count("sound") == 0
