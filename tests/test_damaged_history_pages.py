"""The pages over a damaged history, with Streamlit's AppTest (the real app.py navigation) against the real
offline engine: a real history.sqlite3 with garbage written in its middle, or cut short, gives every page one
line naming the file and what to do — never a traceback — and the pages that need no history keep working
(Voice speaks, Endpoints shows the deployment, its audit panel saying why it is unavailable). A media file
deleted under its record is a line naming it on the Video page, not a MediaFileStorageError.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from services.history import History
from tests.test_history import _filled_history
from tests.test_videos import make_mp4, png

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGES = ("voice", "image", "video", "endpoints", "capacity", "evaluations")


@pytest.fixture
def webrtc_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest has no WebRTC session (as in tests/test_voice_page.py)."""
    import streamlit_webrtc.component
    import streamlit_webrtc.shutdown

    monkeypatch.setattr(streamlit_webrtc.component, "get_this_session_info", lambda: None)
    monkeypatch.setattr(streamlit_webrtc.shutdown, "get_this_session_info", lambda: None)


def _open(monkeypatch: pytest.MonkeyPatch, tmp: Path, data: Path, url: str, page: str) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")  # set empty: no studio.toml at all
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(data))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp / "state.json"))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, f"{page}: {at.exception[0].message}"
    return at


def _texts(elements) -> list[str]:
    return [e.value.replace("\\", "") for e in elements]  # as shown: Markdown escapes removed


def _damage(data: Path, how: str) -> Path:
    db = _filled_history(data)
    with db.open("r+b") as f:
        if how == "garbage":  # a whole page in the middle: rows of the jobs table
            f.seek((db.stat().st_size // 4096 // 2) * 4096)
            f.write(bytes(range(256)) * 16)
        else:
            f.truncate(db.stat().st_size // 2)
    return db


@pytest.mark.parametrize("how", ["garbage", "truncated"])
def test_every_page_names_a_damaged_history_in_one_line(how: str, engine_url: str, webrtc_inert: None,
                                                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = _damage(data, how)
    line = f"the history database {db} is damaged ("
    advice = "move it aside — the studio starts a new one"
    for page in PAGES:
        at = _open(monkeypatch, tmp_path, data, engine_url, page)
        shown = [m for m in _texts(at.main.error) + _texts(at.main.warning) if line in m]
        assert shown, f"{page}: {_texts(at.main.error)} {_texts(at.main.warning)}"
        assert all(advice in m and "\n" not in m for m in shown), shown
        if page == "voice":  # needs no history: it still offers to speak, only the kept takes are missing
            assert at.text_area(key="voice_text") is not None and any(b.label == "Speak" for b in at.button)
            assert any(m.startswith("Earlier takes cannot be shown: the history database") for m in shown)
        if page == "endpoints":  # the deployment is shown; no action runs unaudited
            assert any("No deployment yet" in i for i in _texts(at.main.info))
            assert any(m.startswith("The audit log is unavailable: the history database") for m in shown)
            assert not [b for b in at.button if b.label == "Deploy"]
    # doing what it says: the studio starts a new history and every page works again
    db.rename(db.with_name("history.sqlite3.damaged"))
    for page in PAGES:
        at = _open(monkeypatch, tmp_path, data, engine_url, page)
        assert not [m for m in _texts(at.main.error) + _texts(at.main.warning) if "damaged" in m], page


def test_media_files_deleted_under_their_records_are_named_on_the_video_page(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = tmp_path / "data"
    history = History(data)
    image = history.jobs.create("image", "a harbour", {"size": "64x64", "seed": 1}, target=engine_url)
    history.jobs.succeed(image.id, {"image-0.png": png(64, 64)})
    video = history.jobs.create("video", "the boats rock", {"width": 64, "height": 64, "frames": 5, "fps": 4, "steps": 4,
                                                       "guidance": 5.0, "seed": 2}, target=engine_url)
    history.jobs.succeed(video.id, {"video.mp4": make_mp4(5, 64, 64, 4)})
    picture = history.media.root / image.id / history.jobs.get(image.id).outputs[0]  # the media folder's files
    clip = history.media.root / video.id / history.jobs.get(video.id).outputs[0]
    picture.unlink()
    clip.unlink()
    at = _open(monkeypatch, tmp_path, data, engine_url, "video")
    warnings = _texts(at.main.warning)
    # Named by file, never by the server's path (a viewer of a shared record reads this too; the log has the path).
    gone = "is missing from the studio's media (deleted or moved; the server's log says where)."
    assert f"The image file {picture.name} {gone}" in warnings and f"The video file {clip.name} {gone}" in warnings
    assert any(f"video file {clip.name} missing" in c for c in _texts(at.caption))  # in the job list too
    assert not [t for t in warnings + _texts(at.caption) if str(data) in t]
    at.text_area(key="video_prompt").input("pan")
    next(b for b in at.button if b.label == "Generate").click().run()
    assert not at.exception
    assert any(f"the gallery image file {picture.name} of job {image.id} is missing from the studio's media" in e
               for e in _texts(at.main.error))
    assert len(History(data).jobs.list("video")) == 1  # nothing recorded for a reference that is gone
