"""The voice page's Compare: the text above spoken by 2–4 variants at once (services/compare.py), each a voice,
a mode, a style, a split granularity, a first-audio knob and a target; the takes side by side with TTFA, RTF,
latency and cost. Form state under `vocmp_*` keys (variant i's under `vocmp_<i>_*`)."""

from __future__ import annotations

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from protocol.limits import FIRST_CHUNK_FRAMES
from services.base import Backend
from services.compare import VARIANTS, Outcome, VoiceVariant, compare_voices
from services.settings import Settings
from ui.auth import principal
from ui.compare_progress import compare_button, cost_line, outcome_columns, run_variants
from ui.forms import optional_number, variant_count
from ui.image_compare_views import LABELS, PRICE
from ui.media_views import seconds
from ui.target_views import picked_target, target_book, target_picker
from ui.text import plain

SPLITS = {"clause": "clauses", "sentence": "sentences", "none": "whole text"}
DEFAULT_VOICE = "(the model's default)"


def init_voice_compare_state() -> None:
    state = st.session_state
    variant_count("vocmp_count", VARIANTS)
    for i in range(int(VARIANTS.hi)):
        for name, value in {"label": LABELS[i], "target": "default", "price": "", "voice": DEFAULT_VOICE,
                            "mode": "CustomVoice", "style": "", "split": "clause", "first": ""}.items():
            state.setdefault(f"vocmp_{i}_{name}", value)


def run_voice_compare(settings: Settings, backend: Backend, text: str) -> None:
    """Compare's callback: a refusal goes to `vocmp_error` and nothing is spoken."""
    state = st.session_state
    book = target_book()

    def make_variants() -> list[VoiceVariant]:
        variants, offered = [], book.options("voice")
        for i in range(int(state["vocmp_count"])):
            g = lambda name: state.get(f"vocmp_{i}_{name}")  # noqa: E731
            label = str(g("label")).strip() or LABELS[i]
            try:
                price = optional_number(g("price"), "the price per hour (USD)", PRICE, blank="no price")
                first = optional_number(g("first"), "the first-audio frames", FIRST_CHUNK_FRAMES,
                                        blank="the server's default")
                if first is not None and first != int(first):
                    raise InvalidInput(f"the first-audio frames must be a whole number, not {first:g}")
                target = picked_target(offered, f"vocmp_{i}_target", price)
            except StudioError as exc:
                raise type(exc)(f"variant {label}: {exc}") from None
            options = {"voice": None if g("voice") == DEFAULT_VOICE else g("voice"), "task_type": g("mode"),
                       "instructions": g("style"), "split_granularity": g("split"),
                       "initial_codec_chunk_frames": None if first is None else int(first)}
            variants.append(VoiceVariant(label, text, options, target))
        return variants

    run_variants("vocmp", make_variants, lambda v, on_progress: compare_voices(
        v, settings=settings, default=backend, actor=principal(), book=book, on_progress=on_progress),
        "Speaking with")


def voice_compare(voices: list[str], task_types: tuple[str, ...], on_compare, *, model_default: bool = True) -> None:
    """The variants' columns, Compare, its error, and the last compare's takes side by side. `model_default`:
    whether "(the model's default)" voice is offered (not in a demo that names its voices)."""
    state = st.session_state
    choices = [DEFAULT_VOICE, *voices] if model_default or not voices else list(voices)
    offered = target_book().options("voice")
    st.caption("Speaks the text above with each variant; a style is the preset voice's instructions, or a "
               "designed voice's description (mode VoiceDesign).")
    st.segmented_control("Variants", list(range(int(VARIANTS.lo), int(VARIANTS.hi) + 1)), key="vocmp_count",
                         required=True)
    modes = [m for m in task_types if m != "Base"] or ["CustomVoice"]
    for i, col in enumerate(st.columns(int(state["vocmp_count"]))):
        with col.container(border=True):
            st.text_input("Label", key=f"vocmp_{i}_label", max_chars=40)
            target_picker(offered, f"vocmp_{i}_target")
            if state[f"vocmp_{i}_mode"] not in modes:
                state[f"vocmp_{i}_mode"] = modes[0]
            st.selectbox("Variant mode", modes, key=f"vocmp_{i}_mode")
            if state.get(f"vocmp_{i}_voice") not in choices:
                state[f"vocmp_{i}_voice"] = choices[0]
            st.selectbox("Variant voice", choices, key=f"vocmp_{i}_voice")
            st.text_input("Variant style", key=f"vocmp_{i}_style", placeholder="slow and warm")
            st.selectbox("Split into", list(SPLITS), key=f"vocmp_{i}_split", format_func=SPLITS.get)
            st.text_input("First-audio frames", key=f"vocmp_{i}_first", placeholder="server default",
                          help=f"{FIRST_CHUNK_FRAMES.lo:g}–{FIRST_CHUNK_FRAMES.hi:g}: smaller is earlier first audio")
            st.text_input("Price per hour (USD)", key=f"vocmp_{i}_price", placeholder="from the price table, or none")
    compare_button("vocmp", on_compare)
    outcomes: list[Outcome] = state.get("vocmp_outcomes") or []
    for outcome in outcome_columns(outcomes):
        if outcome.error or outcome.media is None:
            st.error(plain(outcome.error or "no audio"))
            continue
        st.audio(outcome.media, format="audio/wav")
        f = outcome.figures
        ttfa = "—" if f.get("ttfa_ms") is None else f"{f['ttfa_ms']:.0f} ms"
        rtf = "—" if f.get("rtf") is None else f"{f['rtf']:.2f}"
        st.markdown(f"TTFA **{ttfa}** · RTF **{rtf}** · latency **{seconds(outcome.latency_s)}**")
        st.caption(plain(cost_line(outcome, "take", "no audio")))
