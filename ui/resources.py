"""Process-wide resources (`st.cache_resource`) and the per-browser backend choice (`st.session_state`): the
settings, the backend of a choice and its health, the closed set of targets, the history, the deployment and its
cost banner, the infra and evaluation runners. The sidebar that draws the choice is ui/sidebar.py; the chosen
backend's voices, ui/voice_catalog.py; text helpers, ui/text.py."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from protocol.errors import ConfigError, StudioError
from services.backend import Backend, BackendHealth, create_backend
from services.kinds import kind
from services.pricing import usd
from services.runtime import BackgroundLoop, background_loop
from services.settings import Settings, load_settings
from ui import auth
from ui.text import code, plain  # noqa: F401  (code: ui/endpoints_views.py still takes both from here)


@st.cache_resource(show_spinner=False)
def settings() -> Settings:
    return load_settings()


def require_settings() -> Settings:
    """The settings, or — when one is bad — one message naming it and where it was read, and the page stops."""
    try:
        return settings()
    except ConfigError as exc:  # not cached: the next run reads the settings again
        st.error(f"**The studio settings need fixing.** {plain(exc)}  \n"
                 "Fix it and reload this page (a changed environment variable needs a restart of the studio).",
                 icon="⚙️")
        st.stop()


@st.cache_resource(show_spinner=False)
def loop() -> BackgroundLoop:
    return background_loop()


@st.cache_resource(show_spinner="Starting the backend…")
def backend_of(name: str, url: str | None, targets: str | None = None) -> Backend:
    """The backend of a choice (the three parts `backend_choice` gives), one per process."""
    return create_backend(settings().with_overrides(backend=name, server_url=url))


@st.cache_data(ttl=5, show_spinner=False)
def _health(name: str, url: str | None, targets: str | None, state_stamp: float | None) -> BackendHealth:
    # Keyed on the state file's stamp too: deploy, delete and smoke rewrite it on every change of what runs.
    return backend_of(name, url, targets).health()


def _state_stamp(s: Settings) -> float | None:
    sync_deployment_state(s)  # a team studio: another replica's deploy rewrites this copy, and so its stamp
    try:
        return s.state_file.stat().st_mtime
    except OSError:
        return None


@st.cache_data(show_spinner=False)
def _deployment(state_file: str, state_stamp: float | None) -> tuple[str, str]:
    """(targets label, region) of the SageMaker deployment the settings and the state file name: the file is
    read once per change, not on every call during a page run."""
    from services.sagemaker import resolve_targets

    s = settings()
    try:
        t = resolve_targets(s)
    except StudioError as exc:
        return f"unreadable: {exc}", s.region
    return t.label(), t.region


def deployment() -> tuple[str, str]:
    s = settings()
    return _deployment(str(s.state_file), _state_stamp(s))


def backend_choice() -> tuple[str, str | None, str | None]:
    """(backend, URL, SageMaker targets): a deploy or delete that changes the endpoints makes a new backend. A
    server URL is one the studio registered (services/targets.py); anything else falls back to the settings'."""
    s = settings()
    if "backend_name" not in st.session_state and s.demo is None:
        _target_from_url(s)  # a reload (F5) or a shared link: the target the address names, if it may be used
    name = st.session_state.get("backend_name", s.backend)
    url = st.session_state.get("backend_url", s.server_url)
    if name == "server" and url != s.server_url and url not in target_book().server_urls():
        name, url = s.backend, s.server_url  # a server removed meanwhile, or never registered
        st.session_state.pop("backend_name", None), st.session_state.pop("backend_url", None)
    targets = deployment()[0] if name == "sagemaker" else None
    return name, url, targets


TARGET_PARAM = "target"  # ?target=offline | sagemaker | server:<server URL> — the picked target, kept in the address


def _target_from_url(s: Settings) -> None:
    """A new session (a reload, a link) takes the target its address names. Only a kind of target is taken here;
    a server the studio has not registered is then refused by `backend_choice` like any other (the closed set).
    An older link's ?target=omni:<URL> (the server's former name) is read as server:<URL>."""
    from services.targets import option_key_of

    picked = option_key_of(st.query_params.get(TARGET_PARAM) or "")
    if picked in ("offline", "sagemaker") or picked.startswith("server:"):
        st.session_state["backend_name"], st.session_state["backend_url"] = pick_of(picked, s.server_url)


def target_book():
    """The studio's closed set of targets (services/targets.py), one per process: its servers table is made once,
    not on every page run (adding a server takes the person as an argument)."""
    from services.targets import TargetBook

    try:
        return _target_book(*_where())
    except StudioError:  # no usable history: the settings' servers still stand
        return TargetBook(settings(), None)


@st.cache_resource(show_spinner=False)
def _target_book(*where: str | None):
    from services.targets import TargetBook

    return TargetBook(settings(), _history(*where))


