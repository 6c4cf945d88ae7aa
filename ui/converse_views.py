"""The Converse page's views: the settings, the Setup they make on the sidebar's backend (`setup_of`: a server's URL,
or SageMaker's endpoints), a conversation run from recorded turns (the CLI's pipeline or native session,
services/converse), what it shows — the transcript with both sides, each turn's timeline, voice-to-voice
p50/p95 with n — its downloads (the stereo WAV, the JSON timeline) and the conversations kept in the history, each
with its report, link and code (ui/converse_share.py); a link (?item=<id>) shows its conversation first.

A conversation's view is drawn from its timeline (the CLI's `--json` object), the same for one just held and one
from the history. "First audio" is when the studio received the agent's first audio: the page runs recorded turns
through the pipeline and plays the conversation afterwards, so it cannot know when that audio would have played.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from services.backend import Backend
from services.converse.setup import MIN_SPEECH_MS, SILENCE_MS, Setup
from services.converse.sagemaker import ConverseEndpoints
from services.converse.script import DEFAULT_SCRIPT
from services.converse.timeline import Conversation
from services.listen import ListenAudio
from ui import resources
from ui.target_views import guard, reply_picker, target_book
from ui.media_views import when
from ui.text import plain
from ui.converse_share import share_panel
from ui.item_links import linked_first
from ui.workspace_views import kept_list, share_toggle

MODES = {"pipeline": "Pipeline (listen → reply → speak)", "native": "Native speech-to-speech (the server's session)"}
REPLY_KINDS = {"script": "Scripted reply (rules you edit; not a model)",
               "chat": "A model on a registered server (OpenAI-compatible /v1/chat/completions)"}
ENDPOINT_REPLY = {"endpoint": "A model on a SageMaker endpoint (streaming chat)"}  # offered on SageMaker only
# What a model reply needs when the studio's closed set has none of it (services/targets.py reply_options)
NO_REPLY_TARGET = {
    "chat": "No server for the reply is registered: an admin adds one on the sidebar (Add a vLLM-Omni server), or "
            "choose the scripted reply",
    "endpoint": "This deployment has no endpoint that serves chat: deploy the omni endpoint (`python -m infra deploy "
                "--with omni`), or an admin names one in the settings (chat_endpoints), or choose the scripted reply"}
STAGES = (("user_speech_end_s", "speech ended"), ("transcript_final_s", "final transcript"),
          ("reply_first_token_s", "first reply token"), ("first_audio_s", "first audio received"),
          ("first_audio_played_s", "first audio played"))


def settings_form(voices: list[str], *, endpoints: bool = False) -> dict[str, Any]:
    """The settings as the user left them (session state keys `converse_*`). `endpoints`: the backend's models are
    SageMaker endpoints — a reply endpoint is offered, and native mode speaks with the omni endpoint's own voice."""
    state = st.session_state
    mode = st.radio("Mode", list(MODES), format_func=MODES.get, key="converse_mode", horizontal=True)
    voice = None
    if endpoints and mode == "native":
        st.caption("The agent speaks with the omni endpoint's own voice.")
    elif voices:
        voice = st.selectbox("The agent's voice", voices, key="converse_voice")
    kinds = reply_kinds(endpoints)
    if state.get("converse_reply_kind") not in (None, *kinds):  # a kind of another backend's: back to the script
        del state["converse_reply_kind"]
    kind = st.radio("The reply", list(kinds), format_func=kinds.get, key="converse_reply_kind")
    target: dict[str, Any] = {}
    if kind == "script":
        st.text_area("Script — scripted, not a model: one rule a line, `PATTERN => REPLY` (the pattern's words "
                     "anywhere in what you said, any case; the first rule that matches wins), `default => REPLY`, "
                     "`#` a comment", value=DEFAULT_SCRIPT, key="converse_script", height=160)
    else:
        target = reply_target(kind, "converse_reply_target", "The reply's model")
        st.text_area("System prompt", key="converse_system_prompt", height=80,
                     value="You are a helpful voice assistant. Answer in one or two short sentences.")
    detectors = {"learned": "Learned: the end-of-turn model hears when you are done",
                 "silence": "Silence: a fixed pause ends your turn"}
    detector = "silence"
    if mode == "pipeline" or not endpoints:  # native mode: the offline engine's session has the model too; a
        # SageMaker endpoint's vLLM-Omni knows the silence window only (services/converse/setup.py)
        detector = st.radio("Turn taking", list(detectors), format_func=detectors.get, key="converse_turn_detector",
                            horizontal=True, help="Learned (Smart Turn v3.2) scores each pause of 200 ms or more and "
                            "ends the turn when it hears a finished one — no half-second wait after every sentence, "
                            "and a pause mid-sentence is not taken for the end; after 1.5 s of silence the turn ends "
                            "anyway. The silence window below is the rule a pause falls back to. In native mode the "
                            "server decides, asked for its learned rule (a server without one uses the window).")
    silence = st.slider("Silence window (ms): the pause that ends your turn" + (
        " when the model cannot decide in time" if detector == "learned" else ""), *SILENCE_MS, 500, step=50,
        key="converse_silence_ms")
    with st.expander("Turn taking: the voice detector"):
        eot = 0.5
        if detector == "learned":
            eot = st.slider("End-of-turn threshold: how sure the model must be that you are done (the model's own "
                            "cut is 0.5; raise it if you are cut off, lower it to be answered sooner)", 0.05, 0.95,
                            0.5, step=0.05, key="converse_eot_threshold")
        threshold = st.slider("Threshold: how sure the voice detector must be that it hears speech (the Silero VAD's "
                              "probability; native mode: the server VAD's own threshold). Raise it if background "
                              "voices interrupt the agent", 0.05, 0.95, 0.5, step=0.05,
                              key="converse_vad_threshold")
        min_speech = st.slider("Minimum speech (ms): anything shorter — a cough, a click — is no turn and does not "
                               "interrupt the agent", *MIN_SPEECH_MS, 100, step=20, key="converse_min_speech_ms")
    return {"mode": mode, "voice": voice, "reply_kind": kind,
            "script": state.get("converse_script") if kind == "script" else None,
            "reply_url": None, "reply_endpoint": None, **target,
            "system_prompt": state.get("converse_system_prompt") if kind != "script" else None,
            "silence_ms": int(silence), "vad_threshold": float(threshold), "min_speech_ms": int(min_speech),
            "turn_detector": detector, "eot_threshold": float(eot)}


