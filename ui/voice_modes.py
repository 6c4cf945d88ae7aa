"""The voice page's modes — which voice speaks — and the session.config each one makes.

- *Preset voice* (CustomVoice): a voice of the model, with optional style instructions ("warm, slow, smiling").
- *Design a voice* (VoiceDesign): a voice made from a description; the description is required.
- *Clone a voice* (Base): a reference recording (recorded in the browser or uploaded), used once as `ref_audio`
  or saved as a named voice (`backend.client("voices")`) and picked later under *A saved voice*.

Only the modes the target's model has (`backend.client("voice").task_types()`) are offered; one caption names the model
to deploy for the others. Cloning needs the speaker's consent: a ticked checkbox and the id of their consent
recording, or a clone neither speaks nor is saved. The reference is checked by services.speech.load_reference
and its problems are shown in that service's words; the recording itself never goes into a message or a log.
Widgets keep their values while hidden and across pages (`persist_state`), and the checked reference stays in
the session until it is replaced or removed: switching modes loses nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from protocol.limits import FIRST_CHUNK_FRAMES, INSTRUCTIONS_MAX_CHARS, REFERENCE_AUDIO_SECONDS, VOICE_SAMPLE_MAX_BYTES
from protocol.speech import SessionConfig, models_for_task
from services.base import Backend
from services.speech import ReferenceAudio, SavedVoice, load_reference, speech_config
from ui import auth, resources, voice_catalog
from ui.text import code, plain, shorten
from ui.workspace_views import by_line, owner_of, share_toggle

MODES = {"CustomVoice": "Preset voice", "VoiceDesign": "Design a voice", "Base": "Clone a voice"}
NEW, SAVED = "new", "saved"
SOURCES = {NEW: "A new recording", SAVED: "A saved voice"}
RECORD, UPLOAD = "record", "upload"
HOW = {RECORD: "Record in the browser", UPLOAD: "Upload a file"}
UPLOAD_TYPES = ["wav", "mp3", "flac", "ogg"]
SERVER_DEFAULT = "server default"
FRAMES: list[Any] = [SERVER_DEFAULT, *range(int(FIRST_CHUNK_FRAMES.lo), int(FIRST_CHUNK_FRAMES.hi) + 1)]
STUDIO_USER = "studio user"
CONSENT_LABEL = "The speaker agreed to have their voice cloned"
KEEP = "session"  # widgets keep what was typed while hidden (another mode) and across pages
SHOWN = 80  # characters of a description or style in a take's label
PREVIEW = ("**Offline preview**: the offline engine speaks with a CPU voice (Piper). Style instructions, designed "
           "voices and clones are a labelled preview of what Qwen3-TTS does — they change that voice's rate, pitch, "
           "pauses and level; a vLLM-Omni server or SageMaker runs the real model.")


# -- what the target offers -----------------------------------------------------------------------------
def mode_picker(task_types: tuple[str, ...], deploys_models: bool, *, demo: bool = False, note: str | None = None) -> str:
    """The modes the model has (others not offered, one caption naming what to deploy — not on a demo's
    customer-facing screen, which offers what it offers); the chosen one. `note`: what the target's catalog
    could not read (the voices are then offered unchecked), in one line."""
    state = st.session_state
    if note:
        st.caption(f"ℹ️ {plain(note)}")
    offered = [t for t in MODES if t in task_types] or ["CustomVoice"]
    if state.get("voice_mode") not in offered:  # a new target without the mode chosen before
        state["voice_mode"] = offered[0]
    st.radio("Voice", offered, format_func=MODES.__getitem__, horizontal=True, key="voice_mode", persist_state=KEEP)
    if (missing := [t for t in MODES if t not in offered]) and not demo:
        how = ("`python -m infra deploy --voice-model MODEL`" if deploys_models
               else "`vllm serve MODEL --omni`, or the offline engine, which previews every mode")
        needs = "; ".join(f"*{MODES[t]}* needs {' or '.join(map(code, models_for_task(t)))}" for t in missing)
        st.caption(f"Not offered by this target's voice model — {needs}. Deploy one: {how}.")
    return state["voice_mode"]


def saved_voices() -> tuple[list[SavedVoice], str | None]:
    """The target's saved voices, or none and why."""
    try:
        return voice_catalog.saved_voices(), None
    except StudioError as exc:
        return [], str(exc)


