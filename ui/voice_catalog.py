"""What the chosen backend's voice model offers — its voices, languages and task types, and the voices people
saved on it — cached briefly per choice (ui/resources.py's `backend_choice`), and its voice library for saving."""

from __future__ import annotations

import streamlit as st

from ui import auth, resources


@st.cache_data(ttl=30, show_spinner=False)
def _speech_catalog(name: str, url: str | None, targets: str | None = None) -> tuple[list[str], list[str]]:
    speech = resources.backend_of(name, url, targets).client("voice")
    return speech.voices(), speech.languages()


def speech_catalog() -> tuple[list[str], list[str]]:
    """(voices, languages) of the chosen backend's speech model, cached briefly (only the demo's voices in a
    demo studio). Raises StudioError."""
    voices, languages = _speech_catalog(*resources.backend_choice())
    demo = resources.settings().demo
    return (voices if demo is None else demo.voices_shown(voices)), languages


@st.cache_data(ttl=30, show_spinner=False)
def _speech_task_types(name: str, url: str | None, targets: str | None = None) -> tuple[str, ...]:
    return tuple(resources.backend_of(name, url, targets).client("voice").task_types())


def speech_task_types() -> tuple[str, ...]:
    """What the chosen backend's voice model can do (CustomVoice, VoiceDesign, Base), cached briefly; a demo
    studio without uploads offers no cloning."""
    task_types = _speech_task_types(*resources.backend_choice())
    demo = resources.settings().demo
    return task_types if demo is None else demo.task_types_shown(task_types)


@st.cache_data(ttl=30, show_spinner=False)
def _saved_voices(name: str, url: str | None, targets: str | None, actor) -> list:
    return resources.backend_of(name, url, targets).client("voices").acting(resources.history_of(actor)).list()


def saved_voices() -> list:
    """The chosen backend's saved voices this person sees (services.speech.SavedVoice), cached briefly. Raises
    StudioError."""
    return _saved_voices(*resources.backend_choice(), auth.principal())


def voices():
    """The chosen backend's voice library, saving and deleting as this session's person."""
    return resources.backend().client("voices").acting(resources.history())


def forget_saved_voices() -> None:
    """After a voice is saved or deleted: list the voices (saved and preset) afresh."""
    _saved_voices.clear()
    _speech_catalog.clear()
