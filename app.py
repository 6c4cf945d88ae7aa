"""Omni Studio — the entry file: the door (sign-in, ui/auth.py), navigation and the home page."""

from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="Omni Studio", page_icon="🎛️", layout="wide")

from ui import auth  # noqa: E402  (after set_page_config)
from ui.resources import require_settings  # noqa: E402

LINKS = {  # the home page's line for each page
    "voice": ("Voice — text in, speech out while it is generated", "🗣️"),
    "image": ("Image — FLUX.2-klein, realtime", "🖼️"),
    "video": ("Video — Wan2.1-VACE jobs, conditioned on your images", "🎬"),
    "endpoints": ("Endpoints — the SageMaker deployment: status, cost, deploy, delete", "☁️"),
    "capacity": ("Capacity — load sweeps: how much a target holds, what a unit costs", "📈"),
    "evaluations": ("Evaluations — variants rated blind, win rates with their uncertainty", "⚖️"),
}


def home() -> None:
    from ui.resources import sidebar

    sidebar()
    st.title("Omni Studio")
    st.write(
        "Try multimodal vLLM-Omni models in the browser — streaming **voice**, realtime **images**, and "
        "asynchronous **video** — on the embedded offline engine, a vLLM-Omni server, or SageMaker AI."
    )
    for name in VISIBLE:
        label, icon = LINKS[name]
        st.page_link(PAGES[name], label=label, icon=icon)
    if not VISIBLE:
        st.info(f"Your role ({ACTOR.role}) opens no page of this studio; ask a studio admin for more.", icon="🔒")


PAGES = {
    "voice": st.Page("pages/voice.py", title="Voice", icon="🗣️", url_path="voice"),
    "image": st.Page("pages/image.py", title="Image", icon="🖼️", url_path="image"),
    "video": st.Page("pages/video.py", title="Video", icon="🎬", url_path="video"),
    "endpoints": st.Page("pages/endpoints.py", title="Endpoints", icon="☁️", url_path="endpoints"),
    "capacity": st.Page("pages/capacity.py", title="Capacity", icon="📈", url_path="capacity"),
    "evaluations": st.Page("pages/evaluations.py", title="Evaluations", icon="⚖️", url_path="evaluations"),
}
# Off loopback without sign-in, signed out, or named by no entry of the access policy: that screen and
# nothing else. Otherwise who this is (LOCAL without sign-in).
ACTOR = auth.gate(lambda: require_settings().access, url_paths=list(PAGES))
# A bad setting (a variable, studio.toml): one message naming it on whichever page opens, no traceback.
settings = require_settings()
if settings.demo is not None and settings.demo.title:
    st.set_page_config(page_title=settings.demo.title)
# The pages this role and the demo lock allow; the others' URLs open a hidden page saying why not. A demo
# opens on its first page, without the home page.
VISIBLE = auth.pages_for(ACTOR, settings.demo, list(PAGES))
entries = [PAGES[name] for name in VISIBLE] + [
    auth.closed_page(ACTOR, name, PAGES[name].title, settings.demo, settings.access)
    for name in PAGES if name not in VISIBLE]
if settings.demo is None or not VISIBLE:
    entries.insert(0, st.Page(home, title="Home", icon="🏠", default=True))
else:
    # A demo opens on its first page. That page keeps its own URL (/voice): the default page is a hidden one that
    # sends the browser there, since Streamlit serves its default page at / only and its URL would be "not found".
    first = PAGES[VISIBLE[0]]
    entries.insert(0, st.Page(lambda: st.switch_page(first), title=first.title, icon=first.icon, default=True,
                              url_path="start", visibility="hidden"))
nav = st.navigation(entries)
with auth.entered():
    nav.run()
