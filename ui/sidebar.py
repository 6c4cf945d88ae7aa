"""The sidebar every page draws first: who is signed in, the target this browser session uses — picked from the
studio's closed set (services/targets.py), an admin adding or removing a server — and its health, with the cost
banner above the page. What it draws is ui/resources.py's: the settings, the choice, the backend."""

from __future__ import annotations

import streamlit as st

from protocol.catalog import FAMILY_NAMES
from protocol.errors import StudioError
from services.kinds import kind
from services.settings import Settings
from ui import auth, resources
from ui.resources import TARGET_PARAM, pick_of
from ui.text import code, plain


def sidebar(*, banner: bool = True) -> None:
    """Who is signed in, the backend picker and health, on every page (and the cost banner above the page, when
    endpoints run, for whoever may open the Endpoints page; `banner=False`: the page draws it beside its own figures,
    at the same instant — the Endpoints page). A page run without app.py meets the door here."""
    settings = resources.require_settings()  # a bad setting: its message, and the page stops (banner or not)
    actor = auth.guard(lambda: settings.access)
    if banner and auth.page_allowed(actor, "endpoints", settings.demo):
        resources.cost_banner()
    name, url, _ = resources.backend_choice()
    with st.sidebar:
        auth.account(actor)
        st.subheader("Backend")
        if settings.demo is None:  # a demo studio stays on the target its settings name
            _backend_picker(name, url, admin=actor.can("add_server"))
        try:
            b = resources.backend()
        except StudioError as exc:
            st.error(plain(exc))
            return
        h = resources.backend_health()
        if h.undeployed:  # e.g. right after a delete: nothing is wrong, there is nothing to reach yet
            where = "on the Endpoints page" if auth.page_allowed(actor, "endpoints", settings.demo) \
                else "(an admin does, on the Endpoints page)"
            st.info(f"{plain(b.label)}: no deployment — deploy one {where}.", icon="☁️")
            st.caption("Or name running endpoints: " + ", ".join(
                code(f"OMNI_STUDIO_{role.upper()}_ENDPOINT") for role in FAMILY_NAMES) + ".")
            return
        (st.success if h.ok else st.error)(plain(f"{b.label}: {h.detail}"), icon="🟢" if h.ok else "🔴")
        st.caption(f"Target: {code(b.target)}")


def _backend_picker(name: str, url: str | None, *, admin: bool) -> None:
    """The offline engine, a registered vLLM-Omni server or SageMaker, for this browser session: a closed set
    (services/targets.py). Only an admin adds a server, here — the studio's server connects to it."""
    book = resources.target_book()
    servers = book.servers()
    labels = {name: kind(name).picker_label for name in ("offline", "sagemaker")}
    labels |= {f"server:{srv.url}": f"vLLM-Omni {srv.name}" for srv in servers}
    options = ["offline", *[f"server:{srv.url}" for srv in servers], "sagemaker"]
    current = f"server:{url or ''}" if name == "server" else name
    if current not in options:  # the settings name backend "server" without a URL: shown, and named as a problem below
        options.insert(1, current)
        labels[current] = "vLLM-Omni server (no URL set)"
    # The widget shows what this session uses; a pick changes that in its callback (before the script runs), so an
    # Add on the sidebar or a server removed meanwhile is shown at once, without a rerun that could undo it.
    if st.session_state.get("_backend_pick") != current:
        st.session_state["_backend_pick"] = current
    st.selectbox("Target", options, format_func=labels.__getitem__, key="_backend_pick", on_change=_picked,
                 args=(url,))
    _target_in_url(current, resources.settings())
    if admin:
        with st.expander("Add a vLLM-Omni server"):
            st.text_input("Server URL", key="_server_url", placeholder="http://gpu-box:8091")
            st.text_input("Name", key="_server_name", placeholder="gpu box")
            st.button("Add server", key="_server_add", on_click=_add_server, args=(book,))
            if st.session_state.get("_server_error"):
                st.error(plain(st.session_state["_server_error"]))
            added = {srv.url: f"{srv.name} ({srv.url})" for srv in servers if srv.source.startswith("added by")}
            if added:  # the settings' own servers are edited in the settings
                gone = st.selectbox("Remove a server added here", list(added), format_func=added.get,
                                    key="_server_gone")
                st.button("Remove server", key="_server_remove", on_click=lambda: book.remove_server(
                    auth.principal(), gone))
    elif not servers:
        st.caption("No vLLM-Omni server is registered; an admin adds one here (or `server_url` in the settings).")


def _target_in_url(current: str, s: Settings) -> None:
    """Write the session's target into the address (left out when it is the settings' own), so a reload keeps it."""
    default = f"server:{s.server_url or ''}" if s.backend == "server" else s.backend
    if current == default:
        if TARGET_PARAM in st.query_params:
            del st.query_params[TARGET_PARAM]
    elif st.query_params.get(TARGET_PARAM) != current:
        st.query_params[TARGET_PARAM] = current


def _picked(url: str | None) -> None:
    picked = str(st.session_state["_backend_pick"])
    st.session_state["backend_name"], st.session_state["backend_url"] = pick_of(picked, url)


def _add_server(book) -> None:  # noqa: ANN001
    state = st.session_state
    state["_server_error"] = None
    try:
        server = book.add_server(auth.principal(), state.get("_server_url") or "", name=state.get("_server_name"))
    except StudioError as exc:
        state["_server_error"] = str(exc)
        return
    state["_server_url"] = state["_server_name"] = ""
    state["backend_name"], state["backend_url"] = "server", server.url  # the picker shows it on this run
