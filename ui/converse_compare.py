"""The Converse page's "Compare two setups": the uploaded turns through the page's settings (A), then through a
second setup (B) that differs where the person says — the silence window, the mode, the voice, the reply — one
after the other, and their latency side by side with n (services/converse/compare.py). The two conversations are a
measurement: they are not kept in the history."""

from __future__ import annotations

from typing import Any

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from services.converse.compare import compare
from services.converse.setup import SILENCE_MS, Setup
from services.listen import load_audio
from ui import resources
from ui.converse_views import MODES, reply_kinds, reply_target
from ui.text import plain
from ui.workspace_views import may

SAME = "same"
B_REPLY = {SAME: "The same reply as A", "script": "Another script (scripted, not a model)"}


def _b_changes(voices: list[str], endpoints: bool) -> dict[str, Any]:
    """B's settings as the person left them: each a change to A (the same value as A's is no change)."""
    state = st.session_state
    left, right = st.columns(2)
    changes: dict[str, Any] = {
        "silence_ms": int(left.slider("B's silence window (ms)", *SILENCE_MS, 700, step=50, key="cmp_silence_ms"))}
    mode = right.radio("B's mode", [SAME, *MODES], format_func=lambda m: MODES.get(m, "The same as A"),
                       key="cmp_mode")
    voice = st.selectbox("B's voice", [SAME, *voices], format_func=lambda v: "The same as A" if v == SAME else v,
                         key="cmp_voice")
    changes |= {k: v for k, v in (("mode", mode), ("voice", voice)) if v != SAME}
    kinds = B_REPLY | {k: label for k, label in reply_kinds(endpoints).items() if k != "script"}
    if state.get("cmp_reply_kind") not in (None, *kinds):  # a kind of another backend's
        del state["cmp_reply_kind"]
    kind = st.radio("B's reply", list(kinds), format_func=kinds.get, key="cmp_reply_kind", horizontal=True)
    if kind == "script":
        st.text_area("B's script: `PATTERN => REPLY` a line, `default => REPLY`, `#` a comment", key="cmp_script",
                     height=120)
        changes |= {"script": state.get("cmp_script") or "", "script_name": "B's script"}
    elif kind != SAME:  # a model: on a registered server, or on a chat endpoint of the deployment
        target = reply_target(kind, "cmp_reply_target", "B's reply model")
        st.text_area("B's system prompt", key="cmp_system_prompt", height=68)
        changes |= {"script": None, **target, "system_prompt": (state.get("cmp_system_prompt") or "").strip() or None}
    return changes


def _run(a: Setup, uploads: list[Any], changes: dict[str, Any]) -> None:
    state = st.session_state
    state["cmp_error"] = state["cmp_last"] = None
    try:
        if missing := changes.pop("reply_missing", None):
            raise InvalidInput(f"B's reply: {missing}")
        b = a.changed(**changes)
        inputs = [load_audio(f.getvalue(), name=f.name) for f in uploads]
        seconds = 2 * (sum(len(x.pcm) for x in inputs) / 32000 + 120 * len(inputs))
        with st.spinner("A, then B: each turn at real time…"):
            result = resources.loop().run(compare(inputs, a, b), timeout=seconds)
    except StudioError as exc:
        state["cmp_error"] = str(exc)
        return
    except TimeoutError:
        state["cmp_error"] = "The two conversations did not finish in time: try shorter turns"
        return
    state["cmp_last"] = {"json": result.as_json(), "rows": result.rows()}


def compare_section(a: Setup | None, uploads: list[Any] | None, voices: list[str], *, endpoints: bool = False) -> None:
    """The expander: B's settings, one button, and the last comparison's table. `a`: the page's setup (None while
    its settings need fixing: said above, and nothing can start); `endpoints`: on SageMaker (a reply endpoint)."""
    state = st.session_state
    with st.expander("Compare two setups"):
        st.caption("A is the settings above; B is A with what you set here. The same uploaded turns go through A, "
                   "then through B — one after the other, so one does not slow the other.")
        changes = _b_changes(voices, endpoints)
        if may("generate") and st.button("Compare", disabled=not uploads or a is None, key="cmp_go") and a:
            _run(a, uploads or [], changes)
        if error := state.get("cmp_error"):
            st.error(plain(error))
        last = state.get("cmp_last")
        if last is None:
            return
        for side in ("a", "b"):
            d = last["json"][side]
            s, turns = d["setup"], len(d["conversation"]["turns"])
            st.caption(plain(f"{side.upper()}: {s['mode']}, silence window {s['silence_ms']} ms, reply from "
                             f"{s['reply']}, voice {s['voice'] or 'the server default'} · {turns} turns, "
                             f"{d['failed_turns']} failed"))
        st.dataframe(last["rows"], hide_index=True, width="stretch")
        ratio = last["json"]["ratio_p50"]
        st.caption(f"B/A of voice-to-voice p50: {'—' if ratio is None else f'{ratio:g}'}. Milliseconds; percentiles "
                   "by the nearest rank over the turns that have the figure (n); the stages are medians from your "
                   "speech end; first audio is when the studio received it.")
