"""The image page's views: the edit form (1–4 references from the gallery or uploads, a prompt and the usual
controls) with its Edit action, and the gallery, where an edit shows the references it was made from and
what was done to fit them under the target's request limit.

Everything the edit form holds lives in session state under `edit_*` keys, so a refused edit (no reference,
too many, not an image, a bomb, too large after fitting) shows the service's message and keeps it all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from protocol.errors import InvalidInput, StudioError
from protocol.limits import IMAGE_EDIT_REFERENCES, IMAGE_GUIDANCE, IMAGE_SIZE, IMAGE_STEPS, MAX_UPLOAD_BYTES
from services.base import Backend
from services.history import History, Job
from services.images import DEFAULT_STEPS, EditReference, ImageEditRequest, record_edit
from services.imaging import ACCEPTED_SUFFIXES, check_image
from ui.code_views import code_panel
from ui.forms import as_text, bounded_number, optional_number, optional_seed
from ui.media_views import image_summary, when
from ui.resources import uploads_allowed
from ui.text import plain, shorten
from ui.gallery_views import item_link, manage, title_and_prompt
from ui.workspace_views import allowed, by_line, share_toggle

GENERATE, EDIT = "Generate", "Edit"
MODE_KEY = "image_mode"  # the tabs' state: GENERATE or EDIT
GALLERY_JOBS = 60  # image jobs offered as references
COLUMNS = 3
PICK_TEXT, PROMPT_SHOWN, REF_TEXT = 60, 200, 24  # characters of a prompt shown in each place
THUMB, REF_THUMB = 112, 64  # thumbnail widths (px): the form's references, a gallery tile's references
VIDEO_PAGE, IMAGE_PAGE = "pages/video.py", "pages/image.py"
MAX_REFS = int(IMAGE_EDIT_REFERENCES.hi)
EDIT_DEFAULTS: dict[str, Any] = {"edit_prompt": "", "edit_negative": "", "edit_size": "", "edit_steps": DEFAULT_STEPS,
                                 "edit_guidance": "", "edit_seed": "", "edit_picks": []}
_OUTPUT_INDEX = re.compile(r"-(\d+)\.\w+$")


@dataclass(frozen=True)
class Pick:
    """A gallery image that can be a reference: output `index` of `job`."""

    job: Job
    index: int
    name: str  # the output's file name in the job's media
    label: str


def gallery_picks(history: History) -> dict[str, Pick]:
    """The gallery's images by "<job id>-<index>" (the key "Use for video" uses too), newest first."""
    out = {}
    for job in history.jobs.list("image", statuses=("succeeded",), limit=GALLERY_JOBS):
        for i, name in enumerate(job.outputs):
            label = f"{shorten(job.prompt, PICK_TEXT)} · {job.params.get('size')} · seed {job.params.get('seed')}"
            out[f"{job.id}-{i}"] = Pick(job, i, name, f"{label} · {when(job.created_at)}")
    return out


def init_edit_state(picks: dict[str, Pick]) -> None:
    state = st.session_state
    for key, value in EDIT_DEFAULTS.items():
        state.setdefault(key, value)
    state["edit_picks"] = [k for k in state["edit_picks"] if k in picks][:MAX_REFS]  # gone from the gallery


def edit_with(key: str) -> None:
    """A gallery tile's "Edit with this" (a callback): add the image to the edit's references, open Edit."""
    state = st.session_state
    picks = list(state.get("edit_picks") or [])
    if key not in picks:
        if len(picks) >= MAX_REFS:
            state["edit_error"] = (f"an edit takes at most {MAX_REFS} references and {MAX_REFS} are picked already: "
                                   "remove one in the Edit tab first")
        else:
            state["edit_picks"] = picks + [key]
    state[MODE_KEY] = EDIT


def reuse_edit(job: Job, picks: dict[str, Pick]) -> None:
    """An edit's exact settings back into the edit form, with those of its references still in the gallery."""
    p = job.params
    again = []
    for ref in p.get("references") or []:
        match = _OUTPUT_INDEX.search(str(ref.get("name") or ""))
        key = f"{ref.get('job_id')}-{match.group(1)}" if ref.get("job_id") and match else None
        if key in picks and key not in again:
            again.append(key)
    st.session_state.update(edit_prompt=job.prompt, edit_negative=p.get("negative_prompt") or "",
                            edit_size=p.get("size") or "", edit_steps=p.get("steps", DEFAULT_STEPS),
                            edit_guidance=as_text(p.get("guidance")), edit_seed=as_text(p.get("seed")),
                            edit_picks=again[:MAX_REFS], edit_error=None, **{MODE_KEY: EDIT})


