"""Where the studio's server may send requests: a closed set a person picks from (docs/team.md, "Threat model").

    book = TargetBook(settings, history)
    book.servers()                      # vLLM-Omni servers: server_url, [[servers]] in studio.toml, added by admins
    book.add_server(actor, "http://gpu-box:8091", name="gpu box")   # admins only; the URL checked once, here
    book.options("image")               # what a variant picker offers: the sidebar's target, servers, endpoints
    book.check(actor, "server", url="http://10.0.0.5/admin", modality="image")   # Forbidden: not registered

The studio's server makes the requests, not the browser: a URL typed into a form would let anyone who can reach
the studio aim its server at any address it can reach (an internal admin page, a cloud metadata service) and read
back what answers. So a person never types a target. They pick among the target the settings name (the
sidebar's), the vLLM-Omni servers an admin registered — `server_url` and `[[servers]]` in the settings, or added
on the sidebar, which the history keeps — and the SageMaker endpoints of the deployment (the settings' endpoint
names and the infra state file's). A demo studio never leaves the target its settings name.

The pages offer only these, to everyone. The services check again (`check`, `check_variant_keys`), so a
replayed widget message or a hand-made SPEC cannot do what the form does not offer: someone who is not an admin
gets the closed set only, and never a per-variant state file, AWS profile or region. Admins — and the command
line, which acts as one (whoever runs it holds the network and the AWS credentials anyway) — may name any
server in a SPEC; in the studio they add it on the sidebar first, like everyone picks it. A demo studio stays on
its target for everyone.

A target's kind is "default" (the caller's own), "server" (a vLLM-Omni server by URL; "omni", its former name, is
read as "server" wherever a kind or an option key arrives: services/kinds.py), "sagemaker" or "offline".
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from protocol.errors import InvalidInput, StudioError
from services.access import Forbidden, Principal, require
from services.addresses import check_server_url
from services.history import History, HistoryError
from services.history.base import DB_ERRORS, reason
from services.kinds import OLD_NAMES, backend_name
from services.settings import Settings

# The modality of a conversation's reply stage (Converse): a model streaming OpenAI-compatible /v1/chat/completions
CHAT = "chat"
# Keys of an evaluation variant that point the studio's server somewhere else: only the command line sets them.
# (`backend`, `url` and `endpoint` are picked from the closed set; the rest name files and AWS profiles.)
ELSEWHERE_KEYS = ("region", "profile", "state_file")
NAME_MAX = 60


@dataclass(frozen=True)
class Server:
    """A registered vLLM-Omni server: its base URL, a name to show, and where it was registered."""

    url: str
    name: str
    source: str  # "settings (server_url)", "settings ([[servers]])", or "added by ann@example.com"


@dataclass(frozen=True)
class TargetOption:
    """One entry of a variant's Target picker: `key` is what the widget holds; `kind`/`url`/`endpoint` the target."""

    key: str
    label: str
    kind: str  # default | server | sagemaker
    url: str | None = None
    endpoint: str | None = None


def names_any_target(actor: Principal) -> bool:
    """Admins register the servers and run the command line: the services take any target from them."""
    return actor.can("add_server")


