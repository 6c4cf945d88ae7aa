"""Image studio: prompt and parameters, Generate, and the gallery of everything made so far."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from protocol.limits import IMAGE_GUIDANCE, IMAGE_N, IMAGE_SIZE, IMAGE_STEPS
from services.images import DEFAULT_SIZE, DEFAULT_STEPS, ImageRequest, record_image
from ui import resources
from ui.forms import as_text, bounded_number, optional_number, optional_seed
from ui.media_views import image_summary, when
from ui.text import shorten

GALLERY_SIZE = 24
COLUMNS = 3
PROMPT_SHOWN = 200  # characters of a prompt shown under its image
VIDEO_PAGE = "pages/video.py"
state = st.session_state

resources.sidebar()
st.title("Image")
st.caption(f"FLUX.2-klein is distilled: about **{DEFAULT_STEPS} steps** is right (the server's own default is 50). "
           "Every image is kept in the gallery below; take a good one on to the video studio.")

try:
    backend = resources.backend()
    history = resources.history()
except StudioError as exc:
    st.error(f"The image backend is not available: {resources.plain(exc)}")
    st.stop()

for key, value in {"image_prompt": "", "image_negative": "", "image_size": DEFAULT_SIZE, "image_steps": DEFAULT_STEPS,
                   "image_guidance": "", "image_seed": "", "image_n": 1}.items():
    state.setdefault(key, value)


def _reuse(job_id: str) -> None:
    """Put a gallery image's exact settings back into the form (a callback: runs before the widgets)."""
    job = history.get(job_id)
    p = job.params
    state.update(image_prompt=job.prompt, image_negative=p.get("negative_prompt") or "", image_size=p["size"],
                 image_steps=p["steps"], image_guidance=as_text(p.get("guidance")), image_seed=as_text(p.get("seed")),
                 image_n=p.get("n", 1), image_error=None)


def _generate() -> None:
    state["image_error"] = None
    try:
        request = ImageRequest(prompt=state["image_prompt"], negative_prompt=state["image_negative"],
                               size=state["image_size"], steps=int(state["image_steps"]),
                               guidance=optional_number(state["image_guidance"], "guidance", IMAGE_GUIDANCE,
                                                        blank="the model's default"),
                               seed=optional_seed(state["image_seed"]),
                               n=int(state["image_n"]))
        with st.spinner("Generating…"):
            job = record_image(backend.images, history, request)
        state["image_last"] = job.id
    except StudioError as exc:
        state["image_error"] = str(exc)


with st.form("image_form", border=False):
    st.text_area("Prompt", key="image_prompt", height=100, placeholder="A lighthouse on a cliff at dawn, oil painting")
    st.text_input("Negative prompt", key="image_negative", placeholder="what to avoid (optional)")
    c = st.columns(5)
    c[0].text_input("Size (WxH)", key="image_size",
                    help=f"width x height, each {IMAGE_SIZE.lo:g}–{IMAGE_SIZE.hi:g}, e.g. 1024x1024")
    bounded_number(c[1], "Steps", "image_steps", IMAGE_STEPS, step=1,
                   help=f"FLUX.2-klein wants about {DEFAULT_STEPS}; more is slower, not better")
    c[2].text_input("Guidance", key="image_guidance", placeholder="server default",
                    help=f"guidance scale {IMAGE_GUIDANCE.lo:g}–{IMAGE_GUIDANCE.hi:g}; blank: the model's default")
    c[3].text_input("Seed", key="image_seed", placeholder="random", help="blank: a random seed (recorded with the image)")
    bounded_number(c[4], "Images", "image_n", IMAGE_N, step=1)
    st.form_submit_button("Generate", type="primary", on_click=_generate)

if state.get("image_error"):
    st.error(resources.plain(state["image_error"]))

jobs = history.jobs("image", limit=GALLERY_SIZE)
if not jobs:
    st.info("No images yet: write a prompt and press **Generate**.")
    st.stop()

st.subheader("Gallery")
st.caption("Newest first, with the exact settings that made each image.")
tiles = [(job, i, path) for job in jobs for i, path in enumerate(job.output_paths() or [None])]
for row in range(0, len(tiles), COLUMNS):
    for col, (job, index, path) in zip(st.columns(COLUMNS), tiles[row:row + COLUMNS]):
        with col.container(border=True):
            key = f"{job.id}-{index}"
            if job.status == "succeeded" and path is not None and path.exists():
                data = path.read_bytes()
                st.image(data, width="stretch")
                if job.meta.get("preview"):
                    st.caption("🔖 Offline preview — drawn by the offline engine, not by FLUX.2-klein")
            else:
                st.error(resources.plain(f"{job.status}: {job.error or 'no image'}"))
                data = None
            st.text(shorten(job.prompt, PROMPT_SHOWN))
            st.caption(resources.plain(f"{image_summary(job)} · {when(job.created_at)}"))
            if data is not None and st.button("Use for video", key=f"video-{key}", type="primary", width="stretch"):
                state["video_use_reference"] = key  # "<job id>-<index>": the video page picks it up
                st.switch_page(VIDEO_PAGE)
            st.button("Reuse these settings", key=f"reuse-{key}", on_click=_reuse, args=(job.id,), width="stretch")
            if data is not None:
                ext = path.suffix.lstrip(".")
                st.download_button(f"Download {ext.upper()}", data, file_name=f"{job.id}-{index}.{ext}",
                                   mime=f"image/{'jpeg' if ext == 'jpg' else ext}", key=f"download-{key}",
                                   on_click="ignore", width="stretch")
