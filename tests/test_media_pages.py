"""The image and video pages' logic with Streamlit's AppTest (the real app.py navigation), against the
real offline engine — and, for slow and failing jobs, the misbehaving loopback server of test_videos; an
edit whose references must be fitted under InvokeEndpoint's 6 MB goes through the local SageMaker emulator.

AppTest cannot play media (docs/testing.md); tests/test_browser_media.py plays the video in Chromium.
Note: after a script calls st.switch_page, AppTest keeps re-running the page it was told last, so the
tests follow a switch with `at.switch_page(...)` themselves, as the browser would follow the new URL.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest
import streamlit as st
from PIL import Image
from streamlit.testing.v1 import AppTest

from services.history import History
from tests.test_videos import fault_server, png  # noqa: F401  (fixture)
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]  # the SageMaker emulator, for the edit fitted under 6 MB

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
IMAGE, VIDEO = "pages/image.py", "pages/video.py"


def _open(monkeypatch: pytest.MonkeyPatch, data: Path, url: str, page: str) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")  # set empty: no studio.toml at all
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(data))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page(page)
    at.run()
    _ok(at)
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, at.exception[0].message if at.exception else ""


def _button(at: AppTest, label: str, nth: int = 0):
    buttons = [b for b in at.button if b.label == label]
    assert len(buttons) > nth, f"no button {label!r}; buttons: {[b.label for b in at.button]}"
    return buttons[nth]


def _generate_image(at: AppTest, prompt: str, **fields: str) -> None:
    at.text_area(key="image_prompt").input(prompt)
    for key, value in fields.items():
        widget = at.number_input(key=f"image_{key}") if key in ("steps", "n") else at.text_input(key=f"image_{key}")
        widget.set_value(value)
    _button(at, "Generate").click().run()
    _ok(at)


def _until(at: AppTest, done, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out waiting for the page"
        time.sleep(0.2)
        at.run()
        _ok(at)


# ---------------------------------------------------------------------------------------------------------
def test_image_generate_shows_the_gallery_with_parameters_preview_label_and_download(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    assert any("No images yet" in i.value for i in at.info)
    _generate_image(at, "a red <b>fox</b> **not bold**", size="320x192", seed="42")
    assert not at.error
    job = History(tmp_path).jobs.list("image")[0]
    assert job.status == "succeeded" and job.params["seed"] == 42 and job.params["steps"] == 4
    assert Image.open(io.BytesIO(job.output_files()[0][1])).size == (320, 192)
    assert "a red <b>fox</b> **not bold**" in [t.value for t in at.text]  # shown as text, never HTML/markdown
    captions = [c.value for c in at.caption]
    assert any("Offline preview" in c for c in captions)
    assert any("320x192 · 4 steps · seed 42" in c for c in captions)
    assert [d.label for d in at.download_button] == ["Download PNG", "Download Python", "Download curl", "Download CLI",
                                                   "Download all three (and the reference files)"]  # and its code
    assert {b.label for b in at.button} >= {"Reuse these settings", "Use for video"}
    # newest first
    _generate_image(at, "second picture", size="128x128", seed="7")
    assert [t.value for t in at.text][:2] == ["second picture", "a red <b>fox</b> **not bold**"]


@pytest.mark.parametrize("fields, words", [
    ({"prompt": "   "}, "prompt is empty"),
    ({"size": "big"}, "expected 'WIDTHxHEIGHT'"),
    ({"size": "16x16"}, "between 64 and 2048"),
    ({"seed": "forty-two"}, "seed must be a whole number"),
    ({"guidance": "lots"}, "guidance must be a number"),
    ({"guidance": "50"}, "guidance must be a number from 0 to 20"),
])
def test_image_bad_input_is_explained_and_nothing_is_recorded(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fields: dict, words: str) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    prompt = fields.pop("prompt", "a cat")
    _generate_image(at, prompt, **fields)
    assert any(words in e.value.replace("\\", "") for e in at.error), [e.value for e in at.error]
    assert History(tmp_path).jobs.list() == []


def test_reuse_these_settings_fills_the_form(engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    _generate_image(at, "reuse me", size="256x128", seed="1234", guidance="3.5", steps=6)
    _generate_image(at, "something else", size="128x128", seed="", guidance="", steps=4)
    _button(at, "Reuse these settings", nth=1).click().run()  # the older tile
    _ok(at)
    assert at.text_area(key="image_prompt").value == "reuse me"
    assert at.text_input(key="image_size").value == "256x128"
    assert at.text_input(key="image_seed").value == "1234"
    assert at.text_input(key="image_guidance").value == "3.5"
    assert at.number_input(key="image_steps").value == 6


def test_a_server_error_is_shown_with_its_message(fault_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, fault_server, IMAGE)  # this server has no image route: HTTP 404
    _generate_image(at, "a cat", size="128x128")
    assert any("HTTP 404" in e.value for e in at.error)
    failed = History(tmp_path).jobs.list("image")[0]
    assert failed.status == "failed" and "HTTP 404" in failed.error
    assert any("failed" in e.value for e in at.error)  # the failed attempt is in the gallery too


def test_use_for_video_takes_the_image_to_the_video_page_and_a_video_plays(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    _generate_image(at, "a harbour at dawn", size="512x512", seed="3")
    image_job = History(tmp_path).jobs.list("image")[0]
    _button(at, "Use for video").click().run()
    _ok(at)
    assert [t.value for t in at.title] == ["Video"]  # st.switch_page ran
    at.switch_page(VIDEO)
    at.run()
    _ok(at)
    assert at.radio(key="video_ref_source").value == "From the gallery"
    assert at.selectbox(key="video_ref_pick").value == f"{image_job.id}-0"
    # the published defaults
    assert [at.number_input(key=f"video_{k}").value for k in ("width", "height", "frames", "fps", "steps", "guidance")] \
        == [480, 320, 17, 8, 30, 5.0]
    assert not at.warning
    at.number_input(key="video_steps").set_value(4).run()
    assert any("smoke test only" in w.value for w in at.warning)
    at.text_area(key="video_prompt").input("the boats rock gently")
    at.number_input(key="video_frames").set_value(9)
    _button(at, "Generate").click().run()
    _ok(at)
    _until(at, lambda: History(tmp_path).jobs.list("video")[0].finished)
    _until(at, lambda: len(at.get("video")) == 1)
    job = History(tmp_path).jobs.list("video")[0]
    assert job.status == "succeeded", job.error
    assert job.params["reference_name"] == f"gallery image {image_job.id}-0" and job.params["steps"] == 4
    assert Image.open(io.BytesIO(job.input_file("reference.jpg"))).size == (480, 320)
    assert [d.label for d in at.download_button] == ["Download MP4", "Download Python", "Download curl", "Download CLI",
                                                   "Download all three (and the reference files)"]  # and its code
    python = at.code[0].value  # the job list's Code panel: the request again, its reference beside it
    assert '"/v1/videos/sync"' in python and '"num_frames": "9"' in python and 'open(REFERENCE, "rb")' in python
    assert any("9 frames, 1.12 s of video" in c.value.replace("\\", "") for c in at.caption)
    assert "the boats rock gently" in [t.value for t in at.text]


def test_progress_with_elapsed_time_then_the_player(fault_server: str, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, fault_server, VIDEO)
    at.radio(key="video_ref_source").set_value("No reference (text only)").run()
    at.text_area(key="video_prompt").input("slow:6")  # long enough to be seen running on a loaded machine
    at.number_input(key="video_frames").set_value(5)
    _button(at, "Generate").click().run()
    _ok(at)
    first = [i.value for i in at.info if "for" in i.value]
    assert first and ("queued for" in first[0] or "running for" in first[0]), first
    # The elapsed time moves on: polled until a later run shows another "running for" (never a fixed sleep).
    _until(at, lambda: any("running for" in i.value and i.value != first[0] for i in at.info), timeout=60)
    _until(at, lambda: len(at.get("video")) == 1, timeout=60)
    assert not [i for i in at.info if "running for" in i.value]
    assert any("succeeded after" in c.value for c in at.caption)


def test_a_failed_job_shows_its_text_and_the_others_stay(fault_server: str, monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, fault_server, VIDEO)
    at.radio(key="video_ref_source").set_value("No reference (text only)").run()
    for prompt in ("a good one", "oom"):
        at.text_area(key="video_prompt").input(prompt)
        at.number_input(key="video_frames").set_value(5)
        _button(at, "Generate").click().run()
        _ok(at)
        _until(at, lambda: History(tmp_path).jobs.list("video")[0].finished)
    at.run()
    errors = [e.value for e in at.error]
    assert any("CUDA out of memory" in e and "HTTP 500" in e for e in errors), errors
    assert [j.status for j in History(tmp_path).jobs.list("video")] == ["failed", "succeeded"]
    assert len(at.get("video")) == 1  # the good one still plays
    # a reload (a new browser session) shows the same jobs
    again = _open(monkeypatch, tmp_path, fault_server, VIDEO)
    assert any("CUDA out of memory" in e.value for e in again.error)
    assert {t.value for t in again.text} >= {"a good one", "oom"}


def test_uploads_are_checked(engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, VIDEO)
    at.radio(key="video_ref_source").set_value("Upload an image").run()
    at.text_area(key="video_prompt").input("pan")
    _button(at, "Generate").click().run()
    assert any("no image uploaded" in e.value for e in at.error)
    at.file_uploader[0].set_value(("notes.png", b"this is text, not a picture", "image/png")).run()
    _ok(at)
    assert any("notes.png is not an image this studio reads" in e.value.replace("\\", "") for e in at.error)
    bomb = io.BytesIO()
    Image.new("1", (12_000, 12_000)).save(bomb, "PNG")
    at.file_uploader[0].set_value(("bomb.png", bomb.getvalue(), "image/png")).run()
    assert any("decompression bomb" in e.value for e in at.error)
    _button(at, "Generate").click().run()
    assert any("decompression bomb" in e.value for e in at.error)
    assert History(tmp_path).jobs.list() == []
    at.file_uploader[0].set_value(("ok.png", png(900, 300), "image/png")).run()
    assert not at.error
    at.number_input(key="video_frames").set_value(5)
    _button(at, "Generate").click().run()
    _until(at, lambda: History(tmp_path).jobs.list("video")[0].finished)
    job = History(tmp_path).jobs.list("video")[0]
    assert job.status == "succeeded" and job.params["reference_name"] == "ok.png"


def test_a_job_of_a_stopped_studio_is_shown_as_interrupted(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    code = ("import sys; from services.history import History; h = History(sys.argv[1]);"
            "j = h.jobs.create('video', 'cut short', {'width': 480, 'height': 320, 'frames': 17, 'fps': 8, 'steps': 30,"
            " 'guidance': 5.0, 'seed': 1}, target=sys.argv[2]);"
            "h.jobs.mark_running(j.id, {'transport': 'omni-sync', 'target': sys.argv[2], 'id': 'x', 'resumable': False})")
    run_cli([sys.executable, "-c", code, str(tmp_path), engine_url + "/v1/videos/sync"], cwd=ROOT, check=True)
    at = _open(monkeypatch, tmp_path, engine_url, VIDEO)
    assert any("interrupted" in m.value for m in at.markdown)
    assert any("studio stopped while this job ran" in e.value for e in at.error)
    _button(at, "Reuse settings").click().run()
    assert at.text_area(key="video_prompt").value == "cut short"


def test_an_unreachable_backend_is_named_on_both_pages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"
    at = _open(monkeypatch, tmp_path, url, IMAGE)
    assert any(url in e.value.replace("\\", "") for e in at.sidebar.error)  # the health check says so at once
    _generate_image(at, "a cat", size="128x128")
    assert any(f"cannot reach the image server at `{url}`" in e.value for e in at.main.error)  # a URL: in code
    at = _open(monkeypatch, tmp_path, url, VIDEO)
    at.radio(key="video_ref_source").set_value("No reference (text only)").run()
    at.text_area(key="video_prompt").input("pan")
    _button(at, "Generate").click().run()
    _until(at, lambda: History(tmp_path).jobs.list("video")[0].finished)
    at.run()
    assert any(f"cannot reach the video server at `{url}`" in e.value for e in at.main.error)


# ---------------------------------------------------------------------------------------------------------
# Edit: 1–4 references from the gallery or uploads (services/images: ImageEditRequest, record_edit).
def _images(at: AppTest) -> list:
    return at.get("image")


def _gallery_keys(tmp_path: Path) -> list[str]:
    """The gallery's images as the edit picker names them ("<job id>-<index>"), oldest first."""
    return [f"{job.id}-0" for job in reversed(History(tmp_path).jobs.list("image", statuses=("succeeded",)))]


