"""Whose an item is, sharing it, and what this person may make: the small views the galleries, saved voices,
evaluations and load reports share. The history keeps who made what (services/history: `user_id`, `shared`);
services/access.py says who may do what, and the services check it again whatever a page draws.

Without sign-in (the single-user studio) everything is the one person's: no "by …", no toggle, every form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from protocol.errors import StudioError
from services.access import DOING, LOCAL, NEEDS, Action
from ui import auth, resources
from ui.text import plain, shorten

SHARE_LABEL = "Share with the team"


def may(action: Action) -> bool:
    """Whether this person may `action`; when not, one line saying why (the rest of the page stays)."""
    actor = auth.principal()
    if actor.can(action):
        return True
    st.info(plain(f"You are signed in as {actor.name} ({actor.role}): only a {NEEDS[action]} or an admin may "
                  f"{DOING[action]}, so that is not offered here — what the team shared is below. Ask a studio "
                  "admin for the role."), icon="👀")
    return False


def allowed(action: Action) -> bool:
    """Whether this person may `action`, silently: for the buttons of one item (`may` says why, once a page)."""
    return auth.principal().can(action)


def owner_of(user_id: str | None) -> str | None:
    """"by bob@example.com" for an item someone else made (signed in); None for this person's own."""
    actor = auth.principal()
    if not actor.signed_in or not user_id or user_id == actor.id:
        return None
    return f"by {user_id}"


def by_line(user_id: str | None, container: Any = st) -> None:
    """A caption naming whose the item is, when it is not this person's."""
    if (text := owner_of(user_id)) is not None:
        container.caption(plain(text))


def _toggled(history: Any, kind: str, record_id: Any, key: str, after: Callable[[], None] | None) -> None:
    try:
        history.set_shared(kind, record_id, bool(st.session_state[key]))
    except StudioError as exc:
        st.session_state[f"{key}-error"] = str(exc)
    if after is not None:
        after()


def share_toggle(history: Any, kind: str, record_id: Any, user_id: str | None, shared: bool,
                 container: Any = st, *, after: Callable[[], None] | None = None, key_prefix: str = "") -> None:
    """"Share with the team" on an item this person made (signed in, with a role that may share) — for an admin
    also on `local`'s, made before sign-in; its change is kept at once (`History.set_shared`), then `after()`
    (e.g. a cached list forgotten). `kind`: job, voice, load_report, evaluation or take; `key_prefix` for a
    second drawing of the same item on one page."""
    actor = auth.principal()
    theirs = user_id == actor.id or (actor.role == "admin" and user_id == LOCAL.id)
    if record_id is None or not actor.signed_in or not theirs or not actor.can("share"):
        return
    key = f"{key_prefix}share-{kind}-{record_id}"
    container.toggle(SHARE_LABEL, value=bool(shared), key=key, on_change=_toggled,
                     args=(history, kind, record_id, key, after),
                     help="Others who sign in to this studio see it (and can use it); off: only you")
    if error := st.session_state.pop(f"{key}-error", None):
        container.error(plain(error))


KEPT_SHOWN = 10  # records listed from the history (takes, transcripts)
KEPT_TEXT_SHOWN = 400  # characters of a kept record's text shown in the list


def kept_list(title: str, what: str, load: Callable[[Any, int], list[Any]], body: Callable[[Any, Any], None],
              skip: str | None = None) -> None:
    """Earlier records from the history, newest first — this person's and those the team shared, not `skip`
    (the one shown above): `load(history, n)` lists them; each gets its text, whose it is when not one's own,
    and `body(history, record)` (its summary, player, downloads, share toggle)."""
    try:
        history = resources.history()
        records = [r for r in load(history, KEPT_SHOWN + 1) if r.id != skip][:KEPT_SHOWN]
    except StudioError as exc:
        st.error(plain(f"Earlier {what} cannot be shown: {exc}"))
        return
    if not records:
        return
    st.divider()
    st.subheader(title)
    st.caption("Yours and those the team shared, newest first; kept in the studio's history.")
    for r in records:
        with st.container(border=True):
            st.text(shorten(r.text, KEPT_TEXT_SHOWN))
            by_line(r.user_id)
            body(history, r)
