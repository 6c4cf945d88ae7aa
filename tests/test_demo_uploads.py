"""A demo studio without uploads (`[demo] uploads = false`) takes no file on any page (issue 31, L5): Listen's
recording, Converse's recorded turns, Capacity's recording and the Evaluations form's files went through while the
Voice, Image and Video pages hid theirs. Checked on the real pages with AppTest against the offline engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.test_demo import _page, webrtc_inert  # noqa: F401  (the fixture, used by name)

NO_UPLOADS = {"pages": ["listen", "converse", "capacity", "evaluations"], "uploads": False}


def uploaders(at: AppTest) -> int:
    return len(at.get("file_uploader")) + len(at.get("audio_input"))


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


@pytest.mark.usefixtures("webrtc_inert")
@pytest.mark.parametrize("page", ["listen.py", "converse.py"])
def test_listen_and_converse_take_no_file_in_a_demo_without_uploads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                    engine_url: str, page: str) -> None:
    assert uploaders(_page(monkeypatch, tmp_path, engine_url, page, None)) == 1
    assert uploaders(_page(monkeypatch, tmp_path, engine_url, page, {**NO_UPLOADS, "uploads": True})) == 1
    at = _page(monkeypatch, tmp_path, engine_url, page, NO_UPLOADS)
    assert uploaders(at) == 0
    assert "takes no uploads" in captions(at)  # one line says why, instead of a widget that is not there
    assert not [b for b in at.button if b.label in ("Transcribe", "Talk")]


@pytest.mark.usefixtures("webrtc_inert")
def test_capacity_and_evaluations_take_no_file_in_a_demo_without_uploads(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path, engine_url: str) -> None:
    for demo, expected in ((None, 1), (NO_UPLOADS, 0)):
        at = _page(monkeypatch, tmp_path, engine_url, "capacity.py", demo)
        at.segmented_control(key="cap_modality").set_value("listen").run()
        assert not at.exception and uploaders(at) == expected
        at = _page(monkeypatch, tmp_path, engine_url, "evaluations.py", demo)
        assert uploaders(at) == expected  # the prompt file
        at.segmented_control(key="ev_modality").set_value("listen").run()
        assert not at.exception and uploaders(at) == expected  # the recordings to transcribe
