"""Image studio: Generate (a prompt and parameters) or Edit (a prompt applied to 1–4 reference images from
the gallery or uploads), and the gallery of everything made so far."""

from __future__ import annotations

import streamlit as st

from protocol.errors import StudioError
from protocol.limits import IMAGE_GUIDANCE, IMAGE_N, IMAGE_SIZE, IMAGE_STEPS
from services.images import DEFAULT_SIZE, DEFAULT_STEPS, ImageRequest, record_image
from ui import resources
from ui.image_compare_views import COMPARE, compare_form, compare_results, init_compare_state, run_compare
from ui.gallery_views import browse, linked_item
from ui.forms import as_text, bounded_number, optional_number, optional_seed
from ui.sidebar import sidebar
from ui.text import plain
from ui.workspace_views import may
from ui.image_views import EDIT, GENERATE, MODE_KEY, edit_form, gallery, gallery_picks, init_edit_state, reuse_edit, \
    run_edit

state = st.session_state

sidebar()
st.title("Image")
st.caption(f"FLUX.2-klein is distilled: about **{DEFAULT_STEPS} steps** is right (the server's own default is 50). "
           "**Edit** applies a prompt to 1–4 reference images; **Compare** runs one prompt on 2–4 variants side by "
           "side. Every image is kept in the gallery below; take a good one on to the video studio.")

history = resources.require_history()
backend = resources.require_backend("The image backend")

for key, value in {"image_prompt": "", "image_negative": "", "image_size": DEFAULT_SIZE, "image_steps": DEFAULT_STEPS,
                   "image_guidance": "", "image_seed": "", "image_n": 1}.items():
    state.setdefault(key, value)
picks = gallery_picks(history)
init_edit_state(picks)
init_compare_state()


def _reuse(job_id: str) -> None:
    """Put a gallery image's exact settings back into its form (a callback: runs before the widgets)."""
    job = history.jobs.get(job_id)
    if job.meta.get("edit"):
        return reuse_edit(job, picks)
    p = job.params
    state.update(image_prompt=job.prompt, image_negative=p.get("negative_prompt") or "", image_size=p["size"],
                 image_steps=p["steps"], image_guidance=as_text(p.get("guidance")), image_seed=as_text(p.get("seed")),
                 image_n=p.get("n", 1), image_error=None, **{MODE_KEY: GENERATE})


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
            job = record_image(backend.client("image"), history, request)
        state["image_last"] = job.id
    except StudioError as exc:
        state["image_error"] = str(exc)


def _gallery(empty: str = "No images yet: write a prompt and press **Generate**.") -> None:
    if not history.jobs.count("image"):  # this person's images and the team's shared ones
        linked_item(history, "image")  # a link to an image that is gone says so
        st.info(empty)
        st.stop()
    st.subheader("Gallery")
    st.caption("Newest first, with the exact settings that made each image (and, for an edit, its references).")
    browse(history, "image", "image_gallery",
           lambda jobs, prefix: gallery(jobs, on_reuse=_reuse, history=history, key_prefix=prefix))


if not may("generate"):  # the forms are for those who may generate; the gallery is for everyone
    _gallery("No images shared with the team yet.")
    st.stop()

generate_tab, edit_tab, compare_tab = st.tabs([GENERATE, EDIT, COMPARE], key=MODE_KEY, on_change="rerun")  # both drawn: nothing lost
with generate_tab:
    with st.form("image_form", border=False):
        st.text_area("Prompt", key="image_prompt", height=100,
                     placeholder="A lighthouse on a cliff at dawn, oil painting")
        st.text_input("Negative prompt", key="image_negative", placeholder="what to avoid (optional)")
        c = st.columns(5)
        c[0].text_input("Size (WxH)", key="image_size",
                        help=f"width x height, each {IMAGE_SIZE.lo:g}–{IMAGE_SIZE.hi:g}, e.g. 1024x1024")
        bounded_number(c[1], "Steps", "image_steps", IMAGE_STEPS, step=1,
                       help=f"FLUX.2-klein wants about {DEFAULT_STEPS}; more is slower, not better")
        c[2].text_input("Guidance", key="image_guidance", placeholder="server default",
                        help=f"guidance scale {IMAGE_GUIDANCE.lo:g}–{IMAGE_GUIDANCE.hi:g}; blank: the model's "
                             "default")
        c[3].text_input("Seed", key="image_seed", placeholder="random",
                        help="blank: a random seed (recorded with the image)")
        bounded_number(c[4], "Images", "image_n", IMAGE_N, step=1)
        st.form_submit_button("Generate", type="primary", on_click=_generate)
    if state.get("image_error"):
        st.error(plain(state["image_error"]))
with edit_tab:
    edit_form(picks, on_edit=lambda: run_edit(backend, history, picks))
with compare_tab:
    compare_form(on_compare=lambda: run_compare(resources.settings(), history, backend))
    if state.get("cmp_outcomes"):
        compare_results(state["cmp_outcomes"])

_gallery()
