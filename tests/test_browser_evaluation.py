"""A two-variant voice evaluation in a real browser: Debian Chromium (Playwright) and the studio on its own
offline engine, inside a loopback-only network namespace (tests/browser_support.py).

The scenario defines two voice variants on two prompts, runs them, rates both pairs blind (one by its button,
one by its keyboard shortcut) with the variants' labels nowhere on the page, reveals the results and
downloads the ZIP export.
"""

from __future__ import annotations

import io
import re
import zipfile

from bench.page_waits import poll

SCREENSHOT_REVIEW = "/tmp/omni-studio-eval-review.png"
SCREENSHOT_RESULTS = "/tmp/omni-studio-eval-results.png"
LABELS = ("clause-split", "sentence-split")


def _main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    try:
        return _scenario(studio)
    except Exception:
        studio.page.screenshot(path=SCREENSHOT_REVIEW)  # what the page showed when it went wrong
        raise


def _scenario(studio) -> dict:
    from playwright.sync_api import expect

    page = studio.page
    out: dict = {}
    page.set_viewport_size({"width": 1400, "height": 1100})
    studio.open_page("Evaluations", "evaluations")
    expect(page.get_by_role("textbox", name="Name", exact=True)).to_be_visible(timeout=90_000)
    page.get_by_role("textbox", name="Name", exact=True).fill("split granularity")
    with studio.rerun("the form redrawn for voice"):
        page.locator('[data-testid="stButtonGroup"]').filter(has_text="video").get_by_text("voice", exact=True).click()
    page.get_by_role("textbox", name="Prompts, one per line").fill("Hello there, and welcome.\nThe ship sails at dawn.")
    labels, settings = page.get_by_role("textbox", name="Label"), page.get_by_role("textbox", name="Settings (name = value)")
    for i, label in enumerate(LABELS):
        labels.nth(i).fill(label)
    settings.nth(1).fill('split = "sentence"')
    with studio.rerun("the rerun that takes the last variant's settings"):
        settings.nth(1).press("Tab")
    page.get_by_role("button", name="Create and run").click()  # one press: made, and its run started
    poll(lambda: _main_text(page), lambda t: "4 of 4 items made" in t, 240, what="'4 of 4 items made'")
    page.get_by_role("textbox", name="Your name").fill("ana")
    with studio.rerun("the rerun that takes the rater's name"):
        page.get_by_role("textbox", name="Your name").press("Enter")
    page.get_by_role("button", name="Start rating").click()
    expect(page.get_by_role("button", name="is better").first).to_be_visible()
    out["audio_players"] = poll(lambda: page.locator('[data-testid="stMain"] audio').count(), lambda n: n == 2, 60,
                                what="the pair's two audio players")
    text = _main_text(page)
    out["labels_hidden"] = not any(label in text for label in LABELS)
    page.screenshot(path=SCREENSHOT_REVIEW)
    with studio.rerun("the second pair drawn after the first was rated"):
        page.get_by_role("button", name="1 is better").click()
    page.locator("body").press("2")  # "2 is better" by its shortcut
    poll(lambda: _main_text(page), lambda t: "every pair is rated" in t, 60, what="'every pair is rated'")
    with studio.rerun("the results revealed"):
        page.get_by_role("button", name="Reveal the results").click()
    expect(page.locator('[data-testid="stDataFrame"]').first).to_be_visible()
    out["results_text"] = _main_text(page)
    # the results table is not cut off on the right: its grid scrolls no wider than it is shown
    out["table_width"] = page.locator('[data-testid="stDataFrame"]').first.evaluate(
        "e => { const s = e.querySelector('.dvn-scroller'); return s && [s.scrollWidth, s.clientWidth]; }")
    page.get_by_text("Pairwise", exact=False).scroll_into_view_if_needed()
    page.screenshot(path=SCREENSHOT_RESULTS)
    with page.expect_download(timeout=90_000) as download:
        page.get_by_role("button", name="Export ZIP").click()
    out["zip_names"] = zipfile.ZipFile(io.BytesIO(open(download.value.path(), "rb").read())).namelist()
    return out


