"""Video studio: a motion prompt and a reference image in, a short MP4 out — as a job that keeps running
(and stays in the history) while the page shows its progress."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from services.history import UNFINISHED
from services.imaging import ACCEPTED_SUFFIXES, check_image
from services.videos import (
    DEFAULT_FPS,
    DEFAULT_FRAMES,
    DEFAULT_GUIDANCE,
    DEFAULT_HEIGHT,
    DEFAULT_STEPS,
    DEFAULT_WIDTH,
    SMOKE_TEST_STEPS,
    VIDEO_FILE,
    VideoRequest,
)
from ui import resources
from ui.media_views import label, seconds, video_summary, video_timings, when

GALLERY = "From the gallery"
UPLOAD = "Upload an image"
NO_REFERENCE = "No reference (text only)"
JOB_LIST_SIZE = 20
REFRESH_S = 1.0
state = st.session_state

resources.sidebar()
st.title("Video")
st.caption("Describe the motion, pick a reference image, and press **Generate**. The job runs on its own: "
           "you can watch its progress here, reload the page, or come back later — it stays in the list below.")

try:
    backend = resources.backend()
    history = resources.history()
    jobs = resources.video_jobs()
except StudioError as exc:
    st.error(f"The video backend is not available: {resources.plain(exc)}")
    st.stop()
if backend.name == "offline":
    st.info("The offline engine animates the reference (or a preview of the prompt) into a real H.264 MP4 "
            "labelled OFFLINE PREVIEW; it is not Wan2.1-VACE output.", icon="🔖")

for key, value in {"video_prompt": "", "video_ref_source": GALLERY, "video_width": DEFAULT_WIDTH,
                   "video_height": DEFAULT_HEIGHT, "video_frames": DEFAULT_FRAMES, "video_fps": DEFAULT_FPS,
                   "video_steps": DEFAULT_STEPS, "video_guidance": DEFAULT_GUIDANCE, "video_seed": ""}.items():
    state.setdefault(key, value)
picked = state.pop("video_use_reference", None)  # "Use for video" on the image page
if picked:
    state["video_ref_source"], state["video_ref_pick"] = GALLERY, picked


def _gallery() -> dict[str, tuple[Path, str, str]]:
    """Gallery images by "<job id>-<index>": (file, label for the picker, short name for the record)."""
    out = {}
    for job in history.jobs("image", statuses=("succeeded",), limit=60):
        for i, path in enumerate(job.output_paths()):
            text = job.prompt if len(job.prompt) <= 60 else job.prompt[:60] + "…"
            out[f"{job.id}-{i}"] = (path, f"{text} · {job.params.get('size')} · seed {job.params.get('seed')} · "
                                          f"{when(job.created_at)}", f"gallery image {job.id}-{i}")
    return out


gallery = _gallery()
if state.get("video_ref_pick") and state["video_ref_pick"] not in gallery:
    state.pop("video_ref_pick")  # deleted or too old: fall back to the newest


def _reference() -> tuple[bytes | None, str | None]:
    source = state["video_ref_source"]
    if source == GALLERY:
        key = state.get("video_ref_pick")
        if not key:
            raise InvalidInput("there is no image in the gallery yet: make one on the Image page, upload one, "
                               f"or choose “{NO_REFERENCE}”")
        path, _, name = gallery[key]
        return path.read_bytes(), name
    if source == UPLOAD:
        upload = state.get("video_upload")
        if upload is None:
            raise InvalidInput("no image uploaded: drop a PNG, JPEG or WebP file on the uploader, "
                               f"or choose “{NO_REFERENCE}”")
        return upload.getvalue(), upload.name
    return None, None


def _seed() -> int | None:
    text = str(state["video_seed"]).strip()
    if not text:
        return None
    if not text.isdigit():
        raise InvalidInput(f"seed must be a whole number (or blank for a random one); got {text!r}")
    return int(text)


def _generate() -> None:
    """Generate's callback: the job is recorded and started before the page redraws, so it shows at once."""
    state["video_error"] = None
    try:
        reference, name = _reference()
        request = VideoRequest(prompt=state["video_prompt"], width=int(state["video_width"]),
                               height=int(state["video_height"]), frames=int(state["video_frames"]),
                               fps=int(state["video_fps"]), steps=int(state["video_steps"]),
                               guidance=float(state["video_guidance"]), seed=_seed(), reference=reference,
                               reference_name=name)
        state["video_current"] = jobs.start(request).id
    except StudioError as exc:
        state["video_error"] = str(exc)


def _reuse(job_id: str) -> None:
    job = history.get(job_id)
    p = job.params
    state.update(video_prompt=job.prompt, video_width=p["width"], video_height=p["height"], video_frames=p["frames"],
                 video_fps=p["fps"], video_steps=p["steps"], video_guidance=float(p["guidance"]),
                 video_seed=str(p.get("seed") or ""), video_error=None)


def _clear_error() -> None:
    state["video_error"] = None  # a new reference: the last Generate's complaint no longer applies


def _play(job_id: str) -> None:
    state["video_current"] = job_id


