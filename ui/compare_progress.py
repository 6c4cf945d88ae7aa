"""Compare's progress on the page: a status box with one line per variant, each line updated as that variant
finishes (services.compare's `on_progress`, called in the script's thread), so a compare of 2–4 variants is no
longer a greyed page until the last one ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import streamlit as st

from protocol.errors import StudioError
from services.compare import OnProgress, Outcome
from services.pricing import usd
from ui.text import plain


@contextmanager
def compare_progress(variants: Sequence[Any], doing: str) -> Iterator[OnProgress]:
    """`with compare_progress(variants, "Generating") as on_progress: compare_…(…, on_progress=on_progress)`."""
    total = len(variants)
    box = st.status(f"{doing} {total} variants at once — 0 of {total} done", expanded=True)
    lines = {}
    with box:
        for v in variants:
            lines[v.label.strip()] = line = st.empty()
            line.markdown(f"⏳ **{plain(v.label.strip())}** — running…")

    def on_progress(outcome: Outcome, done: int, of: int) -> None:
        label = outcome.variant.label
        if outcome.error:
            text = f"❌ **{plain(label)}** — failed: {plain(outcome.error[:200])}"
        else:
            took = outcome.latency_s
            text = f"✅ **{plain(label)}** — done" + ("" if took is None else f" in {took:.1f} s")
        if label in lines:
            lines[label].markdown(text)
        box.update(label=f"{doing} {of} variants at once — {done} of {of} done")

    try:
        yield on_progress
    except BaseException:
        box.update(label="The compare did not run", state="error", expanded=False)
        raise
    box.update(label=f"All {total} variants done", state="complete", expanded=False)


def run_variants(prefix: str, make_variants: Callable[[], list[Any]],
                 compare: Callable[[list[Any], OnProgress], list[Outcome]], doing: str) -> None:
    """A Compare button's callback: build the variants from the form, run them with progress shown, and keep
    the outcomes in `<prefix>_outcomes`; a refusal goes to `<prefix>_error` and nothing runs."""
    state = st.session_state
    state[f"{prefix}_error"] = None
    try:
        variants = make_variants()
        with compare_progress(variants, doing) as on_progress:
            state[f"{prefix}_outcomes"] = compare(variants, on_progress)
    except StudioError as exc:
        state[f"{prefix}_error"] = str(exc)


def compare_button(prefix: str, on_compare: Callable[[], None]) -> None:
    """The Compare button and, under it, why the last compare did not run."""
    st.button("Compare", type="primary", on_click=on_compare, key=f"{prefix}_go")
    if st.session_state.get(f"{prefix}_error"):
        st.error(plain(st.session_state[f"{prefix}_error"]))


def outcome_columns(outcomes: Sequence[Outcome]) -> Iterator[Outcome]:
    """One bordered column per outcome, headed by its label and target; the caller fills each as it is yielded."""
    for outcome, col in zip(outcomes, st.columns(max(1, len(outcomes)))):
        with col.container(border=True):
            st.markdown(f"**{plain(outcome.variant.label)}**")
            st.caption(plain(outcome.target))
            yield outcome


def cost_line(outcome: Outcome, noun: str, missing: str) -> str:
    """"$0.0012 per image at $1.1267/h", or why the cost per item is unknown."""
    cost = outcome.cost_per_item_usd
    if cost is not None:
        return f"{usd(cost, 'unit')} per {noun} at {usd(outcome.usd_per_hour, 'rate')}/h"
    return f"cost per {noun} unknown: {outcome.price_note or missing}"
