"""A variant's Target picker, shared by the Compare tabs and the Evaluations form: the studio's closed set of
targets (services/targets.py) — the sidebar's, the registered vLLM-Omni servers, the deployment's endpoint —
never a typed address. The widget holds an option's key; a key no longer offered falls back to the sidebar's."""

from __future__ import annotations

import streamlit as st

from services.compare import Target
from services.targets import TargetOption, chosen
from ui.resources import target_book

__all__ = ["picked_target", "target_book", "target_picker"]


def target_picker(offered: list[TargetOption], key: str) -> TargetOption:
    """The Target selectbox under `key` over `offered` (`book.options(modality)`, read once per form); returns the
    picked option."""
    options = {o.key: o for o in offered}
    if st.session_state.get(key) not in options:
        st.session_state[key] = "default"
    st.selectbox("Target", list(options), key=key, format_func=lambda k: options[k].label,
                 help="the sidebar's target, a server an admin registered, or the deployment's endpoint")
    return options[st.session_state[key]]


def picked_target(offered: list[TargetOption], key: str, usd_per_hour: float | None = None) -> Target:
    """The Target of the option under `key` among `offered` (InvalidInput when it is no longer offered)."""
    option = chosen(offered, str(st.session_state.get(key) or "default"))
    return Target(option.kind, url=option.url, endpoint=option.endpoint, usd_per_hour=usd_per_hour)  # type: ignore[arg-type]
