"""The Video page's "Make a clip": a finished video with a narration (text the voice target speaks, or a kept voice
take) and a soundtrack (a prompt the sound target generates to the video's length, or a kept sound), ducked and
muxed (services/clips), shown stage by stage and kept beside the video as a clip with its parts."""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from protocol.errors import StudioError
from services.base import Backend
from services.clips import FITS
from services.clips.make import ClipPlan, keep_clip, make_finished_clip
from services.history import History, Job
from services.videos import VIDEO_FILE
from ui.text import plain, shorten

NONE, WRITE, KEPT = "None", "Write it", "A kept one"
CLIP_KEY = "clip_of"  # the video job a clip is being made from


def start_clip(job_id: str) -> None:
    """The "Make a clip" button's callback: open the panel for that video."""
    st.session_state[CLIP_KEY] = job_id
    st.session_state["clip_error"] = None


def clip_summary(job: Job) -> str | None:
    """One line on a kept clip: what was generated for it (None for a video that is not a clip)."""
    clip = job.meta.get("clip")
    if not clip:
        return None
    made = clip.get("generated") or {}
    bits = [f"narration “{shorten(made['narration']['text'], 40)}”" if "narration" in made else None,
            f"soundtrack “{shorten(made['soundtrack']['prompt'], 40)}” (seed {made['soundtrack']['seed']})"
            if "soundtrack" in made else None, f"fit: {clip['fit']}" if clip.get("fit") else None]
    return "🎞 Clip" + (f" of {clip['of']}" if clip.get("of") else "") + ": " + (
        " · ".join(b for b in bits if b) or "from files")


def clip_panel(history: History, backend: Backend) -> None:
    """The panel for the video in CLIP_KEY: the parts, then Make clip with its stages."""
    state = st.session_state
    job_id = state.get(CLIP_KEY)
    if not job_id:
        return
    try:
        video = history.jobs.get(job_id)
        mp4 = video.read(VIDEO_FILE)
    except StudioError as exc:
        st.warning(plain(f"The video {job_id} cannot be made into a clip: {exc}"))
        state[CLIP_KEY] = None
        return
    with st.container(border=True):
        st.markdown(f"**Make a clip** of {plain(video.title or shorten(video.prompt, 60))}")
        st.caption("The video's frames stay as they are; the soundtrack is ducked under the narration.")
        left, right = st.columns(2)
        narration = left.radio("Narration", (NONE, WRITE, KEPT), horizontal=True, key="clip_narration_mode")
        takes = {t.id: t for t in history.takes.list(limit=30) if t.ok} if narration == KEPT else {}
        if narration == WRITE:
            left.text_area("Narration text", key="clip_narration_text", height=80,
                           placeholder="Dawn breaks over the harbour.")
        elif narration == KEPT:
            left.selectbox("Voice take", list(takes), key="clip_take", format_func=lambda t: shorten(takes[t].text, 50)
                           ) if takes else left.info("No voice takes kept yet: make one on the Voice page.")
        soundtrack = right.radio("Soundtrack", (NONE, WRITE, KEPT), horizontal=True, key="clip_sound_mode")
        sounds = {j.id: j for j in history.jobs.list("sound", statuses=("succeeded",), limit=30)} \
            if soundtrack == KEPT else {}
        if soundtrack == WRITE:
            right.text_input("Soundtrack prompt", key="clip_sound_prompt", placeholder="calm strings, slow")
            right.text_input("Seed", key="clip_sound_seed", placeholder="random")
        elif soundtrack == KEPT:
            right.selectbox("Sound", list(sounds), key="clip_sound", format_func=lambda j: shorten(sounds[j].prompt, 50)
                            ) if sounds else right.info("No sounds kept yet: make one on the Sound page.")
        a, b = st.columns(2)
        a.slider("Duck the soundtrack under the narration (dB)", 0, 30, 12, key="clip_duck")
        b.radio("A narration longer than the video", ("refuse", *FITS), horizontal=True, key="clip_fit",
                help="trim: cut it at the video's end · hold: keep the last frame on screen until it ends")
        go, cancel = st.columns(2)
        if cancel.button("Close", key="clip_close"):
            state[CLIP_KEY] = None
            st.rerun()
        if go.button("Make clip", type="primary", key="clip_go"):
            _make(history, backend, video, mp4, takes, sounds)
        if state.get("clip_error"):
            st.error(plain(state["clip_error"]))


def _make(history: History, backend: Backend, video: Job, mp4: bytes, takes: dict, sounds: dict) -> None:
    state = st.session_state
    state["clip_error"] = None
    seed = (state.get("clip_sound_seed") or "").strip()
    narration_mode, sound_mode = state.get("clip_narration_mode"), state.get("clip_sound_mode")
    with tempfile.TemporaryDirectory(prefix="omni-clip-") as tmp, st.status("Making the clip…", expanded=True) as status:
        try:
            source, out = Path(tmp) / "video.mp4", Path(tmp) / "clip.mp4"
            source.write_bytes(mp4)
            take, sound = takes.get(state.get("clip_take")), sounds.get(state.get("clip_sound"))
            plan = ClipPlan(
                video=source,
                narration_text=(state.get("clip_narration_text") or None) if narration_mode == WRITE else None,
                narration_audio=take.wav() if narration_mode == KEPT and take is not None else None,
                soundtrack_prompt=(state.get("clip_sound_prompt") or None) if sound_mode == WRITE else None,
                soundtrack_audio=sound.read(sound.outputs[0]) if sound_mode == KEPT and sound is not None else None,
                seed=int(seed) if seed.isdigit() else None, duck_db=float(state.get("clip_duck", 12)),
                fit=None if state.get("clip_fit") == "refuse" else state.get("clip_fit"))
            outcome = make_finished_clip(backend, plan, out=out,
                                         progress=lambda stage, detail: status.write(plain(f"**{stage}** — {detail}")))
            what = " · ".join(x for x in (plan.narration_text, plan.soundtrack_prompt) if x) or "kept parts"
            job = keep_clip(history, outcome, of=video.id, prompt=f"clip of {video.id}: {what}",
                            target=backend.target, source_params=dict(video.params))
        except (StudioError, ValueError) as exc:
            status.update(label="The clip could not be made", state="error")
            state["clip_error"] = str(exc)
            return
        status.update(label=f"Clip made: {outcome.result.clip_s:.1f} s", state="complete")
    state["video_current"], state[CLIP_KEY] = job.id, None
    st.rerun()
