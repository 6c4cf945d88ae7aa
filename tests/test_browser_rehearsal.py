"""The rehearsal in a real browser: `scripts/rehearse.py --no-deploy` (emulated SageMaker + the studio on
its SageMaker backend) and Debian Chromium, inside a loopback-only network namespace.

A demo engineer's dry run, start to finish: deploy the three endpoints from the Endpoints page, see them
InService with cost and a passing smoke test and the banner on every page, speak (HTTP/2 bidi, heard
through WebRTC), generate an image (invoke_endpoint), turn it into a video (async inference through S3),
delete everything after a confirmation that names it — and the rehearsal's own listing at exit shows
zero endpoints, configs and models.
"""

from __future__ import annotations

import re

import json
import time

from bench.page_waits import poll

SCREENSHOT_ENDPOINTS = "/tmp/omni-studio-rehearsal-endpoints.png"
SCREENSHOT_END = "/tmp/omni-studio-rehearsal-deleted.png"


def _main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    page = studio.page
    out: dict = {}
    t0 = time.monotonic()

    # 1. Deploy from the Endpoints page.
    studio.open_page("Endpoints", "endpoints")
    page.get_by_text("No deployment yet").wait_for(timeout=60_000)
    out["deploy_command"] = page.locator("code").filter(has_text="python -m infra deploy").first.inner_text()
    page.get_by_role("button", name="Deploy", exact=True).click()
    # The outcome line is drawn after the title says done: wait for both (or a failure), not the title alone.
    text = poll(lambda: _main_text(page), lambda t: ("deploy — done" in t and "smoke test passed" in t)
                or "deploy — failed" in t, 120, what="the deploy's outcome")
    out["after_deploy"] = text
    out["deploy_s"] = round(time.monotonic() - t0, 1)
    page.screenshot(path=SCREENSHOT_ENDPOINTS, full_page=True)

    # 2. The banner shows on another page.
    studio.open_page("Image", "image")
    banner = page.get_by_text("studio endpoints running").first
    banner.wait_for(timeout=30_000)
    out["banner"] = banner.inner_text()

    # 3. Speak: HTTP/2 bidi to the voice endpoint, played through WebRTC.
    studio.open_page("Voice", "voice")
    page.get_by_role("button", name="Speak").wait_for(timeout=60_000)
    player = studio.frame("webrtc")
    player.get_by_role("button", name="Connect player").click()
    poll(lambda: studio.stats(player), lambda s: s and sum(x["packetsReceived"] for x in s) > 0, 20)
    before = sum(x["totalAudioEnergy"] for x in studio.stats(player))
    box = page.get_by_role("textbox", name="Text")
    box.fill("Hello from the rehearsal. This speech crossed an emulated SageMaker endpoint.")
    with studio.rerun("the rerun that takes the text"):
        box.press("Control+Enter")
    page.get_by_role("button", name="Speak").click()
    poll(lambda: sum(x["totalAudioEnergy"] for x in studio.stats(player)), lambda e: e > before + 1e-3, 30)
    page.get_by_text("Last utterance").wait_for(timeout=30_000)
    out["voice_text"] = _main_text(page)[-1500:]

    # 4. Image, then 5. video from it.
    studio.open_page("Image", "image")
    prompt = page.get_by_role("textbox", name="Prompt", exact=True)
    prompt.wait_for(timeout=30_000)
    prompt.fill("A lighthouse on a cliff at dawn")
    page.get_by_role("textbox", name="Size (WxH)").fill("512x320")
    page.get_by_role("button", name="Generate").click()
    img = page.locator('[data-testid="stImage"] img').first
    img.wait_for(timeout=60_000)
    out["image"] = img.evaluate("i => ({w: i.naturalWidth, h: i.naturalHeight})")
    page.get_by_role("button", name="Use for video").first.click()
    page.wait_for_url("**/video", timeout=15_000)
    motion = page.get_by_role("textbox", name="Motion prompt")
    motion.wait_for(timeout=30_000)
    out["video_form_before"] = {n: page.get_by_label(n, exact=True).input_value() for n in ("FPS", "Steps", "Guidance")}
    motion.fill("The camera slowly pushes in")
    with studio.rerun("the rerun that takes the motion prompt"):
        motion.press("Control+Enter")
    out["video_form_at_generate"] = {n: page.get_by_label(n, exact=True).input_value() for n in ("FPS", "Steps", "Guidance")}
    page.get_by_role("button", name="Generate").click()
    out["video"] = poll(
        lambda: page.evaluate("() => { const v = document.querySelector('[data-testid=\"stMain\"] video');"
                              " return v ? {ready: v.readyState, duration: v.duration} : null; }"),
        lambda v: v is not None and v["ready"] >= 1, 90)
    out["video_text"] = _main_text(page)[-2000:]

    # 6. Delete, after a confirmation that names what goes.
    studio.open_page("Endpoints", "endpoints")
    page.get_by_role("button", name="Delete…").click()
    confirm = page.get_by_role("button", name=re.compile(r"^Yes, delete these \d+$"))
    confirm.wait_for(timeout=30_000)
    out["confirmation"] = _main_text(page)  # the whole list: it names every resource
    confirm.click()
    out["after_delete"] = poll(lambda: _main_text(page), lambda t: "No deployment yet" in t and "delete — done" in t
                              # the outcome line is drawn after the title says done (and a stale panel may linger)
                              and "everything is gone" in t and "delete — running" not in t, 90)
    page.screenshot(path=SCREENSHOT_END, full_page=True)
    out["total_s"] = round(time.monotonic() - t0, 1)
    return out


def test_rehearsal_walk_in_chromium(tmp_path) -> None:
    from bench.browser import REHEARSAL_DIR_ENV, REHEARSAL_REPORT_ENV, SERVER_ENV
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    report = tmp_path / "rehearsal-report.json"
    r = run_browser_scenario("tests.test_browser_rehearsal:scenario", timeout=420,
                             env={SERVER_ENV: "rehearsal", REHEARSAL_REPORT_ENV: str(report),
                                  REHEARSAL_DIR_ENV: str(tmp_path / "rehearsal")})
    print({k: r[k] for k in ("deploy_s", "total_s", "image", "video", "banner", "video_form_before", "video_form_at_generate")})
    assert "python -m infra deploy" in r["deploy_command"]
    after = r["after_deploy"]
    assert "deploy — done" in after and "all endpoints InService, smoke test passed" in after
    assert after.count("InService") >= 3
    assert "3 studio endpoints running" in r["banner"]
    assert "3 studio endpoints running in us-east-1: $" in r["voice_text"] and "/hour" in r["voice_text"]
    assert "Last utterance" in r["voice_text"]
    assert r["image"] == {"w": 512, "h": 320}
    assert r["video"]["ready"] >= 1 and r["video"]["duration"] > 1
    assert "succeeded" in r["video_text"]
    confirmation = r["confirmation"]
    assert re.search(r"This deletes \d+ resources", confirmation) and "endpoint config" in confirmation
    assert "schedule group" in confirmation  # the TTL deploy set up is named too
    assert "everything is gone" in r["after_delete"]
    left = json.loads(report.read_text())  # written by the rehearsal's own teardown, after the browser left
    assert left["clean"] and left["left"] == {"endpoints": [], "endpoint configs": [], "models": [],
                                              "schedule groups": [], "scheduler roles": [], "scalable targets": []}