def _edit(at: AppTest, prompt: str | None = None, **fields: str) -> None:
    if prompt is not None:
        at.text_area(key="edit_prompt").input(prompt)
    for key, value in fields.items():
        widget = at.number_input(key="edit_steps") if key == "steps" else at.text_input(key=f"edit_{key}")
        widget.set_value(value)
    at.button(key="edit_go").click().run()
    _ok(at)


def _errors(at: AppTest) -> list[str]:
    return [e.value.replace("\\", "") for e in at.main.error]


def test_edit_two_gallery_images_and_an_upload_then_use_the_result_for_video(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from services.images.edits import auto_size

    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    assert [t.label for t in at.tabs] == ["Generate", "Edit", "Compare"]
    _generate_image(at, "a red fox", size="320x192", seed="1")
    _generate_image(at, "a blue boat", size="256x256", seed="2")
    fox, boat = _gallery_keys(tmp_path)
    picker = at.multiselect(key="edit_picks")
    picker.set_value([fox, boat]).run()
    at.file_uploader(key="edit_uploads").set_value([("sketch.png", png(200, 100), "image/png")]).run()
    _ok(at)
    thumbs = [img for img in _images(at) if len(img.value) == 3]
    assert thumbs and [c.split(" · ")[0] for c in thumbs[0].captions] == ["1", "2", "3"]
    assert thumbs[0].captions[2] == "3 · sketch.png"
    assert any("**3** references" in c.value for c in at.caption)
    _edit(at, "make them friends", seed="9")
    assert not _errors(at), _errors(at)
    edit = History(tmp_path).jobs.list("image")[0]
    assert edit.status == "succeeded" and edit.meta["edit"] is True and edit.meta["fitting"] is None
    refs = edit.params["references"]
    assert [r["job_id"] for r in refs] == [fox.rsplit("-", 1)[0], boat.rsplit("-", 1)[0], None]
    assert refs[2]["name"] == "sketch.png" and edit.params["seed"] == 9
    assert edit.params["size"] == auto_size(320, 192)  # the first reference's proportions
    assert Image.open(io.BytesIO(edit.output_files()[0][1])).size == tuple(map(int, auto_size(320, 192).split("x")))
    # the form keeps what was typed and picked, for the next variation
    assert at.text_area(key="edit_prompt").value == "make them friends"
    assert at.multiselect(key="edit_picks").value == [fox, boat]
    # the gallery shows the edit first, with its references as small thumbnails
    assert [t.value for t in at.text][0] == "make them friends"
    assert "Edited from 3 references: 1 · a red fox; 2 · a blue boat; 3 · sketch.png" in [
        c.value.replace("\\", "") for c in at.caption]
    tile_refs = [img for img in _images(at) if img.captions == ["1", "2", "3"]]
    assert len(tile_refs) == 1 and all("/media/" in url for url in tile_refs[0].value)

    # "Reuse these settings" on the edit fills the edit form (and its gallery references) back in
    at.multiselect(key="edit_picks").set_value([]).run()
    at.text_area(key="edit_prompt").input("something else").run()
    _button(at, "Reuse these settings", nth=0).click().run()
    _ok(at)
    assert at.text_area(key="edit_prompt").value == "make them friends"
    assert at.multiselect(key="edit_picks").value == [fox, boat]
    assert at.text_input(key="edit_seed").value == "9"
    assert at.session_state["image_mode"] == "Edit"

    # "Edit with this" adds a gallery image to the references
    at.multiselect(key="edit_picks").set_value([]).run()
    _button(at, "Edit with this", nth=2).click().run()  # tiles: the edit, the boat, the fox
    assert at.multiselect(key="edit_picks").value == [fox]

    _button(at, "Use for video", nth=0).click().run()
    _ok(at)
    at.switch_page(VIDEO)
    at.run()
    _ok(at)
    assert at.selectbox(key="video_ref_pick").value == f"{edit.id}-0"


def test_edit_bad_input_is_explained_and_nothing_typed_or_picked_is_lost(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    _generate_image(at, "a red fox", size="128x128", seed="1")
    (fox,) = _gallery_keys(tmp_path)
    before = [j.id for j in History(tmp_path).jobs.list()]

    _edit(at, "make it winter")  # no reference at all
    assert any("an edit takes 1 to 4 reference images; got 0 — pick at least one" in e for e in _errors(at))
    assert at.text_area(key="edit_prompt").value == "make it winter"

    at.multiselect(key="edit_picks").set_value([fox]).run()
    uploader = at.file_uploader(key="edit_uploads")
    uploader.set_value([("notes.png", b"this is text, not a picture", "image/png")]).run()
    assert any("notes.png is not an image this studio reads" in e for e in _errors(at))  # said at once
    _edit(at, seed="5", size="320x320")
    assert any("reference 2 (notes.png) is not an image this studio reads" in e for e in _errors(at))

    bomb = io.BytesIO()
    Image.new("1", (12_000, 12_000)).save(bomb, "PNG")
    at.file_uploader(key="edit_uploads").set_value([("bomb.png", bomb.getvalue(), "image/png")]).run()
    _edit(at)
    assert any("bomb.png) declares too many pixels" in e and "decompression bomb" in e for e in _errors(at))

    five = [(f"p{i}.png", png(64 + i, 64), "image/png") for i in range(4)]  # with the fox: five references
    at.file_uploader(key="edit_uploads").set_value(five).run()
    _edit(at)
    assert any("got 5 — remove some" in e for e in _errors(at)), _errors(at)

    at.file_uploader(key="edit_uploads").set_value(five[:1]).run()
    assert not _errors(at)  # a new choice clears the last complaint
    _edit(at, "   ")
    assert any("the prompt is empty" in e for e in _errors(at))
    _edit(at, "make it winter", size="huge")
    assert any("expected 'WIDTHxHEIGHT'" in e for e in _errors(at)), _errors(at)

    assert [j.id for j in History(tmp_path).jobs.list()] == before  # nothing was sent or recorded
    assert at.multiselect(key="edit_picks").value == [fox]
    assert [f.name for f in at.session_state["edit_uploads"]] == ["p0.png"]
    assert (at.text_area(key="edit_prompt").value, at.text_input(key="edit_seed").value,
            at.text_input(key="edit_size").value) == ("make it winter", "5", "huge")
    _edit(at, size="")  # fixed: it goes through with everything that was kept
    edit = History(tmp_path).jobs.list("image")[0]
    assert edit.status == "succeeded" and [r["name"] for r in edit.params["references"]][1] == "p0.png"
    assert edit.params["seed"] == 5


def test_on_sagemaker_large_references_are_fitted_and_the_result_says_how(
        emulator_env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Three 9 MB photos are far over InvokeEndpoint's 6 MB: the edit goes through, fitted, and says so."""
    import numpy as np

    from tests.emulator_support import deploy_endpoint

    deploy_endpoint(emulator_env, "sm-image", environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "sagemaker")
    monkeypatch.setenv("OMNI_STUDIO_IMAGE_ENDPOINT", "sm-image")
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp_path / "none.json"))
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(IMAGE)
    at.run()
    _ok(at)

    def photo(seed: int) -> bytes:
        out = io.BytesIO()
        Image.fromarray(np.random.default_rng(seed).integers(0, 255, (1500, 2000, 3), dtype=np.uint8)).save(out, "PNG")
        return out.getvalue()

    at.file_uploader(key="edit_uploads").set_value([(f"photo-{i}.png", photo(i), "image/png") for i in range(3)]).run()
    _edit(at, "one photo from three", size="320x240", seed="2")
    assert not _errors(at), _errors(at)
    job = History(tmp_path).jobs.list("image")[0]
    assert job.status == "succeeded", job.error
    fitting = job.meta["fitting"]
    assert fitting.startswith("3 references") and "JPEG q" in fitting and "SageMaker's 6 MB limit" in fitting
    assert any(fitting in c.value.replace("\\", "") for c in at.caption), [c.value for c in at.caption]
    assert any("Edited from 3 references: 1 · photo-0.png; 2 · photo-1.png; 3 · photo-2.png" in c.value.replace(
        "\\", "") for c in at.caption)
    assert [img for img in _images(at) if img.captions == ["1", "2", "3"]]


# -- the gallery: pages, search, a link to each item, rename and delete ------------------------------------------
def _made(data: Path, kind: str, prompt: str) -> str:
    """A finished job recorded directly (as the form would), for a gallery with many items."""
    from tests.test_videos import make_mp4
    h = History(data)
    params = {"size": "64x64", "steps": 2, "seed": 1} if kind == "image" else \
        {"width": 64, "height": 48, "frames": 9, "fps": 8, "steps": 4, "guidance": 5.0, "seed": 1}
    job = h.jobs.create(kind, prompt, params, target="t", status="running")
    h.jobs.succeed(job.id, {"image-0.png": png(64, 64)} if kind == "image" else {"video.mp4": make_mp4(9, 64, 48, 8)},
              timings={"wall_s": 1.0})
    return job.id


def _links(at: AppTest) -> list[str]:
    return [p.proto.query_string for p in at.get("page_link")]


def _said(at: AppTest) -> str:
    return " ".join(e.value for kind in (at.caption, at.info, at.success, at.warning, at.markdown)
                    for e in kind).replace("\\", "")


def test_the_image_gallery_pages_searches_links_renames_and_deletes(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ids = [_made(tmp_path, "image", f"picture {n:02d}") for n in range(30)]
    odd = _made(tmp_path, "image", "100% cotton_shirt")
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    texts = [t.value for t in at.text]
    assert len(texts) == 24 and texts[0] == "100% cotton_shirt" and "picture 00" not in texts
    assert "Images 1–24 of 31, newest first · page 1 of 2" in _said(at)
    assert f"item={ids[-1]}" in _links(at)  # each item links to itself
    at.button(key="image_gallery_older").click().run()
    _ok(at)
    assert [t.value for t in at.text][-1] == "picture 00" and "Images 25–31 of 31" in _said(at)  # the oldest
    at.text_input(key="image_gallery_search").input("0% COTTON_").run()  # any case; % and _ are plain characters
    _ok(at)
    assert [t.value for t in at.text] == ["100% cotton_shirt"] and "Images matching “0% COTTON_” 1–1 of 1" in _said(at)
    at.text_input(key="image_gallery_search").input("nothing like it").run()
    assert "No image's prompt or title contains “nothing like it”" in _said(at)
    at.text_input(key="image_gallery_search").input("").run()

    at.query_params["item"] = ids[0]  # the link: the oldest image, shown first although it is on page 2
    at.run()
    _ok(at)
    assert "The linked image" in _said(at) and [t.value for t in at.text][0] == "picture 00"

    at.text_input(key=f"linked-title-{ids[0]}").input("The first one").run()
    at.button(key=f"linked-rename-{ids[0]}").click().run()
    _ok(at)
    assert History(tmp_path).jobs.get(ids[0]).title == "The first one"
    assert [t.value for t in at.text][0] == "The first one" and "Prompt: picture 00" in _said(at)

    folder = History(tmp_path).media.root / odd
    at.button(key=f"delete-{odd}").click().run()
    _ok(at)
    assert f"Deleted {odd} and its files." in _said(at)
    assert not folder.exists() and History(tmp_path).jobs.count("image") == 30
    assert "100% cotton_shirt" not in [t.value for t in at.text]

    at.button(key=f"linked-delete-{ids[0]}").click().run()  # deleting the linked item closes the link
    _ok(at)
    assert "item" not in at.query_params and "The linked image" not in _said(at)
    at.query_params["item"] = ids[0]
    at.run()
    _ok(at)
    assert f"The linked image {ids[0]} is not in this studio's history for you" in _said(at)


def test_a_video_link_opens_it_in_the_player_and_the_job_list_pages(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ids = [_made(tmp_path, "video", f"waves {n:02d}") for n in range(26)]
    at = _open(monkeypatch, tmp_path, engine_url, VIDEO)
    assert "Videos 1–24 of 26" in _said(at) and "waves 00" not in [t.value for t in at.text]
    at.query_params["item"] = ids[0]
    at.run()
    _ok(at)
    assert [t.value for t in at.text][0] == "waves 00"  # the player's, first on the page
    assert "The linked video" in _said(at)
    at.button(key="video_jobs_older").click().run()
    _ok(at)
    assert "Videos 25–26 of 26" in _said(at)
