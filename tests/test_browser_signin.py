"""Sign-in in a real browser: the studio with an [auth] table in its secrets (Streamlit's `secrets.files`
pointed at a temporary secrets.toml), the local OpenID Connect provider (emulator/oidc.py) and Debian
Chromium, all inside the loopback-only namespace of tests/browser_support.py.

One browser signs in through the provider's page as a viewer, a creator and an admin in turn (signing out
between them, through the provider's end-session endpoint) and checks what each may see and do: the viewer
no generate form (the Image page says why) and no Endpoints page (its URL says it is for admins); the creator
generates an image and has no Endpoints page; the admin has the Endpoints page. Someone the policy does not
name is told so, and so is someone whose e-mail the provider says is not verified (the policy's domain entry
would make them a viewer).

Done when (issue #16): two people signed in at once, in two browser contexts, each with their own image
history; one shares an evaluation that the other then sees; only the admin reaches the Endpoints page.

And the refusal: `make studio`'s launcher exits 2 with the message on 0.0.0.0 without sign-in, and
`streamlit run app.py --server.address 0.0.0.0` run directly shows that message on every page and nothing else.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.page_waits import poll, settled
from tests.cli_support import run_cli

OIDC_PORT_ENV = "OMNI_TEST_OIDC_PORT"
OIDC_PORT = 18093  # inside the namespace every port is free
USERS = [
    {"email": "vic@example.com", "name": "Vic Viewer", "groups": []},
    {"email": "bob@example.com", "name": "Bob Creator", "groups": ["creative"]},
    {"email": "ann@example.com", "name": "Ann Admin", "groups": ["studio-admins"]},
    {"email": "eve@elsewhere.org", "name": "Eve Outsider", "groups": []},
    {"email": "una@example.com", "name": "Una Unverified", "groups": ["studio-admins"], "email_verified": False},
]
POLICY = {"admins": ["group:studio-admins"], "creators": ["group:creative"], "viewers": ["*@example.com"]}
COOKIE_SECRET = "browser-test-cookie-secret-0123456789abcdef"
SCREENSHOT = "/tmp/omni-studio-signin-browser.png"


def secrets_toml(oidc_port: int, client_id: str = "omni-studio",
                 client_secret: str = "local-oidc-secret-not-for-real-use") -> str:
    """[auth] for the studio: Streamlit fills {port} in redirect_uri with its own port."""
    return (f'[auth]\nredirect_uri = "http://127.0.0.1:{{port}}/oauth2callback"\ncookie_secret = "{COOKIE_SECRET}"\n'
            f'client_id = "{client_id}"\nclient_secret = "{client_secret}"\n'
            f'server_metadata_url = "http://127.0.0.1:{oidc_port}/.well-known/openid-configuration"\n')


def team_env(tmp_path: Path, oidc_port: int = OIDC_PORT) -> dict[str, str]:
    """The environment of a team studio for run_browser_scenario: its secrets, policy and data in tmp_path."""
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(secrets_toml(oidc_port))
    return {"STREAMLIT_SECRETS_FILES": str(secrets), "OMNI_STUDIO_ACCESS": json.dumps(POLICY),
            "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_STATE_FILE": str(tmp_path / "state.json"),
            "OMNI_STUDIO_CONFIG": "",
            OIDC_PORT_ENV: str(oidc_port)}


# ---------------------------------------------------------------------------------------------------------
# Inside the namespace: helpers a scenario uses
def sign_in(page, name: str) -> None:
    """From the sign-in screen, through the provider's page as `name`, back to the studio signed in."""
    page.get_by_role("button", name="Sign in").click(timeout=30_000)
    page.get_by_role("button", name=name).click(timeout=30_000)  # the provider's page: one button per user
    page.get_by_text("Signed in as").or_(page.get_by_text("no access")).first.wait_for(timeout=30_000)
    settled(page, f"the script run that signed {name} in")  # its navigation and sidebar drawn whole


def sign_out(page) -> None:
    page.get_by_role("button", name="Sign out").first.click()  # the sidebar's, or the no-access screen's
    page.get_by_role("button", name="Sign in").wait_for(timeout=30_000)


def nav_links(page) -> list[str]:
    """The page titles the sidebar's navigation offers."""
    nav = page.locator('[data-testid="stSidebarNav"]')
    if not nav.count():
        return []
    return [t.strip().splitlines()[-1] for t in nav.locator("a").all_inner_texts() if t.strip()]  # not the icon


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def settled_text(page, ready, timeout: float = 30) -> str:
    """The main text once `ready(text)` and the page has stopped drawing (the same text twice, 0.5 s apart)."""
    last = [None]

    def read() -> str:
        text = main_text(page)
        settled, last[0] = text == last[0], text
        return text if settled else ""

    return poll(read, lambda text: bool(text) and ready(text), timeout, step=0.5)


