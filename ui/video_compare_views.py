"""The video page's Compare: the motion prompt and reference of the form above on 2–4 variants at once
(services/compare.py), each frames / steps / guidance and a target, the videos side by side with their
figures and cost per video. Its fields say "Variant frames" etc.: the form above has its own Frames, Steps and
Guidance. Form state under `vcmp_*` keys (variant i's under `vcmp_<i>_*`)."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from protocol.limits import VIDEO_FRAMES, VIDEO_GUIDANCE, VIDEO_STEPS
from services.base import Backend
from services.compare import VARIANTS, Outcome, VideoVariant, compare_videos
from services.history import History
from services.settings import Settings
from services.videos import DEFAULT_FRAMES, DEFAULT_GUIDANCE, DEFAULT_STEPS, VIDEO_FILE, VideoRequest
from ui.compare_progress import compare_button, cost_line, outcome_columns, run_variants
from ui.forms import bounded_number, optional_number, optional_seed, variant_count
from ui.image_compare_views import LABELS, PRICE
from ui.media_views import seconds, video_summary
from ui.target_views import picked_target, target_book, target_picker
from ui.text import plain
from ui.video_views import chosen_reference


def init_video_compare_state() -> None:
    state = st.session_state
    variant_count("vcmp_count", VARIANTS)
    for i in range(int(VARIANTS.hi)):
        for name, value in {"label": LABELS[i], "target": "default", "price": "",
                            "frames": DEFAULT_FRAMES, "steps": DEFAULT_STEPS, "guidance": DEFAULT_GUIDANCE}.items():
            state.setdefault(f"vcmp_{i}_{name}", value)


def run_video_compare(settings: Settings, history: History, backend: Backend, gallery) -> None:
    """Compare's callback: the form above's prompt, size, fps, seed and reference; each variant's own frames,
    steps, guidance and target. A refusal goes to `vcmp_error` and nothing runs."""
    state = st.session_state

    def make_variants() -> list[VideoVariant]:
        reference, name = chosen_reference(gallery)
        seed = optional_seed(state["video_seed"])
        variants, offered = [], target_book().options("video")
        for i in range(int(state["vcmp_count"])):
            label = str(state[f"vcmp_{i}_label"]).strip() or LABELS[i]
            try:
                price = optional_number(state[f"vcmp_{i}_price"], "the price per hour (USD)", PRICE, blank="no price")
                target = picked_target(offered, f"vcmp_{i}_target", price)
            except StudioError as exc:
                raise type(exc)(f"variant {label}: {exc}") from None
            request = VideoRequest(prompt=state["video_prompt"], width=int(state["video_width"]),
                                   height=int(state["video_height"]), fps=int(state["video_fps"]), seed=seed,
                                   frames=int(state[f"vcmp_{i}_frames"]), steps=int(state[f"vcmp_{i}_steps"]),
                                   guidance=float(state[f"vcmp_{i}_guidance"]), reference=reference,
                                   reference_name=name)
            variants.append(VideoVariant(label, request, target))
        return variants

    run_variants("vcmp", make_variants, lambda v, on_progress: compare_videos(
        v, settings=settings, history=history, default=backend, on_progress=on_progress), "Generating videos:")


def video_compare(on_compare) -> None:
    """The variants' columns, Compare, its error, and the last compare's videos side by side."""
    state = st.session_state
    offered = target_book().options("video")
    st.caption("Uses the motion prompt, size, FPS, seed and reference above; each variant sets its own frames, "
               "steps, guidance and target.")
    st.segmented_control("Variants", list(range(int(VARIANTS.lo), int(VARIANTS.hi) + 1)), key="vcmp_count",
                         required=True)
    for i, col in enumerate(st.columns(int(state["vcmp_count"]))):
        with col.container(border=True):
            st.text_input("Label", key=f"vcmp_{i}_label", max_chars=40)
            target_picker(offered, f"vcmp_{i}_target")
            bounded_number(st, "Variant frames", f"vcmp_{i}_frames", VIDEO_FRAMES, step=4)
            bounded_number(st, "Variant steps", f"vcmp_{i}_steps", VIDEO_STEPS, step=1)
            bounded_number(st, "Variant guidance", f"vcmp_{i}_guidance", VIDEO_GUIDANCE, step=0.5, integer=False)
            st.text_input("Price per hour (USD)", key=f"vcmp_{i}_price", placeholder="from the price table, or none")
    compare_button("vcmp", on_compare)
    outcomes: list[Outcome] = state.get("vcmp_outcomes") or []
    for outcome in outcome_columns(outcomes):
        job = outcome.job
        mp4 = None if outcome.error or job is None else job.file(VIDEO_FILE)
        if mp4 is None:
            st.error(plain(outcome.error or "no video"))
            continue
        st.video(mp4, format="video/mp4", muted=True)
        st.markdown(f"Latency **{seconds(outcome.latency_s)}** · model time **{seconds(outcome.model_s)}**")
        st.caption(plain(video_summary(job)))
        st.caption(plain(cost_line(outcome, "video", "no video")))
