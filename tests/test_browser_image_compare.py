"""The image page's Compare tab in a real browser: Debian Chromium (Playwright) and the studio on its own
offline engine, inside a loopback-only network namespace (tests/browser_support.py).

The scenario opens Compare, gives two variants different sizes and steps (the same seed) and the second a
price per hour, presses Compare once, and sees both images side by side, each column with its label, its
settings, latency and model time, and a cost per image where the price is known.
"""

from __future__ import annotations

from bench.page_waits import poll

SCREENSHOT = "/tmp/omni-studio-image-compare.png"
PROMPT = "A lighthouse on a cliff at dawn"

# The innermost blocks holding a "Latency" line: one per result column, with its text and its images.
_COLUMNS = """
() => Array.from(document.querySelectorAll('[data-testid="stMain"] [data-testid="stVerticalBlock"]'))
  .filter(b => b.innerText.includes('Latency'))
  .filter(b => !Array.from(b.querySelectorAll('[data-testid="stVerticalBlock"]')).some(i => i.innerText.includes('Latency')))
  .map(b => ({text: b.innerText, left: Math.round(b.getBoundingClientRect().left),
              images: Array.from(b.querySelectorAll('img')).map(i => ({w: i.naturalWidth, h: i.naturalHeight,
                                                                      ok: i.complete}))}))
"""


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    page = studio.page
    out: dict = {}
    page.set_viewport_size({"width": 1400, "height": 1100})
    studio.open_page("Image", "image")
    page.get_by_role("textbox", name="Prompt", exact=True).wait_for(timeout=90_000)  # the engine is up
    page.get_by_role("tab", name="Compare").click()
    prompt = page.get_by_role("textbox", name="Compare prompt")
    prompt.wait_for()
    prompt.fill(PROMPT)
    labels, sizes = page.get_by_role("textbox", name="Label"), page.get_by_role("textbox", name="Size (WxH)")
    seeds, prices = page.get_by_role("textbox", name="Seed"), page.get_by_role("textbox", name="Price per hour (USD)")
    # the default is two variants; a rerun in flight (the prompt's) may be drawing the columns one by one
    out["variant_forms"] = poll(lambda: labels.count(), lambda n: n >= 2, 60, step=0.1, what="two variants' forms")
    for i, (label, size) in enumerate([("4 steps", "512x320"), ("8 steps", "320x320")]):
        labels.nth(i).fill(label)
        sizes.nth(i).fill(size)
        seeds.nth(i).fill("5")
    prices.nth(1).fill("2.5")
    with studio.rerun("the rerun that takes the last variant's price"):
        prices.nth(1).press("Tab")  # the last field's value reaches the app before the click
    page.get_by_role("button", name="Compare", exact=True).click()
    columns = poll(lambda: page.evaluate(_COLUMNS), lambda c: len(c) == 2 and all(
        c_["images"] and all(i["ok"] and i["w"] for i in c_["images"]) for c_ in c), 180,
                   what="both variants' columns with their images loaded")
    out["columns"] = sorted(columns, key=lambda c: c["left"])
    out["errors"] = page.locator('[data-testid="stMain"] [data-testid="stAlertContentError"]').all_inner_texts()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.get_by_text("Latency", exact=False).last.scroll_into_view_if_needed()  # the columns, whole
    page.screenshot(path=SCREENSHOT)
    return out


def test_two_image_variants_side_by_side_in_chromium(tmp_path) -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_image_compare:scenario", timeout=400,
                             env={"OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_CONFIG": ""})
    print(r)
    assert r["variant_forms"] == 2 and not r["errors"], r["errors"]
    left, right = r["columns"]
    assert left["left"] < right["left"]  # side by side, in the variants' order
    assert "4 steps" in left["text"] and "512x320" in left["text"] and "seed 5" in left["text"]
    assert "8 steps" in right["text"] and "320x320" in right["text"] and "seed 5" in right["text"]
    assert [(i["w"], i["h"]) for i in left["images"]] == [(512, 320)]
    assert [(i["w"], i["h"]) for i in right["images"]] == [(320, 320)]
    for column in (left, right):
        assert "Latency" in column["text"] and "model time" in column["text"]
    assert "per image at $2.5000/h" in right["text"]
    assert "cost per image unknown" in left["text"]
