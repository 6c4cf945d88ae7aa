"""The studio's door with Streamlit's AppTest (the real app.py): with an [auth] table in the secrets files,
signed out is a sign-in screen and nothing else; signed in, the access policy's role decides the pages
offered (the Endpoints page for admins only) and the sidebar names who is signed in; someone the policy
does not name is told so, whom to ask, and may sign out. Off loopback without sign-in, every page shows
the refusal and nothing else. Without sign-in on loopback, the studio is today's single-user one.

AppTest plays the signed-in person (`at.user`, what Streamlit's own sign-in would put in `st.user`); the
browser tests (test_browser_signin.py) sign in through the local OpenID Connect provider.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from protocol.catalog import PAGES

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
AUTH = """[auth]
redirect_uri = "http://127.0.0.1:{port}/oauth2callback"
cookie_secret = "0123456789abcdef0123456789abcdef"
client_id = "omni-studio"
client_secret = "s3cret"
server_metadata_url = "http://127.0.0.1:9/.well-known/openid-configuration"
"""
POLICY = {"admins": ["group:studio-admins"], "creators": ["bob@example.com"], "viewers": ["*@example.com"]}
SIGNED_IN = {"is_logged_in": True, "iss": "http://127.0.0.1:9", "email_verified": True}  # as the provider's token
VIC = {**SIGNED_IN, "email": "vic@example.com", "name": "Vic Viewer", "groups": []}
BOB = {**SIGNED_IN, "email": "bob@example.com", "name": "Bob Creator", "groups": ["creative"]}
ANN = {**SIGNED_IN, "email": "ann@example.com", "name": "Ann Admin", "groups": ["studio-admins"]}
EVE = {**SIGNED_IN, "email": "eve@other.org", "name": "Eve", "groups": []}
ALL_PAGES = [p.title for p in PAGES]  # the catalog's pages, in order (the families', then the tools')


@pytest.fixture
def option():
    """Set Streamlit config options for one test (AppTest reads the process's config), put back after."""
    saved: dict[str, object] = {}

    def set_option(name: str, value: object) -> None:
        saved.setdefault(name, st_config.get_option(name))
        st_config.set_option(name, value)

    yield set_option
    for name, value in saved.items():
        st_config.set_option(name, value)
    if "secrets.files" in saved:
        from streamlit.runtime.secrets import secrets_singleton

        secrets_singleton._reset()  # st.user read the test's [auth] through it: forget it with the files


@pytest.fixture
def studio(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, option) -> Path:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp_path / "none.json"))
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")  # nothing is generated here: no engine needed
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OMNI_STUDIO_ACCESS", json.dumps(POLICY))
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(AUTH)
    option("secrets.files", [str(secrets)])
    option("server.address", "127.0.0.1")
    st.cache_resource.clear()
    st.cache_data.clear()
    return secrets


def _run(user: dict | None = None, page: str | None = None, script: str = APP) -> AppTest:
    at = AppTest.from_file(script, default_timeout=30)
    if user is not None:
        at.user = user
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, at.exception[0].message
    return at


def _links(at: AppTest) -> list[str]:
    """The home page's links to pages, by the page's title."""
    return [el.proto.label.split(" — ")[0] for el in at.get("page_link")]


def _texts(at: AppTest) -> str:
    return "\n".join(str(e.value) for kind in ("markdown", "warning", "error", "info", "code")
                     for e in at.get(kind))


def _shown(at: AppTest) -> str:
    """_texts with the escapes that keep a token's text from being read as Markdown taken out."""
    return re.sub(r"\\(.)", r"\1", _texts(at))


def test_signed_out_is_a_sign_in_screen_and_nothing_else(studio: Path) -> None:
    at = _run()
    assert [b.label for b in at.button] == ["Sign in"]
    assert not _links(at) and not at.sidebar.get("markdown") and not at.sidebar.get("selectbox")
    assert "Sign in to use the team studio." in _texts(at)


def test_each_role_is_offered_its_pages_and_the_sidebar_names_who_is_signed_in(studio: Path) -> None:
    everyone = [p for p in ALL_PAGES if p != "Endpoints"]
    for user, role, pages in [(VIC, "viewer", everyone), (BOB, "creator", everyone), (ANN, "admin", ALL_PAGES)]:
        at = _run(user)
        assert _links(at) == pages, (role, _links(at))
        account = "\n".join(str(m.value) for m in at.sidebar.markdown)
        assert f"Signed in as **{user['name']}**" in account and f"`{user['email']}` · {role}" in account, account
        assert "Sign out" in [b.label for b in at.sidebar.button]


def test_someone_the_policy_does_not_name_sees_who_they_are_whom_to_ask_and_sign_out(studio: Path) -> None:
    at = _run(EVE)
    text = _texts(at)
    assert "You are signed in as **Eve** (`eve@other.org`), but you have **no access**" in text
    assert "Ask a studio admin (a member of the group `studio-admins`) to add you" in text
    assert [b.label for b in at.button] == ["Sign out"]
    assert not _links(at) and not at.sidebar.get("selectbox")


