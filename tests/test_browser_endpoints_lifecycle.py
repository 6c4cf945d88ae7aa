"""The Endpoints page's lifecycle in a real browser: `scripts/rehearse.py --no-deploy` (emulated SageMaker, the
studio on its SageMaker backend) and Debian Chromium, inside a loopback-only network namespace.

Deploy from the page with a 2 h TTL and the video endpoint scaling to zero; the status table shows each
endpoint's time left ("deletes itself in …") and its current/desired instances, the banner the TTL; Extend
(+4 h from now) makes the time left grow; Upgrade one endpoint to another image tag changes the version in
use, Roll back returns it; delete everything — and the rehearsal's own listing at exit shows nothing left.
"""

from __future__ import annotations

import json
import re

from bench.page_waits import poll

SHOTS = {k: f"/tmp/omni-studio-lifecycle-{k}.png" for k in ("deployed", "extended", "upgraded", "rolled-back", "deleted")}
NEW_TAG = "omni-sagemaker-cuda-v1.7"

# The status table is a canvas (glide data grid); its accessible DOM table carries the visible cells' text.
_TABLE = """() => {
  const grid = document.querySelector('[data-testid="stMain"] [data-testid="stDataFrame"] table');
  if (!grid) return null;
  const rows = [...grid.querySelectorAll('tr')].map(tr => [...tr.querySelectorAll('th, td')].map(c => c.innerText.trim()));
  return rows.filter(r => r.length);
}"""


def _main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def _ended(page, kind: str, timeout: float) -> str:
    """The page once `kind`'s action shows done or failed and has finished drawing its panel: Streamlit draws
    the title before the outcome line below it, so the text must read the same twice, half a second apart."""
    last = [None]

    def read() -> str:
        text = _main_text(page)
        settled, last[0] = text == last[0], text
        return text if settled else ""

    return poll(read, lambda t: f"{kind} — done" in t or f"{kind} — failed" in t, timeout, step=0.5)


def _table(page) -> list[dict[str, str]] | None:
    """The status table as rows of {column: cell}; None until it is drawn."""
    rows = page.evaluate(_TABLE)
    if not rows or len(rows) < 2:
        return None
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:] if len(r) == len(head)]


def _minutes_left(cell: str) -> int:
    """'deletes itself in 2 h 10 min' -> 130 (days, hours, minutes; 'under a minute' -> 0)."""
    total = 0
    for number, unit in re.findall(r"(\d+) (d|h|min)\b", cell):
        total += int(number) * {"d": 1440, "h": 60, "min": 1}[unit]
    return total


def _ttl_by_role(page) -> dict[str, str] | None:
    table = _table(page)
    if not table or any("time to live" not in r for r in table):
        return None
    return {r["endpoint"]: r["time to live"] for r in table}


