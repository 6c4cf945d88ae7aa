"""What the image gallery and the video job list share: a search by prompt (or title), pages of PAGE_SIZE with
Newer / Older and the total, a link to each item (`?item=<job id>` opens the page with it shown first), and
Rename / Delete on one's own items (an admin: anyone's). The history does the searching and the role checks
(services/history: `history.jobs.list`, `.count`, `.rename`, `.delete`); these only draw.

State under `<prefix>_*` keys (`image_gallery_search`, `image_gallery_page`, …), so a search survives reruns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from protocol.catalog import FAMILIES
from protocol.errors import StudioError
from services.history import TITLE_MAX, History, Job, JobKind
from ui.text import plain, shorten

PAGE_SIZE = 24
ITEM_PARAM = "item"  # ?item=<job id>
NOUNS = {f.name: f.item_nouns for f in FAMILIES}
PROMPT_SHOWN = 120


@dataclass(frozen=True)
class GalleryPage:
    jobs: list[Job]
    total: int  # the jobs the search matches, on every page
    number: int  # 0-based
    pages: int
    search: str


def _first_page(prefix: str) -> None:
    st.session_state[f"{prefix}_page"] = 0  # a new search starts from its newest match


def search_and_page(history: History, kind: JobKind, prefix: str) -> GalleryPage:
    """The search box and this page's jobs (newest first), the page number kept within the pages there are."""
    state = st.session_state
    st.text_input("Search by prompt or title", key=f"{prefix}_search", on_change=_first_page, args=(prefix,),
                  placeholder="a word of the prompt, or of a title you gave")
    search = str(state.get(f"{prefix}_search") or "").strip()
    total = history.jobs.count(kind, search=search)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    number = min(max(0, int(state.get(f"{prefix}_page") or 0)), pages - 1)
    state[f"{prefix}_page"] = number
    jobs = history.jobs.list(kind, limit=PAGE_SIZE, offset=number * PAGE_SIZE, search=search)
    return GalleryPage(jobs, total, number, pages, search)


def _turn(prefix: str, by: int) -> None:
    st.session_state[f"{prefix}_page"] = int(st.session_state.get(f"{prefix}_page") or 0) + by


def page_caption(page: GalleryPage, kind: JobKind) -> None:
    """"Images 25–48 of 130, newest first" (or what the search matched, or that it matched nothing)."""
    one, many = NOUNS[kind]
    if not page.total:
        st.info(plain(f"No {one}'s prompt or title contains “{page.search}”." if page.search else f"No {many} yet."))
        return
    first = page.number * PAGE_SIZE + 1
    found = f" matching “{page.search}”" if page.search else ""
    st.caption(plain(f"{many.capitalize()}{found} {first}–{first + len(page.jobs) - 1} of {page.total}, newest "
                     f"first · page {page.number + 1} of {page.pages}"))


def page_nav(page: GalleryPage, prefix: str) -> None:
    """Newer / Older, when there is more than one page."""
    if page.pages < 2:
        return
    newer, middle, older = st.columns([1, 2, 1])
    newer.button("← Newer", key=f"{prefix}_newer", on_click=_turn, args=(prefix, -1), disabled=page.number == 0,
                 width="stretch")
    middle.caption(f"Page {page.number + 1} of {page.pages}")
    older.button("Older →", key=f"{prefix}_older", on_click=_turn, args=(prefix, 1),
                 disabled=page.number >= page.pages - 1, width="stretch")


def linked_item(history: History, kind: JobKind) -> Job | None:
    """The job `?item=` names, when it is one of this page's kind that this person sees; otherwise a line
    saying the link shows nothing (and why it may be so)."""
    job_id = st.query_params.get(ITEM_PARAM)
    if not job_id:
        return None
    try:
        job = history.jobs.get(job_id)
    except StudioError:
        job = None
    if job is None or job.kind != kind:
        st.warning(plain(f"The linked {NOUNS[kind][0]} {job_id} is not in this studio's history for you: it was "
                         "deleted, or it is someone else's and not shared."), icon="🔗")
        return None
    return job


