"""Compare's progress on the page: a status box with one line per variant, each line updated as that variant
finishes (services.compare's `on_progress`, called in the script's thread), so a compare of 2–4 variants is no
longer a greyed page until the last one ends."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import streamlit as st

from services.compare import OnProgress, Outcome
from ui.resources import plain


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
