"""A variant's Target picker, shared by the Compare tabs and the Evaluations form: the studio's closed set of
targets (services/targets.py) — the sidebar's, the registered vLLM-Omni servers, the deployment's endpoint —
never a typed address. The widget holds an option's key; a key no longer offered falls back to the sidebar's.
Converse's reply pickers (`reply_picker`) offer the same set's chat targets, and `guard()` is the set for this
session's person, which the services check again."""

from __future__ import annotations

import streamlit as st

from services.compare import Target
from services.targets import TargetGuard, TargetOption, chosen
from ui import auth
from ui.resources import target_book

__all__ = ["guard", "picked_target", "reply_picker", "target_book", "target_picker"]


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


def reply_picker(offered: list[TargetOption], kind: str, key: str, label: str) -> TargetOption | None:
    """A conversation's reply target under `key`: the options of `kind` (server: a registered server, sagemaker: a
    chat endpoint) among `offered` (`book.reply_options()`); None when there is none. A key not offered (a
    server removed meanwhile, a forged widget value) falls back to the first."""
    options = {o.key: o for o in offered if o.kind == kind}
    if not options:
        return None
    if st.session_state.get(key) not in options:
        st.session_state[key] = next(iter(options))
    st.selectbox(label, list(options), key=key, format_func=lambda k: options[k].label,
                 help="a server an admin registered, or the deployment's endpoint: never a typed address")
    return options[st.session_state[key]]


def guard() -> TargetGuard:
    """The studio's closed set for this session's person: what a service checks a target against again."""
    return TargetGuard(target_book(), auth.principal())
