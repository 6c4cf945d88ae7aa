"""The image page's Compare tab: one prompt on 2–4 variants at once (services/compare.py), each a full set of
settings and a target, and the results in columns with their figures and cost per image.

The form lives in session state under `cmp_*` keys (variant i's under `cmp_<i>_*`), so a refused compare
keeps everything typed; the last outcomes stay under `cmp_outcomes` until the next compare.
"""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from protocol.limits import IMAGE_GUIDANCE, IMAGE_SIZE, IMAGE_STEPS, Range
from services.base import Backend
from services.compare import VARIANTS, ImageVariant, Outcome, compare_images
from services.history import History
from services.images import DEFAULT_SIZE, DEFAULT_STEPS, ImageRequest
from services.settings import Settings
from ui.compare_progress import compare_button, cost_line, outcome_columns, run_variants
from ui.forms import bounded_number, optional_number, optional_seed, variant_count
from ui.media_views import image_summary, seconds
from ui.target_views import picked_target, target_book, target_picker
from ui.text import plain

COMPARE = "Compare"
PRICE = Range(0.0001, 1000.0)
LABELS = "ABCD"


def _defaults(i: int) -> dict[str, object]:
    return {"label": LABELS[i], "target": "default", "price": "", "size": DEFAULT_SIZE,
            "steps": DEFAULT_STEPS * (i + 1) if DEFAULT_STEPS * (i + 1) <= IMAGE_STEPS.hi else DEFAULT_STEPS,
            "guidance": "", "seed": "", "negative": ""}


def init_compare_state() -> None:
    state = st.session_state
    state.setdefault("cmp_prompt", "")
    variant_count("cmp_count", VARIANTS)
    for i in range(int(VARIANTS.hi)):
        for name, value in _defaults(i).items():
            state.setdefault(f"cmp_{i}_{name}", value)


def _variant(i: int, prompt: str, offered) -> ImageVariant:
    state = st.session_state
    label = str(state[f"cmp_{i}_label"]).strip() or LABELS[i]
    try:
        request = ImageRequest(prompt=prompt, negative_prompt=state[f"cmp_{i}_negative"], size=state[f"cmp_{i}_size"],
                               steps=int(state[f"cmp_{i}_steps"]),
                               guidance=optional_number(state[f"cmp_{i}_guidance"], "guidance", IMAGE_GUIDANCE,
                                                        blank="the model's default"),
                               seed=optional_seed(state[f"cmp_{i}_seed"]))
        price = optional_number(state[f"cmp_{i}_price"], "the price per hour (USD)", PRICE, blank="no price")
        target = picked_target(offered, f"cmp_{i}_target", price)
    except StudioError as exc:
        raise type(exc)(f"variant {label}: {exc}") from None
    return ImageVariant(label, request, target)


def run_compare(settings: Settings, history: History, backend: Backend) -> None:
    """Compare's callback: every variant at once; a refusal goes to `cmp_error` and nothing runs."""
    state = st.session_state

    def variants() -> list[ImageVariant]:
        offered = target_book().options("image")
        return [_variant(i, state["cmp_prompt"], offered) for i in range(int(state["cmp_count"]))]

    run_variants("cmp", variants, lambda v, on_progress: compare_images(
        v, settings=settings, history=history, default=backend, on_progress=on_progress), "Generating")


def compare_form(on_compare) -> None:
    """The prompt, how many variants, each variant's column of settings and target, the Compare button."""
    state = st.session_state
    offered = target_book().options("image")
    st.text_area("Compare prompt", key="cmp_prompt", height=80, placeholder="The same prompt goes to every variant")
    st.segmented_control("Variants", list(range(int(VARIANTS.lo), int(VARIANTS.hi) + 1)), key="cmp_count",
                         required=True, help="each variant is a full set of settings and a target")
    for i, col in enumerate(st.columns(int(state["cmp_count"]))):
        with col.container(border=True):
            col_text = st.text_input
            col_text("Label", key=f"cmp_{i}_label", max_chars=40)
            target_picker(offered, f"cmp_{i}_target")
            col_text("Size (WxH)", key=f"cmp_{i}_size",
                     help=f"width x height, each {IMAGE_SIZE.lo:g}–{IMAGE_SIZE.hi:g}")
            bounded_number(st, "Steps", f"cmp_{i}_steps", IMAGE_STEPS, step=1)
            col_text("Guidance", key=f"cmp_{i}_guidance", placeholder="server default")
            col_text("Seed", key=f"cmp_{i}_seed", placeholder="random", help="the same seed makes variants comparable")
            col_text("Negative prompt", key=f"cmp_{i}_negative", placeholder="optional")
            col_text("Price per hour (USD)", key=f"cmp_{i}_price", placeholder="from the price table, or none",
                     help="the target's hourly price for a cost per image; a SageMaker endpoint's comes from the "
                          "shipped price table when left blank")
    compare_button("cmp", on_compare)


def compare_results(outcomes: list[Outcome]) -> None:
    """The last compare: one column per variant, its image, settings, figures and cost per image."""
    st.subheader("Side by side")
    for outcome in outcome_columns(outcomes):
        job = outcome.job
        if outcome.error or job is None:
            st.error(plain(outcome.error or "no image"))
            continue
        first = job.output_files()[:1]
        if first and first[0][1] is not None:
            st.image(first[0][1], width="stretch")
        if job.meta.get("preview"):
            st.caption("🔖 Offline preview — drawn by the offline engine, not by FLUX.2-klein")
        st.markdown(f"Latency **{seconds(outcome.latency_s)}** · model time **{seconds(outcome.model_s)}**")
        st.caption(plain(image_summary(job)))
        st.caption(plain(cost_line(outcome, "image", "no image")))
