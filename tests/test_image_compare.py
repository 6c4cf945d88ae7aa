"""Compare on the image page (a tab), the video and the voice pages (expanders) with Streamlit's AppTest (the
real app.py navigation) against the real offline engine: one prompt on two variants at once, each image or
video recorded in the history with its own settings, the columns showing their figures and cost per item; a
variant whose target is down fails alone; bad input is named and nothing runs.
tests/test_browser_image_compare.py shows the image columns in Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from services.history import History
from tests.conftest import free_port
from tests.test_media_pages import IMAGE, VIDEO, _button, _ok, _open
from tests.test_voice_page import _page as _voice_page
from tests.test_voice_page import webrtc_inert  # noqa: F401  (fixture)


def _variant(at, i: int, **fields: str) -> None:
    for name, value in fields.items():
        if name == "steps":
            at.number_input(key=f"cmp_{i}_steps").set_value(int(value))
        elif name == "target":  # a registered server, picked by its key (there is no URL to type)
            at.selectbox(key=f"cmp_{i}_target").set_value(value).run()
        elif name == "where":
            pass
        else:
            at.text_input(key=f"cmp_{i}_{name}").set_value(value)


def _compare(at, prompt: str) -> None:
    at.text_area(key="cmp_prompt").input(prompt)
    _button(at, "Compare").click().run()
    _ok(at)


def test_two_variants_side_by_side_are_recorded_with_figures_and_cost(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    _variant(at, 0, label="small fast", size="256x192", steps="4", seed="11")
    _variant(at, 1, label="large slow", size="384x320", steps="8", seed="11", guidance="3.5", negative="blur",
             price="3.6")
    _compare(at, "a lighthouse at dawn")
    assert not at.error, [e.value for e in at.error]
    jobs = {j.params["size"]: j for j in History(tmp_path).jobs.list("image")}
    assert set(jobs) == {"256x192", "384x320"}  # both recorded, each with its own settings
    small, large = jobs["256x192"], jobs["384x320"]
    assert small.status == large.status == "succeeded" and small.prompt == large.prompt == "a lighthouse at dawn"
    assert (small.params["steps"], small.params["seed"]) == (4, 11)
    assert (large.params["steps"], large.params["guidance"], large.params["negative_prompt"]) == (8, 3.5, "blur")
    text = (" ".join(m.value for m in at.markdown) + " " + " ".join(c.value for c in at.caption)).replace("\\", "")
    assert "small fast" in text and "large slow" in text
    assert text.count("Latency") == 2 and text.count("model time") == 2
    # 3.6 USD an hour: a second of latency costs a thousandth of a dollar
    cost = float(re.search(r"\$([0-9.]+) per image at \$3\.6000/h", text).group(1))
    assert cost == pytest.approx(large.timings["total_s"] / 1000, rel=1e-3)  # four significant digits
    assert "cost per image unknown: no hourly price is known" in text  # the sidebar's engine
    # the gallery holds both, like any other image
    assert sum("Use for video" == b.label for b in at.button) == 2
    # progress, not a greyed page: a line per variant, each marked as it finished
    box = at.status[0]
    assert box.label == "All 2 variants done" and box.state == "complete", (box.label, box.state)
    lines = [m.value.replace("\\", "") for m in box.markdown]
    assert len(lines) == 2 and all(line.startswith("✅ **") and " — done in " in line for line in lines), lines


def test_a_variant_on_a_down_target_fails_alone_and_another_url_works(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("OMNI_STUDIO_SERVERS", json.dumps([{"url": down, "name": "gone"}]))  # an admin registered it
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    at.segmented_control(key="cmp_count").set_value(3).run()
    _variant(at, 0, size="128x128", seed="1")
    _variant(at, 1, target=f"server:{engine_url}", size="160x128", seed="1")  # a second backend, same server
    _variant(at, 2, target=f"server:{down}", size="192x128", seed="1")
    at.run()
    _compare(at, "a boat")
    jobs = History(tmp_path).jobs.list("image")
    done = sorted(j.params["size"] for j in jobs if j.status == "succeeded")
    assert done == ["128x128", "160x128"]
    failed = [j for j in jobs if j.status == "failed"]
    assert [j.params["size"] for j in failed] == ["192x128"]  # recorded with its settings
    errors = [e.value.replace("\\", "") for e in at.error]
    assert errors and all(down in e.replace("`", "") for e in errors), errors  # its column (and gallery tile) only
    captions = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert f"vLLM-Omni {engine_url}" in captions.replace("`", "")
    lines = [m.value.replace("\\", "") for m in at.status[0].markdown]
    assert sorted(line[0] for line in lines) == ["✅", "✅", "❌"], lines
    assert any(line.startswith("❌") and "failed:" in line for line in lines), lines


def test_each_variant_is_reported_in_the_callers_thread_as_it_finishes(engine_url: str, tmp_path: Path) -> None:
    import threading

    from services.access import LOCAL
    from services.backend import server_backend
    from services.compare import ImageVariant, compare_images
    from services.images import ImageRequest
    from services.settings import Settings

    seen: list[tuple[int, str, int, int]] = []
    settings = Settings(data_dir=tmp_path)
    backend = server_backend(engine_url, settings)
    try:
        outcomes = compare_images(
            [ImageVariant("A", ImageRequest("a kite", size="128x128", steps=2)),
             ImageVariant("B", ImageRequest("a kite", size="160x128", steps=6))],
            settings=settings, history=History(tmp_path).acting_as(LOCAL), default=backend,
            on_progress=lambda o, done, total: seen.append((threading.get_ident(), o.variant.label, done, total)))
    finally:
        backend.close()
    assert [o.error for o in outcomes] == [None, None]
    assert {s[0] for s in seen} == {threading.get_ident()}  # the caller's thread: a page may draw from it
    assert sorted(s[1] for s in seen) == ["A", "B"] and [s[2:] for s in seen] == [(1, 2), (2, 2)]


def test_the_compare_targets_are_the_closed_set_and_the_form_has_no_url_field(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A creator once typed http://127.0.0.1:PORT/admin/secret?q= as a variant's URL and the page showed what the
    internal service answered. Now a target is picked from the studio's set (the service checks again:
    tests/test_targets.py)."""
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    assert at.selectbox(key="cmp_1_target").options[0] == "Sidebar backend"
    assert all(o == "Sidebar backend" or engine_url in o for o in at.selectbox(key="cmp_1_target").options)
    assert not [t for t in at.text_input if t.label in ("URL", "Endpoint name")]