left, right = st.columns([3, 2], gap="large")
with right:
    st.radio("Reference image", [GALLERY, UPLOAD, NO_REFERENCE], key="video_ref_source", on_change=_clear_error)
    source = state["video_ref_source"]
    if source == GALLERY:
        if gallery:
            st.selectbox("Gallery image", list(gallery), key="video_ref_pick", format_func=lambda k: gallery[k][1])
            st.image(str(gallery[state["video_ref_pick"]][0]), width="stretch")
        else:
            st.caption("The gallery is empty: make an image on the Image page first, or upload one.")
    elif source == UPLOAD:
        upload = st.file_uploader("Upload a reference image", type=list(ACCEPTED_SUFFIXES), key="video_upload",
                                  on_change=_clear_error)
        if upload is not None:
            try:
                info = check_image(upload.getvalue(), upload.name)
                st.image(upload.getvalue(), width="stretch")
                st.caption(resources.plain(f"{upload.name} · {info.format} {info.size} · fitted to the video size when sent"))
            except InvalidInput as exc:
                st.error(resources.plain(exc))

with left:
    # Number inputs get `value=` their own state as well as `key=`: the browser can show an element's default
    # for a moment while a page replaces another, and a rerun in that moment sent min_value back (FPS 1,
    # steps 1). With the default equal to the state, that moment shows — and sends — the right number.
    st.text_area("Motion prompt", key="video_prompt", height=100,
                 placeholder="The camera slowly pushes in while the waves roll onto the beach")
    c = st.columns(3)
    c[0].number_input("Width", key="video_width", value=state["video_width"], min_value=64, max_value=1280, step=16, help="rounded down to a multiple of 16")
    c[1].number_input("Height", key="video_height", value=state["video_height"], min_value=64, max_value=1280, step=16, help="rounded down to a multiple of 16")
    c[2].number_input("Frames", key="video_frames", value=state["video_frames"], min_value=1, max_value=257, step=4,
                      help="Wan rounds to 4k+1: 17, 33, 49, …")
    c = st.columns(3)
    c[0].number_input("FPS", key="video_fps", value=state["video_fps"], min_value=1, max_value=60, step=1)
    c[1].number_input("Steps", key="video_steps", value=state["video_steps"], min_value=1, max_value=200, step=1,
                      help=f"{DEFAULT_STEPS} keeps the reference's composition; {SMOKE_TEST_STEPS} is a smoke test only")
    c[2].number_input("Guidance", key="video_guidance", value=state["video_guidance"], min_value=0.0, max_value=20.0, step=0.5)
    st.text_input("Seed", key="video_seed", placeholder="random", help="blank: a random seed (recorded with the job)")
    if int(state["video_steps"]) <= SMOKE_TEST_STEPS:
        st.warning(f"{int(state['video_steps'])} steps is a **smoke test only**: the video will not keep the "
                   f"reference's composition. Use {DEFAULT_STEPS} for a real result.", icon="⚠️")
    seconds_long = int(state["video_frames"]) / max(1, int(state["video_fps"]))
    st.caption(f"About {seconds_long:.1f} s of video.")
    st.button("Generate", type="primary", on_click=_generate)
    if state.get("video_error"):
        st.error(resources.plain(state["video_error"]))

active_at_start = {j.id for j in history.jobs("video", statuses=UNFINISHED, limit=None)}


@st.fragment(run_every=REFRESH_S if active_at_start else None)
def progress() -> None:
    """Jobs still running, with their elapsed time, refreshed every second; the page redraws when one ends."""
    active = history.jobs("video", statuses=UNFINISHED, limit=None)
    if active_at_start - {j.id for j in active}:
        st.rerun(scope="app")  # one finished: show its video and stop refreshing
    for job in active:
        text = job.prompt if len(job.prompt) <= 80 else job.prompt[:80] + "…"
        st.info(resources.plain(f"{label(job)} for {seconds(job.elapsed_s())} — {text} ({video_summary(job)})"),
                icon="⏳")


progress()

finished = history.jobs("video", statuses=("succeeded",), limit=1)
current_id = state.get("video_current")
current = history.get(current_id) if current_id else None
if current is None or current.status != "succeeded":
    current = finished[0] if finished else None
if current is not None and current.path(VIDEO_FILE).exists():
    st.subheader("Player")
    mp4 = current.path(VIDEO_FILE).read_bytes()
    player, about = st.columns([3, 2], gap="large")
    player.video(mp4, format="video/mp4", autoplay=True, muted=True,
                 alt=f"Generated video: {current.prompt[:200]}")
    about.text(current.prompt)
    about.caption(resources.plain(f"{video_summary(current)} · {video_timings(current)}"))
    about.download_button("Download MP4", mp4, file_name=f"{current.id}.mp4", mime="video/mp4", on_click="ignore",
                          key="video_download")

all_jobs = history.jobs("video", limit=JOB_LIST_SIZE)
if all_jobs:
    st.subheader("Jobs")
    for job in all_jobs:
        with st.container(border=True):
            a, b = st.columns([4, 1])
            a.markdown(f"**{label(job)}** · {resources.plain(when(job.created_at))}")
            a.text(job.prompt if len(job.prompt) <= 200 else job.prompt[:200] + "…")
            a.caption(resources.plain(f"{video_summary(job)} · {video_timings(job)}"))
            if job.error:
                a.error(resources.plain(job.error))
            if job.status == "succeeded":
                b.button("Play", key=f"play-{job.id}", on_click=_play, args=(job.id,), width="stretch")
            b.button("Reuse settings", key=f"reuse-{job.id}", on_click=_reuse, args=(job.id,), width="stretch")
