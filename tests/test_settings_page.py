"""How the studio shows bad settings and backend health, with Streamlit's AppTest (the real app.py navigation).

A bad setting is one message naming the setting and where it was read, on whichever page opens, and the
page stops there: no traceback. The sidebar's health line shows server text as typed: Markdown escapes
where they render away, URLs in code spans (an escape inside an auto-linked URL would show).
AppTest sees the Markdown source, so the checks read it as Markdown would: `_shown` is what a reader sees,
`_outside_code` is what Markdown parses (and could auto-link).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from services.settings import ENV_PREFIX
from tests.conftest import free_port
from tests.test_voice_page import webrtc_inert  # noqa: F401  (fixture)
from ui.text import plain

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGES = ["pages/voice.py", "pages/image.py", "pages/video.py", "pages/endpoints.py"]
CODE_SPAN = re.compile(r"(?<!\\)`([^`]*)`")  # an escaped backtick opens no code span


def _outside_code(markdown: str) -> str:
    return CODE_SPAN.sub("", markdown)


def _shown(markdown: str) -> str:
    """The text a reader sees: code spans verbatim, backslash escapes resolved elsewhere."""
    parts = CODE_SPAN.split(markdown)  # even: Markdown, odd: code span contents
    return "".join(p if i % 2 else re.sub(r"\\([!-/:-@[-`{-~])", r"\1", p) for i, p in enumerate(parts))


@pytest.fixture
def studio_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Only the variables a test sets, no studio.toml in the working folder, data and state in tmp_path."""
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp_path / "none.json"))
    st.cache_resource.clear()
    st.cache_data.clear()
    return tmp_path


def _run(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=30)
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, at.exception[0].message if at.exception else ""
    return at


def _settings_error(at: AppTest) -> str:
    """The one message of a page stopped by a bad setting, as a reader sees it."""
    assert not at.exception, at.exception[0].message
    assert len(at.error) == 1, [e.value for e in at.error]
    assert not at.title and not at.button, "the page went on after the settings error"
    return _shown(at.error[0].value)


BAD_SETTINGS = {
    "an unknown backend": ({"OMNI_STUDIO_BACKEND": "bogus"}, None, ["OMNI_STUDIO_BACKEND (environment variable)",
                                                                  "'bogus'"]),
    "ICE servers that are not JSON": ({"OMNI_STUDIO_ICE_SERVERS": "stun:stun.example.org:3478"}, None,
                                      ["OMNI_STUDIO_ICE_SERVERS", "must be JSON", '[{"urls": ']),
    "a malformed studio.toml": ({}, b'backend = "omni\n', ["is not valid TOML", "{file}"]),
    "a studio.toml that is not UTF-8": ({}, 'region = "caf\xe9"\n'.encode("latin-1"), ["is not UTF-8", "{file}"]),
    "a bad value in studio.toml": ({}, b'connect_timeout_s = 0\n', ["connect_timeout_s in {file}", "greater than 0"]),
    "OMNI_STUDIO_CONFIG naming a missing file": ({"OMNI_STUDIO_CONFIG": "{missing}"}, None,
                                                 ["OMNI_STUDIO_CONFIG names {missing}, which does not exist"]),
}


@pytest.mark.parametrize("case", list(BAD_SETTINGS))
def test_a_bad_setting_is_one_message_naming_it_on_the_home_page(case: str, studio_env: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    env, toml, expected = BAD_SETTINGS[case]
    names = {"file": str(studio_env / "studio.toml"), "missing": str(studio_env / "typo.toml")}
    if toml is not None:
        (studio_env / "studio.toml").write_bytes(toml)
    for key, value in env.items():
        monkeypatch.setenv(key, _named(value, names))
    text = _settings_error(_run())
    assert text.startswith("**The studio settings need fixing.**")
    for words in expected:
        assert _named(words, names) in text, text


def _named(text: str, names: dict[str, str]) -> str:
    for key, value in names.items():
        text = text.replace("{" + key + "}", value)
    return text


@pytest.mark.parametrize("page", PAGES)
def test_every_page_stops_at_a_bad_setting(page: str, studio_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "bogus")
    text = _settings_error(_run(page))
    assert "OMNI_STUDIO_BACKEND (environment variable)" in text and "'bogus'" in text


def test_a_page_run_on_its_own_stops_at_a_bad_setting_too(studio_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                          webrtc_inert: None) -> None:
    monkeypatch.setenv("OMNI_STUDIO_ICE_SERVERS", "not json")
    at = AppTest.from_file(str(ROOT / "pages" / "voice.py"), default_timeout=30)
    at.run()
    assert "OMNI_STUDIO_ICE_SERVERS" in _settings_error(at)


def test_a_fixed_studio_toml_is_read_again_on_the_next_run(studio_env: Path) -> None:
    toml = studio_env / "studio.toml"
    toml.write_text('backend = "bogus"\n')
    at = _run()
    assert f"backend in {toml}" in _settings_error(at)
    toml.write_text(f'backend = "server"\nserver_url = "http://127.0.0.1:{free_port()}"\n')
    at.run()
    assert not at.exception and [t.value for t in at.title] == ["Omni Studio"]


# ---------------------------------------------------------------------------------------------------------
# The sidebar's health line
def test_the_health_detail_shows_the_url_as_typed_and_not_as_a_link(studio_env: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", url)
    at = _run()
    (line,) = [e.value for e in at.sidebar.error]
    assert f"`{url}`" in line, line  # in a code span: verbatim, never auto-linked
    assert "://" not in _outside_code(line), line
    assert f": cannot reach {url} (" in _shown(line) and "is the server running?" in _shown(line)
    assert [t.value for t in at.title] == ["Omni Studio"]  # health is news, not a stop


def test_a_backend_that_cannot_be_made_is_named_in_the_sidebar_without_markdown_artefacts(
        studio_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")  # and no URL
    at = _run()
    (line,) = [e.value for e in at.sidebar.error]
    assert "OMNI_STUDIO_SERVER_URL" in _shown(line)
    assert not re.search(r"(?<!\\)[_*]", _outside_code(line)), line  # `_STUDIO_` would turn italic


@pytest.mark.parametrize("text", [
    "cannot reach http://127.0.0.1:9 (ConnectError: [Errno 111] Connection refused); is the server running?",
    "see https://example.org/a_b?c=1#d, www.example.org. or write to ops+studio@example.org.",
    "(http://h:1/x) <b>*not bold*</b> _nor this_ `nor code` ~~struck~~ $x$ | 1. # 2",
    "OMNI_STUDIO_ICE_SERVERS must be JSON, e.g. '[{\"urls\": \"stun:stun.example.org:3478\"}]'",
    "server_url must start with http:// or https:// (got 'ftp://x'), e.g. http://gpu-box:8091",
])
def test_plain_shows_text_as_typed_with_nothing_to_auto_link(text: str) -> None:
    md = plain(text)
    assert _shown(md) == text
    outside = _outside_code(md)
    assert not re.search(r"://\w|www\.|@\w", outside), md
    assert not re.search(r"(?<!\\)[_*`\[\]<>~$|#]", outside), md