@pytest.mark.parametrize(("user", "shown", "why"), [
    ({**ANN, "email_verified": False}, "You are signed in as **Ann Admin** (`ann@example.com`)",
     "the sign-in token's e-mail (ann@example.com) is not verified (its email_verified claim is false)"),
    ({**ANN, "email": ["eve@other.org", "ann@example.com"]}, "(`(no usable e-mail in the sign-in token)`)",
     'the sign-in token has no usable e-mail (its email claim is ["eve@other.org", "ann@example.com"]'),
    ({**ANN, "groups": {"studio-admins": True}}, "You are signed in as **Ann Admin** (`ann@example.com`)",
     'the sign-in token\'s groups claim is {"studio-admins": true}, not a list of group names'),
])
def test_a_token_that_names_nobody_it_can_trust_gets_the_no_access_screen(studio: Path, user: dict, shown: str,
                                                                          why: str) -> None:
    """An unverified e-mail (whom the policy would make an admin), an e-mail that is a list, groups that are
    not a list: the no-access screen says what is wrong with the token and offers sign-out, on every page
    (the sign-in cookie keeps the token for 30 days), never a traceback."""
    for page in (None, "pages/endpoints.py"):
        at = _run(user, page)
        text = _shown(at)
        assert shown in text and "but you have **no access** to this studio: " + why in text, text
        assert [b.label for b in at.button] == ["Sign out"]
        assert not _links(at) and not at.sidebar.get("selectbox") and not at.get("dataframe")


def test_an_issuer_named_in_the_policy_may_send_no_email_verified_claim(studio: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    silent = {k: v for k, v in ANN.items() if k != "email_verified"}
    assert "does not say that its e-mail (ann@example.com) is verified" in _shown(_run(silent))
    monkeypatch.setenv("OMNI_STUDIO_ACCESS", json.dumps({**POLICY, "trust_unverified_email_from": [ANN["iss"]]}))
    st.cache_resource.clear()
    assert _links(_run(silent)) == ALL_PAGES
    assert "is not verified" in _shown(_run({**ANN, "email_verified": "false"}))  # said false: refused all the same


def test_a_role_from_the_group_claim_the_policy_names(studio: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNI_STUDIO_ACCESS", json.dumps({**POLICY, "group_claim": "roles"}))
    st.cache_resource.clear()
    at = _run({**VIC, "roles": ["studio-admins"]})  # "groups" is not read now, "roles" is
    assert _links(at) == ALL_PAGES


def test_a_page_started_on_its_own_does_not_pass_the_door(studio: Path) -> None:
    at = _run(ANN, script=str(ROOT / "pages" / "endpoints.py"))
    assert "Open the studio from its home page" in _texts(at)
    assert not at.get("dataframe") and [b.label for b in at.button] == []
    at = _run(None, script=str(ROOT / "pages" / "image.py"))
    assert [b.label for b in at.button] == ["Sign in"]


def test_off_loopback_without_sign_in_every_page_shows_the_refusal_only(studio: Path, option, tmp_path: Path) -> None:
    option("secrets.files", [str(tmp_path / "none.toml")])
    option("server.address", "0.0.0.0")
    for page in (None, "pages/image.py", "pages/endpoints.py"):
        at = _run(ANN, page)
        (code,) = at.code
        assert "Omni Studio will not listen on 0.0.0.0 without sign-in" in code.value
        assert "[auth]" in code.value and "HOST=127.0.0.1" in code.value
        assert [e.value for e in at.error] == [
            "**The studio will not start here.** It says why below; fix that and start it again."]
        assert not _links(at) and not at.button and not at.sidebar.get("selectbox")


def test_without_sign_in_on_loopback_the_studio_is_the_single_user_one(studio: Path, option, tmp_path: Path) -> None:
    option("secrets.files", [str(tmp_path / "none.toml")])
    at = _run()
    assert _links(at) == ALL_PAGES
    assert not any("Signed in as" in str(m.value) for m in at.sidebar.markdown)
    assert not [b for b in at.button if b.label in ("Sign in", "Sign out")]


def test_the_demo_lock_narrows_the_pages_further(studio: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNI_STUDIO_DEMO", json.dumps({"pages": ["image", "endpoints"]}))
    st.cache_resource.clear()
    # a demo opens on its first page, without the home page: Image, the one a creator may see
    assert [t.value for t in _run(BOB).title] == ["Image"]
    monkeypatch.setenv("OMNI_STUDIO_DEMO", json.dumps({"pages": ["image"], "title": "Acme × Omni"}))
    st.cache_resource.clear()
    assert [t.value for t in _run(BOB).title] == ["Image"]  # the demo's title is the browser tab's
    monkeypatch.setenv("OMNI_STUDIO_DEMO", json.dumps({"pages": ["endpoints"]}))
    st.cache_resource.clear()
    assert [t.value for t in _run(ANN).title] == ["Endpoints"]
    assert [t.value for t in _run(BOB).title] == ["Omni Studio"]  # nothing of this demo is a creator's
    assert "Your role (creator) opens no page of this studio" in _texts(_run(BOB))
