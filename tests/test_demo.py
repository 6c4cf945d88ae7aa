"""Demo mode (`[demo]` in the settings): a studio locked for a customer-facing screen — only the demo's
voices, no uploads (so no cloning), checked on the real pages with AppTest against the offline engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from protocol.errors import ConfigError
from services.settings import DemoMode, load_settings

ROOT = Path(__file__).resolve().parent.parent


def test_demo_voices_keep_the_demos_order_and_name_what_is_missing() -> None:
    demo = DemoMode(voices=["Vivian", "joe"])
    assert demo.voices_shown(["default", "joe", "vivian", "ryan"]) == ["vivian", "joe"]
    assert DemoMode().voices_shown(["a", "b"]) == ["a", "b"]  # no list: every voice
    with pytest.raises(ConfigError, match=r"demo.voices \['Vivian', 'joe'\] names none of this target's voices "
                                          r"\(ryan\)"):
        demo.voices_shown(["ryan"])


def test_without_uploads_there_is_no_cloning() -> None:
    everything = ("CustomVoice", "VoiceDesign", "Base")
    assert DemoMode().task_types_shown(everything) == ("CustomVoice", "VoiceDesign")
    assert DemoMode(uploads=True).task_types_shown(everything) == everything


def test_demo_settings_are_checked() -> None:
    s = load_settings({"OMNI_STUDIO_DEMO": json.dumps({"pages": ["voice", "image"], "voices": ["joe"]})})
    assert s.demo == DemoMode(pages=["voice", "image"], voices=["joe"])
    with pytest.raises(ConfigError, match=r"OMNI_STUDIO_DEMO.pages\[0\]"):
        load_settings({"OMNI_STUDIO_DEMO": json.dumps({"pages": ["settings"]})})
    with pytest.raises(ConfigError, match="OMNI_STUDIO_DEMO.pages"):
        load_settings({"OMNI_STUDIO_DEMO": json.dumps({"pages": []})})
    with pytest.raises(ConfigError, match="OMNI_STUDIO_DEMO.upload"):
        load_settings({"OMNI_STUDIO_DEMO": json.dumps({"upload": True})})  # a typo is named, not ignored


@pytest.fixture
def webrtc_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit_webrtc.component
    import streamlit_webrtc.shutdown

    monkeypatch.setattr(streamlit_webrtc.component, "get_this_session_info", lambda: None)
    monkeypatch.setattr(streamlit_webrtc.shutdown, "get_this_session_info", lambda: None)


def _page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, page: str, demo: dict | None,
          query: dict[str, str] | None = None) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path / "data"))
    if demo is None:
        monkeypatch.delenv("OMNI_STUDIO_DEMO", raising=False)
    else:
        monkeypatch.setenv("OMNI_STUDIO_DEMO", json.dumps(demo))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=30)
    at.query_params.update(query or {})  # the address the browser opened
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.usefixtures("webrtc_inert")
def test_the_voice_page_offers_only_the_demos_voices_and_no_cloning(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                    engine_url: str) -> None:
    at = _page(monkeypatch, tmp_path, engine_url, "voice.py", None)
    assert "Clone a voice" in at.radio(key="voice_mode").options
    assert len(at.selectbox(key="voice_voice").options) > 1
    at = _page(monkeypatch, tmp_path, engine_url, "voice.py", {"voices": ["Joe"]})
    assert at.selectbox(key="voice_voice").options == ["joe"]
    assert at.radio(key="voice_mode").options == ["Preset voice", "Design a voice"]


def test_image_and_video_pages_offer_no_uploads_in_a_demo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          engine_url: str) -> None:
    def uploaders(at: AppTest) -> int:
        return len(at.get("file_uploader"))

    assert uploaders(_page(monkeypatch, tmp_path, engine_url, "image.py", None)) == 1
    assert uploaders(_page(monkeypatch, tmp_path, engine_url, "image.py", {"pages": ["image"]})) == 0
    at = _page(monkeypatch, tmp_path, engine_url, "video.py", None)
    assert "Upload" in " ".join(at.radio(key="video_ref_source").options)
    at = _page(monkeypatch, tmp_path, engine_url, "video.py", {"pages": ["video"], "uploads": False})
    assert "Upload" not in " ".join(at.radio(key="video_ref_source").options)
    at = _page(monkeypatch, tmp_path, engine_url, "video.py", {"pages": ["video"], "uploads": True})
    assert "Upload" in " ".join(at.radio(key="video_ref_source").options)


def test_the_target_is_locked_in_a_demo_and_only_an_admin_adds_a_server(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str) -> None:
    from services.access import Principal
    from ui import auth

    at = _page(monkeypatch, tmp_path, engine_url, "image.py", {"pages": ["image"]})
    assert not [s for s in at.selectbox if s.key == "_backend_pick"]  # no picker in a demo
    assert any(engine_url in c.value for c in at.sidebar.caption)  # the settings' target, shown
    compare_targets = [s for s in at.selectbox if s.key and s.key.startswith("cmp_") and s.key.endswith("_target")]
    assert compare_targets and all(s.options == ["Sidebar backend"] for s in compare_targets)  # a demo stays put

    at = _page(monkeypatch, tmp_path, engine_url, "image.py", None)  # without sign-in: LOCAL, an admin
    assert [t for t in at.sidebar.text_input if t.label == "Server URL"]
    creator = Principal(id="bob@example.com", name="Bob", role="creator", signed_in=True)
    monkeypatch.setattr(auth, "guard", lambda policy: creator)
    monkeypatch.setattr(auth, "principal", lambda: creator)
    at = _page(monkeypatch, tmp_path, engine_url, "image.py", None)
    assert at.selectbox(key="_backend_pick").value == f"server:{engine_url}"  # the settings' server, by name
    assert not [t for t in at.sidebar.text_input if t.label == "Server URL"]  # nothing to type
    # The compare targets are the closed set: the sidebar's and the registered server; no text field for a URL.
    assert at.selectbox(key="cmp_0_target").options == ["Sidebar backend", f"vLLM-Omni 127.0.0.1:{engine_url.rsplit(':', 1)[1]} ({engine_url})"]
    assert not [t for t in at.text_input if t.label in ("URL", "Endpoint name")]


@pytest.mark.usefixtures("webrtc_inert")
def test_a_demo_offers_only_its_voices_in_compare_and_no_deploy_advice(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path, engine_url: str) -> None:
    at = _page(monkeypatch, tmp_path, engine_url, "voice.py", {"voices": ["joe"]})
    assert at.selectbox(key="vocmp_0_voice").options == ["joe"]  # not "(the model's default)": the demo names joe
    shown = " ".join(c.value for c in at.caption)
    assert "vllm serve" not in shown and "Deploy one" not in shown  # a customer's screen gets no deploy advice
    at = _page(monkeypatch, tmp_path, engine_url, "voice.py", None)
    assert at.selectbox(key="vocmp_0_voice").options[0] == "(the model's default)"


@pytest.mark.usefixtures("webrtc_inert")
def test_a_demo_opens_on_its_first_page_which_keeps_its_own_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                engine_url: str) -> None:
    """Streamlit serves the default page at / only: when the demo's first page was the default, /voice opened
    directly said "Page not found". The default is now a hidden page that switches to it."""
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", engine_url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OMNI_STUDIO_DEMO", json.dumps({"pages": ["voice", "image"], "voices": ["joe"]}))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Voice"]  # / lands on the demo's first page


def test_an_admin_adds_a_server_on_the_sidebar_and_the_session_moves_to_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str) -> None:
    at = _page(monkeypatch, tmp_path, engine_url, "image.py", None)  # without sign-in: LOCAL, an admin
    at.sidebar.text_input(key="_server_url").input("http://ann:pw@127.0.0.1:9/admin?q=")
    at.sidebar.button(key="_server_add").click().run()
    assert any("no user name or password" in e.value for e in at.sidebar.error)
    assert at.selectbox(key="_backend_pick").value == f"server:{engine_url}"  # nothing changed
    other = engine_url.replace("127.0.0.1", "localhost")  # the same engine under another name: a second server
    at.sidebar.text_input(key="_server_url").input(other + "/")
    at.sidebar.text_input(key="_server_name").input("second")
    at.sidebar.button(key="_server_add").click().run()
    assert not at.exception and not at.sidebar.error
    assert at.selectbox(key="_backend_pick").value == f"server:{other}"  # this session now uses it
    assert any(other in c.value for c in at.sidebar.caption)
    assert f"vLLM-Omni second ({other})" in at.selectbox(key="cmp_0_target").options  # and every picker offers it
    at.selectbox(key="_backend_pick").set_value("offline").run()
    assert at.selectbox(key="_backend_pick").value == "offline" and not at.exception
    at.selectbox(key="_server_gone").set_value(other)
    at.sidebar.button(key="_server_remove").click().run()
    assert f"vLLM-Omni second ({other})" not in at.selectbox(key="cmp_0_target").options
    assert not [s for s in at.selectbox if s.key == "_server_gone"]  # the settings' server is not removable here


def test_a_reload_keeps_the_target_picked_because_the_address_names_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str) -> None:
    """A reload (F5) is a new session: the picked target was in the session only, and the studio went back to the
    settings' target. The address now names it (`?target=`), from the closed set only."""
    at = _page(monkeypatch, tmp_path, engine_url, "image.py", None)
    assert "target" not in at.query_params  # the settings' own target: the address stays clean
    other = engine_url.replace("127.0.0.1", "localhost")
    at.sidebar.text_input(key="_server_url").input(other)
    at.sidebar.button(key="_server_add").click().run()
    assert at.query_params["target"] == f"server:{other}"  # the session moved to it, and the address says so
    at.selectbox(key="_backend_pick").set_value("offline").run()
    assert at.query_params["target"] == "offline"

    # The reload: a new session on the same address.
    at = _page(monkeypatch, tmp_path, engine_url, "image.py", None, query={"target": "offline"})
    assert at.selectbox(key="_backend_pick").value == "offline"
    at = _page(monkeypatch, tmp_path, engine_url, "image.py", None, query={"target": f"server:{other}"})
    assert at.selectbox(key="_backend_pick").value == f"server:{other}"
    assert any(other in c.value for c in at.sidebar.caption)
    at = _page(monkeypatch, tmp_path, engine_url, "image.py", None, query={"target": f"omni:{other}"})  # an old link
    assert at.selectbox(key="_backend_pick").value == f"server:{other}"
    assert at.query_params["target"] == f"server:{other}"  # the address now says it as today
    # An address naming a server the studio never registered is not a way in: the settings' target is used.
    for stray in ("server:http://127.0.0.1:9", "omni:http://127.0.0.1:9", "server:", "omni:", "file:///etc/passwd",
                  "sagemaker2"):
        at = _page(monkeypatch, tmp_path, engine_url, "image.py", None, query={"target": stray})
        assert at.selectbox(key="_backend_pick").value == f"server:{engine_url}", stray
        assert "target" not in at.query_params, stray
    # A demo stays on its settings' target whatever the address says.
    at = _page(monkeypatch, tmp_path, engine_url, "image.py", {"pages": ["image"]}, query={"target": "offline"})
    assert any(engine_url in c.value for c in at.sidebar.caption)
