"""The Capacity page in a real browser: Debian Chromium (Playwright) and the studio on its own offline engine,
inside a loopback-only network namespace (tests/browser_support.py).

The scenario runs a two-level voice sweep from the page, waits for its report, and asks the browser what it
drew: two Vega-Lite charts with marks in them, the SLO line, the figures labelled as this machine's; then it
overlays a report saved earlier (a hand-made "g6" sweep in the same history) and sees both in the charts.
"""

from __future__ import annotations

import json
import time

from bench.page_waits import choose, poll

SCREENSHOT = "/tmp/omni-studio-capacity-browser.png"
SAVED_TITLE = "g6 reference"

# What Vega drew: each chart's size, and the marks of its scene graph (the `view` vega-embed keeps on the
# element is not reachable, so the rendered SVG/canvas and the DOM text are read instead).
_CHARTS = """
() => Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]')).map(el => {
  const svg = el.querySelector('svg.marks, svg');
  const canvas = el.querySelector('canvas');
  const box = el.getBoundingClientRect();
  return {w: Math.round(box.width), h: Math.round(box.height), svg: !!svg, canvas: !!canvas,
          canvasSize: canvas ? [canvas.width, canvas.height] : null,
          paths: svg ? svg.querySelectorAll('path').length : null,
          text: Array.from(el.querySelectorAll('svg text')).map(t => t.textContent).join(' | '),
          aria: el.querySelector('[aria-label]') ? el.querySelector('[aria-label]').getAttribute('aria-label') : null};
})
"""


def _drawn(charts: list[dict], *labels: str) -> bool:
    """Both charts laid out and drawn by Vega (their SVG text, or a canvas with pixels), each naming `labels`."""
    return len(charts) >= 2 and all(
        c["w"] > 100 and c["h"] > 100 and (c["text"] or (c["canvas"] and c["canvasSize"][0] > 0))
        and all(label in c["text"] for label in labels) for c in charts)


def scenario(studio) -> dict:
    from playwright.sync_api import expect

    page = studio.page
    out: dict = {}
    studio.goto("capacity")
    levels = page.get_by_role("textbox", name="Concurrency levels")
    expect(levels).to_be_visible(timeout=90_000)  # the backend (offline engine) is up
    for box, value in ((levels, "1,2"), (page.get_by_label("Requests per level"), "2"),
                       (page.get_by_role("textbox", name="SLO (p95, with its unit)", exact=True), "ttfa 60s")):
        box.fill(value)
        with studio.rerun(f"the rerun that takes {value!r}"):
            box.press("Enter")
    text = page.get_by_label("Text each session speaks")
    text.fill("Hello there. A short load test.")
    with studio.rerun("the rerun that takes the text"):
        text.press("Tab")  # a text area takes its value when it loses focus
    t0 = time.monotonic()
    page.get_by_role("button", name="Run the sweep").click()
    seen = {"progress": False}

    def report_shown() -> bool:
        seen["progress"] = seen["progress"] or page.locator('[data-testid="stProgress"]').count() > 0
        return page.get_by_text("Figures of this machine").count() > 0  # the new report (the saved one is a g6's)
    poll(report_shown, bool, 180, step=0.1, what="the sweep's report ('Figures of this machine')")
    out["seen_progress"] = seen["progress"]
    out["sweep_s"] = round(time.monotonic() - t0, 2)  # for information: load decides it
    out["charts"] = poll(lambda: page.evaluate(_CHARTS), lambda c: _drawn(c, "this machine"), 60,
                         what="two charts drawn by Vega, each with this machine's series")
    studio.settled("the script run that drew the report")  # its figures and text whole, not half redrawn
    out["metrics"] = page.locator('[data-testid="stMetric"]').all_inner_texts()
    out["body"] = page.inner_text("body")[:6000]
    page.set_viewport_size({"width": 1400, "height": 1800})
    page.screenshot(path=SCREENSHOT, full_page=True)

    overlay = page.locator('[data-testid="stSelectbox"]').filter(has_text="Overlay another report")
    choose(page, overlay, SAVED_TITLE)
    poll(lambda: page.locator('[data-testid="stMetric"]').count(), lambda n: n >= 6, 60,
         what="both reports' figures (6 metrics)")
    out["overlay_charts"] = poll(lambda: page.evaluate(_CHARTS), lambda c: _drawn(c, "this machine", "g6"), 60,
                                 what="two charts drawn by Vega with both reports' series (this machine's, the g6's)")
    studio.settled("the script run that drew both reports")
    out["overlay_metrics"] = page.locator('[data-testid="stMetric"]').all_inner_texts()
    out["overlay_body"] = page.inner_text("body")[:8000]
    page.screenshot(path=SCREENSHOT.replace(".png", "-overlay.png"), full_page=True)
    return out


def _saved_report():
    from services.load import LevelReport, LoadReport, Sample, Slo

    levels = [LevelReport("voice", c, 2, tuple(Sample(i, 0.0, 1.0, True, ttfa_ms=90.0 * c, audio_s=1.0, bytes=48000,
                                                      rtf=0.2) for i in range(2))) for c in (1, 2)]
    return LoadReport("voice", "sagemaker", "SageMaker endpoint v (us-east-1)", levels, slo=Slo("ttfa_ms", 60000),
                      instance_type="ml.g6.xlarge", usd_per_hour=1.1267, price_source="table", title=SAVED_TITLE,
                      created_at=time.time() - 3600)


def test_capacity_sweep_charts_in_chromium(tmp_path) -> None:
    from services.history import History
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    saved = _saved_report()
    History(tmp_path / "data").load_reports.save(saved.to_dict())
    r = run_browser_scenario("tests.test_browser_capacity:scenario", timeout=480,
                             env={"OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_CONFIG": ""})
    print(json.dumps({k: r[k] for k in ("seen_progress", "sweep_s", "charts", "metrics")}, indent=1))
    body = r["body"]
    assert "this machine" in body and "not a GPU" in body
    assert any(m.startswith("Highest concurrency within the SLO") and m.rstrip().endswith("2") for m in r["metrics"])
    charts = r["charts"]
    assert len(charts) == 2 and all(c["w"] > 100 and c["h"] > 100 for c in charts)
    assert all(c["svg"] or (c["canvas"] and c["canvasSize"][0] > 0) for c in charts)  # Vega drew them
    latency, throughput = (c["text"] for c in charts)  # the SVG's own text: axes, the SLO line, the legend
    assert "first audio (ms), p50 and p95" in latency and "SLO: p95 first audio ≤ 60000 ms" in latency
    assert "p50" in latency and "p95" in latency and "audio seconds per second" in throughput
    new_label = next(x for x in latency.split(" | ") if "this machine" in x)
    assert new_label in throughput
    reports = History(tmp_path / "data").load_reports.list()
    assert len(reports) == 2 and reports[0].modality == "voice" and reports[0].id != saved.id  # the new one kept
    assert len(r["overlay_metrics"]) == 6  # both reports' figures
    assert SAVED_TITLE in r["overlay_body"]
    assert len(r["overlay_charts"]) == 2
    for chart in r["overlay_charts"]:  # both reports in each chart's legend
        assert new_label in chart["text"] and saved.label() in chart["text"]