def backend() -> Backend:
    """The backend this browser session chose in the sidebar (default from the settings)."""
    return backend_of(*backend_choice())


def backend_health() -> BackendHealth:
    try:
        return _health(*backend_choice(), _state_stamp(settings()))
    except StudioError as exc:
        return BackendHealth(False, str(exc))


def pick_of(picked: str, url: str | None) -> tuple[str, str | None]:
    """A picker's value ("offline", "sagemaker", "server:<server URL>") as (backend, URL); others keep `url`."""
    return ("server", picked.removeprefix("server:") or None) if picked.startswith("server:") else (picked, url)


# ---------------------------------------------------------------------------------------------------------
# What is running on SageMaker, and what it costs: a banner on every page.
ENDPOINTS_PAGE = "pages/endpoints.py"


@st.cache_data(ttl=30, show_spinner=False)
def _fleet(region: str, profile: str | None, state_stamp: float | None):  # noqa: ANN202 — infra.fleet.StudioFleet
    """Studio-tagged endpoints in the region (infra's fleet listing), or None when AWS cannot be asked."""
    from infra.aws import AwsContext
    from infra.fleet import studio_fleet

    try:
        return studio_fleet(AwsContext(region, profile))
    except StudioError:
        return None


def fleet(at: float | None = None) -> dict | None:
    """What runs in the region and what it costs, its cost so far at `at` (now): the listing is kept 30 s, the
    cost is the moment's (services.pricing.spend, the rule the Endpoints page's figures follow)."""
    s = settings()  # keyed on the state file's stamp: a deploy or delete is asked about at once
    f = _fleet(deployment()[1], s.profile, _state_stamp(s))
    return None if f is None else f.to_dict(at)


def banner_wanted(s: Settings, backend_name: str) -> bool:
    if s.cost_banner == "off":
        return False
    return s.cost_banner == "always" or s.state_file.is_file() or kind(backend_name).capabilities.billed


def ttl_text(f: dict) -> str:
    """"; deletes itself in 2 h 10 min" (the soonest TTL schedule), or "; **no TTL**" when an endpoint has none."""
    from datetime import UTC, datetime

    from infra.ttl_choice import format_left, parse_iso

    if f.get("without_ttl"):
        return f"; **no TTL** on {f['without_ttl']}: runs until deleted"
    if f.get("soonest_deletion"):
        left = (parse_iso(f["soonest_deletion"]) - datetime.now(UTC)).total_seconds()
        return f"; deletes itself in {format_left(left)}" if left > 0 else "; deleting itself now"
    return ""


def fleet_count(f: dict) -> str:
    """'**2 studio endpoints running**', and those InService at 0 instances (free until a request scales them up):
    '**3 studio endpoints**: 2 running, video at 0 instances'."""
    n, idle = f["running"], f.get("idle") or []
    if not idle:
        return f"**{n} studio endpoint{'s' if n != 1 else ''} running**"
    them = "it" if len(idle) == 1 else "them"
    return (f"**{n + len(idle)} studio endpoints**: {n} running, {plain(', '.join(idle))} at 0 instances (no cost "
            f"until a request scales {them} up)")


def cost_banner(*, at: float | None = None, link: bool = True) -> None:
    """'N studio endpoints running: $/hour, cost so far' (at `at`, now; "(emulated)" on the local emulator) with a
    link to the endpoints page (`link`), when there are any."""
    if not banner_wanted(settings(), backend_choice()[0]):
        return
    f = fleet(at)
    if not f or not f["running"]:
        return
    left_out = f" (without {plain(', '.join(f['unpriced']))}: no price)" if f.get("unpriced") else ""
    emulated = " (emulated)" if f.get("emulated") else ""
    st.warning(f"{fleet_count(f)} in {plain(f['region'])}: {usd(f['usd_per_hour'])}/hour, "
               f"{usd(f['cost_so_far_usd'])} so far{emulated}{left_out}{ttl_text(f)}.", icon="💸")
    if link:
        st.page_link(ENDPOINTS_PAGE, label="Endpoints: status, cost, delete", icon="☁️")


@st.cache_resource(show_spinner=False)
def _infra_actions(state_file: str, *where: str | None):
    from infra.actions import ActionRunner
    from services.audit import AuditLog

    return ActionRunner(Path(state_file), audit=AuditLog(_history(*where)), shared=_shared_state(*where))


@st.cache_resource(show_spinner=False)
def _shared_state(*where: str | None):
    """A team studio's deployment state and lock (its PostgreSQL database: infra/shared_state.py); None with
    SQLite, where the state file and its lock on this machine's disk are the deployment's."""
    from infra.shared_state import SharedState

    h = _history(*where)
    return SharedState(h.engine, h.where) if h.dialect == "postgresql" else None


STATE_FRESH_S = 1.0  # a page run asks for the deployment several times (sidebar, banner, page): one read serves