# -- the fields of each mode ----------------------------------------------------------------------------
LANGUAGE_HELP = ("The language of the text. The offline engine (and an emulated endpoint, which runs it) accepts "
                 "every language the model does, but speaks them all with its one English voice; its preset "
                 "speakers are that voice at different pitches and rates.")


def mode_fields(mode: str, backend: Backend, voices: list[str], languages: list[str]) -> None:
    saved, problem = saved_voices()
    c1, c2 = st.columns(2)
    if mode == "CustomVoice":
        taken = {v.name.lower() for v in saved}  # saved voices are for cloning, not presets
        c1.selectbox("Preset voice", [v for v in voices if v.lower() not in taken] or voices, key="voice_voice",
                     persist_state=KEEP)
    (c2 if mode == "CustomVoice" else c1).selectbox("Language", languages, key="voice_language", help=LANGUAGE_HELP)
    if mode == "CustomVoice":
        st.text_input("Style (optional)", key="voice_style", max_chars=INSTRUCTIONS_MAX_CHARS, persist_state=KEEP,
                      placeholder="e.g. warm, slow, smiling", help="How the voice speaks, in your words")
    elif mode == "VoiceDesign":
        st.text_area("Voice description", key="voice_description", max_chars=INSTRUCTIONS_MAX_CHARS, height=90,
                     persist_state=KEEP, placeholder="e.g. a calm, low female voice with a slight British accent",
                     help="Required: the model makes a voice that fits it")
    else:
        source = st.radio("Voice to clone", list(SOURCES), format_func=SOURCES.__getitem__, horizontal=True,
                          key="voice_clone_source", persist_state=KEEP)
        if source == SAVED:
            _saved_fields(backend, saved, problem)
        else:
            _new_clone_fields()


def _new_clone_fields() -> None:
    how = st.radio("Reference", list(HOW), format_func=HOW.__getitem__, horizontal=True, key="voice_ref_how",
                   persist_state=KEEP, label_visibility="collapsed")
    lo, hi = REFERENCE_AUDIO_SECONDS
    if how == RECORD:
        st.audio_input(f"Record 5–20 s of the speaker ({lo:.0f}–{hi:.0f} s accepted)", key="voice_recording",
                       sample_rate=24_000)
    else:
        st.file_uploader(f"A recording of the speaker: WAV, MP3, FLAC or OGG, 5–20 s, at most "
                         f"{VOICE_SAMPLE_MAX_BYTES // 2**20} MB", type=UPLOAD_TYPES, key="voice_upload")
    state = st.session_state
    ref = current_reference(state)
    if state.get("voice_ref_error"):
        st.error(plain(f"This reference cannot be used: {state['voice_ref_error']}"))
    elif ref is not None:
        c1, c2 = st.columns([3, 1], vertical_alignment="center")
        c1.success(f"Reference ready: {ref.seconds:.1f} s, average level {ref.level_dbfs:.0f} dBFS.", icon="🎙️")
        c2.button("Remove", key="voice_ref_remove", on_click=forget_reference)
    st.text_input("Transcript of the recording (optional)", key="voice_ref_text", persist_state=KEEP,
                  help="What the speaker says in it: with it the clone is closest; without, only the timbre is taken")
    st.markdown("**Consent**")
    st.checkbox(CONSENT_LABEL, key="voice_consent", persist_state=KEEP)
    st.text_input("Consent id", key="voice_consent_id", persist_state=KEEP,
                  placeholder="the id of the speaker's consent recording, e.g. consent-0412")
    if problem := consent_problem(state):
        st.caption(f"⚠️ {problem}")
    st.caption("Press **Speak** to use this recording once, or save it as a named voice to pick it later.")
    with st.container(border=True):
        c1, c2 = st.columns(2)
        c1.text_input("Name for the saved voice", key="voice_save_name", persist_state=KEEP, placeholder="e.g. anna")
        c2.text_input("Saved by", key="voice_who", persist_state=KEEP, placeholder=_saver())
        st.button("Save voice", key="voice_save", on_click=save_voice, disabled=not auth.principal().can("clone_voice"))
        _notice("voice_save_error", "voice_save_notice")


