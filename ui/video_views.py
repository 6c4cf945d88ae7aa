"""The video page's views: the reference image picker (gallery, upload or none), running jobs, the player
and the job list."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from protocol.errors import InvalidInput
from protocol.limits import MAX_UPLOAD_BYTES
from services.history import History, Job
from services.imaging import ACCEPTED_SUFFIXES, check_image
from services.videos import VIDEO_FILE
from ui.media_views import label, seconds, video_summary, video_timings, when
from ui.resources import plain, uploads_allowed
from ui.text import shorten

GALLERY = "From the gallery"
UPLOAD = "Upload an image"
NO_REFERENCE = "No reference (text only)"
GALLERY_JOBS = 60  # image jobs offered as references
PICK_TEXT, PROGRESS_TEXT, PROMPT_TEXT = 60, 80, 200  # characters of a prompt shown in each place

Gallery = dict[str, tuple[Path, str, str]]


def gallery_choices(history: History) -> Gallery:
    """Gallery images by "<job id>-<index>": (file, label for the picker, short name for the record)."""
    out = {}
    for job in history.jobs("image", statuses=("succeeded",), limit=GALLERY_JOBS):
        for i, path in enumerate(job.output_paths()):
            out[f"{job.id}-{i}"] = (path, f"{shorten(job.prompt, PICK_TEXT)} · {job.params.get('size')} · seed "
                                          f"{job.params.get('seed')} · {when(job.created_at)}",
                                    f"gallery image {job.id}-{i}")
    return out


def reference_picker(gallery: Gallery, on_change: Callable[[], None]) -> None:
    """Where the reference comes from (state `video_ref_source`), and the image chosen or uploaded."""
    state = st.session_state
    sources = [GALLERY, UPLOAD, NO_REFERENCE] if uploads_allowed() else [GALLERY, NO_REFERENCE]
    if state.get("video_ref_source") not in sources:
        state["video_ref_source"] = GALLERY
    st.radio("Reference image", sources, key="video_ref_source", on_change=on_change)
    source = state["video_ref_source"]
    if source == GALLERY:
        if gallery:
            st.selectbox("Gallery image", list(gallery), key="video_ref_pick", format_func=lambda k: gallery[k][1])
            st.image(str(gallery[state["video_ref_pick"]][0]), width="stretch")
        else:
            st.caption("The gallery is empty: make an image on the Image page first, or upload one.")
    elif source == UPLOAD:
        upload = st.file_uploader("Upload a reference image", type=list(ACCEPTED_SUFFIXES), key="video_upload",
                                  on_change=on_change, max_upload_size=MAX_UPLOAD_BYTES // (1024 * 1024))
        if upload is not None:
            try:
                info = check_image(upload.getvalue(), upload.name)
                st.image(upload.getvalue(), width="stretch")
                st.caption(plain(f"{upload.name} · {info.format} {info.size} · fitted to the video size when sent"))
            except InvalidInput as exc:
                st.error(plain(exc))


def chosen_reference(gallery: Gallery) -> tuple[bytes | None, str | None]:
    """(image bytes, name for the record) of the picked reference; InvalidInput saying what to pick."""
    state = st.session_state
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


def running_jobs(jobs: list[Job]) -> None:
    for job in jobs:
        notice = f": {job.meta['notice']}" if job.meta.get("notice") else ""  # e.g. starting an instance
        st.info(plain(f"{label(job)}{notice} for {seconds(job.elapsed_s())} — {shorten(job.prompt, PROGRESS_TEXT)} "
                      f"({video_summary(job)})"), icon="⏳")


def player(job: Job) -> None:
    st.subheader("Player")
    mp4 = job.path(VIDEO_FILE).read_bytes()
    left, about = st.columns([3, 2], gap="large")
    left.video(mp4, format="video/mp4", autoplay=True, muted=True,
               alt=f"Generated video: {shorten(job.prompt, PROMPT_TEXT)}")
    about.text(job.prompt)
    about.caption(plain(f"{video_summary(job)} · {video_timings(job)}"))
    about.download_button("Download MP4", mp4, file_name=f"{job.id}.mp4", mime="video/mp4", on_click="ignore",
                          key="video_download")


def job_list(jobs: list[Job], *, on_play: Callable[[str], None], on_reuse: Callable[[str], None]) -> None:
    if not jobs:
        return
    st.subheader("Jobs")
    for job in jobs:
        with st.container(border=True):
            a, b = st.columns([4, 1])
            a.markdown(f"**{label(job)}** · {plain(when(job.created_at))}")
            a.text(shorten(job.prompt, PROMPT_TEXT))
            a.caption(plain(f"{video_summary(job)} · {video_timings(job)}"))
            if job.error:
                a.error(plain(job.error))
            if job.status == "succeeded":
                b.button("Play", key=f"play-{job.id}", on_click=on_play, args=(job.id,), width="stretch")
            b.button("Reuse settings", key=f"reuse-{job.id}", on_click=on_reuse, args=(job.id,), width="stretch")
