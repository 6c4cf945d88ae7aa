"""Omni Studio — the entry file: the door (sign-in, ui/auth.py), navigation and the home page."""

from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="Omni Studio", page_icon="🎛️", layout="wide")

from protocol.catalog import PAGES as CATALOG_PAGES  # noqa: E402  (after set_page_config; the pages, as data)
from ui import auth  # noqa: E402
from ui.resources import require_settings  # noqa: E402
from ui.webrtc_runs import count_full_run  # noqa: E402

count_full_run()  # the studio's own count of full runs, for its WebRTC players (ui/webrtc_runs.py)


def home() -> None:
    from ui.sidebar import sidebar

    sidebar()
    st.title("Omni Studio")
    st.write(
        "Try multimodal vLLM-Omni models in the browser — streaming **voice**, realtime **images**, and "
        "asynchronous **video** — on the embedded offline engine, a vLLM-Omni server, or SageMaker AI."
    )
    for page in CATALOG_PAGES:
        if page.name in VISIBLE:
            st.page_link(PAGES[page.name], label=page.blurb, icon=page.icon)
    if not VISIBLE:
        st.info(f"Your role ({ACTOR.role}) opens no page of this studio; ask a studio admin for more.", icon="🔒")


PAGES = {p.name: st.Page(p.script, title=p.title, icon=p.icon, url_path=p.name) for p in CATALOG_PAGES}
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