def _shot(page, name: str, anchor: str) -> None:
    """A screenshot with `anchor` (a selector) in view: the page scrolls inside its main block, not the window."""
    page.locator(anchor).first.scroll_into_view_if_needed()
    page.screenshot(path=SHOTS[name])


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    from playwright.sync_api import expect

    page = studio.page
    out: dict = {}

    # 1. Deploy from the Endpoints page with a 2 h TTL and video scaling to zero.
    studio.open_page("Endpoints", "endpoints")
    page.get_by_text("No deployment yet").wait_for(timeout=60_000)
    page.get_by_text("More options").click()
    ttl = page.get_by_role("textbox", name="Time to live")
    ttl.wait_for(timeout=15_000)
    ttl.fill("2h")
    ttl.press("Enter")
    out["scale_to_zero_checked"] = page.get_by_role("checkbox", name="Video scales to zero when idle").is_checked()
    out["deploy_command"] = poll(
        lambda: page.locator("pre code").filter(has_text="python -m infra deploy").first.inner_text(),
        lambda c: "--ttl 2h" in c, 30)
    page.get_by_role("button", name="Deploy", exact=True).click()
    out["after_deploy"] = _ended(page, "deploy", 150)
    out["ttl_deployed"] = poll(lambda: _ttl_by_role(page),
                               lambda t: t is not None and len(t) == 3 and all("deletes itself in" in v for v in t.values()), 60)
    out["table_deployed"] = _table(page)
    out["ttl_panel"] = page.locator('[data-testid="stAlert"]').filter(
        has_text="TTL: the endpoints delete themselves at").first.inner_text()
    _shot(page, "deployed", '[data-testid="stMain"] [data-testid="stDataFrame"]')

    # 2. The banner says when they delete themselves (another page, fresh from the fleet).
    studio.open_page("Image", "image")
    banner = page.locator('[data-testid="stAlert"]').filter(has_text="studio endpoints running").first
    banner.wait_for(timeout=30_000)
    out["banner"] = poll(lambda: banner.inner_text(), lambda b: "deletes itself in" in b, 45)

    # 3. Extend to 4 h from now: the time left grows.
    studio.open_page("Endpoints", "endpoints")
    extend_to = page.get_by_role("textbox", name="Extend to (from now)")
    extend_to.wait_for(timeout=30_000)
    extend_to.fill("4h")
    extend_to.press("Enter")
    poll(lambda: page.locator("pre code").filter(has_text="python -m infra extend").first.inner_text(),
         lambda c: "--ttl 4h" in c, 30)
    page.get_by_role("button", name="Extend", exact=True).click()
    out["after_extend"] = _ended(page, "extend", 90)
    out["ttl_extended"] = poll(
        lambda: _ttl_by_role(page),
        lambda t: t is not None and len(t) == 3 and all(_minutes_left(v) > 200 for v in t.values()), 60)
    _shot(page, "extended", '[data-testid="stMain"] [data-testid="stDataFrame"]')

    # 4. Upgrade one endpoint (voice) to another image tag; the version in use changes.
    tag = page.get_by_role("textbox", name="New image tag")
    tag.fill(NEW_TAG)
    tag.press("Enter")
    picked = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Endpoints to upgrade")
    chooser, chips = picked.locator("input"), picked.locator("[data-tag]")  # the chosen ones' chips
    upgrade_line = lambda: page.locator("pre code").filter(has_text="python -m infra upgrade").first.inner_text()  # noqa: E731
    for _ in range(2):  # video, then image, out of the chosen endpoints: voice alone is upgraded
        chosen = chips.count()
        chooser.click()
        chooser.press("Backspace")
        expect(chips).to_have_count(chosen - 1)  # the chip is gone before the next Backspace
    page.keyboard.press("Escape")
    out["upgrade_command"] = poll(upgrade_line, lambda c: f"upgrade voice --image-tag {NEW_TAG}" in c, 60,
                                  what=f"the upgrade command naming voice alone and {NEW_TAG}")
    out["versions_before"] = page.get_by_text("voice: v1 (").first.inner_text()
    page.get_by_role("button", name="Upgrade", exact=True).click()
    out["after_upgrade"] = _ended(page, "upgrade", 180)
    out["versions_upgraded"] = poll(lambda: _main_text(page), lambda t: f"voice: v2 ({NEW_TAG}" in t, 60)
    _shot(page, "upgraded", 'h3:has-text("Versions")')

    # 5. Roll back: the previous version is in use again.
    page.get_by_role("button", name="Roll back", exact=True).click()
    out["after_rollback"] = _ended(page, "rollback", 180)
    out["versions_rolled_back"] = poll(lambda: _main_text(page),
                                       lambda t: "voice: v1 (" in t and f"v2 ({NEW_TAG}) rolled back" in t, 60)
    _shot(page, "rolled-back", 'h3:has-text("Versions")')

    # 6. Delete everything, after the confirmation.
    page.get_by_role("button", name="Delete…").click()
    confirm = page.get_by_role("button", name=re.compile(r"^Yes, delete these \d+$"))
    confirm.wait_for(timeout=30_000)
    shown = _main_text(page)  # the confirmation, from its warning on (panels below it: Add an endpoint, versions…)
    out["confirmation"] = shown[shown.find("This deletes"):][:3000] if "This deletes" in shown else shown[-3000:]
    confirm.click()
    out["after_delete"] = poll(lambda: _main_text(page), lambda t: "No deployment yet" in t and "delete — done" in t
                               and "Versions" not in t, 120)[-2500:]  # and the deployment's panels are gone
    _shot(page, "deleted", 'h1:has-text("Endpoints")')

    # 7. The banner goes with the endpoints (its listing is cached for half a minute at most: ask again).
    def banner_now() -> str:
        studio.goto("image")
        page.get_by_role("textbox", name="Prompt", exact=True).wait_for(timeout=30_000)
        return _main_text(page)

    out["banner_after_delete"] = poll(banner_now, lambda t: "studio endpoints running" not in t, 90, step=3)[:300]
    return out


