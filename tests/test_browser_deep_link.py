"""A deep link as the very first request of a fresh studio, in a real browser (Debian Chromium, Playwright,
a loopback-only network namespace: tests/browser_support.py).

Streamlit builds its navigation from app.py's st.navigation only once app.py has run; before that, a request for
a `pages/` URL ran that script on its own: the sidebar listed the file names ("app, capacity, …"), the layout was
narrow (st.set_page_config is app.py's), and so for every new session until someone opened "/". The scenario
opens /capacity first, then /endpoints in a new tab (a second session), and reads what the browser shows.
"""

from __future__ import annotations

import time

from bench.page_waits import poll

_LAYOUT = """
() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  const nav = document.querySelector('[data-testid="stSidebarNav"]');
  return {main_width: main ? Math.round(main.getBoundingClientRect().width) : null,
          nav: nav ? Array.from(nav.querySelectorAll('a')).map(a => a.innerText.trim().split(String.fromCharCode(10)).pop().trim()) : null,
          title: document.title};
}
"""


def _seen(page, heading: str) -> dict:
    page.get_by_role("heading", name=heading).first.wait_for(timeout=60_000)
    return poll(lambda: page.evaluate(_LAYOUT), lambda v: v["nav"] and v["main_width"], timeout=30)


def scenario(studio) -> dict:
    page = studio.page
    out = {"capacity": _seen(page, "Capacity"), "capacity_url": page.url}
    second = page.context.new_page()  # a new session, while nobody has opened "/"
    t0 = time.monotonic()
    second.goto(f"{studio.url}/endpoints")
    out["endpoints"] = _seen(second, "Endpoints")
    out["endpoints_s"] = round(time.monotonic() - t0, 2)
    out["endpoints_url"] = second.url
    return out


scenario.first_url_path = "capacity"


def test_a_deep_link_first_shows_the_studios_navigation_and_layout(tmp_path) -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_deep_link:scenario", timeout=180,
                             env={"OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_CONFIG": ""})
    print(r)
    for page in ("capacity", "endpoints"):
        seen = r[page]
        assert seen["nav"][:1] == ["Home"] and "Capacity" in seen["nav"] and "Endpoints" in seen["nav"], seen
        assert not {"app", "capacity", "endpoints"} & set(seen["nav"]), seen  # no file names
        assert seen["main_width"] > 900, seen  # wide (a narrow layout is at most 736 px), viewport 1400 px
        assert seen["title"] == "Omni Studio", seen  # app.py's set_page_config ran
        assert r[f"{page}_url"].endswith(f"/{page}"), r  # the link stays where it pointed


def demo_scenario(studio) -> dict:
    """A demo studio (voice and image): its first page opened by its own URL as the first request, then "/"."""
    page = studio.page
    out = {"voice": _seen(page, "Voice"), "voice_url": page.url}
    second = page.context.new_page()
    second.goto(f"{studio.url}/")
    out["root"] = _seen(second, "Voice")
    out["root_url"] = second.url
    out["not_found"] = "page not found" in (page.inner_text("body") + second.inner_text("body")).lower()
    return out


demo_scenario.first_url_path = "voice"


def test_a_demos_first_page_opens_by_its_own_url(tmp_path) -> None:
    """In a demo the first page was Streamlit's default page, served at "/" only: /voice said "Page not found"."""
    import json

    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_deep_link:demo_scenario", timeout=180,
                             env={"OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_CONFIG": "",
                                  "OMNI_STUDIO_DEMO": json.dumps({"pages": ["voice", "image"], "title": "Acme"})})
    print(r)
    assert not r["not_found"], r
    assert r["voice"]["nav"] == ["Voice", "Image"] and r["voice_url"].endswith("/voice"), r
    assert r["root"]["nav"] == ["Voice", "Image"], r  # "/" lands on the demo's first page
    assert r["voice"]["title"] == "Acme", r