def _saved_fields(backend: Backend, saved: list[SavedVoice], problem: str | None) -> None:
    if backend.client("voices").notice:
        st.caption(plain(backend.client("voices").notice))
    if problem:
        st.error(plain(f"The saved voices cannot be listed: {problem}"))
    elif not saved:
        st.info("No saved voices on this target yet: choose *A new recording* and save it under a name.")
    else:
        by_name = {v.name: v for v in saved}
        c1, c2 = st.columns([4, 1], vertical_alignment="bottom")
        name = c1.selectbox("Saved voices", list(by_name), key="voice_saved", persist_state=KEEP)
        v, actor = by_name.get(name), auth.principal()
        theirs = v is not None and owner_of(v.user_id) is not None and actor.role != "admin"  # for them to remove
        c2.button("Delete" if backend.client("voices").server_lists else "Forget", key="voice_delete", on_click=delete_voice,
                  disabled=theirs or not actor.can("clone_voice"))
        if v is not None:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(v.created_at)) if v.created_at else "unknown"
            st.caption(plain(f"consent id {v.consent_id or 'not recorded'} · saved by {v.who or 'another client'} "
                             f"· {when} · {'with' if v.ref_text else 'no'} transcript"))
            by_line(v.user_id)
            share_toggle(resources.history(), "voice", v.record_id, v.user_id, v.shared,
                         after=voice_catalog.forget_saved_voices)
    _notice("voice_save_error", "voice_save_notice")


def _notice(error_key: str, notice_key: str) -> None:
    """What the last Save or Delete did, shown once: the next action on the page clears it."""
    error, notice = st.session_state.pop(error_key, None), st.session_state.pop(notice_key, None)
    if error:
        st.error(plain(error))
    elif notice:
        st.success(plain(notice))


def first_chunk_slider() -> None:
    st.select_slider("First audio ↔ smoothness", FRAMES, key="voice_first_chunk", persist_state=KEEP,
                     format_func=lambda f: f if f == SERVER_DEFAULT else f"{f} frames",
                     help="Codec frames in the first audio chunk (initial_codec_chunk_frames): fewer start the "
                          "audio sooner, more make its start smoother. Server default leaves it to the server.")


# -- the reference, consent, and the session.config -----------------------------------------------------
def current_reference(state: MutableMapping[str, Any]) -> ReferenceAudio | None:
    """The checked reference in use. A new recording or upload replaces it (or, refused, sets the reason)."""
    for key in ("voice_recording", "voice_upload"):
        f = state.get(key)
        if f is not None and state.get("voice_ref_id") != (key, f.file_id):
            state["voice_ref_id"] = (key, f.file_id)
            try:
                state["voice_reference"], state["voice_ref_error"] = load_reference(f.getvalue()), None
            except InvalidInput as exc:
                state["voice_reference"], state["voice_ref_error"] = None, str(exc)
    return state.get("voice_reference")


def forget_reference() -> None:
    st.session_state["voice_reference"] = st.session_state["voice_ref_error"] = None


def consent_problem(values: Mapping[str, Any]) -> str | None:
    """What consent is missing before a clone may speak or be saved, or None."""
    ticked, consent_id = bool(values.get("voice_consent")), str(values.get("voice_consent_id") or "").strip()
    missing = [what for what, lacking in ((f"tick “{CONSENT_LABEL}”", not ticked),
                                          ("enter the consent id", not consent_id)) if lacking]
    if not missing:
        return None
    return f"Cloning a voice needs the speaker's consent: {' and '.join(missing)} — until then it neither speaks nor is saved."