def test_voice_evaluation_rated_blind_revealed_and_exported_in_chromium(tmp_path) -> None:
    from services.eval.store import EvalStore
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    data = tmp_path / "data"
    r = run_browser_scenario("tests.test_browser_evaluation:scenario", timeout=300,
                             env={"OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": ""})
    print({k: v for k, v in r.items() if k != "results_text"})
    assert r["audio_players"] == 2 and r["labels_hidden"]
    assert all(label in r["results_text"] for label in LABELS)  # revealed
    assert "no significant difference" in r["results_text"]
    scrolled, shown = r["table_width"]
    assert 0 < scrolled <= shown + 1, r["table_width"]
    store = EvalStore(data)
    (ev,) = store.list()
    assert sorted(x.winner for x in store.ratings(ev["id"])) == ["a", "b"]
    assert {"items.csv", "ratings.csv", "report.html"} <= set(r["zip_names"])
    assert sum(n.endswith(".wav") for n in r["zip_names"]) == 4


def stop_scenario(studio) -> dict:
    """Run an image evaluation of many items, press Stop after the first ones: the run ends, Continue is offered."""
    from playwright.sync_api import expect

    page = studio.page
    out: dict = {}
    page.set_viewport_size({"width": 1400, "height": 1100})
    studio.open_page("Evaluations", "evaluations")
    expect(page.get_by_role("textbox", name="Name", exact=True)).to_be_visible(timeout=90_000)
    studio.settled("the page's first script run to be over")  # the form's defaults (labels A, B) are drawn
    expect(page.get_by_role("textbox", name="Label").first).to_have_value("A")
    page.get_by_role("textbox", name="Name", exact=True).fill("stop me")
    # 200 items: the run goes on off the page, so it must last long enough for the page to show it and be stopped
    page.get_by_role("textbox", name="Prompts, one per line").fill("\n".join(f"prompt {n}" for n in range(100)))
    settings = page.get_by_role("textbox", name="Settings (name = value)")
    settings.nth(0).fill('size = "256x256"')
    settings.nth(1).fill('size = "256x256"\nsteps = 8')
    with studio.rerun("the rerun that takes the last variant's settings"):
        settings.nth(1).press("Tab")
    page.get_by_role("button", name="Create and run").click()  # one press: made, and its run started
    # an item made (the run shows as soon as it is claimed, before its first item: a Stop then leaves nothing made)
    poll(lambda: _main_text(page), lambda t: re.search(r"Generating · [1-9]\d* of 200 made", t) is not None, 120,
         what="the run's progress with an item made ('Generating · N of 200 made')")
    page.get_by_role("button", name="Stop").click()
    # the run over and the page redrawn whole (while Streamlit swaps the run's progress for its end, a moment shows
    # one without the other): Continue offered, the last run's line there, no Stop left from the last refresh
    out["after_stop"] = poll(lambda: _main_text(page), lambda t: "Continue (only what is missing)" in t
                             and "Last run, ended" in t and "Stop (Continue" not in t, 120,
                             what="'Continue (only what is missing)' and the last run's line after Stop")
    return out


def test_stop_ends_an_evaluation_run_and_continue_is_offered_in_chromium(tmp_path) -> None:
    from services.eval.store import EvalStore
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    data = tmp_path / "data"
    r = run_browser_scenario("tests.test_browser_evaluation:stop_scenario", timeout=300,
                             env={"OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": ""})
    store = EvalStore(data)
    (ev,) = store.list()
    assert ev["pending"] > 0 and ev["succeeded"] > 0, ev  # stopped part way, what was made is kept
    shown = int(re.search(r"(\d+) of 200 items made", r["after_stop"]).group(1))
    assert shown == ev["succeeded"]  # the run ended (the item in flight at the click landed) before Continue showed
    assert "stopped" in r["after_stop"]  # the last run's line says so
