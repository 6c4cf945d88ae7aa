"""The Capacity page in a real browser: Debian Chromium (Playwright) and the studio on its own offline engine,
inside a loopback-only network namespace (tests/browser_support.py).

The scenario runs a two-level voice sweep from the page, waits for its report, and asks the browser what it
drew: two Vega-Lite charts with marks in them, the SLO line, the figures labelled as this machine's; then it
overlays a report saved earlier (a hand-made "g6" sweep in the same history) and sees both in the charts.
"""

from __future__ import annotations

import json
import time

from tests.browser_support import poll

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


def _text_input(page, label: str, value: str) -> None:
    box = page.get_by_role("textbox", name=label, exact=True)
    box.fill(value)
    box.press("Enter")


def scenario(studio) -> dict:
    page = studio.page
    out: dict = {}
    studio.goto("capacity")
    levels = page.get_by_role("textbox", name="Concurrency levels")
    levels.wait_for(timeout=60_000)  # the backend (offline engine) is up
    _text_input(page, "Concurrency levels", "1,2")
    requests = page.get_by_label("Requests per level")
    requests.fill("2")
    requests.press("Enter")
    _text_input(page, "SLO (p95, with its unit)", "ttfa 60s")
    page.get_by_label("Text each session speaks").fill("Hello there. A short load test.")
    page.wait_for_timeout(500)
    t0 = time.monotonic()
    page.get_by_role("button", name="Run the sweep").click()
    seen_progress = False
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if page.locator('[data-testid="stProgress"]').count():
            seen_progress = True
        if page.get_by_text("Figures of this machine").count():  # the new report (the saved one is a g6's)
            break
        page.wait_for_timeout(100)
    out["seen_progress"] = seen_progress
    out["sweep_s"] = round(time.monotonic() - t0, 2)
    page.get_by_text("Figures of this machine").first.wait_for(timeout=5_000)
    poll(lambda: page.evaluate(_CHARTS), lambda c: len(c) >= 2 and all(x["w"] > 100 and x["h"] > 100 for x in c),
                  timeout=30)
    page.wait_for_timeout(800)  # let Vega finish drawing
    out["charts"] = page.evaluate(_CHARTS)
    out["metrics"] = page.locator('[data-testid="stMetric"]').all_inner_texts()
    out["body"] = page.inner_text("body")[:6000]
    page.set_viewport_size({"width": 1400, "height": 1800})
    page.screenshot(path=SCREENSHOT, full_page=True)

    overlay = page.locator('[data-testid="stSelectbox"]').filter(has_text="Overlay another report")
    overlay.click()
    page.get_by_role("option").filter(has_text=SAVED_TITLE).first.click()
    poll(lambda: page.locator('[data-testid="stMetric"]').count(), lambda n: n >= 6, timeout=30)
    page.wait_for_timeout(800)
    out["overlay_charts"] = page.evaluate(_CHARTS)
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
    r = run_browser_scenario("tests.test_browser_capacity:scenario", timeout=240,
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
