"""The Code panel and the link (`?item=<id>`) on the pages whose kept items are not images or sounds, with
Streamlit's AppTest through app.py's navigation, against the real offline engine: a speech take (Voice), a
transcript (Listen), a video job and a clip made from it with "Make a clip" (Video) each show the code that makes
them again and link to themselves; a link opens the page with that item first in a box of its own — for an
evaluation, that evaluation chosen — and a link to an item that is gone says so in one line. The generated code
itself is run unchanged by tests/test_code_media.py and tests/test_code_voice.py; tests/test_browser_code.py
copies an image's Python off the page in Chromium and runs it."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from services.eval.spec import parse_spec
from services.eval.store import EvalStore
from services.history import History
from tests.code_support import made
from tests.test_media_pages import _button, _ok, _open
from tests.test_voice_page import webrtc_inert  # noqa: F401  (a fixture)

VOICE, LISTEN, VIDEO, EVALUATIONS = "pages/voice.py", "pages/listen.py", "pages/video.py", "pages/evaluations.py"
CODE = "</> Code — make it again from a script"
GONE = "is not in this studio's history for you: it was deleted, or it is someone else's and not shared"


def _wav(seconds: float = 0.5, rate: int = 24_000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.sin(2 * np.pi * 220 * t) * 8000).astype("<i2").tobytes())
    return out.getvalue()


def _links(at: AppTest) -> list[str]:
    return [p.proto.query_string for p in at.get("page_link")]


def _said(at: AppTest) -> str:
    return " ".join(e.value for kind in (at.caption, at.info, at.success, at.warning, at.markdown)
                    for e in kind).replace("\\", "")


def _panels(at: AppTest) -> list:
    """The Code panels on the page, in page order."""
    return [e for e in at.expander if e.label == CODE]


def _python(panel) -> str:
    return panel.code[0].value  # the Python tab's, the first of three


def _link_to(at: AppTest, item_id: str) -> AppTest:
    at.query_params["item"] = item_id
    at.run()
    _ok(at)
    return at


def test_a_speech_take_shows_its_code_and_a_link_that_opens_it_first(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:  # noqa: F811
    history = History(tmp_path)
    older = history.takes.record("The harbour wakes at dawn.", _wav(), target=engine_url,
                                 config={"voice": "joe", "language": "English", "type": "session.config"})
    newer = history.takes.record("A second take.", _wav(), target=engine_url, config={"voice": "joe"})
    at = _open(monkeypatch, tmp_path, engine_url, VOICE)
    assert {f"item={older.id}", f"item={newer.id}"} <= set(_links(at))  # each kept take links to itself
    newest, oldest = _panels(at)  # the kept list, newest first
    assert '"A second take."' in _python(newest)
    python = _python(oldest)
    assert '"The harbour wakes at dawn."' in python and '"language": "English"' in python and "BASE_URL" in python
    assert "session.config" in python  # streamed over the speech WebSocket, as the take was
    assert [d.label for d in at.download_button].count("Download Python") == 2

    _link_to(at, older.id)
    assert "The linked take" in _said(at)
    assert [t.value for t in at.text][0] == "The harbour wakes at dawn."  # first on the page's list of takes
    assert python in [_python(p) for p in _panels(at)[:1]]  # the linked one's code, in its box
    assert len(_panels(at)) == 3  # and in the list below, as the gallery does
    _button(at, "Close the link").click().run()
    _ok(at)
    assert "item" not in at.query_params and "The linked take" not in _said(at)

    _link_to(at, "take-20200101-000000-00000000")
    assert f"The linked take take-20200101-000000-00000000 {GONE}" in _said(at)
    assert len(_panels(at)) == 2  # the list stays


def test_a_transcript_shows_its_code_and_a_link_that_opens_it_first(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None) -> None:  # noqa: F811
    history = History(tmp_path)
    kept = history.transcripts.record("Please call me back.", source="call.wav", route="file", model="whisper",
                                      backend="server", target=engine_url, figures={"audio_s": 0.5, "language": "en"},
                                      audio=_wav(), audio_name="call.wav")
    at = _open(monkeypatch, tmp_path, engine_url, LISTEN)
    assert f"item={kept.id}" in _links(at)
    [panel] = _panels(at)
    python = _python(panel)
    assert "client.audio.transcriptions.create(" in python and '"whisper"' in python and "recording.wav" in python
    assert any(b.label == "Download all three (and the reference files)" for b in panel.get("download_button"))

    _link_to(at, kept.id)
    assert "The linked transcript" in _said(at) and [t.value for t in at.text][0] == "Please call me back."
    assert [_python(p) for p in _panels(at)] == [python, python]  # in its box, and in the list below
    _link_to(at, "transcript-gone")
    assert f"The linked transcript transcript-gone {GONE}" in _said(at)


def test_a_video_and_the_clip_made_from_it_each_have_a_code_panel(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    video = made("video", "--url", engine_url, "--prompt", "waves at dawn", "--width", "160", "--height", "96",
                 "--frames", "9", "--fps", "8", "--steps", "4", "--seed", "2", "--out", "v.mp4",
                 data=tmp_path, cwd=tmp_path)["job_id"]
    at = _open(monkeypatch, tmp_path, engine_url, VIDEO)
    [panel] = _panels(at)
    python = _python(panel)
    assert '"/v1/videos/sync"' in python and '"num_frames": "9"' in python and '"seed": "2"' in python

    at.button(key=f"clip-{video}").click().run()  # "Make a clip" on the job list, as a person does
    at.radio(key="clip_narration_mode").set_value("Write it").run()
    at.text_area(key="clip_narration_text").input("Dawn over the harbour.")
    at.radio(key="clip_fit").set_value("trim")  # the narration is longer than these 9 frames
    at.button(key="clip_go").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    clip = next(j for j in History(tmp_path).jobs.list("video") if j.meta.get("clip"))
    assert f"item={clip.id}" in _links(at)
    of_clip, of_video = _panels(at)  # newest first
    assert _python(of_video) == python
    # A clip is no single request to a server: whatever services/code makes of it — the code of its parts and
    # mux, or one line why there is none — shows; never the image script its kept settings would otherwise read as.
    shown = " ".join([c.value for c in of_clip.code] + [i.value for i in of_clip.info])
    assert shown and "images.generate" not in shown and "/v1/videos/sync" not in shown

    _link_to(at, clip.id)
    assert "The linked video" in _said(at) and len(_panels(at)) == 3


def test_an_evaluation_link_chooses_it_and_says_so(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    store = EvalStore(tmp_path)

    def spec(name: str):
        return parse_spec({"name": name, "modality": "image", "prompts": ["a lighthouse at dawn"],
                           "variants": [{"label": "s4", "steps": 4}, {"label": "s8", "steps": 8}]})
    first, second = store.create(spec("first")), store.create(spec("second"))
    at = _open(monkeypatch, tmp_path, engine_url, EVALUATIONS)
    assert f"id {first.id}" not in _said(at)  # a new one is being defined: no evaluation shown
    _link_to(at, first.id)
    assert f"id {first.id}" in _said(at) and "🔗 The linked evaluation" in _said(at)
    assert f"item={first.id}" in _links(at)  # its own link, to send on
    picker = next(s for s in at.selectbox if s.label == "Evaluation")
    assert picker.value == first.id
    picker.set_value(second.id).run()  # the link chose it once; the picker moves freely after
    _ok(at)
    assert f"id {second.id}" in _said(at) and "🔗 The linked evaluation" not in _said(at)

    _link_to(at, "ev-gone")
    assert f"The linked evaluation ev-gone {GONE}" in _said(at)


def test_a_record_the_generators_cannot_read_is_one_line_and_the_page_stays(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import ui.code_views

    made("video", "--url", engine_url, "--prompt", "waves at dawn", "--width", "160", "--height", "96", "--frames",
         "9", "--fps", "8", "--steps", "4", "--seed", "2", "--out", "v.mp4", data=tmp_path, cwd=tmp_path)

    def misreads(history, item_id, **_):  # as a generator tripping on an odd old record would
        raise KeyError("prompt")
    monkeypatch.setattr(ui.code_views, "generate_all", misreads)
    at = _open(monkeypatch, tmp_path, engine_url, VIDEO)  # _open: no exception on the page
    [panel] = _panels(at)
    [line] = [w.value.replace("\\", "") for w in panel.warning]  # (Markdown-escaped)
    assert "could not be made (KeyError)" in line and not panel.code
    assert len(at.get("video")) == 1  # the rest of the page: the player