def open_page(studio, url_path: str, wait_text: str) -> str:
    """Open `url_path` by its URL (as a typed or bookmarked link would), wait for `wait_text`; the main text."""
    studio.goto(url_path)
    page = studio.page
    page.get_by_text(wait_text).first.wait_for(timeout=60_000)
    return main_text(page)


def provider(studio):
    """The local OpenID Connect provider, on the port the studio's secrets name."""
    from emulator.oidc import start_oidc

    return start_oidc(USERS, port=int(os.environ[OIDC_PORT_ENV]),
                      redirect_uris=[f"{studio.url}/oauth2callback"])


def generate_image(page, prompt: str) -> str:
    """On the Image page: generate one image; the caption of the first gallery tile."""
    box = page.get_by_role("textbox", name="Prompt", exact=True)
    box.wait_for(timeout=60_000)
    box.fill(prompt)
    page.get_by_role("textbox", name="Seed").fill("7")
    page.get_by_role("button", name="Generate").click()
    page.get_by_text("Offline preview", exact=False).first.wait_for(timeout=60_000)
    page.locator('[data-testid="stImage"] img').first.wait_for(timeout=20_000)
    # The gallery tile's caption (the seed) may be drawn a moment after the image: read once it has settled.
    return settled_text(page, lambda text: "seed 7" in text and "Offline preview" in text, timeout=30)