def chosen_references(picks: dict[str, Pick]) -> tuple[EditReference, ...]:
    """The picked gallery images (in pick order), then the uploads (in upload order)."""
    state = st.session_state
    refs = [EditReference.from_job(picks[k].job, picks[k].index) for k in state.get("edit_picks") or [] if k in picks]
    refs += [EditReference(u.getvalue(), name=u.name) for u in state.get("edit_uploads") or []]
    return tuple(refs)


def run_edit(backend: Backend, history: History, picks: dict[str, Pick]) -> None:
    """Edit's callback: the request from the form, sent and recorded; a refusal goes to `edit_error`."""
    state = st.session_state
    state["edit_error"] = None
    try:
        request = ImageEditRequest(
            prompt=state["edit_prompt"], references=chosen_references(picks), negative_prompt=state["edit_negative"],
            size=str(state["edit_size"]).strip() or None, steps=int(state["edit_steps"]),
            guidance=optional_number(state["edit_guidance"], "guidance", IMAGE_GUIDANCE, blank="the model's default"),
            seed=optional_seed(state["edit_seed"]))
        with st.spinner("Editing…"):
            state["edit_last"] = record_edit(backend.client("image"), history, request).id
    except StudioError as exc:
        state["edit_error"] = str(exc)


def _clear_error() -> None:
    st.session_state["edit_error"] = None  # new references: the last Edit's complaint no longer applies


