"""Video studio: a motion prompt and a reference image in, a short MP4 out — as a job that keeps running
(and stays in the history) while the page shows its progress."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from services.history import UNFINISHED
from services.videos import (
    DEFAULT_FPS,
    DEFAULT_FRAMES,
    DEFAULT_GUIDANCE,
    DEFAULT_HEIGHT,
    DEFAULT_STEPS,
    DEFAULT_WIDTH,
    VideoRequest,
)
from ui import resources
from ui.clip_views import clip_panel
from ui.forms import optional_seed
from ui.gallery_views import ITEM_PARAM, browse, linked_item
from ui.sidebar import sidebar
from ui.text import plain
from ui.video_views import GALLERY, chosen_reference, gallery_choices, job_list, player, running_jobs, video_form
from ui.video_compare_views import init_video_compare_state, run_video_compare, video_compare
from ui.workspace_views import may

REFRESH_S = 1.0
state = st.session_state

sidebar()
st.title("Video")
st.caption("Describe the motion, pick a reference image, and press **Generate**. The job runs on its own: "
           "you can watch its progress here, reload the page, or come back later — it stays in the list below.")

history = resources.require_history()
try:
    backend = resources.backend()
    jobs = resources.video_jobs()
except StudioError as exc:
    st.error(f"The video backend is not available: {plain(exc)}")
    st.stop()
if backend.capabilities.previews:
    st.info("The offline engine animates the reference (or a preview of the prompt) into a real H.264 MP4 "
            "labelled OFFLINE PREVIEW; it is not Wan2.1-VACE output.", icon="🔖")

for key, value in {"video_prompt": "", "video_ref_source": GALLERY, "video_width": DEFAULT_WIDTH,
                   "video_height": DEFAULT_HEIGHT, "video_frames": DEFAULT_FRAMES, "video_fps": DEFAULT_FPS,
                   "video_steps": DEFAULT_STEPS, "video_guidance": DEFAULT_GUIDANCE, "video_seed": ""}.items():
    state.setdefault(key, value)
picked = state.pop("video_use_reference", None)  # "Use for video" on the image page
if picked:
    state["video_ref_source"], state["video_ref_pick"] = GALLERY, picked

gallery = gallery_choices(history)
if state.get("video_ref_pick") and state["video_ref_pick"] not in gallery:
    state.pop("video_ref_pick")  # deleted or too old: fall back to the newest


def _generate() -> None:
    """Generate's callback: the job is recorded and started before the page redraws, so it shows at once."""
    state["video_error"] = None
    try:
        reference, name = chosen_reference(gallery)
        request = VideoRequest(prompt=state["video_prompt"], width=int(state["video_width"]),
                               height=int(state["video_height"]), frames=int(state["video_frames"]),
                               fps=int(state["video_fps"]), steps=int(state["video_steps"]),
                               guidance=float(state["video_guidance"]), seed=optional_seed(state["video_seed"]),
                               reference=reference, reference_name=name)
        state["video_current"] = jobs.start(request, history=history).id  # recorded as this person's
    except StudioError as exc:
        state["video_error"] = str(exc)


def _reuse(job_id: str) -> None:
    job = history.jobs.get(job_id)
    p = job.params
    state.update(video_prompt=job.prompt, video_width=p["width"], video_height=p["height"], video_frames=p["frames"],
                 video_fps=p["fps"], video_steps=p["steps"], video_guidance=float(p["guidance"]),
                 video_seed=str(p.get("seed") or ""), video_error=None)


def _clear_error() -> None:
    state["video_error"] = None  # a new reference: the last Generate's complaint no longer applies


def _play(job_id: str) -> None:
    state["video_current"] = job_id


def _compare() -> None:
    init_video_compare_state()
    with st.expander("Compare 2–4 variants side by side", expanded=bool(state.get("vcmp_outcomes"))):
        video_compare(on_compare=lambda: run_video_compare(resources.settings(), history, backend, gallery))


if may("generate"):  # the form is for those who may generate; the jobs below are for everyone
    video_form(gallery, on_generate=_generate, on_clear_error=_clear_error, below=_compare)

active_at_start = {j.id for j in history.jobs.list("video", statuses=UNFINISHED, limit=None)}
# What finished is read before the running jobs are: a job that ends in between is then in neither (the next refresh
# shows it), never in both — a player beside the same job still "running for".
finished = history.jobs.list("video", statuses=("succeeded",), limit=1)
linked = st.query_params.get(ITEM_PARAM)  # ?item=<job id>: that video in the player (the list says if it is gone)
if linked and state.get("video_link_seen") != linked:
    state["video_link_seen"] = state["video_current"] = linked
current_id = state.get("video_current")
try:
    current = history.jobs.get(current_id) if current_id else None
except StudioError:  # deleted, or not this person's to see
    current = None
if current is None or current.status != "succeeded":
    current = finished[0] if finished else None


@st.fragment(run_every=REFRESH_S if active_at_start else None)
def progress() -> None:
    """Jobs still running, with their elapsed time, refreshed every second; the page redraws when one ends."""
    active = history.jobs.list("video", statuses=UNFINISHED, limit=None)
    if active_at_start - {j.id for j in active}:
        st.rerun(scope="app")  # one finished: show its video and stop refreshing
    running_jobs(active)


progress()

clip_panel(history, backend)  # "Make a clip" from a finished video, below
if current is not None:
    player(current)  # a file deleted under its record: a line naming it

if history.jobs.count("video"):
    st.subheader("Jobs")
    browse(history, "video", "video_jobs", lambda jobs, prefix: job_list(jobs, on_play=_play, on_reuse=_reuse,
                                                                          history=history, key_prefix=prefix))
else:
    linked_item(history, "video")  # a link to a video that is gone says so
