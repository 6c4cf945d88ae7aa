"""The Capacity page with Streamlit's AppTest (the real app.py navigation): a sweep run from the page against the
real offline engine with its progress, charts and figures; bad input and a target that is down refused before any
load; a SageMaker sweep (the local emulator) that waits for a yes after showing its cost; past reports reopened
and two overlaid on the same charts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from services.history import History
from services.load import LevelReport, LoadReport, Sample, Slo
from services.pricing import usd

pytest.register_assert_rewrite("tests.emulator_support")
from tests.conftest import free_port  # noqa: E402
from tests.emulator_support import EmulatorHandle, deploy_endpoint  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
CAPACITY = "pages/capacity.py"


def _open(monkeypatch: pytest.MonkeyPatch, tmp: Path, **env: str) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp / "data"))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp / "no-state.json"))
    monkeypatch.setenv("OMNI_STUDIO_COST_BANNER", "off")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(CAPACITY)
    at.run()
    _ok(at)
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, at.exception[0].message if at.exception else ""


def _until(at: AppTest, done, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out; errors: {[e.value for e in at.error]}"
        time.sleep(0.3)
        at.run()
        _ok(at)


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def _chart_rows(at: AppTest) -> list[list[dict]]:
    """Every chart's data rows: inline in its spec, or (a single chart) as the Arrow table Streamlit sends."""
    import pyarrow as pa

    out = []
    for c in at.get("vega_lite_chart"):
        rows = [v for d in _datasets(json.loads(c.proto.spec)) for v in d["values"]]
        if c.proto.data.data:
            rows += pa.ipc.open_stream(c.proto.data.data).read_all().to_pylist()
        for d in c.proto.datasets:
            rows += pa.ipc.open_stream(d.data.data).read_all().to_pylist()
        out.append(rows)
    return out


def _engine(engine_url: str) -> dict[str, str]:
    return {"OMNI_STUDIO_BACKEND": "server", "OMNI_STUDIO_SERVER_URL": engine_url}


def test_a_sweep_from_the_page_draws_its_charts_and_is_kept(engine_url: str, monkeypatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, **_engine(engine_url))
    assert any("No sweeps yet" in i.value for i in at.info)
    at.text_input(key="cap_levels").input("1,2")
    at.number_input(key="cap_requests").set_value(2)
    at.text_input(key="cap_slo").input("ttfa 600s")  # above any timeout: held on any machine
    at.text_area(key="cap_text").input("Hello there. A short load test.")
    at.text_input(key="cap_title").input("engine voice")
    at.button(key="cap_go").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    _until(at, lambda: any(m.label == "Highest concurrency within the SLO" for m in at.metric))
    assert _metric(at, "Highest concurrency within the SLO") == "2"
    assert any("this machine" in i.value and "not a GPU" in i.value for i in at.info)
    assert _metric(at, "Cost per audio minute") == "—"  # the offline engine has no instance price
    levels = at.dataframe[0].value
    assert "first audio p95 (ms)" in levels.columns and "audio seconds per second" in levels.columns
    assert not [c for c in levels.columns if "_" in c], list(levels.columns)  # no snake_case column names
    assert any("No cost per unit" in c.value for c in at.caption)
    latency, throughput = _charts(at)
    text = json.dumps(latency)
    assert "SLO: p95 first audio" in text and "600000" in text  # the SLO line
    values = next(d["values"] for d in _datasets(latency) if d["values"] and "percentile" in d["values"][0])
    assert sorted((v["concurrency"], v["percentile"]) for v in values) == [(1, "p50"), (1, "p95"), (2, "p50"), (2, "p95")]
    assert all(v["n"] == 2 for v in values)
    saved = History(tmp_path / "data").load_reports.list()
    assert len(saved) == 1 and saved[0].title == "engine voice" and saved[0].modality == "voice"
    report = LoadReport.from_dict(saved[0].report)
    assert [lv.concurrency for lv in report.levels] == [1, 2] and all(lv.ok == 2 for lv in report.levels)
    tp = _chart_rows(at)[1]
    assert [v["value"] for v in tp] == [lv.throughput for lv in report.levels]


def test_a_listen_sweep_from_the_page_holds_the_final_text_slo(engine_url: str, monkeypatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, **_engine(engine_url))
    at.segmented_control(key="cap_modality").set_value("listen").run()
    _ok(at)
    assert at.text_input(key="cap_slo").placeholder == "final 1000ms"
    at.text_input(key="cap_levels").input("1")
    at.number_input(key="cap_requests").set_value(1)
    at.text_input(key="cap_listen_text").input("Please call me back tonight.")
    at.text_input(key="cap_price").input("1.5")
    at.button(key="cap_go").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    _until(at, lambda: any(m.label == "Cost per audio hour" for m in at.metric))
    saved = History(tmp_path / "data").load_reports.list()
    assert len(saved) == 1 and saved[0].modality == "listen"
    report = LoadReport.from_dict(saved[0].report)
    assert report.slo is not None and report.slo.label() == "p95 final text ≤ 1000 ms"
    assert report.work["text"] == "Please call me back tonight." and report.levels[0].ok == 1
    levels = at.dataframe[0].value
    assert {"final text p95 (ms)", "first partial p95 (ms)", "audio seconds per second"} <= set(levels.columns)
    latency, _ = _charts(at)
    assert "SLO: p95 final text" in json.dumps(latency)  # the chart puts the SLO's figure first
    cost = report.cost()["usd_per_audio_hour"]
    held = report.max_concurrency_within_slo == 1
    assert _metric(at, "Cost per audio hour") == (usd(cost, "unit") if held else "—")
    if held:  # $/h over audio hours transcribed per hour
        assert cost == pytest.approx(1.5 / report.levels[0].throughput, rel=1e-3)


