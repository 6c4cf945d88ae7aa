"""Workspaces on the pages, with Streamlit's AppTest (the real app.py navigation) and the real offline engine: a
signed-in person's galleries, job lists, evaluations and load reports show their own items and what others
shared — "by bob@example.com" on another's — and a "Share with the team" toggle on their own; someone whose
role may not make things sees one line saying why, no form, and the shared work.

Who is signed in is `ui.auth.principal()` (the sign-in itself is tests/test_browser_signin.py's); here it is set
by monkeypatching that function, which every page and view asks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from services.eval.spec import parse_spec
from services.eval.store import EvalStore
from services.history import History
from tests.test_capacity_page import _report
from tests.test_eval import spec_dict
from tests.test_media_pages import IMAGE, VIDEO, _button, _generate_image, _ok, _open
from tests.test_videos import make_mp4, png
from tests.test_voice_page import webrtc_inert  # noqa: F401  (fixture)
from tests.test_workspaces import ALICE, BOB, VIC
from ui import auth

EVALUATIONS, CAPACITY, VOICE = "pages/evaluations.py", "pages/capacity.py", "pages/voice.py"


def _as(monkeypatch: pytest.MonkeyPatch, who, data: Path, url: str, page: str):
    monkeypatch.setattr(auth, "principal", lambda: who)
    return _open(monkeypatch, data, url, page)


def _image(data: Path, who, prompt: str, *, shared: bool = False) -> str:
    h = History(data, actor=who)
    job = h.jobs.create("image", prompt, {"size": "64x64", "steps": 2, "seed": 1}, target="t", status="running")
    h.jobs.succeed(job.id, {"image-0.png": png(64, 64)})
    if shared:
        h.set_shared("job", job.id, True)
    return job.id


def _words(at) -> str:
    return " ".join(e.value for kind in (at.markdown, at.caption, at.info, at.text) for e in kind).replace("\\", "")


def test_the_image_gallery_is_ones_own_and_the_shared_and_ones_own_can_be_shared(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    private = _image(tmp_path, ALICE, "alice private")
    _image(tmp_path, ALICE, "alice shared", shared=True)
    _image(tmp_path, BOB, "bob private")
    _image(tmp_path, BOB, "bob shared", shared=True)

    at = _as(monkeypatch, ALICE, tmp_path, engine_url, IMAGE)
    shown = [t.value for t in at.text]
    assert shown == ["bob shared", "alice shared", "alice private"]  # newest first; Bob's private one is not there
    by = [c.value for c in at.caption if c.value.startswith("by ")]
    assert by == ["by `bob@example.com`"]  # only the other person's, as an e-mail in a code span
    toggles = {t.key: t for t in at.toggle}
    assert len(toggles) == 2 and all(t.label == "Share with the team" for t in toggles.values())
    assert toggles[f"share-job-{private}"].value is False
    toggles[f"share-job-{private}"].set_value(True).run()
    _ok(at)
    assert History(tmp_path).jobs.get(private).shared

    _generate_image(at, "made by alice", size="64x64", seed="5")  # what the form makes is hers
    assert not at.error and History(tmp_path).jobs.list("image")[0].user_id == ALICE.id

    bob = _as(monkeypatch, BOB, tmp_path, engine_url, IMAGE)  # Alice's new image stays hers; the shared one is his to see
    assert [t.value for t in bob.text] == ["bob shared", "bob private", "alice shared", "alice private"]
    assert [c.value for c in bob.caption if c.value.startswith("by ")] == ["by `alice@example.com`"] * 2
    assert len(bob.toggle) == 2 and not any("alice" in t.key for t in bob.toggle)


def test_a_viewer_sees_the_shared_videos_and_no_form(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    h = History(tmp_path, actor=ALICE)
    for prompt, shared in (("waves, shared", True), ("waves, private", False)):
        job = h.jobs.create("video", prompt, {"width": 64, "height": 48, "frames": 9, "fps": 8, "steps": 4,
                                         "guidance": 5.0, "seed": 1}, target="t", status="running")
        h.jobs.succeed(job.id, {"video.mp4": make_mp4(9, 64, 48, 8)}, timings={"wall_s": 1.0})
        if shared:
            h.set_shared("job", job.id, True)
    at = _as(monkeypatch, VIC, tmp_path, engine_url, VIDEO)
    assert "Vic (viewer): only a creator or an admin may generate speech, images or videos" in _words(at)
    labels = {b.label for b in at.button}
    assert "Generate" not in labels and "Play" in labels and not at.text_area  # no form, the jobs stay
    words = _words(at)
    assert "waves, shared" in words and "waves, private" not in words and "by `alice@example.com`" in words
    assert not at.toggle  # nothing of hers to share


def test_a_viewer_reads_and_cannot_rate_a_shared_evaluation(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    store = EvalStore(History(tmp_path, actor=ALICE))
    shared = store.create(parse_spec(spec_dict(name="team one")))
    store.set_shared(shared.id, True)
    store.create(parse_spec(spec_dict(name="alice alone")))
    at = _as(monkeypatch, VIC, tmp_path, engine_url, EVALUATIONS)
    assert any("may run or rate evaluations" in i.value for i in at.info)
    picker = at.selectbox(key="ev_pick_1")  # one option: no "New evaluation", not her private one
    assert picker.options == [f"team one · voice · 6 items · {_when(shared)} · by alice@example.com"]
    labels = {b.label for b in at.button}
    assert not labels & {"Create and run", "Create only", "Run", "Start rating"}
    words = _words(at)
    assert "Only `alice@example.com`, who made it, runs its items." in words and "Rating is for creators" in words
    _button(at, "Reveal the results").click().run()
    _ok(at)
    assert at.dataframe and not at.file_uploader  # the results, and no import of ratings


def test_alice_shares_her_evaluation_and_her_load_report(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    store = EvalStore(History(tmp_path, actor=ALICE))
    ev = store.create(parse_spec(spec_dict(name="mine")))
    at = _as(monkeypatch, ALICE, tmp_path, engine_url, EVALUATIONS)
    at.selectbox[0].set_value(ev.id).run()
    _ok(at)
    at.toggle(key=f"share-evaluation-{ev.id}").set_value(True).run()
    _ok(at)
    assert store.get(ev.id).shared

    report = _report("g6 run", "ml.g6.xlarge", 200, 1.0).to_dict()
    History(tmp_path, actor=ALICE).load_reports.save(report)
    History(tmp_path, actor=BOB).load_reports.save(_report("bob's", "ml.g6e.xlarge", 150, 2.0).to_dict())
    at = _as(monkeypatch, ALICE, tmp_path, engine_url, CAPACITY)
    assert at.selectbox(key="cap_pick").options == [f"g6 run · voice · ml.g6.xlarge · {_when(report)}"]  # not Bob's
    at.toggle(key=f"share-load_report-{report['id']}").set_value(True).run()
    _ok(at)
    vic = _as(monkeypatch, VIC, tmp_path, engine_url, CAPACITY)
    assert "Run the sweep" not in {b.label for b in vic.button}
    assert any("may run load sweeps" in i.value for i in vic.info)
    assert vic.selectbox(key="cap_pick").options == [f"g6 run · voice · ml.g6.xlarge · {_when(report)} · by "
                                                     "alice@example.com"]
    assert "by `alice@example.com`" in _words(vic) and not vic.toggle


def test_a_viewer_cannot_speak(engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                               webrtc_inert: None) -> None:  # noqa: F811
    at = _as(monkeypatch, VIC, tmp_path, engine_url, VOICE)
    (speak,) = [b for b in at.button if b.label == "Speak"]
    assert speak.disabled and any("may generate" in i.value for i in at.info)
    assert not [e for e in at.expander if "Compare" in e.label]


def _when(record) -> str:
    import time

    from ui.media_views import when

    if isinstance(record, dict):  # a load report: minutes, as the Capacity page's picker shows it
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(record["created_at"]))
    return when(record.created_at)


def test_a_viewer_is_offered_no_action_only_makers_may_use(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    _image(tmp_path, ALICE, "alice shared", shared=True)
    h = History(tmp_path, actor=ALICE)
    job = h.jobs.create("video", "waves, shared", {"width": 64, "height": 48, "frames": 9, "fps": 8, "steps": 4,
                                              "guidance": 5.0, "seed": 1}, target="t", status="running")
    h.jobs.succeed(job.id, {"video.mp4": make_mp4(9, 64, 48, 8)}, timings={"wall_s": 1.0})
    h.set_shared("job", job.id, True)
    makers = {"Use for video", "Edit with this", "Reuse these settings", "Reuse settings", "Save title"}

    at = _as(monkeypatch, VIC, tmp_path, engine_url, IMAGE)
    assert "alice shared" in _words(at) and [d.label for d in at.download_button][:2] == ["Download PNG",
                                                                                         "Download Python"]
    assert not {b.label for b in at.button} & makers and not at.get("popover")  # nothing to rename or delete
    assert at.get("page_link")  # the link stays: anyone who sees it may send it on
    at = _as(monkeypatch, VIC, tmp_path, engine_url, VIDEO)
    assert "Play" in {b.label for b in at.button} and not {b.label for b in at.button} & makers

    at = _as(monkeypatch, BOB, tmp_path, engine_url, IMAGE)  # a creator: Alice's shared image to reuse, not to delete
    assert {"Use for video", "Edit with this", "Reuse these settings"} <= {b.label for b in at.button}
    assert not at.get("popover")
    at = _as(monkeypatch, ALICE, tmp_path, engine_url, VIDEO)  # hers: rename or delete
    assert at.get("popover") and "Reuse settings" in {b.label for b in at.button}