def reply_kinds(endpoints: bool) -> dict[str, str]:
    """The replies offered: the script; a model on a registered server; on SageMaker, on an endpoint. A demo studio
    answers with a script only (its visitors aim the studio nowhere)."""
    if resources.settings().demo is not None:
        return {"script": REPLY_KINDS["script"]}
    return REPLY_KINDS | (ENDPOINT_REPLY if endpoints else {})


def reply_target(kind: str, key: str, label: str) -> dict[str, Any]:
    """The picker of a model reply's target (`kind` chat: a registered server; endpoint: a chat endpoint of the
    deployment) — the studio's closed set, never a typed address — as the settings' `reply_url` or
    `reply_endpoint`; `reply_missing` says what to do when the set has none."""
    picked = reply_picker(target_book().reply_options(), "server" if kind == "chat" else "sagemaker", key, label)
    if picked is None:
        return {"reply_missing": NO_REPLY_TARGET[kind]}
    return {"reply_url": picked.url} if kind == "chat" else {"reply_endpoint": picked.endpoint}


@st.cache_resource(show_spinner=False)
def _endpoints(choice: tuple[str, str | None, str | None]) -> ConverseEndpoints:
    """The SageMaker endpoints of the sidebar's choice (names only: nothing is asked of AWS), one per deployment."""
    return ConverseEndpoints.of(resources.settings())