class TargetBook:
    """The closed set of targets of one studio: its settings and the servers its history keeps."""

    def __init__(self, settings: Settings, history: History | None = None) -> None:
        self.settings = settings
        self.history = history

    # -- vLLM-Omni servers ------------------------------------------------------------------------------------
    def _db(self) -> History | None:
        return self.history

    def servers(self) -> list[Server]:
        """Every registered server, the settings' first; an unreadable history leaves the settings' ones."""
        out: dict[str, Server] = {}
        if self.settings.server_url:
            out[self.settings.server_url] = Server(self.settings.server_url, _host(self.settings.server_url),
                                                   "settings (server_url)")
        for entry in self.settings.servers:
            out.setdefault(entry.url, Server(entry.url, entry.name or _host(entry.url), "settings ([[servers]])"))
        try:
            db = self._db()
            rows = [] if db is None else db.reader().execute("SELECT * FROM servers ORDER BY added_at").fetchall()
        except (HistoryError, *DB_ERRORS):
            rows = []
        for r in rows:
            out.setdefault(r["url"], Server(r["url"], r["name"], f"added by {r['added_by']}"))
        return list(out.values())

    def server_urls(self) -> set[str]:
        return {s.url for s in self.servers()}

    def add_server(self, actor: Principal, url: str, *, name: str | None = None) -> Server:
        """Register a vLLM-Omni server (admins only): the one place a URL enters the studio. InvalidInput names
        what is wrong with the URL."""
        require(actor, "add_server")
        try:
            checked = check_server_url(url)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        name = " ".join(str(name or "").split())[:NAME_MAX] or _host(checked)
        db = self._db()
        if db is None:
            raise InvalidInput("servers are added to the studio's history, and this studio has none open")
        try:
            with db.transaction() as tx:
                tx.execute("INSERT INTO servers (url, name, added_by, added_at) VALUES (?, ?, ?, ?) ON CONFLICT (url)"
                           " DO UPDATE SET name = excluded.name, added_by = excluded.added_by, added_at = excluded.added_at",
                           (checked, name, actor.id, time.time()))
        except DB_ERRORS as exc:
            raise HistoryError(f"cannot record the server in the history at {db.data_dir} ({reason(exc)})") from None
        return Server(checked, name, f"added by {actor.id}")

    def remove_server(self, actor: Principal, url: str) -> None:
        """Forget a server added on the sidebar (admins only); the settings' servers stay (edit the settings)."""
        require(actor, "add_server")
        db = self._db()
        if db is None:
            return
        with db.transaction() as tx:
            tx.execute("DELETE FROM servers WHERE url = ?", (url,))

    # -- SageMaker endpoints -------------------------------------------------------------------------------------
    def endpoints(self, modality: str) -> list[str]:
        """The deployment's endpoint for `modality` (the settings' name, else the state file's), if any. For CHAT
        (a conversation's reply): the omni endpoint (Qwen3-Omni answers chat in text mode) and the endpoints an
        admin named in `chat_endpoints`."""
        from services.sagemaker import resolve_targets

        try:
            names = resolve_targets(self.settings).endpoints
        except StudioError:
            names = {}
        found = [names.get("omni"), *self.settings.chat_endpoints] if modality == CHAT else [names.get(modality)]
        return list(dict.fromkeys(n for n in found if n))

    # -- pickers and checks ---------------------------------------------------------------------------------------
    def options(self, modality: str, *, default_label: str = "Sidebar backend") -> list[TargetOption]:
        """What a variant's Target picker offers: the sidebar's target; unless a demo, each registered server and
        the deployment's endpoint for this modality."""
        out = [TargetOption("default", default_label, "default")]
        if self.settings.demo is not None:
            return out
        out += [TargetOption(f"server:{s.url}", f"vLLM-Omni {s.name} ({s.url})", "server", url=s.url)
                for s in self.servers()]
        out += [TargetOption(f"sagemaker:{e}", f"SageMaker endpoint {e}", "sagemaker", endpoint=e)
                for e in self.endpoints(modality)]
        return out

    def reply_options(self) -> list[TargetOption]:
        """What a conversation's reply pickers offer (a model's /v1/chat/completions): the registered servers and
        the deployment's chat endpoints; none in a demo (its conversations answer with a script, or the settings'
        own native session). A SageMaker endpoint is reached with the SageMaker backend's credentials."""
        if self.settings.demo is not None:
            return []
        return ([TargetOption(f"server:{s.url}", f"{s.name} ({s.url})", "server", url=s.url)
                 for s in self.servers()]
                + [TargetOption(f"sagemaker:{e}", f"SageMaker endpoint {e}", "sagemaker", endpoint=e)
                   for e in self.endpoints(CHAT)])

    def check(self, actor: Principal, kind: str, *, url: str | None = None, endpoint: str | None = None,
              modality: str, who: str = "") -> None:
        """Forbidden unless the target is in the closed set (an admin may name any; a demo stays on its own)."""
        if kind == "default":
            return
        prefix = f"{who}: " if who else ""
        if self.settings.demo is not None:
            raise Forbidden(f"{prefix}a demo studio stays on the target its settings name")
        if kind == "server":
            try:
                checked = check_server_url(url or "")
            except ValueError as exc:
                raise InvalidInput(f"{prefix}{exc}") from None
            if checked not in self.server_urls() and not names_any_target(actor):
                raise Forbidden(f"{prefix}{checked} is not a server registered in this studio: pick one of its "
                                "servers, or ask an admin to add it on the sidebar")
            return
        if kind == "sagemaker":
            if endpoint not in self.endpoints(modality) and not names_any_target(actor):
                raise Forbidden(f"{prefix}{endpoint!r} is not this studio's {modality} endpoint: pick the "
                                "deployment's endpoint, or ask an admin to name it in the settings")
            return
        if kind == "offline":
            return
        raise InvalidInput(f"{prefix}unknown target {kind!r}")

    def check_variant_keys(self, actor: Principal, modality: str, variants: Iterable[Mapping[str, Any]]) -> None:
        """An evaluation's variants (SPEC tables): their targets in the closed set, no other state file, profile
        or region (an admin's, from a SPEC file), and in a demo only the settings' own target."""
        for v in variants:
            who = f"variant {v.get('label')!r}"
            elsewhere = [k for k in ELSEWHERE_KEYS if v.get(k) not in (None, "")]
            if elsewhere and not names_any_target(actor):
                raise Forbidden(f"{who}: {', '.join(elsewhere)} point the studio elsewhere and are set on the "
                                "command line only (python -m services eval)")
            backend = target_backend(v.get("backend"), url=v.get("url"), endpoint=v.get("endpoint"))
            if self.settings.demo is not None:
                same = backend in (None, self.settings.backend) and v.get("url") in (None, self.settings.server_url)
                if not same or v.get("endpoint"):
                    raise Forbidden(f"{who}: a demo studio stays on the target its settings name")
                continue
            if backend == "server":
                self.check(actor, "server", url=v.get("url") or self.settings.server_url, modality=modality, who=who)
            elif backend == "sagemaker" and v.get("endpoint"):
                self.check(actor, "sagemaker", endpoint=v.get("endpoint"), modality=modality, who=who)