def close_link() -> None:
    st.query_params.pop(ITEM_PARAM, None)


def item_link(page: str, job: Job, container: Any = st) -> None:
    """A link that opens `page` with this job shown first (copy it to send it to someone who sees it)."""
    link_to(page, job.id, container)


def link_to(page: str, item_id: str, container: Any = st) -> None:
    """"Link to this item": `page` with `?item=<item_id>`. A page opened on its own (not through app.py's
    navigation, as a test may) has no page registry to link through: the link is then this page's own query."""
    from streamlit.errors import StreamlitPageNotFoundError

    hint = f"opens the page with this item first (?{ITEM_PARAM}={item_id})"
    try:
        container.page_link(page, label="Link to this item", icon="🔗", query_params={ITEM_PARAM: item_id}, help=hint)
    except StreamlitPageNotFoundError:
        container.markdown(f"[🔗 Link to this item](?{ITEM_PARAM}={item_id})", help=hint)


def may_change(history: History, job: Job) -> bool:
    """Whether this person may rename or delete `job` (the history checks again): a role that may generate,
    and the job theirs — or they an admin."""
    actor = history.actor
    return actor.can("generate") and (history.owns(job) or actor.role == "admin")


def _rename(history: History, job_id: str, key: str) -> None:
    try:
        history.jobs.rename(job_id, st.session_state.get(key))
    except StudioError as exc:
        st.session_state["gallery_error"] = str(exc)


def _delete(history: History, job_id: str) -> None:
    try:
        history.jobs.delete(job_id)
    except StudioError as exc:
        st.session_state["gallery_error"] = str(exc)
    else:
        st.session_state["gallery_notice"] = f"Deleted {job_id} and its files."
        if st.query_params.get(ITEM_PARAM) == job_id:
            close_link()


def manage(history: History, job: Job, container: Any = st, *, key_prefix: str = "") -> None:
    """Rename / Delete on an item this person may change; nothing on anyone else's."""
    if not may_change(history, job):
        return
    with container.popover("Rename or delete", width="stretch"):
        key = f"{key_prefix}title-{job.id}"
        st.session_state.setdefault(key, job.title or "")
        st.text_input("Title", key=key, max_chars=TITLE_MAX, placeholder=shorten(job.prompt, 60),
                      help="shown instead of the prompt (which is kept); blank: the prompt again")
        st.button("Save title", key=f"{key_prefix}rename-{job.id}", on_click=_rename, args=(history, job.id, key))
        st.button(f"Delete this {job.kind}", key=f"{key_prefix}delete-{job.id}", type="primary",
                  on_click=_delete, args=(history, job.id), disabled=not job.finished,
                  help="removes its record and its files for good" if job.finished else "wait until it ends")


def messages() -> None:
    """The last rename or delete's outcome (set by its callback), once."""
    if error := st.session_state.pop("gallery_error", None):
        st.error(plain(error))
    if notice := st.session_state.pop("gallery_notice", None):
        st.success(plain(notice))


def title_and_prompt(job: Job, container: Any = st, *, shown: int = PROMPT_SHOWN) -> None:
    """The item's title (or, without one, its prompt) as plain text; a titled item's prompt in a caption."""
    container.text(shorten(job.name, shown))
    if job.title:
        container.caption(plain(f"Prompt: {shorten(job.prompt, shown)}"))


def browse(history: History, kind: JobKind, prefix: str, draw: Callable[[list[Job], str], None]) -> None:
    """The last rename/delete's outcome, the linked item (`?item=`) first, then the search, this page of items
    (`draw(jobs, key_prefix)`) and Newer / Older."""
    messages()
    if (linked := linked_item(history, kind)) is not None:
        with st.container(border=True):
            st.markdown(f"**The linked {NOUNS[kind][0]}**")
            draw([linked], "linked-")
            st.button("Close the link", key=f"{prefix}_close", on_click=close_link)
    page = search_and_page(history, kind, prefix)
    page_caption(page, kind)
    draw(page.jobs, "")
    page_nav(page, prefix)
