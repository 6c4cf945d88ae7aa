"""Form helpers shared by the pages: number inputs bounded by protocol.limits, and the
optional text fields (seed, guidance) read into numbers with a message naming what to fix."""

from __future__ import annotations

from typing import Any

import streamlit as st

from protocol.errors import InvalidInput
from protocol.limits import Range


def bounded_number(where: Any, label: str, key: str, limit: Range, *, step: float, integer: bool = True,
                   help: str | None = None) -> None:
    """A number input whose min/max are `limit`'s, drawn in `where` (a column or st).

    It gets `value=` its own state as well as `key=`: the browser can show an element's default for a
    moment while a page replaces another, and a rerun in that moment sent min_value back (FPS 1, steps 1).
    With the default equal to the state, that moment shows — and sends — the right number.
    """
    lo, hi = (int(limit.lo), int(limit.hi)) if integer else (float(limit.lo), float(limit.hi))
    where.number_input(label, key=key, value=st.session_state[key], min_value=lo, max_value=hi,
                       step=int(step) if integer else float(step), help=help)


def variant_count(key: str, limit: Range) -> None:
    """Start a Compare's "Variants" segmented control at `limit.lo` — also when its state is there as None: with
    reruns in quick succession Chromium's page has sent the control's value as None (seen on the voice page, then
    in a loaded run of the image page's browser test), and the page then failed on int(None)."""
    if st.session_state.get(key) is None:
        st.session_state[key] = int(limit.lo)


def optional_seed(text: str) -> int | None:
    """A seed typed in a text box: blank for a random one."""
    text = str(text).strip()
    if not text:
        return None
    if not text.isdigit():  # the request checks the range (protocol.limits.SEED)
        raise InvalidInput(f"seed must be a whole number (or blank for a random one); got {text!r}")
    return int(text)


def optional_number(text: str, name: str, limit: Range, *, blank: str) -> float | None:
    """A number typed in a text box, None when blank (`blank` says what blank means)."""
    text = str(text).strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidInput(f"{name} must be a number from {limit.lo:g} to {limit.hi:g} (or blank for {blank}); "
                           f"got {text!r}") from None


def as_text(value: object) -> str:
    """A recorded number back into a text box: blank for None, `3.5` not `3.50000`."""
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