@pytest.mark.parametrize("fields, message", [
    ({0: {"label": "same"}, 1: {"label": "same"}}, "variant labels must differ"),
    ({1: {"seed": "abc"}}, "variant B: seed must be a whole number"),
    ({0: {"size": "10x10"}}, "variant A:"),
    ({1: {"price": "lots"}}, "variant B: the price per hour (USD) must be a number"),
])
def test_bad_variants_are_named_and_nothing_runs(engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                 fields: dict, message: str) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, IMAGE)
    for i, values in fields.items():
        _variant(at, i, **values)
    at.run()
    _compare(at, "a cat")
    assert any(message in e.value.replace("\\", "") for e in at.error), [e.value for e in at.error]
    assert History(tmp_path).jobs.list("image") == []
    assert at.text_area(key="cmp_prompt").value == "a cat"  # nothing typed is lost


# ---------------------------------------------------------------------------------------------------------
# The video page's Compare (the same service): the form's prompt and reference, each variant's own knobs.
def test_two_video_variants_side_by_side(engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, VIDEO)
    at.radio(key="video_ref_source").set_value("No reference (text only)").run()
    at.text_area(key="video_prompt").input("waves roll onto the beach")
    for key, value in {"video_width": 160, "video_height": 128, "video_fps": 8}.items():
        at.number_input(key=key).set_value(value)
    at.text_input(key="video_seed").set_value("3")
    at.number_input(key="vcmp_0_frames").set_value(9)
    at.number_input(key="vcmp_1_frames").set_value(17)
    at.number_input(key="vcmp_1_steps").set_value(2)
    at.text_input(key="vcmp_1_price").set_value("3.6")
    _button(at, "Compare").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    jobs = {j.params["frames"]: j for j in History(tmp_path).jobs.list("video")}
    assert set(jobs) == {9, 17} and {j.status for j in jobs.values()} == {"succeeded"}
    assert jobs[17].params["steps"] == 2 and jobs[9].params["seed"] == jobs[17].params["seed"] == 3
    text = (" ".join(m.value for m in at.markdown) + " " + " ".join(c.value for c in at.caption)).replace("\\", "")
    assert text.count("Latency") == 2
    cost = float(re.search(r"\$([0-9.]+) per video at \$3\.6000/h", text).group(1))
    latency = jobs[17].timings.get("total_s", jobs[17].timings.get("wall_s"))
    assert cost == pytest.approx(latency / 1000, rel=1e-3)
    assert "cost per video unknown" in text


# ---------------------------------------------------------------------------------------------------------
# The voice page's Compare: the text above spoken by each variant at once, the takes side by side.
@pytest.fixture
def voice_page(engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, webrtc_inert: None):  # noqa: F811
    return _voice_page(monkeypatch, tmp_path, engine_url)


def test_two_voice_variants_side_by_side_with_ttfa_rtf_and_cost(voice_page) -> None:
    at = voice_page
    at.text_area(key="voice_text").input("Hello there. The ship sails at dawn, and we sail with it.")
    at.selectbox(key="vocmp_0_split").set_value("clause")
    at.text_input(key="vocmp_0_first").set_value("2")
    at.selectbox(key="vocmp_1_split").set_value("none")
    at.selectbox(key="vocmp_1_voice").set_value("joe")
    at.text_input(key="vocmp_1_price").set_value("3.6")
    _button(at, "Compare").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    outcomes = at.session_state["vocmp_outcomes"]
    assert [o.variant.options["split_granularity"] for o in outcomes] == ["clause", "none"]
    assert outcomes[0].variant.options["initial_codec_chunk_frames"] == 2 and outcomes[1].variant.options["voice"] == "joe"
    assert all(o.media and o.media[:4] == b"RIFF" and o.figures["ttfa_ms"] > 0 for o in outcomes)
    text = (" ".join(m.value for m in at.markdown) + " " + " ".join(c.value for c in at.caption)).replace("\\", "")
    assert text.count("TTFA") == 2 and text.count("RTF") >= 2
    cost = float(re.search(r"\$([0-9.]+) per take at \$3\.6000/h", text).group(1))
    assert cost == pytest.approx(outcomes[1].latency_s / 1000, rel=1e-3)
    assert "cost per take unknown" in text


def test_a_bad_voice_variant_is_named_and_nothing_is_spoken(voice_page) -> None:
    at = voice_page
    at.text_input(key="vocmp_1_first").set_value("lots")
    _button(at, "Compare").click().run()
    _ok(at)
    assert any("variant B: the first-audio frames must be a number" in e.value.replace("\\", "") for e in at.error)
    assert "vocmp_outcomes" not in at.session_state  # nothing was spoken