def _datasets(spec: dict) -> list[dict]:
    """Every inline data set of a (layered) vega-lite spec."""
    out = []
    if isinstance(spec.get("data"), dict) and "values" in spec["data"]:
        out.append(spec["data"])
    for layer in spec.get("layer", []):
        out += _datasets(layer)
    for d in (spec.get("datasets") or {}).values():
        out.append({"values": d})
    return out


@pytest.mark.parametrize("field, value, words", [
    ("cap_levels", "2,1", "in '2,1' 1 follows 2"),
    ("cap_slo", "300", "has no unit: write 300ms or 300s"),
    ("cap_levels", "1,16", "fewer than the highest concurrency level 16"),
])
def test_bad_input_is_named_and_nothing_is_sent(engine_url: str, monkeypatch, tmp_path: Path, field: str, value: str,
                                                words: str) -> None:
    at = _open(monkeypatch, tmp_path, **_engine(engine_url))
    at.text_input(key=field).input(value)
    at.button(key="cap_go").click().run()
    _ok(at)
    assert any(words in e.value for e in at.error), [e.value for e in at.error]
    assert at.text_input(key=field).value == value  # what was typed stays
    assert not History(tmp_path / "data").load_reports.list()


def test_a_target_that_is_down_is_said_before_any_load(monkeypatch, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    at = _open(monkeypatch, tmp_path, OMNI_STUDIO_BACKEND="server", OMNI_STUDIO_SERVER_URL=dead)
    at.button(key="cap_go").click().run()
    _ok(at)
    assert any("is down" in e.value and "no load was sent" in e.value for e in at.error), [e.value for e in at.error]
    assert not History(tmp_path / "data").load_reports.list()


def _report(title: str, instance: str, ms: float, usd: float) -> LoadReport:
    levels = [LevelReport("voice", c, c, tuple(Sample(i, 0.0, 1.0, True, ttfa_ms=ms * c, audio_s=1.0, bytes=48000)
                                                 for i in range(c))) for c in (1, 2)]
    return LoadReport("voice", "sagemaker", f"SageMaker endpoint v ({instance})", levels, slo=Slo("ttfa_ms", 300),
                      instance_type=instance, usd_per_hour=usd, title=title)


def test_past_reports_reopen_and_two_overlay(monkeypatch, tmp_path: Path, engine_url: str) -> None:
    history = History(tmp_path / "data")
    g6, g6e = _report("g6", "ml.g6.xlarge", 100, 1.1267), _report("g6e", "ml.g6e.xlarge", 80, 2.61)
    for r in (g6, g6e):
        history.load_reports.save(r.to_dict())
    at = _open(monkeypatch, tmp_path, **_engine(engine_url))
    assert at.selectbox(key="cap_pick").value == g6e.id  # the newest first
    at.selectbox(key="cap_pick").set_value(g6.id).run()
    _ok(at)
    assert _metric(at, "Highest concurrency within the SLO") == "2"
    # $1.1267/h over 2 audio s/s at concurrency 2 = 120 audio minutes an hour: $0.0093892 (4 significant digits)
    assert _metric(at, "Cost per audio minute") == "$0.009389"
    at.selectbox(key="cap_overlay").set_value(g6e.id).run()
    _ok(at)
    for rows in _chart_rows(at):  # both charts carry both reports
        assert {v["report"] for v in rows if "report" in v} == {g6.label(), g6e.label()}
    assert len(at.metric) == 6  # both reports' figures


def test_a_sagemaker_sweep_waits_for_a_yes_after_showing_its_cost(emulator_env: EmulatorHandle, monkeypatch,
                                                                  tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "cap-image", environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    at = _open(monkeypatch, tmp_path, OMNI_STUDIO_BACKEND="sagemaker", OMNI_STUDIO_REGION=emulator_env.region,
               OMNI_STUDIO_IMAGE_ENDPOINT="cap-image")
    at.segmented_control(key="cap_modality").set_value("image").run()
    at.text_input(key="cap_levels").input("1,2")
    at.number_input(key="cap_requests").set_value(2)
    at.text_input(key="cap_size").input("128x96")
    at.button(key="cap_go").click().run()
    _ok(at)
    warning = " ".join(w.value for w in at.warning).replace("\\", "")  # Markdown escapes off
    assert "The sweep sends 4 image generations" in warning and "ml.g6.xlarge" in warning and "1.1267/h" in warning
    assert "this is the local SageMaker emulator: nothing is billed" in warning
    assert not History(tmp_path / "data").load_reports.list()  # nothing runs before the yes
    at.button(key="cap_confirm").click().run()
    _ok(at)
    # the sweep's cost is labelled as the emulator's where it is shown (the metric, the report's label)
    _until(at, lambda: any(m.label == "Cost per image (emulated)" for m in at.metric))
    assert _metric(at, "Price per hour") == "$1.1267" and _metric(at, "Cost per image (emulated)") != "—"
    saved_report = LoadReport.from_dict(History(tmp_path / "data").load_reports.list()[0].report)
    assert _metric(at, "Cost per image (emulated)") == usd(saved_report.cost()["usd_per_image"], "unit")
    # beside the dollars: they price an instance that did not run the load
    emulated = [w.value.replace("\\", "") for w in at.warning if w.value.startswith("Emulated")]
    assert emulated and "local SageMaker emulator" in emulated[0] and "ml.g6.xlarge" in emulated[0], emulated
    saved = History(tmp_path / "data").load_reports.list()
    assert len(saved) == 1 and saved[0].instance_type == "ml.g6.xlarge" and saved[0].backend == "sagemaker"