@dataclass(frozen=True)
class TargetGuard:
    """The closed set for one person, held by what a page hands to a service that builds its own clients (a
    conversation's Setup): `check` before anything is built or sent, as `TargetBook.check`."""

    book: TargetBook
    actor: Principal

    def check(self, kind: str, *, url: str | None = None, endpoint: str | None = None, modality: str,
              who: str = "") -> None:
        self.book.check(self.actor, kind, url=url, endpoint=endpoint, modality=modality, who=who)


def chosen(options: Iterable[TargetOption], key: str) -> TargetOption:
    """The picked option by its key ("omni:<url>", the former spelling, as "server:<url>"); one no longer offered (a
    server removed meanwhile) is refused."""
    key = option_key_of(key)
    for o in options:
        if o.key == key:
            return o
    raise InvalidInput(f"the target {key!r} is not one this studio offers any more: pick another")


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc or url


# -- a target named by keys (a SPEC variant, CLI flags, a picked option) → the backend it means ----------------
def target_backend(backend: str | None = None, *, url: str | None = None, endpoint: str | None = None) -> str | None:
    """The backend a target's keys name: `backend` when given (a former name read as today's: "omni" → "server");
    a URL alone means a vLLM-Omni server, an endpoint alone a SageMaker endpoint; None leaves the caller's."""
    return backend_name(backend) or ("server" if url else "sagemaker" if endpoint else None)


def target_overrides(modality: str, *, backend: str | None = None, url: str | None = None,
                     endpoint: str | None = None) -> dict[str, Any]:
    """The settings overrides (`Settings.with_overrides`) that aim a backend at the target these keys name."""
    changes: dict[str, Any] = {}
    if name := target_backend(backend, url=url, endpoint=endpoint):
        changes["backend"] = name
    if url:
        changes["server_url"] = url
    if endpoint:
        changes[f"{modality}_endpoint"] = endpoint
    return changes


def spec_keys(option: Any, default_backend: str, default_url: str | None) -> dict[str, Any]:
    """A picked target (a TargetOption or services.compare.Target) as a SPEC variant's keys; `default` is the
    caller's own backend (its URL only when it is a vLLM-Omni server)."""
    if option.kind == "default":
        return {"backend": default_backend} | ({"url": default_url} if default_backend == "server" else {})
    if option.kind == "server":
        return {"backend": "server", "url": option.url}
    return {"backend": "sagemaker", "endpoint": option.endpoint}


def option_key(variant: Mapping[str, Any], default_backend: str, default_url: str | None) -> str:
    """The TargetOption key a SPEC variant's keys name (`default` when they are the caller's own backend)."""
    if variant.get("endpoint"):
        return f"sagemaker:{variant['endpoint']}"
    own_url = default_url if default_backend == "server" else None
    if variant.get("backend") == default_backend and variant.get("url") == own_url:
        return "default"
    return f"server:{variant['url']}" if variant.get("url") else "default"


def option_key_of(key: str) -> str:
    """A TargetOption key as someone may have kept it (a link, a saved form): "omni:<url>", the former spelling of a
    server's key, read as "server:<url>"; other keys unchanged."""
    kind, sep, rest = key.partition(":")
    return f"{OLD_NAMES[kind]}:{rest}" if sep and kind in OLD_NAMES else key