def setup_of(backend: Backend, settings: dict[str, Any]) -> Setup:
    """The settings as a conversation's Setup on `backend` (the sidebar's). A server at a URL (the offline engine, a
    vLLM-Omni server) listens, speaks and holds the native session. SageMaker (its models deployed as endpoints):
    the listen and voice endpoints through the backend's listener and speech client, the omni endpoint's session
    (EndpointSession), the reply endpoint when chosen; what the mode needs and is not there is a ConfigError in one
    line saying what to do. The reply's target is one the studio's closed set offered, and the Setup holds this
    person's `guard()`, which checks it again before any reply stage is built. Nothing is sent to any target here."""
    if missing_reply := settings.get("reply_missing"):
        raise InvalidInput(missing_reply)
    script = settings["reply_kind"] == "script"
    common: dict[str, Any] = {
        "mode": settings["mode"], "script": (settings["script"] or "") if script else None,
        "script_name": "the script", "reply_url": settings.get("reply_url"),
        "system_prompt": None if script else settings["system_prompt"] or None, "voice": settings["voice"],
        "silence_ms": settings["silence_ms"], "vad_threshold": settings["vad_threshold"],
        "min_speech_ms": settings["min_speech_ms"], "turn_detector": settings.get("turn_detector", "learned"),
        "eot_threshold": settings.get("eot_threshold", 0.5), "guard": guard()}
    if not backend.capabilities.deploys_models:  # a server at its URL does it all
        url = backend.target
        return Setup(listen=url, speak=url, url=url, **common)
    where = _endpoints(resources.backend_choice())
    if (missing := where.missing(settings["mode"])) is not None:
        raise missing
    return Setup(listen=backend.client("listen") if where.listen else None, speak=backend.client("voice") if where.voice else None,
                 url=where.session(), reply_endpoint=settings.get("reply_endpoint"), aws=where.aws, **common)


def converse(setup: Setup, inputs: list[ListenAudio]) -> Conversation:
    """Hold the conversation: the recorded turns sent as a microphone would, as `setup` (setup_of's) says."""
    runner = setup.runner()
    seconds = sum(len(a.pcm) for a in inputs) / 32000 + 120 * len(inputs)
    return resources.loop().run(runner.run(inputs), timeout=seconds)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} ms"


