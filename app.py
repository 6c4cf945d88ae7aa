"""Omni Studio — the entry file: navigation and the home page."""

from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="Omni Studio", page_icon="🎛️", layout="wide")

from ui.resources import require_settings  # noqa: E402  (after set_page_config)


def home() -> None:
    from ui.resources import sidebar

    sidebar()
    st.title("Omni Studio")
    st.write(
        "Try multimodal vLLM-Omni models in the browser — streaming **voice**, realtime **images**, and "
        "asynchronous **video** — on the embedded offline engine, a vLLM-Omni server, or SageMaker AI."
    )
    st.page_link(PAGES["voice"], label="Voice — text in, speech out while it is generated", icon="🗣️")
    st.page_link(PAGES["image"], label="Image — FLUX.2-klein, realtime", icon="🖼️")
    st.page_link(PAGES["video"], label="Video — Wan2.1-VACE jobs, conditioned on your images", icon="🎬")
    st.page_link(PAGES["endpoints"], label="Endpoints — the SageMaker deployment: status, cost, deploy, delete",
                 icon="☁️")
    st.page_link(PAGES["capacity"], label="Capacity — load sweeps: how much a target holds, what a unit costs",
                 icon="📈")
    st.page_link(PAGES["evaluations"], label="Evaluations — variants rated blind, win rates with their uncertainty",
                 icon="⚖️")


PAGES = {
    "voice": st.Page("pages/voice.py", title="Voice", icon="🗣️", url_path="voice"),
    "image": st.Page("pages/image.py", title="Image", icon="🖼️", url_path="image"),
    "video": st.Page("pages/video.py", title="Video", icon="🎬", url_path="video"),
    "endpoints": st.Page("pages/endpoints.py", title="Endpoints", icon="☁️", url_path="endpoints"),
    "capacity": st.Page("pages/capacity.py", title="Capacity", icon="📈", url_path="capacity"),
    "evaluations": st.Page("pages/evaluations.py", title="Evaluations", icon="⚖️", url_path="evaluations"),
}
nav = st.navigation([st.Page(home, title="Home", icon="🏠", default=True), *PAGES.values()])
# A bad setting (a variable, studio.toml): one message naming it on whichever page opens, no traceback.
require_settings()
nav.run()