def _reference_for_clone(values: Mapping[str, Any], reference: ReferenceAudio | None) -> ReferenceAudio:
    if problem := consent_problem(values):
        raise InvalidInput(problem)
    if reference is None:
        why = values.get("voice_ref_error")
        raise InvalidInput(f"the reference cannot be used: {why}" if why else
                           "cloning needs a reference: record or upload 5–20 s of the speaker")
    return reference


def build_config(values: Mapping[str, Any], reference: ReferenceAudio | None) -> SessionConfig:
    """The session.config of the chosen mode, from the page's values; InvalidInput naming what to fix."""
    mode = values.get("voice_mode") or "CustomVoice"
    frames = values.get("voice_first_chunk", SERVER_DEFAULT)
    common: dict[str, Any] = dict(
        language=values.get("voice_language"), split_granularity=values.get("voice_split") or "clause",
        task_type=mode, initial_codec_chunk_frames=None if frames in (None, SERVER_DEFAULT) else int(frames))
    if mode == "CustomVoice":
        return speech_config(values.get("voice_voice"), instructions=values.get("voice_style"), **common)
    if mode == "VoiceDesign":
        return speech_config(instructions=values.get("voice_description"), **common)
    if values.get("voice_clone_source") == SAVED:
        if not values.get("voice_saved"):
            raise InvalidInput("choose a saved voice, or clone a new recording")
        return speech_config(values["voice_saved"], **common)
    return speech_config(ref_audio=_reference_for_clone(values, reference), ref_text=values.get("voice_ref_text"),
                         **common)


def describe(values: Mapping[str, Any]) -> str:
    """What spoke, for a take's caption (never the recording)."""
    mode = values.get("voice_mode") or "CustomVoice"
    if mode == "VoiceDesign":
        return f"designed voice “{shorten(values.get('voice_description') or '', SHOWN)}”"
    if mode == "Base":
        saved = values.get("voice_clone_source") == SAVED
        return f"saved voice {values.get('voice_saved')}" if saved else "clone of a recording (used once)"
    style = (values.get("voice_style") or "").strip()
    return f"voice {values.get('voice_voice') or 'default'}" + (f", style “{shorten(style, SHOWN)}”" if style else "")


# -- saving and deleting voices (button callbacks) ------------------------------------------------------
def _saver() -> str:
    """Who saves a voice when the field is blank: the signed-in person's name, else "studio user"."""
    actor = auth.principal()
    return actor.name if actor.signed_in else STUDIO_USER


def _library_action(action: Callable[[], str]) -> None:
    state = st.session_state
    state["voice_save_error"] = state["voice_save_notice"] = None
    try:
        state["voice_save_notice"] = action()
    except StudioError as exc:
        state["voice_save_error"] = str(exc)
    voice_catalog.forget_saved_voices()


def save_voice() -> None:
    def save() -> str:
        state = st.session_state
        reference = _reference_for_clone(state, current_reference(state))
        who = str(state.get("voice_who") or "").strip() or _saver()
        v = voice_catalog.voices().add(str(state.get("voice_save_name") or ""), reference,
                                           state["voice_consent_id"], ref_text=state.get("voice_ref_text"), who=who)
        # Chosen in the saved voices' list for when the person turns to it. The page does not turn to it by itself:
        # a value the script gives a shown widget can be undone by a refresh the browser had already queued (the
        # utterance panel refreshes while the last take still plays), and the page then showed "A saved voice"
        # picked over the recording's fields.
        state["voice_saved"] = v.name
        return (f"Saved the voice {v.name!r} (consent id {v.consent_id}, saved by {who}): pick it under "
                "“A saved voice” above.")

    _library_action(save)


def delete_voice() -> None:
    def delete() -> str:
        said = voice_catalog.voices().delete(str(st.session_state.get("voice_saved") or ""))
        return said[:1].upper() + said[1:] + "."

    _library_action(delete)