def _at(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def transcript_view(timeline: dict[str, Any]) -> None:
    """Both sides with their times on the conversation's clock, and each turn's stages."""
    for i, turn in enumerate(timeline.get("turns", []), start=1):
        with st.chat_message("user"):
            st.markdown(f"**{plain(turn.get('user_text') or '…')}**")
            st.caption(f"turn {i} · speech ended at {_at(turn.get('user_speech_end_s'))}")
        with st.chat_message("assistant"):
            if turn.get("reply_text"):
                st.markdown(plain(turn["reply_text"]) + (" *(interrupted)*" if turn.get("interrupted") else ""))
            elif turn.get("interrupted"):
                st.markdown("*(interrupted)* — you spoke again before its first audio, so it did not answer this turn")
            if turn.get("error"):
                st.error(plain(f"Turn {i} failed: {turn['error']}"))
            played = turn.get("first_audio_played_s", turn.get("first_audio_s"))
            st.caption(f"first audio at {_at(played)} · voice-to-voice {_ms(turn.get('voice_to_voice_ms'))}"
                       + (f" · you interrupted after {_ms(turn.get('barge_in_stop_ms'))}"
                          if turn.get("interrupted") and turn.get("barge_in_stop_ms") is not None else ""))
        end = turn.get("user_speech_end_s")
        steps = [f"{label} +{(turn[key] - end) * 1000:.0f} ms" for key, label in STAGES[1:]
                 if end is not None and turn.get(key) is not None]
        if turn.get("eot_wait_ms") is not None:  # the turn's end, decided: its own stage, first
            p = turn.get("eot_probability")
            steps.insert(0, f"turn decided +{turn['eot_wait_ms']:.0f} ms ({turn.get('eot_rule')}"
                            + (f", p {p:.2f}" if p is not None else "") + ")")
        if steps:
            st.caption("Timeline from speech ended: " + " → ".join(steps) + (
                "" if "first_audio_played_s" in turn else " (recorded turns are not played as they come: first "
                "audio received is shown)"))


def figures(timeline: dict[str, Any]) -> None:
    v2v = timeline.get("voice_to_voice_ms") or {}
    n = v2v.get("n", 0)
    a, b, c = st.columns(3)
    a.metric("Voice-to-voice p50", _ms(v2v.get("p50")))
    b.metric("Voice-to-voice p95", _ms(v2v.get("p95")))
    c.metric("Turns measured (n)", n)
    live = any("first_audio_played_s" in t for t in timeline.get("turns", []))
    st.caption(f"Voice-to-voice: your speech ended → the agent's first audio {'played' if live else 'received'}; it "
               "includes the silence window. Percentiles by the nearest rank over the turns that have it.")


def conversation_view(timeline: dict[str, Any], audio: bytes | None, key: str) -> None:
    """A conversation: its figures, transcript, the recording (you left, the agent right) and its downloads."""
    figures(timeline)
    transcript_view(timeline)
    if audio:
        st.audio(audio, format="audio/wav")
    left, right = st.columns(2)
    if audio:
        left.download_button("Download the stereo WAV", audio, file_name="conversation.wav", mime="audio/wav",
                             key=f"{key}-wav")
    right.download_button("Download the JSON timeline", json.dumps(timeline, ensure_ascii=False, indent=1),
                          file_name="conversation.json", mime="application/json", key=f"{key}-json")


def _cut_line(record: Any) -> str:
    cut = record.cut
    n = cut.get("turns", len(record.turns))
    return (f"Cut off at {when(cut['at'])}, when the studio serving it ({cut.get('replica')}) stopped: the "
            f"{n} turn{'' if n == 1 else 's'} said before {'is' if n == 1 else 'are'} kept; the recording was not.")


def cut_notice() -> None:
    """Calls whose studio process died (a restart, a team studio's replica that went away) are marked cut — any
    replica's page does it — and their person is told after reconnecting, until they dismiss it."""
    state = st.session_state
    try:
        store = resources.history().conversations
        store.cut_orphans()
        cut = store.recently_cut()
    except StudioError as exc:
        st.warning(plain(f"Calls cut off by a studio restart cannot be looked for: {exc}"))
        return
    seen = state.setdefault("converse_cut_seen", set())
    for record in cut:
        if record.id in seen:
            continue
        st.warning(plain(f"Your conversation that began {when(record.created_at)} (“{record.title}”) ended "
                         f"early. {_cut_line(record)} It is under Earlier conversations."), icon="✂️")
        st.button("Dismiss", key=f"converse-cut-{record.id}", on_click=seen.add, args=(record.id,))


def _kept_body(history: Any, record: Any) -> None:
    if record.cut:
        st.caption(plain(_cut_line(record)))
    v2v = record.timeline.get("voice_to_voice_ms") or {}
    st.caption(f"{record.mode} · {len(record.turns)} turns · voice-to-voice p50 {_ms(v2v.get('p50'))} "
               f"(n={v2v.get('n', 0)})")
    with st.expander("The conversation"):
        try:
            audio = record.audio_bytes()
        except StudioError as exc:
            st.error(plain(exc))
            audio = None
        conversation_view(record.timeline, audio, key=record.id)
    share_toggle(history, "conversation", record.id, record.user_id, record.shared)
    share_panel(history, record)


def kept_conversations(skip: str | None) -> None:
    kept_list("Earlier conversations", "conversations", lambda h, n: h.conversations.list(limit=n), _kept_body,
              skip=skip)


def share_kept(record_id: str | None) -> None:
    """The conversation just held, once kept: its report, link and code (services/code: read from the history)."""
    if record_id is None:
        return
    history = resources.history()
    try:
        record = history.conversations.get(record_id)
    except StudioError as exc:
        st.caption(plain(f"Its report and code cannot be made: {exc}"))
        return
    share_panel(history, record, key="last-")


def linked_conversation() -> None:
    """The conversation the page's link names (?item=<id>), shown first and whole (ui/item_links.py); one this person
    may not see, is gone or is still going on says so in one line."""
    def get(history: Any, record_id: str) -> Any:
        record = history.conversations.get(record_id)
        if record.status == "live":  # a call going on is nobody's to see yet
            raise KeyError(record_id)
        return record

    def draw(history: Any, record: Any) -> None:
        if record.cut:
            st.caption(plain(_cut_line(record)))
        try:
            audio = record.audio_bytes()
        except StudioError as exc:
            st.error(plain(exc))
            audio = None
        conversation_view(record.timeline, audio, key=f"linked-{record.id}")
        share_panel(history, record, key="linked-")

    linked_first("conversation", get, draw, key="converse-link-close")
