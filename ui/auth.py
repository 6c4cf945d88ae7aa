"""Who is using this browser session, and the studio's door (docs/team.md, "Sign-in").

services/access.py has the roles and the policy, services/signin.py the sign-in configuration and the loopback
rule. Sign-in is Streamlit's own OpenID Connect support (`st.login`, `st.user`, `st.logout`), on when an
[auth] table is in the secrets files Streamlit reads (its `secrets.files` option).

- Without sign-in, on loopback (`make studio`'s default): every session is LOCAL, an admin who owns everything.
- Off loopback without sign-in, or with an incomplete [auth] table: every page shows why, and nothing else.
- With sign-in: app.py calls `gate()` before `nav.run()`. Signed out: a sign-in screen; signed in but named
  by no entry of the access policy, or with a token that names nobody it can trust (an unverified e-mail, no
  usable e-mail: `AccessPolicy.admit`): who they are signed in as, that they have no access and why, whom to
  ask, and a sign-out button; otherwise their Principal, and the navigation offers only `pages_for` them (and the
  demo lock's pages). The sidebar shows who is signed in, their role and a sign-out button (`account`).

Every page calls the sidebar, which calls `guard()`: a page that Streamlit runs on its own — it does for
`pages/` scripts until the entry file has set up the navigation once, e.g. a deep link as a fresh server's first
request — runs again at the same URL through app.py, so no URL reaches a page past the door, and none shows
Streamlit's file-name navigation or a narrow layout.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit import config
from streamlit.errors import StreamlitAPIException
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from protocol.catalog import PAGES
from protocol.errors import ConfigError
from services import signin
from services.access import GROUP_PREFIX, LOCAL, ROLES, AccessPolicy, BadToken, Principal, Role
from services.settings import DemoMode

ENTRY = Path(__file__).resolve().parent.parent / "app.py"
# Which role sees which page. Every page shows a viewer what the team shared (galleries, saved voices,
# evaluations, load reports) and offers the forms only to whoever may use them (ui/workspace_views.may; the
# services check again: services.access.require); the Endpoints page is the admins' alone.
PAGE_ROLES: dict[str, Role] = {p.name: p.min_role for p in PAGES}  # type: ignore[misc]  # the catalog's
_PRINCIPAL_KEY = "_auth_principal"
_run = threading.local()  # `entered`: this script run came through app.py (each run has its own thread)


@dataclass(frozen=True)
class Door:
    """What the door says for this session: one of refusal, sign_in (not signed in), stranger (signed in,
    no role; `bad_token` says why when the token itself names nobody), or actor."""

    actor: Principal | None = None
    refusal: str | None = None
    sign_in: signin.SignIn | None = None
    stranger: dict[str, Any] | None = None
    policy: AccessPolicy | None = None
    bad_token: str | None = None


def secrets_files() -> list[str]:
    return list(st.get_option("secrets.files") or [])


def sign_in_config() -> signin.SignIn | None:
    """The [auth] configuration Streamlit uses, or None (sign-in off). Raises ConfigError when incomplete."""
    return signin.sign_in(secrets_files())


def door(policy: Callable[[], AccessPolicy]) -> Door:
    """Who this session is, or why it may not go further. `policy()` is asked only when sign-in is on."""
    files = secrets_files()
    address = st.get_option("server.address")
    if not address and not st.context.headers:
        address = "127.0.0.1"  # no HTTP request behind this run (AppTest): nothing is served, nothing to refuse
    problem = signin.bind_problem(address, files)
    if problem:
        return Door(refusal=problem)
    config = signin.sign_in(files)  # whole: bind_problem said so
    if config is None:
        return Door(actor=LOCAL)
    user = st.user.to_dict()
    if not user.get("is_logged_in"):
        return Door(sign_in=config)
    access = policy()
    try:
        actor = access.admit(user)
    except BadToken as exc:  # the 30-day cookie keeps the token: every page says so, with a way out
        return Door(stranger=user, policy=access, sign_in=config, bad_token=str(exc))
    if actor is None:
        return Door(stranger=user, policy=access, sign_in=config)
    return Door(actor=actor, sign_in=config)


def gate(policy: Callable[[], AccessPolicy], url_paths: Sequence[str] = ()) -> Principal:
    """app.py, before `nav.run()`: this session's Principal, or the door's screen as the only page — at "/" and
    at each of `url_paths` (hidden), so a link to a page opens the screen, not "page not found" — and the run
    ends there."""
    d = door(policy)
    if d.actor is not None:
        st.session_state[_PRINCIPAL_KEY] = d.actor
        return d.actor
    st.session_state.pop(_PRINCIPAL_KEY, None)
    # A navigation of its own: the sidebar lists nothing, and Streamlit's pages/ fallback is off from now on.
    screens = [st.Page(lambda: _screen(d), title="Omni Studio", icon="🔒", default=True)]
    screens += [st.Page(lambda: _screen(d), title="Omni Studio", icon="🔒", url_path=path, visibility="hidden")
                for path in url_paths]
    st.navigation(screens, position="hidden").run()
    st.stop()
    raise AssertionError  # unreachable: st.stop raises


def closed_page(actor: Principal, name: str, title: str, demo: DemoMode | None, policy: AccessPolicy) -> Any:
    """A hidden page at `name`'s URL saying why this person may not open it (their role, or the demo lock):
    what a typed or bookmarked URL of a page they do not see opens."""
    def closed() -> None:
        with st.sidebar:
            account(actor)
        st.title(title)
        needed = PAGE_ROLES.get(name, "admin")
        if demo is not None and name not in demo.pages:
            st.info(f"The {title} page is not part of this demo.", icon="🔒")
        else:
            st.warning(f"The {title} page is for {needed}s{' and admins' if needed != 'admin' else ''}; you are "
                       f"signed in as {_text(actor.name)} ({actor.role}). Ask {whom_to_ask(policy)} for the "
                       f"{needed} role.", icon="🔒")

    return st.Page(closed, title=title, url_path=name, visibility="hidden")


@contextmanager
def entered() -> Iterator[None]:
    """app.py: `with entered(): nav.run()` — the page runs behind the door."""
    _run.entered = True
    try:
        yield
    finally:
        _run.entered = False


def guard(policy: Callable[[], AccessPolicy]) -> Principal:
    """Every page (the sidebar calls it): the Principal when the run came through app.py's gate. A page that
    Streamlit runs on its own (its pages/ fallback, before app.py has set up the navigation once) is opened
    again through app.py whenever there is a door — sign-in, or a refusal — so app.py decides what it shows.
    Without sign-in, on loopback, such a page (AppTest runs pages on their own) acts as LOCAL."""
    if getattr(_run, "entered", False):
        return principal()
    if _pages_fallback():
        # Until app.py has called st.navigation once in this server, Streamlit runs a pages/ URL's script on its
        # own, with a navigation of file names and no set_page_config — for every session until someone opens
        # "/". Turn that fallback off (what st.navigation does) and run this URL again: app.py runs it now.
        PagesManager.uses_pages_directory = False
        st.rerun()
    d = door(policy)
    if d.actor is not None and d.sign_in is None:
        return principal()  # LOCAL: who the session acts as, asked the one way every page asks
    try:
        st.switch_page(ENTRY)
    except StreamlitAPIException:  # app.py is not a page here: this page was started on its own
        if d.actor is None:
            _screen(d)
        else:
            st.error("Open the studio from its home page (`streamlit run app.py`): sign-in decides there which "
                     "pages you may see.", icon="🔒")
        st.stop()
    raise AssertionError  # unreachable: switch_page raises


def _pages_fallback() -> bool:
    """Is this run Streamlit's pages/ fallback, whose navigation is app.py (as a plain page) and the pages/ files?
    (Not AppTest's page run on its own: app.py is no page there.)"""
    ctx = get_script_run_ctx()
    # AppTest turns the fallback on again before every run (it resets PagesManager.uses_pages_directory): a
    # rerun there would only drop the click that started the run; it draws no navigation anyway.
    if ctx is None or not PagesManager.uses_pages_directory or config.get_option("global.appTest"):
        return False
    return any(p.get("script_path") and Path(p["script_path"]).resolve() == ENTRY
               for p in ctx.pages_manager.get_pages().values())


def principal() -> Principal:
    """The person this session acts as: LOCAL without sign-in; the signed-in person (their role from the
    access policy) with it. Past the gate only; elsewhere a signed-out session ends the run."""
    actor = st.session_state.get(_PRINCIPAL_KEY)
    if isinstance(actor, Principal):
        return actor
    try:
        if sign_in_config() is None:
            return LOCAL
    except ConfigError as exc:
        st.error(f"Sign-in: {exc}", icon="🔒")
        st.stop()
    st.warning("Sign in from the studio's home page first.", icon="🔒")
    st.stop()
    raise AssertionError  # unreachable


def page_allowed(actor: Principal, name: str, demo: DemoMode | None) -> bool:
    """May `actor` see the page `name` (a key of PAGE_ROLES), under the demo lock when there is one?"""
    needed = PAGE_ROLES.get(name, "admin")
    if ROLES.index(actor.role) < ROLES.index(needed):
        return False
    return demo is None or name in demo.pages


def pages_for(actor: Principal, demo: DemoMode | None, names: Sequence[str]) -> list[str]:
    """The page names `actor` may see, in the given order."""
    return [n for n in names if page_allowed(actor, n, demo)]


def account(actor: Principal) -> None:
    """The sidebar's top: who is signed in, their role, and a sign-out button (nothing without sign-in)."""
    if not actor.signed_in:
        return
    st.markdown(f"Signed in as **{_text(actor.name)}**  \n{_code(actor.id)} · {actor.role}")
    if st.button("Sign out", key="_auth_sign_out"):
        st.session_state.pop(_PRINCIPAL_KEY, None)
        st.logout()


# ---------------------------------------------------------------------------------------------------------
# The door's screens
def _screen(d: Door) -> None:
    if d.refusal is not None:
        _refusal(d.refusal)
    elif d.stranger is not None:
        _stranger(d.stranger, d.policy or AccessPolicy(), d.bad_token)
    elif d.sign_in is not None:
        _sign_in(d.sign_in)


def _refusal(problem: str) -> None:
    st.title("Omni Studio")
    st.error("**The studio will not start here.** It says why below; fix that and start it again.", icon="🔒")
    st.code(problem, language=None, wrap_lines=True)


def _sign_in(config: signin.SignIn) -> None:
    st.title("Omni Studio")
    st.write("Sign in to use the team studio.")
    for provider in config.providers:
        label = "Sign in" if provider == signin.DEFAULT_PROVIDER else f"Sign in with {provider}"
        if st.button(label, type="primary", key=f"_auth_sign_in_{provider}"):
            if provider == signin.DEFAULT_PROVIDER:
                st.login()
            else:
                st.login(provider)


def whom_to_ask(policy: AccessPolicy) -> str:
    """Whom a refused person can ask, as the policy names its admins."""
    people = []
    for entry in policy.admins:
        if entry.startswith(GROUP_PREFIX):
            people.append(f"a member of the group {_code(entry[len(GROUP_PREFIX):])}")
        elif entry.startswith("*@"):
            people.append(f"someone at {_code(entry[2:])}")
        else:
            people.append(_code(entry))
    if not people:
        return "whoever runs this studio (its access policy names no admin yet)"
    return f"a studio admin ({', '.join(people)})"


def _stranger(user: dict[str, Any], policy: AccessPolicy, bad_token: str | None = None) -> None:
    st.title("Omni Studio")
    email = user.get("email") if isinstance(user.get("email"), str) else "(no usable e-mail in the sign-in token)"
    name = user.get("name") if isinstance(user.get("name"), str) and user["name"].strip() else email
    if bad_token:  # the token names nobody the policy can trust: no entry would help
        st.warning(f"You are signed in as **{_text(name)}** ({_code(email)}), but you have **no access** to this "
                   f"studio: {_text(bad_token)}.", icon="🚫")
        st.write(f"Sign out, then sign in with an account the studio can use; {whom_to_ask(policy)} can help.")
    else:
        st.warning(f"You are signed in as **{_text(name)}** ({_code(email)}), but you have **no access** to this "
                   "studio: its access policy gives you no role.", icon="🚫")
        st.write(f"Ask {whom_to_ask(policy)} to add you to the access policy (`[access]` in studio.toml, "
                 "docs/team.md). Then sign in again.")
    if st.button("Sign out", key="_auth_sign_out"):
        st.logout()


_MARKDOWN_SPECIALS = "\\`*_{}[]()#+-.!|<>~$:@"


def _text(text: str) -> str:
    """Text from the sign-in token shown as it is (Markdown's specials escaped)."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in str(text))


def _code(text: str) -> str:
    return "`" + str(text).replace("`", "'") + "`"

