"""A link to a kept record that is not a job — a speech take, a transcript, an evaluation — as the galleries link a
job (ui/gallery_views.py): `?item=<id>` opens the record's page with it shown first, for whoever may see it; a
record the reader may not see, or one deleted since, says so in one line.

    record_link(VOICE_PAGE, take.id)                       # "Link to this item", a page link
    linked_first("take", lambda h, i: h.takes.get(i), draw)   # on open: the linked take in a box, or why not

The history decides who sees what (someone else's unshared record is refused like a missing one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from protocol.errors import StudioError
from ui import resources
from ui.gallery_views import ITEM_PARAM, close_link, link_to
from ui.text import plain, shorten
from ui.workspace_views import KEPT_TEXT_SHOWN, by_line

LINK_LABEL = "Link to this item"


def record_link(page: str, record_id: str, container: Any = st) -> None:
    """A link that opens `page` with this record shown first (copy it to send it to someone who sees it)."""
    link_to(page, record_id, container)


def linked_id() -> str | None:
    """The id `?item=` names on this page, if any."""
    return st.query_params.get(ITEM_PARAM) or None


def linked_record(noun: str, get: Callable[[str], Any]) -> Any | None:
    """The record `?item=` names, read by `get(id)` (which refuses — StudioError, KeyError — what this person may
    not see); None without a link, or with one line saying the link shows nothing and why it may be so."""
    record_id = linked_id()
    if record_id is None:
        return None
    try:
        record = get(record_id)
    except (StudioError, KeyError):
        record = None
    if record is None:
        st.warning(plain(f"The linked {noun} {record_id} is not in this studio's history for you: it was deleted, "
                         "or it is someone else's and not shared."), icon="🔗")
    return record


def linked_first(noun: str, get: Callable[[Any, str], Any], draw: Callable[[Any, Any], None], *, key: str) -> None:
    """On a page of kept records (takes, transcripts): the one `?item=` names in a box of its own — its text, whose
    it is, `draw(history, record)` and "Close the link" (`key`) — or the line saying why it is not shown."""
    if linked_id() is None:
        return
    try:
        history = resources.history()
    except StudioError:
        return  # the list below says what is wrong with the history
    record = linked_record(noun, lambda record_id: get(history, record_id))
    if record is None:
        return
    with st.container(border=True):
        st.markdown(f"**The linked {noun}**")
        st.text(shorten(record.text, KEPT_TEXT_SHOWN))
        by_line(record.user_id)
        draw(history, record)
        st.button("Close the link", key=key, on_click=close_link)
