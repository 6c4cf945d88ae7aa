"""The Sound page's parts: the form's defaults and its run, and the kept sounds — each with its player, waveform,
settings, download, a link to it, sharing, rename and delete."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from protocol.errors import StudioError
from services.base import Backend
from services.history import History, Job
from services.sound import DEFAULT_SECONDS, SoundRequest, record_sound, waveform
from services.sound.request import DEFAULT_GUIDANCE, DEFAULT_STEPS
from ui.code_views import code_panel
from ui.forms import as_text, optional_seed
from ui.gallery_views import item_link, manage, title_and_prompt
from ui.media_views import when
from ui.text import plain
from ui.workspace_views import allowed, by_line, share_toggle

SOUND_PAGE = "pages/sound.py"
FORM = {"sound_prompt": "", "sound_negative": "", "sound_seconds": DEFAULT_SECONDS, "sound_steps": DEFAULT_STEPS,
        "sound_guidance": DEFAULT_GUIDANCE, "sound_seed": "", "sound_format": "wav"}
MIME = {"wav": "audio/wav", "flac": "audio/flac", "mp3": "audio/mpeg"}


def init_state() -> None:
    for key, value in FORM.items():
        st.session_state.setdefault(key, value)


def generate(backend: Backend, history: History) -> None:
    """The form's run (a callback): one sound, kept in the history; the error in the state when it fails."""
    state = st.session_state
    state["sound_error"] = None
    try:
        request = SoundRequest(prompt=state["sound_prompt"], seconds=float(state["sound_seconds"]),
                               steps=int(state["sound_steps"]), guidance=float(state["sound_guidance"]),
                               seed=optional_seed(state["sound_seed"]), negative_prompt=state["sound_negative"],
                               format=state["sound_format"])
        state["sound_last"] = record_sound(backend.client("sound"), history, request).id
    except StudioError as exc:
        state["sound_error"] = str(exc)


def reuse(history: History, job_id: str) -> None:
    """Put a kept sound's exact settings back into the form (a callback: runs before the widgets)."""
    p = history.jobs.get(job_id).params
    st.session_state.update(sound_prompt=p["prompt"], sound_negative=p.get("negative_prompt") or "",
                            sound_seconds=p["seconds"], sound_steps=p["steps"], sound_guidance=p["guidance"],
                            sound_seed=as_text(p.get("seed")), sound_format=p.get("format", "wav"), sound_error=None)


def summary(job: Job) -> str:
    p, m = job.params, job.meta
    length = f"{m['seconds']:.2f} s" if "seconds" in m else f"{p['seconds']:g} s asked"
    return f"{length} · {p['steps']} steps · guidance {p['guidance']:g} · seed {p.get('seed')} · {p.get('format', 'wav')}"


def sounds(jobs: list[Job], *, history: History, on_reuse: Callable[[str], None], key_prefix: str = "") -> None:
    """Each kept sound, newest first."""
    makes = allowed("generate")
    for job in jobs:
        with st.container(border=True):
            key = f"{key_prefix}{job.id}"
            name = job.outputs[0] if job.status == "succeeded" and job.outputs else None
            title_and_prompt(job)
            if name is None:
                st.error(plain(f"{job.status}: {job.error or 'no sound'}"))
            else:
                fmt = name.rsplit(".", 1)[-1]
                url = job.url(name)
                data = job.file(name) if url is None else None
                st.audio(url or data, format=MIME.get(fmt, "audio/wav"))
                if data is not None:
                    st.image(waveform(data), width="stretch")
                if job.meta.get("preview"):
                    st.caption(plain("🔖 Offline preview — a procedural sound made from the prompt and seed by the "
                                     "offline engine, not by Stable Audio Open"))
                if data is not None:
                    st.download_button(f"Download {fmt.upper()}", data, file_name=f"{job.id}.{fmt}",
                                       mime=MIME.get(fmt), key=f"download-{key}", on_click="ignore")
                elif url is not None:
                    st.link_button(f"Download {fmt.upper()}", job.url(name, download_as=f"{job.id}.{fmt}") or url)
            st.caption(plain(f"{summary(job)} · {when(job.created_at)}"))
            by_line(job.user_id)
            if makes:
                st.button("Reuse these settings", key=f"reuse-{key}", on_click=on_reuse, args=(job.id,))
            item_link(SOUND_PAGE, job)
            if name is not None:
                code_panel(history, job.id, key=key_prefix)
            share_toggle(history, "job", job.id, job.user_id, job.shared, key_prefix=key_prefix)
            manage(history, job, key_prefix=key_prefix)
