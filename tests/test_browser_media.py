"""The image and video studios in a real browser: Debian Chromium (Playwright) and the studio on its own
offline engine, inside a loopback-only network namespace (tests/browser_support.py).

The scenario generates an image, sees it in the gallery with its preview label, presses "Use for video",
lands on the video page with that image as the reference, generates a video, and then asks the browser's
own HTMLVideoElement: it has loaded (readyState), its duration is frames / fps, and currentTime advances
while it plays.
"""

from __future__ import annotations

import time

from tests.browser_support import poll

SCREENSHOT_IMAGE = "/tmp/omni-studio-image-browser.png"
SCREENSHOT_VIDEO = "/tmp/omni-studio-video-browser.png"
FRAMES, FPS = 17, 8

_VIDEO_STATE = """
() => {
  const v = document.querySelector('[data-testid="stMain"] video');
  if (!v) return null;
  return {readyState: v.readyState, duration: v.duration, currentTime: v.currentTime, paused: v.paused,
          ended: v.ended, error: v.error ? v.error.code + ': ' + v.error.message : null,
          width: v.videoWidth, height: v.videoHeight};
}
"""

_PLAY_FROM_START = """
async () => {
  const v = document.querySelector('[data-testid="stMain"] video');
  v.currentTime = 0;
  await v.play();
  return v.currentTime;
}
"""


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    page = studio.page
    out: dict = {}
    t0 = time.monotonic()
    studio.open_page("Image", "image")
    prompt = page.get_by_role("textbox", name="Prompt", exact=True)
    prompt.wait_for(timeout=60_000)  # the backend (offline engine) is up
    prompt.fill("A lighthouse on a cliff at dawn")
    size = page.get_by_role("textbox", name="Size (WxH)")
    size.fill("768x512")
    page.get_by_role("textbox", name="Seed").fill("42")
    page.get_by_role("button", name="Generate").click()
    page.get_by_text("Offline preview", exact=False).first.wait_for(timeout=30_000)
    gallery_img = page.locator('[data-testid="stImage"] img').first
    gallery_img.wait_for(timeout=10_000)
    out["gallery_image"] = gallery_img.evaluate("img => ({w: img.naturalWidth, h: img.naturalHeight, ok: img.complete})")
    out["gallery_caption"] = page.get_by_text("768x512 · 4 steps · seed 42").first.inner_text()
    out["image_s"] = round(time.monotonic() - t0, 2)
    page.set_viewport_size({"width": 1400, "height": 1800})  # tall enough to see the gallery tile whole
    page.screenshot(path=SCREENSHOT_IMAGE)
    page.set_viewport_size({"width": 1400, "height": 1000})

    page.get_by_role("button", name="Use for video").first.click()
    page.wait_for_url("**/video", timeout=15_000)
    motion = page.get_by_role("textbox", name="Motion prompt")
    motion.wait_for(timeout=30_000)
    out["form_on_arrival"] = []  # sampled while the page settles: it must never show (and send) the minimums
    for _ in range(8):
        out["form_on_arrival"].append({n: page.get_by_label(n, exact=True).input_value() for n in ("FPS", "Steps")})
        page.wait_for_timeout(60)
    picker = page.locator('[data-testid="stSelectbox"]').filter(has_text="Gallery image")
    out["reference_picked"] = picker.evaluate(  # the shown choice (text, or an input's value)
        "el => el.innerText + ' ' + Array.from(el.querySelectorAll('input')).map(i => i.value).join(' ')")
    out["reference_shown"] = page.locator('[data-testid="stImage"] img').count() >= 1
    motion.fill("The camera slowly pushes in while the waves roll in")
    motion.press("Control+Enter")
    page.wait_for_timeout(300)
    t1 = time.monotonic()
    page.get_by_role("button", name="Generate").click()
    state = poll(lambda: page.evaluate(_VIDEO_STATE), lambda s: s is not None and s["readyState"] >= 1, 60)
    out["video_s"] = round(time.monotonic() - t1, 2)
    out["loaded"] = state
    start = page.evaluate(_PLAY_FROM_START)
    page.wait_for_timeout(800)
    playing = page.evaluate(_VIDEO_STATE)
    out["play"] = {"start": start, "after_800ms": playing}
    out["jobs_text"] = page.locator('[data-testid="stMain"]').inner_text()[-2500:]
    page.set_viewport_size({"width": 1400, "height": 2000})
    page.wait_for_timeout(300)
    page.screenshot(path=SCREENSHOT_VIDEO)
    return out


def test_image_to_video_in_chromium(tmp_path) -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_media:scenario", timeout=150,
                             env={"OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"),
                                  "OMNI_STUDIO_CONFIG": ""})
    print({k: r[k] for k in ("image_s", "video_s", "loaded", "play", "gallery_image")})
    assert r["gallery_image"] == {"w": 768, "h": 512, "ok": True}
    assert "768x512 · 4 steps · seed 42" in r["gallery_caption"]
    assert "lighthouse" in r["reference_picked"].lower() and r["reference_shown"]
    loaded = r["loaded"]
    assert loaded["error"] is None
    assert (loaded["width"], loaded["height"]) == (480, 320)
    assert abs(loaded["duration"] - FRAMES / FPS) < 0.2, loaded["duration"]
    after = r["play"]["after_800ms"]
    assert after["error"] is None
    assert after["currentTime"] > r["play"]["start"] + 0.3  # it plays: time advances
    assert "succeeded" in r["jobs_text"] and "17 frames @ 8 fps · 30 steps" in r["jobs_text"]
    assert all(v == {"FPS": "8", "Steps": "30"} for v in r["form_on_arrival"]), r["form_on_arrival"]