def sync_deployment_state(s: Settings) -> None:
    """This replica's copy of a shared deployment state brought up to date (one read; nothing on SQLite, nothing
    while this process writes it): what another replica deployed or deleted shows on this page run."""
    if not s.database_url:
        return
    from infra.lock import held_here

    shared = _shared_state(*_where())
    if shared is not None and held_here(s.state_file) is None:
        try:
            shared.pull(s.state_file, fresh_for_s=STATE_FRESH_S)  # once per page run, not per caller
        except Exception as exc:  # noqa: BLE001 — the page still shows this replica's copy; say why it may be old
            st.warning(f"The deployment as other replicas left it could not be read ({plain(str(exc))}); this "
                       "page shows this replica's copy.", icon="⚠️")


def infra_actions():
    """The background runner of deploy/resume/smoke/delete for the settings' state file (process-wide); each
    action names who asks, and only an admin may start one. Starts, refusals and outcomes go to the audit log."""
    s = settings()
    return _infra_actions(str(s.state_file), *_where())


def audit_entries(limit: int = 50) -> list:
    """The audit log, newest first (endpoint actions and voice clones): the runner's own, made once per process
    (making one creates its table: a write, not for every page run)."""
    return infra_actions().audit.entries(limit=limit)


def uploads_allowed() -> bool:
    """Whether pages offer uploads (reference images, recordings, prompt and ratings files): always, except in a
    demo studio without them — where a page says `NO_UPLOADS` in place of its uploader."""
    demo = settings().demo
    return demo is None or demo.uploads


NO_UPLOADS = "This demo studio takes no uploads (its `uploads` setting is off)."


def ice_servers() -> list[dict]:
    """The WebRTC ICE servers from the settings, as RTCIceServer dicts (empty: loopback/LAN only)."""
    return [s.model_dump(exclude_none=True) for s in settings().ice_servers]


# ---------------------------------------------------------------------------------------------------------
# Image and video studios: one history per data folder, one video job runner per backend (process-wide).
@st.cache_resource(show_spinner=False)
def _history(*where: str | None):
    """The history the settings name, one per process and per `_where()` (the cache's key)."""
    from services.history import History

    h = History.of(settings())
    h.jobs.recover()  # jobs a previous run left unfinished: marked interrupted, or kept for a runner to resume
    return h


def history():
    """The studio's history (SQLite in the data_dir setting, or the database_url's PostgreSQL; media in
    <data_dir>/media or at media_url) acting for this session's person (`auth.principal()`: their records and the
    shared ones; their role checked on every write). The connection is the process's;
    the view is cheap. Raises StudioError naming a bad folder."""
    return history_of(auth.principal())


def history_of(actor):  # noqa: ANN001, ANN201 — a services.access.Principal; the history acting as them
    return _history(*_where()).acting_as(actor)


def _where() -> tuple[str, str, str, str | None]:
    """Where the history is, as the settings say: the data folder, the database URL, the media URL and its key."""
    s = settings()
    return str(s.data_dir), s.database_url, s.media_url, s.kms_key_id


def require_backend(what: str = "The backend", family: str | None = None):
    """`backend()` having what `family` needs (`backend.missing`), or "<what> is not available: …" and the page stops."""
    try:
        built = backend()
        if family is not None and (problem := built.missing(family)) is not None:
            raise problem
        return built
    except StudioError as exc:
        st.error(f"{what} is not available: {plain(exc)}")
        st.stop()


def require_history():
    """`history()`, or — when it cannot be used (a damaged database, a folder that is not writable) — its one
    line naming the file and what to do, and the page stops (for pages that show nothing without it)."""
    try:
        return history()
    except StudioError as exc:  # not cached: once the file is moved aside, the next run starts a new one
        st.error(f"**The studio's history is not available.** {plain(exc)}", icon="🗄️")
        st.stop()


@st.cache_resource(show_spinner=False)
def _eval_runs(*where: str | None):
    from services.eval.runs import EvalRuns

    # the process's evaluation runner: pages start runs with their person's store; it carries on runs whose
    # process (here, or on another replica of a team studio) is gone
    return EvalRuns(_history(*where), settings())


def eval_runs():
    """The process's evaluation runner (services/eval/runs.py): runs go on while the page is closed."""
    return _eval_runs(*_where())


@st.cache_resource(show_spinner=False)
def _video_jobs(name: str, url: str | None, targets: str | None = None):
    from services.videos import VideoJobs

    # the process's runner: resumes what its transport can poll again, for whoever started it; pages start jobs
    # with their person's history (`start(request, history=history())`)
    return VideoJobs(backend_of(name, url, targets).client("video"), _history(*_where()))


def video_jobs():
    """The video job runner for the chosen backend; jobs run on its worker threads, not the script's."""
    return _video_jobs(*backend_choice())