def _segment(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[-1].split(end, 1)[0]


def test_endpoints_lifecycle_in_chromium(tmp_path) -> None:
    from bench.browser import REHEARSAL_DIR_ENV, REHEARSAL_REPORT_ENV, SERVER_ENV
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    report = tmp_path / "rehearsal-report.json"
    r = run_browser_scenario("tests.test_browser_endpoints_lifecycle:scenario", timeout=600,
                             env={SERVER_ENV: "rehearsal", REHEARSAL_REPORT_ENV: str(report),
                                  REHEARSAL_DIR_ENV: str(tmp_path / "rehearsal")})
    print({k: r[k] for k in ("ttl_deployed", "ttl_extended", "banner", "upgrade_command", "versions_before")})
    print(r["table_deployed"])

    # Deployed with a 2 h TTL and the video endpoint to zero when idle.
    assert r["scale_to_zero_checked"] and "--ttl 2h" in r["deploy_command"]
    assert "--no-scale-to-zero" not in r["deploy_command"]
    assert "deploy — done" in r["after_deploy"] and "all endpoints InService, smoke test passed" in r["after_deploy"], \
        r["after_deploy"]
    before = {role: _minutes_left(v) for role, v in r["ttl_deployed"].items()}
    assert set(before) == {"voice", "image", "video"} and all(100 <= m <= 120 for m in before.values()), before
    rows = {row["endpoint"]: row for row in r["table_deployed"]}
    assert rows["video"]["instances"].endswith("[0–1]"), rows["video"]  # scales between 0 and 1
    assert re.fullmatch(r"[01]( \(→[01]\))? \[0–1\]", rows["video"]["instances"]), rows["video"]
    assert rows["voice"]["instances"] == "1" and rows["image"]["instances"] == "1", rows
    assert "TTL: the endpoints delete themselves at" in r["ttl_panel"]
    assert "3 studio endpoints running" in r["banner"] and re.search(r"deletes itself in (1 h \d+ min|2 h)", r["banner"])

    # Extend: every endpoint's time left grew to about 4 h.
    assert "extend — done" in r["after_extend"], r["after_extend"][-2000:]
    after = {role: _minutes_left(v) for role, v in r["ttl_extended"].items()}
    assert all(after[role] > before[role] + 100 and after[role] <= 240 for role in before), (before, after)

    # Upgrade voice alone, then roll it back.
    assert f"python -m infra upgrade voice --image-tag {NEW_TAG}" in r["upgrade_command"]
    assert r["versions_before"].startswith("voice: v1 (omni-sagemaker-cuda-v1.6")
    assert "upgrade — done" in r["after_upgrade"] and "voice: now on " + NEW_TAG in r["after_upgrade"]
    versions = _segment(r["versions_upgraded"], "Versions", "New image tag")
    assert f"voice: v2 ({NEW_TAG}" in versions and "kept for rollback" in versions
    assert "image: v1 (omni-sagemaker-cuda-v1.6)" in versions and "video: v1 (omni-sagemaker-cuda-v1.6)" in versions
    assert "rollback — done" in r["after_rollback"] and "voice: back on the previous version" in r["after_rollback"]
    versions = _segment(r["versions_rolled_back"], "Versions", "New image tag")
    assert f"voice: v1 (omni-sagemaker-cuda-v1.6); v2 ({NEW_TAG}) rolled back" in versions, versions

    # Delete: the confirmation names the versions too; nothing is left in the emulated account.
    assert "This deletes" in r["confirmation"] and "endpoint config" in r["confirmation"]
    assert "everything is gone" in r["after_delete"]
    assert "studio endpoints running" not in r["banner_after_delete"]
    left = json.loads(report.read_text())  # written by the rehearsal's own teardown, after the browser left
    assert left["clean"] and left["left"] == {"endpoints": [], "endpoint configs": [], "models": [],
                                              "schedule groups": [], "scheduler roles": [], "scalable targets": []}