def edit_form(picks: dict[str, Pick], on_edit: Callable[[], None]) -> None:
    """References (gallery picks and uploads, with thumbnails), prompt, controls, the Edit button, its error."""
    state = st.session_state
    left, right = st.columns([3, 2], gap="large")
    with right:
        st.multiselect("Gallery images", list(picks), key="edit_picks", format_func=lambda k: picks[k].label,
                       max_selections=MAX_REFS, on_change=_clear_error, wrap=True,
                       placeholder="pick images from the gallery" if picks else "the gallery is empty: upload instead",
                       help=f"{IMAGE_EDIT_REFERENCES.lo:g} to {MAX_REFS} references in all, gallery images and uploads")
        if uploads_allowed():
            st.file_uploader("Or upload reference images", type=list(ACCEPTED_SUFFIXES), accept_multiple_files=True,
                             key="edit_uploads", on_change=_clear_error,
                             max_upload_size=MAX_UPLOAD_BYTES // (1024 * 1024))
        shown, captions = [], []
        for n, key in enumerate(state["edit_picks"], 1):
            pick = picks[key]
            if (image := pick.job.file(pick.name)) is None:
                continue
            shown.append(image)
            captions.append(f"{n} · {shorten(picks[key].job.prompt, REF_TEXT)}")
        for upload in state.get("edit_uploads") or []:
            try:
                check_image(upload.getvalue(), upload.name)
            except InvalidInput as exc:
                st.error(plain(exc))
                continue
            shown.append(upload.getvalue())
            captions.append(f"{len(shown)} · {shorten(upload.name, REF_TEXT)}")
        count = len(state["edit_picks"]) + len(state.get("edit_uploads") or [])
        if shown:
            st.image(shown, caption=captions, width=THUMB)
        st.caption(f"**{count}** reference{'' if count == 1 else 's'} of {IMAGE_EDIT_REFERENCES.lo:g}–{MAX_REFS}; "
                   "without a size the result keeps the first one's proportions.")
    with left:
        st.text_area("Edit prompt", key="edit_prompt", height=100,
                     placeholder="Put the two of them together on a beach at sunset")
        st.text_input("Negative prompt", key="edit_negative", placeholder="what to avoid (optional)")
        c = st.columns(4)
        c[0].text_input("Size (WxH)", key="edit_size", placeholder="like reference 1",
                        help=f"blank: the first reference's proportions at about 1 MP; or width x height, each "
                             f"{IMAGE_SIZE.lo:g}–{IMAGE_SIZE.hi:g}")
        bounded_number(c[1], "Steps", "edit_steps", IMAGE_STEPS, step=1,
                       help=f"FLUX.2-klein wants about {DEFAULT_STEPS}; more is slower, not better")
        c[2].text_input("Guidance", key="edit_guidance", placeholder="server default",
                        help=f"guidance scale {IMAGE_GUIDANCE.lo:g}–{IMAGE_GUIDANCE.hi:g}; blank: the model's "
                             "default")
        c[3].text_input("Seed", key="edit_seed", placeholder="random", help="blank: a random seed (recorded)")
        st.button("Apply edit", type="primary", on_click=on_edit, key="edit_go")
        if state.get("edit_error"):
            st.error(plain(state["edit_error"]))


def _references(job: Job, prompts: dict[str, str]) -> None:
    """An edit's references as small numbered thumbnails (the files kept with the job), named: a gallery
    image by its prompt (`prompts`: job id → prompt of the images shown), an upload by its file name."""
    refs = job.params.get("references") or []
    shown, numbers, names = [], [], []
    for n, ref in enumerate(refs, 1):
        source = ref.get("job_id")
        names.append(f"{n} · " + shorten(prompts.get(source, "a gallery image") if source else str(ref.get("name")),
                                         REF_TEXT))
        image = job.input_file(str(ref.get("input") or ""))
        if image is not None:
            shown.append(image)
            numbers.append(str(n))
    st.caption(plain(f"Edited from {len(refs)} reference{'' if len(refs) == 1 else 's'}: {'; '.join(names)}"))
    if shown:
        st.image(shown, caption=numbers, width=REF_THUMB)
    if job.meta.get("fitting"):
        st.caption(plain(f"ℹ️ {job.meta['fitting']}"))


def gallery(jobs: list[Job], on_reuse: Callable[[str], None], history: History | None = None, *,
            key_prefix: str = "") -> None:
    """Every image job's tiles, newest first: the image, its title or prompt and settings (and whose it is, when
    not this person's), an edit's references, a link to it, Download — for a role that may generate also Use for
    video / Edit with this / Reuse these settings — and, on this person's own images, Share with the team and
    Rename or delete (one each per job, on its first tile). `key_prefix` tells a second drawing of a job (the
    linked item above the gallery) from the first."""
    state = st.session_state
    makes = allowed("generate")  # a viewer is not offered what only makers may do
    prompts = {job.id: job.prompt for job in jobs}
    tiles = [(job, i, name) for job in jobs for i, name in enumerate(job.outputs or [None])]
    for row in range(0, len(tiles), COLUMNS):
        for col, (job, index, name) in zip(st.columns(COLUMNS), tiles[row:row + COLUMNS]):
            with col.container(border=True):
                key = f"{key_prefix}{job.id}-{index}"
                made = job.status == "succeeded" and name is not None
                # media in a bucket: the browser fetches it (a presigned URL); in a folder: the studio sends the bytes
                url = job.url(name) if made else None
                data = job.file(name) if made and url is None else None
                if url is not None or data is not None:
                    st.image(url or data, width="stretch")
                    if job.meta.get("preview"):
                        st.caption("🔖 Offline preview — drawn by the offline engine, not by FLUX.2-klein")
                else:
                    st.error(plain(f"{job.status}: {job.error or 'no image'}"))
                title_and_prompt(job, shown=PROMPT_SHOWN)
                st.caption(plain(f"{image_summary(job)} · {when(job.created_at)}"))
                by_line(job.user_id)
                if job.params.get("references"):
                    _references(job, prompts)
                if makes and (url or data) is not None and st.button("Use for video", key=f"video-{key}", type="primary",
                                                            width="stretch"):
                    state["video_use_reference"] = f"{job.id}-{index}"  # the video page picks it up
                    st.switch_page(VIDEO_PAGE)
                if makes and (url or data) is not None:
                    st.button("Edit with this", key=f"edit-{key}", on_click=edit_with, args=(f"{job.id}-{index}",),
                              width="stretch")
                if makes:
                    st.button("Reuse these settings", key=f"reuse-{key}", on_click=on_reuse, args=(job.id,),
                              width="stretch")
                if url is not None and name is not None:
                    ext = name.rsplit(".", 1)[-1].lower()
                    st.link_button(f"Download {ext.upper()}", job.url(name, download_as=f"{job.id}-{index}.{ext}")
                                   or url, width="stretch")
                elif data is not None and name is not None:
                    ext = name.rsplit(".", 1)[-1].lower()
                    st.download_button(f"Download {ext.upper()}", data, file_name=f"{job.id}-{index}.{ext}",
                                       mime=f"image/{'jpeg' if ext == 'jpg' else ext}", key=f"download-{key}",
                                       on_click="ignore", width="stretch")
                if index == 0:
                    item_link(IMAGE_PAGE, job)
                if index == 0 and made and history is not None:
                    code_panel(history, job.id, key=key_prefix)
                if history is not None and index == 0:
                    share_toggle(history, "job", job.id, job.user_id, job.shared, key_prefix=key_prefix)
                    manage(history, job, key_prefix=key_prefix)
