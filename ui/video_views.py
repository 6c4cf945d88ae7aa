"""The video page's views: the form (the reference image picker — gallery, upload or none — the prompt and the
settings), running jobs, the player and the job list (whose each job is, and Share with the team on one's own)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from protocol.limits import MAX_UPLOAD_BYTES, VIDEO_FPS, VIDEO_FRAMES, VIDEO_GUIDANCE, VIDEO_SIZE, VIDEO_STEPS
from services.history import History, Job
from services.imaging import ACCEPTED_SUFFIXES, check_image
from services.videos import DEFAULT_STEPS, SMOKE_TEST_STEPS, VIDEO_FILE
from ui.forms import bounded_number
from ui.media_views import label, seconds, video_summary, video_timings, when
from ui.resources import uploads_allowed
from ui.clip_views import clip_summary, start_clip
from ui.code_views import code_panel
from ui.text import plain, shorten
from ui.gallery_views import item_link, manage, title_and_prompt
from ui.workspace_views import allowed, by_line, share_toggle

log = logging.getLogger(__name__)

GALLERY = "From the gallery"
UPLOAD = "Upload an image"
NO_REFERENCE = "No reference (text only)"
GALLERY_JOBS = 60  # image jobs offered as references
VIDEO_PAGE = "pages/video.py"
PICK_TEXT, PROGRESS_TEXT, PROMPT_TEXT = 60, 80, 200  # characters of a prompt shown in each place

Gallery = dict[str, tuple[tuple[Job, str], str, str]]


def gallery_choices(history: History) -> Gallery:
    """Gallery images by "<job id>-<index>": ((job, output name), label for the picker, short name for the
    record)."""
    out = {}
    for job in history.jobs.list("image", statuses=("succeeded",), limit=GALLERY_JOBS):
        for i, name in enumerate(job.outputs):
            out[f"{job.id}-{i}"] = ((job, name), f"{shorten(job.prompt, PICK_TEXT)} · {job.params.get('size')} · seed "
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
            job, name = gallery[state["video_ref_pick"]][0]
            try:
                st.image(job.read(name), width="stretch")
            except StudioError as exc:
                missing(name, "image", exc)
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


def video_form(gallery: Gallery, *, on_generate: Callable[[], None], on_clear_error: Callable[[], None],
               below: Callable[[], None]) -> None:
    """The reference (right), the motion prompt, the settings, Generate and its error (left), then `below()` in
    the left column. Number inputs carry value= as well as key= (why: ui.forms.bounded_number)."""
    state = st.session_state
    left, right = st.columns([3, 2], gap="large")
    with right:
        reference_picker(gallery, on_change=on_clear_error)
    with left:
        st.text_area("Motion prompt", key="video_prompt", height=100,
                     placeholder="The camera slowly pushes in while the waves roll onto the beach")
        c = st.columns(3)
        bounded_number(c[0], "Width", "video_width", VIDEO_SIZE, step=16, help="rounded down to a multiple of 16")
        bounded_number(c[1], "Height", "video_height", VIDEO_SIZE, step=16, help="rounded down to a multiple of 16")
        bounded_number(c[2], "Frames", "video_frames", VIDEO_FRAMES, step=4, help="Wan rounds to 4k+1: 17, 33, 49, …")
        c = st.columns(3)
        bounded_number(c[0], "FPS", "video_fps", VIDEO_FPS, step=1)
        bounded_number(c[1], "Steps", "video_steps", VIDEO_STEPS, step=1,
                       help=f"{DEFAULT_STEPS} keeps the reference's composition; {SMOKE_TEST_STEPS} is a smoke test "
                            "only")
        bounded_number(c[2], "Guidance", "video_guidance", VIDEO_GUIDANCE, step=0.5, integer=False)
        st.text_input("Seed", key="video_seed", placeholder="random",
                      help="blank: a random seed (recorded with the job)")
        if int(state["video_steps"]) <= SMOKE_TEST_STEPS:
            st.warning(f"{int(state['video_steps'])} steps is a **smoke test only**: the video will not keep the "
                       f"reference's composition. Use {DEFAULT_STEPS} for a real result.", icon="⚠️")
        seconds_long = int(state["video_frames"]) / max(1, int(state["video_fps"]))
        st.caption(f"About {seconds_long:.1f} s of video.")
        st.button("Generate", type="primary", on_click=on_generate)
        if state.get("video_error"):
            st.error(plain(state["video_error"]))
        below()


def chosen_reference(gallery: Gallery) -> tuple[bytes | None, str | None]:
    """(image bytes, name for the record) of the picked reference; InvalidInput saying what to pick."""
    state = st.session_state
    source = state["video_ref_source"]
    if source == GALLERY:
        key = state.get("video_ref_pick")
        if not key:
            raise InvalidInput("there is no image in the gallery yet: make one on the Image page, upload one, "
                               f"or choose “{NO_REFERENCE}”")
        (job, file), _, name = gallery[key]
        try:
            return job.read(file), name
        except StudioError:
            raise InvalidInput(f"the gallery image file {file} of job {job.id} is missing from the studio's media: "
                               "pick another, or make it again on the Image page") from None
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


def missing(name: str, what: str, why: Exception) -> None:
    """The placeholder of a media file deleted (or moved) under its record: one line naming the file, not where it
    was — whoever reads it (a viewer of a shared record) is not shown the server's folder or bucket, which goes to
    the log (as services.history.base.read_kept does)."""
    log.warning("the %s file of a record is missing: %s", what, why)
    st.warning(plain(f"The {what} file {name} is missing from the studio's media (deleted or moved; the "
                     "server's log says where)."), icon="🕳️")


def player(job: Job) -> None:
    st.subheader("Player")
    url = job.url(VIDEO_FILE)  # media in a bucket: the browser streams it from there (presigned), not via the studio
    mp4 = None
    if url is None:
        try:
            mp4 = job.read(VIDEO_FILE)
        except StudioError as exc:
            missing(VIDEO_FILE, "video", exc)
            return
    left, about = st.columns([3, 2], gap="large")
    left.video(url or mp4, format="video/mp4", autoplay=True, muted=True,
               alt=f"Generated video: {shorten(job.prompt, PROMPT_TEXT)}")
    if job.title:
        about.markdown(f"**{plain(job.title)}**")
    about.text(job.prompt)
    about.caption(plain(f"{video_summary(job)} · {video_timings(job)}"))
    if (clip := clip_summary(job)) is not None:
        about.caption(plain(clip))
    by_line(job.user_id, about)
    if mp4 is None:
        about.link_button("Download MP4", job.url(VIDEO_FILE, download_as=f"{job.id}.mp4") or url or "")
    else:
        about.download_button("Download MP4", mp4, file_name=f"{job.id}.mp4", mime="video/mp4", on_click="ignore",
                              key="video_download")


def job_list(jobs: list[Job], *, on_play: Callable[[str], None], on_reuse: Callable[[str], None],
             history: History | None = None, key_prefix: str = "") -> None:
    """One card per job: its status, title or prompt, settings and timings, whose it is, a link to it, Play —
    for a role that may generate also Reuse settings — and, on this person's own, Share and Rename or delete.
    `key_prefix` tells a second drawing of a job (the linked one) from the first."""
    makes = allowed("generate")  # a viewer is not offered what only makers may do
    for job in jobs:
        with st.container(border=True):
            a, b = st.columns([4, 1])
            a.markdown(f"**{label(job)}** · {plain(when(job.created_at))}")
            title_and_prompt(job, a, shown=PROMPT_TEXT)
            a.caption(plain(f"{video_summary(job)} · {video_timings(job)}"))
            if (clip := clip_summary(job)) is not None:
                a.caption(plain(clip))
            by_line(job.user_id, a)
            if history is not None:
                share_toggle(history, "job", job.id, job.user_id, job.shared, a, key_prefix=key_prefix)
            if job.error:
                a.error(plain(job.error))
            if job.status == "succeeded" and not job.has(VIDEO_FILE):
                a.caption(plain(f"🕳️ video file {VIDEO_FILE} missing from the studio's media"))
            if job.status == "succeeded":
                b.button("Play", key=f"{key_prefix}play-{job.id}", on_click=on_play, args=(job.id,), width="stretch")
            if makes and job.status == "succeeded":
                b.button("Make a clip", key=f"{key_prefix}clip-{job.id}", on_click=start_clip, args=(job.id,),
                         width="stretch", help="add a narration and a soundtrack to this video")
            if makes:
                b.button("Reuse settings", key=f"{key_prefix}reuse-{job.id}", on_click=on_reuse, args=(job.id,),
                         width="stretch")
            item_link(VIDEO_PAGE, job, b)
            if history is not None:
                manage(history, job, b, key_prefix=key_prefix)
            if history is not None and job.status == "succeeded":
                with a:
                    code_panel(history, job.id, key=key_prefix)  # a clip's too: services/code says what it can