# ---------------------------------------------------------------------------------------------------------
def roles(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    page = studio.page
    out: dict = {}
    with provider(studio):
        page.get_by_role("button", name="Sign in").wait_for(timeout=30_000)
        out["signed_out"] = {"nav": nav_links(page), "main": main_text(page)}
        out["signed_out_deep_link"] = open_page(studio, "endpoints", "Sign in to use the team studio")

        sign_in(page, "Vic Viewer")
        out["viewer"] = {"nav": nav_links(page),
                         "sidebar": page.locator('[data-testid="stSidebar"]').inner_text(),
                         "image": open_page(studio, "image", "only a creator or an admin may generate"),
                         "image_form": page.get_by_role("button", name="Generate").count()
                         + page.get_by_role("textbox", name="Prompt", exact=True).count(),
                         "endpoints": open_page(studio, "endpoints", "is for admins")}
        sign_out(page)

        sign_in(page, "Bob Creator")
        out["creator"] = {"nav": nav_links(page)}
        studio.open_page("Image", "image")
        out["creator"]["image"] = generate_image(page, "A red kite over a green hill")
        out["creator"]["endpoints"] = open_page(studio, "endpoints", "is for admins")
        sign_out(page)

        sign_in(page, "Ann Admin")
        out["admin"] = {"nav": nav_links(page)}
        studio.goto("endpoints")
        page.get_by_role("button", name="Deploy").first.wait_for(timeout=60_000)  # the page's own form
        out["admin"]["endpoints"] = main_text(page)
        sign_out(page)

        sign_in(page, "Eve Outsider")
        out["outsider"] = {"main": main_text(page), "nav": nav_links(page)}
        page.screenshot(path=SCREENSHOT)
        sign_out(page)
        out["after_sign_out"] = main_text(page)

        sign_in(page, "Una Unverified")
        out["unverified"] = {"main": main_text(page), "nav": nav_links(page),
                             "endpoints": open_page(studio, "endpoints", "no access")}
        sign_out(page)
    return out


def test_viewer_creator_and_admin_sign_in_and_see_what_their_role_allows(tmp_path: Path) -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    r = run_browser_scenario("tests.test_browser_signin:roles", timeout=300, env=team_env(tmp_path))
    assert r["signed_out"]["nav"] == [] and "Sign in to use the team studio." in r["signed_out"]["main"]
    assert "Endpoints" not in r["signed_out_deep_link"].replace("Omni Studio", "")

    viewer = r["viewer"]
    assert viewer["nav"] == ["Home", "Voice", "Image", "Video", "Listen", "Sound", "Capacity", "Evaluations", "Converse"], viewer["nav"]
    assert "Signed in as Vic Viewer" in viewer["sidebar"] and "vic@example.com · viewer" in viewer["sidebar"]
    assert "You are signed in as Vic Viewer (viewer): only a creator or an admin may generate" in viewer["image"]
    assert viewer["image_form"] == 0  # no Generate button, no prompt: the team's shared images only
    assert "The Endpoints page is for admins" in viewer["endpoints"]

    creator = r["creator"]
    assert creator["nav"] == ["Home", "Voice", "Image", "Video", "Listen", "Sound", "Capacity", "Evaluations", "Converse"], creator["nav"]
    assert "Offline preview" in creator["image"] and "seed 7" in creator["image"]
    assert "The Endpoints page is for admins; you are signed in as Bob Creator (creator)" in creator["endpoints"]

    admin = r["admin"]
    assert admin["nav"] == ["Home", "Voice", "Image", "Video", "Listen", "Sound", "Endpoints", "Capacity", "Evaluations", "Converse"], admin["nav"]
    assert "Deploy" in admin["endpoints"] and "is for admins" not in admin["endpoints"]

    outsider = r["outsider"]
    assert "You are signed in as Eve Outsider (eve@elsewhere.org), but you have no access" in outsider["main"]
    assert "Ask a studio admin (a member of the group studio-admins)" in outsider["main"]
    assert outsider["nav"] == []
    assert "Sign in to use the team studio." in r["after_sign_out"]

    unverified = r["unverified"]  # in the admins' group, at the viewers' domain: refused all the same
    for shown in (unverified["main"], unverified["endpoints"]):
        assert ("You are signed in as Una Unverified (una@example.com), but you have no access to this studio: the "
                "sign-in token's e-mail (una@example.com) is not verified") in shown, shown
        assert "Deploy" not in shown
    assert unverified["nav"] == []


# ---------------------------------------------------------------------------------------------------------
# The refusal: the launcher, and app.py run directly on 0.0.0.0
def test_the_launcher_refuses_0_0_0_0_without_sign_in(tmp_path: Path) -> None:
    """`make studio HOST=0.0.0.0` without [auth]: exit 2 and the message, before anything listens."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    # -o setup: the venv is this one (no install from a test)
    proc = run_cli(["make", "-s", "-o", "setup", "studio", "HOST=0.0.0.0", f"PY={sys.executable}"],
                          cwd=Path(__file__).resolve().parent.parent, env={**env, "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])  # make passes the launcher's code on
    assert "Omni Studio will not listen on 0.0.0.0 without sign-in" in proc.stderr
    assert "[auth]" in proc.stderr and "HOST=127.0.0.1" in proc.stderr and 'docs/team.md, "Sign-in"' in proc.stderr


def _direct_on_all_interfaces() -> dict:
    """In the namespace: `streamlit run app.py --server.address 0.0.0.0` (no launcher), each page in Chromium."""
    from playwright.sync_api import sync_playwright

    from offline.launch import free_port, spawn, stop, wait_http_ok
    from bench.browser import CHROMIUM, CHROMIUM_ARGS

    port = free_port()
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="omni-refusal-") as tmp:
        env = {**os.environ, "HOME": tmp, "OMNI_STUDIO_DATA_DIR": f"{tmp}/data", "OMNI_STUDIO_CONFIG": ""}
        env.pop("STREAMLIT_SECRETS_FILES", None)
        log = Path(tmp) / "streamlit.log"
        with open(log, "wb") as stdout:
            proc = spawn("streamlit", ["run", "app.py", "--server.address", "0.0.0.0", "--server.port", str(port),
                                       "--server.headless", "true", "--logger.hideWelcomeMessage", "true"],
                         name="streamlit on 0.0.0.0", env=env, stdout=stdout)
        try:
            wait_http_ok(f"http://127.0.0.1:{port}/_stcore/health", proc, timeout=60, what="streamlit",
                         log_tail=lambda: log.read_text(errors="replace")[-2000:])
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
                page = browser.new_page()
                for path in ("", "image", "endpoints"):
                    page.goto(f"http://127.0.0.1:{port}/{path}")
                    page.get_by_text("will not listen on").first.wait_for(timeout=30_000)
                    out[path or "home"] = {
                        "main": page.locator('[data-testid="stMain"]').inner_text(),
                        "sidebar": page.locator('[data-testid="stSidebar"]').count(),
                        "buttons": page.locator('[data-testid="stMain"] button').count()
                        - page.locator('[data-testid="stMain"] [data-testid="stCode"] button').count()}
                browser.close()
        finally:
            stop(proc)
    return out


def test_app_py_run_directly_on_0_0_0_0_shows_the_refusal_on_every_page(tmp_path: Path) -> None:
    from bench.browser import RESULT_MARK, run_in_netns
    from tests.browser_support import require_browser

    require_browser()
    proc = run_in_netns([sys.executable, "-m", "tests.test_browser_signin", "refusal"], timeout=180)
    results = [json.loads(line[len(RESULT_MARK):]) for line in proc.stdout.splitlines() if line.startswith(RESULT_MARK)]
    assert results, f"exit {proc.returncode}; stderr ends with:\n{proc.stderr[-3000:]}"
    pages = results[-1]
    assert "error" not in pages, pages
    for name in ("home", "image", "endpoints"):
        shown = pages[name]
        assert "The studio will not start here." in shown["main"], (name, shown)
        assert "Omni Studio will not listen on 0.0.0.0 without sign-in" in shown["main"]
        assert "[auth]" in shown["main"] and "HOST=127.0.0.1" in shown["main"]
        assert shown["sidebar"] == 0 and shown["buttons"] == 0, (name, shown)  # nothing else: no pages, no forms
        for other in ("Generate", "Deploy", "Backend", "Sign in"):
            assert other not in shown["main"], (name, other)


# ---------------------------------------------------------------------------------------------------------
# Done when: two people at once, in two browser contexts
def _team_studio(tmp: Path) -> Any:
    """In the namespace: the provider and a team studio (its own secrets, the test's policy and data folder)."""
    from emulator.oidc import start_oidc
    from offline.launch import free_port, spawn, stop, wait_http_ok

    @contextmanager
    def running() -> Iterator[str]:
        oidc_port, port = free_port(), free_port()
        env = {**os.environ, **{k: v for k, v in team_env(tmp, oidc_port).items() if k != OIDC_PORT_ENV},
               "OMNI_STUDIO_DATA_DIR": os.environ["OMNI_STUDIO_DATA_DIR"], "HOME": str(tmp)}
        url = f"http://127.0.0.1:{port}"
        log = tmp / "streamlit.log"
        with start_oidc(USERS, port=oidc_port, redirect_uris=[f"{url}/oauth2callback"]), open(log, "wb") as out:
            proc = spawn("streamlit", ["run", "app.py", "--server.address", "127.0.0.1", "--server.port", str(port),
                                       "--server.headless", "true", "--global.developmentMode", "false"],
                         name="the team studio", env=env, stdout=out)
            try:
                wait_http_ok(f"{url}/_stcore/health", proc, timeout=60, what="the team studio",
                             log_tail=lambda: log.read_text(errors="replace")[-2000:])
                yield url
            finally:
                stop(proc)
                sys.stderr.write("---- studio log ----\n" + log.read_text(errors="replace")[-3000:])

    return running()


def _evaluation_options(page) -> list[str]:
    """The Evaluations page's picker: the labels it offers (this person's and the team's shared ones)."""
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Evaluation").first.click()
    options = page.get_by_role("option")
    options.first.wait_for(timeout=10_000)
    labels = options.all_inner_texts()
    page.keyboard.press("Escape")
    return labels


def _two_people() -> dict:
    from playwright.sync_api import sync_playwright

    from bench.browser import CHROMIUM, CHROMIUM_ARGS, EXPECT_TIMEOUT_MS
    from bench.page_waits import rerun, watch_script_runs

    def person(browser):  # type: ignore[no-untyped-def]
        """A page in a fresh context (a person's own cookies) where `rerun` sees Streamlit's script runs."""
        context = browser.new_context(viewport={"width": 1400, "height": 1100})
        context.set_default_timeout(EXPECT_TIMEOUT_MS)
        watch_script_runs(context)
        return context.new_page()

    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="omni-team-") as tmp, _team_studio(Path(tmp)) as url, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ann, bob = person(browser), person(browser)
        try:
            for page, name in ((ann, "Ann Admin"), (bob, "Bob Creator")):  # both signed in, both sessions open
                page.goto(url)
                sign_in(page, name)
            for page, prompt in ((ann, "A lighthouse at dusk"), (bob, "A red kite over a green hill")):
                page.goto(f"{url}/image")
                box = page.get_by_role("textbox", name="Prompt", exact=True)
                box.wait_for(timeout=60_000)
                box.fill(prompt)
                page.get_by_role("button", name="Generate").click()  # both run at once
            for page in (ann, bob):
                page.get_by_text("Offline preview", exact=False).first.wait_for(timeout=60_000)
            for page, who, own in ((ann, "ann", "lighthouse"), (bob, "bob", "kite")):
                page.reload()
                page.get_by_text("Gallery").first.wait_for(timeout=30_000)
                out[f"{who}_gallery"] = settled_text(page, lambda text, own=own: own in text)

            ann.goto(f"{url}/evaluations")
            ann.get_by_role("textbox", name="Name", exact=True).wait_for(timeout=60_000)
            out["ann_before"] = _evaluation_options(ann)
            bob.goto(f"{url}/evaluations")
            bob.get_by_role("textbox", name="Name", exact=True).wait_for(timeout=60_000)
            bob.get_by_role("textbox", name="Name", exact=True).fill("kite study")
            with rerun(bob, "Bob's evaluation form redrawn for images"):
                bob.locator('[data-testid="stButtonGroup"]').filter(has_text="video").get_by_text(
                    "image", exact=True).click()
            bob.get_by_role("textbox", name="Prompts, one per line").fill("A kite\nTwo kites")
            labels, settings = (bob.get_by_role("textbox", name="Label"),
                                bob.get_by_role("textbox", name="Settings (name = value)"))
            for i, (label, steps) in enumerate((("four-steps", 4), ("two-steps", 2))):
                labels.nth(i).fill(label)
                settings.nth(i).fill(f"steps = {steps}")
            with rerun(bob, "the rerun that takes Bob's last variant's settings"):
                settings.nth(1).press("Tab")
            bob.get_by_role("button", name="Create only").click()
            bob.get_by_text("Share with the team").wait_for(timeout=30_000)
            ann.reload()
            ann.get_by_role("textbox", name="Name", exact=True).wait_for(timeout=60_000)
            out["ann_unshared"] = _evaluation_options(ann)  # Bob's, not shared yet: not Ann's to see
            with rerun(bob, "the rerun that shares Bob's evaluation"):
                bob.get_by_text("Share with the team").click()
            ann.reload()
            ann.get_by_role("textbox", name="Name", exact=True).wait_for(timeout=60_000)
            out["ann_shared"] = _evaluation_options(ann)

            for page, who in ((ann, "ann"), (bob, "bob")):
                page.goto(f"{url}/endpoints")
                page.get_by_role("button", name="Deploy").or_(page.get_by_text("is for admins")).first.wait_for(
                    timeout=60_000)
                out[f"{who}_endpoints"] = main_text(page)
        except Exception:
            for page, who in ((ann, "ann"), (bob, "bob")):
                page.screenshot(path=f"/tmp/omni-studio-team-{who}.png", full_page=True)
                print(f"---- {who}'s page ----\n" + page.inner_text("body")[:3000], file=sys.stderr)
            raise
        finally:
            browser.close()
    return out


def test_done_when_two_people_at_once_own_histories_a_shared_evaluation_and_only_the_admin_on_endpoints(
        tmp_path: Path) -> None:
    from services.eval.store import EvalStore
    from services.history import History
    from bench.browser import RESULT_MARK, run_in_netns
    from tests.browser_support import require_browser

    require_browser()
    data = tmp_path / "data"
    proc = run_in_netns([sys.executable, "-m", "tests.test_browser_signin", "two_people"], timeout=400,
                        env={"OMNI_STUDIO_DATA_DIR": str(data)})
    results = [json.loads(line[len(RESULT_MARK):]) for line in proc.stdout.splitlines() if line.startswith(RESULT_MARK)]
    assert results, f"exit {proc.returncode}; stderr ends with:\n{proc.stderr[-4000:]}"
    r = results[-1]
    assert "error" not in r, f"{r}\n{proc.stderr[-4000:]}"
    # each person's image history is their own
    assert "lighthouse" in r["ann_gallery"] and "kite" not in r["ann_gallery"]
    assert "kite" in r["bob_gallery"] and "lighthouse" not in r["bob_gallery"]
    owners = sorted((job.user_id, job.prompt) for job in History(data).jobs.list("image"))
    assert owners == [("ann@example.com", "A lighthouse at dusk"), ("bob@example.com", "A red kite over a green hill")]
    # Bob's evaluation: Ann sees it once he shares it, with whose it is
    assert not any("kite study" in o for o in r["ann_before"] + r["ann_unshared"]), r["ann_unshared"]
    (shared,) = [o for o in r["ann_shared"] if "kite study" in o]
    assert "by bob@example.com" in shared
    (ev,) = EvalStore(data).list()
    assert ev["user_id"] == "bob@example.com" and ev["shared"]
    # only the admin reaches the Endpoints page
    assert "Deploy" in r["ann_endpoints"] and "is for admins" not in r["ann_endpoints"]
    assert "The Endpoints page is for admins; you are signed in as Bob Creator (creator)" in r["bob_endpoints"]
    assert "Deploy" not in r["bob_endpoints"]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.browser import RESULT_MARK

    try:
        result = {"refusal": _direct_on_all_interfaces, "two_people": _two_people}[sys.argv[1]]()
    except Exception as exc:  # reported, so the test fails with the reason
        import traceback

        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(RESULT_MARK + json.dumps(result), flush=True)
