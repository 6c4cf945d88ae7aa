"""The image and video studios in a real browser: Debian Chromium (Playwright) and the studio on its own
offline engine, inside a loopback-only network namespace (tests/browser_support.py).

The scenario generates an image, sees it in the gallery with its preview label, presses "Use for video",
lands on the video page with that image as the reference, generates a video, and then asks the browser's
own HTMLVideoElement: it has loaded (readyState), its duration is frames / fps, and currentTime advances
while it plays. Then it makes a clip of that video from the job list (a written narration, a soundtrack prompt):
the browser decodes the clip's audio, and the kept clip's video packets are the source video's.
"""

from __future__ import annotations

import io
import time

import av

from services.history import History
from bench.page_waits import poll

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


_CLIP_AUDIO = """
async () => {
  const v = document.querySelector('[data-testid="stMain"] video');
  if (!v) return null;
  v.muted = false; v.currentTime = 0;
  try { await v.play(); } catch (e) { return {audio: 0, error: String(e)}; }
  await new Promise(r => setTimeout(r, 800));
  return {audio: v.webkitAudioDecodedByteCount || 0, duration: v.duration};
}
"""


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    from playwright.sync_api import expect

    page = studio.page
    out: dict = {}
    t0 = time.monotonic()
    studio.open_page("Image", "image")
    prompt = page.get_by_role("textbox", name="Prompt", exact=True)
    prompt.wait_for(timeout=90_000)  # the backend (offline engine) is up
    prompt.fill("A lighthouse on a cliff at dawn")
    size = page.get_by_role("textbox", name="Size (WxH)")
    size.fill("768x512")
    page.get_by_role("textbox", name="Seed").fill("42")
    page.get_by_role("button", name="Generate").click()
    page.get_by_text("Offline preview", exact=False).first.wait_for(timeout=90_000)
    gallery_img = page.locator('[data-testid="stImage"] img').first
    gallery_img.wait_for()
    out["gallery_image"] = gallery_img.evaluate("img => ({w: img.naturalWidth, h: img.naturalHeight, ok: img.complete})")
    out["gallery_caption"] = page.get_by_text("768x512 · 4 steps · seed 42").first.inner_text()
    out["image_s"] = round(time.monotonic() - t0, 2)
    page.set_viewport_size({"width": 1400, "height": 1800})  # tall enough to see the gallery tile whole
    page.screenshot(path=SCREENSHOT_IMAGE)
    page.set_viewport_size({"width": 1400, "height": 1000})

    page.get_by_role("button", name="Use for video").first.click()
    page.wait_for_url("**/video")
    motion = page.get_by_role("textbox", name="Motion prompt")
    motion.wait_for()
    out["form_on_arrival"] = []  # sampled while the page settles: it must never show (and send) the minimums

    def sample_until_settled() -> bool:
        out["form_on_arrival"].append({n: page.get_by_label(n, exact=True).input_value() for n in ("FPS", "Steps")})
        return len(out["form_on_arrival"]) >= 3 and studio.is_settled()
    poll(sample_until_settled, bool, 90, step=0.06, what="the video page's script run over after 'Use for video'")
    picker = page.locator('[data-testid="stSelectbox"]').filter(has_text="Gallery image")
    out["reference_picked"] = picker.evaluate(  # the shown choice (text, or an input's value)
        "el => el.innerText + ' ' + Array.from(el.querySelectorAll('input')).map(i => i.value).join(' ')")
    out["reference_shown"] = page.locator('[data-testid="stImage"] img').count() >= 1
    motion.fill("The camera slowly pushes in while the waves roll in")
    with studio.rerun("the rerun that takes the motion prompt"):
        motion.press("Control+Enter")
    t1 = time.monotonic()
    page.get_by_role("button", name="Generate").click()
    state = poll(lambda: page.evaluate(_VIDEO_STATE), lambda s: s is not None and s["readyState"] >= 1, 180,
                 what="the video loaded in its player (readyState >= 1)")
    out["video_s"] = round(time.monotonic() - t1, 2)  # for information: load decides it
    out["loaded"] = state
    start = page.evaluate(_PLAY_FROM_START)
    # It plays: its own clock (currentTime) advances, read until it has or the video reports an error.
    playing = poll(lambda: page.evaluate(_VIDEO_STATE),
                   lambda v: v["error"] is not None or v["currentTime"] > start + 0.3 or v["ended"], 60,
                   what="the video's currentTime to advance 0.3 s past where play began")
    out["play"] = {"start": start, "playing": playing}
    main = page.locator('[data-testid="stMain"]')
    expect(main).to_contain_text("17 frames @ 8 fps · 30 steps")
    expect(main).to_contain_text("succeeded")
    out["jobs_text"] = page.locator('[data-testid="stMain"]').inner_text()[-2500:]
    page.set_viewport_size({"width": 1400, "height": 2000})
    page.screenshot(path=SCREENSHOT_VIDEO)

    # "Make a clip" from the video in the job list: a narration the voice speaks, a soundtrack the sound route makes
    with studio.rerun("the rerun that opens the clip panel"):
        page.get_by_role("button", name="Make a clip").first.click()
    for group in ("Narration", "Soundtrack"):
        with studio.rerun(f"the rerun that shows the {group.lower()}'s field"):
            page.get_by_role("radiogroup", name=group).get_by_text("Write it").click()
    text = page.get_by_role("textbox", name="Narration text")
    text.fill("The waves roll in at dawn.")
    with studio.rerun("the rerun that takes the narration"):
        text.press("Control+Enter")
    sound = page.get_by_role("textbox", name="Soundtrack prompt")
    sound.fill("calm strings")
    with studio.rerun("the rerun that takes the soundtrack prompt"):
        sound.press("Enter")
    page.get_by_role("button", name="Make clip").click()
    page.get_by_text("🎞 Clip of", exact=False).first.wait_for(timeout=120_000)
    out["clip_state"] = poll(lambda: page.evaluate(_CLIP_AUDIO), lambda s: s is not None and s["audio"] > 0, 60,
                             what="the clip's audio decoded by the browser")
    out["clip_text"] = page.locator('[data-testid="stMain"]').inner_text()
    return out


def test_image_to_video_in_chromium(tmp_path) -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_media:scenario", timeout=400,
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
    after = r["play"]["playing"]
    assert after["error"] is None
    assert after["currentTime"] > r["play"]["start"] + 0.3  # it plays: time advances
    assert "succeeded" in r["jobs_text"] and "17 frames @ 8 fps · 30 steps" in r["jobs_text"]
    assert all(v == {"FPS": "8", "Steps": "30"} for v in r["form_on_arrival"]), r["form_on_arrival"]
    # the clip: kept as a video beside the one it was made from, its frames that video's, with an AAC track
    assert "calm strings" in r["clip_text"] and r["clip_state"]["audio"] > 0, r["clip_state"]
    history = History(tmp_path / "data")
    clip = next(j for j in history.jobs.list("video") if j.meta.get("clip"))
    source = history.jobs.get(clip.meta["clip"]["of"])
    assert video_packets(clip.read("video.mp4")) == video_packets(source.read("video.mp4"))
    with av.open(io.BytesIO(clip.read("video.mp4"))) as c:
        assert (c.streams.audio[0].codec_context.name, c.streams.audio[0].rate) == ("aac", 48000)
    assert {"narration.wav", "soundtrack.wav"} <= set(clip.inputs or [])


def video_packets(mp4: bytes) -> list[bytes]:
    with av.open(io.BytesIO(mp4)) as c:
        return [bytes(p) for p in c.demux(c.streams.video[0]) if p.size]
