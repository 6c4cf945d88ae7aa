"""Sign-in for the team studio, without the UI: is Streamlit's OpenID Connect sign-in (`st.login`) configured,
is its configuration whole, and may the studio listen where it was asked to (docs/team.md, "Sign-in").

    config = sign_in(files)          # SignIn, or None when no secrets file has an [auth] table; ConfigError
                                     # naming what is missing when one has an incomplete table
    bind_problem("0.0.0.0", files)   # the message why the studio may not start there, or None

`files` are the secrets files Streamlit reads (its `secrets.files` option: ~/.streamlit/secrets.toml, then
./.streamlit/secrets.toml; a folder holds Kubernetes-style secrets), read the way Streamlit reads them: the
later file's top-level tables replace the earlier's. Streamlit's `[auth]` contract (streamlit/auth_util.py):
`redirect_uri` (ending in /oauth2callback) and `cookie_secret` in `[auth]`, and per provider `client_id`,
`client_secret` and `server_metadata_url` — in `[auth]` itself for the default provider (`st.login()`), or in
an `[auth.<name>]` table for a named one (`st.login("<name>")`).

The rule: without sign-in the studio acts as one local admin for everyone who reaches it, so it listens on
loopback only (127.0.0.0/8, ::1, localhost). Any other address — 0.0.0.0, a LAN address, a Unix socket
behind a proxy, or no address at all (Streamlit then listens on every interface) — needs sign-in.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.errors import ConfigError

AUTH_KEYS = ("redirect_uri", "cookie_secret")
PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")
DEFAULT_PROVIDER = "default"
CALLBACK_PATH = "/oauth2callback"
MIN_COOKIE_SECRET = 14  # bytes: below this joserfc (which signs Streamlit's provider tokens) calls a key weak
SECRETS_HINT = ".streamlit/secrets.toml"
DOCS = 'docs/team.md, "Sign-in"'
EXAMPLE = """[auth]
redirect_uri = "https://studio.example.com/oauth2callback"
cookie_secret = "<a long random string: python -c 'import secrets; print(secrets.token_hex(32))'>"
client_id = "<from your OpenID Connect provider>"
client_secret = "<from your OpenID Connect provider>"
server_metadata_url = "https://login.example.com/.well-known/openid-configuration"
""".strip()


@dataclass(frozen=True)
class SignIn:
    """A whole [auth] configuration: the providers to offer (DEFAULT_PROVIDER for keys in [auth] itself)."""

    providers: tuple[str, ...]
    redirect_uri: str
    files: tuple[str, ...]  # the secrets files it was read from


def _read_folder(path: Path) -> dict[str, Any]:
    """Kubernetes-style secrets as Streamlit reads them: a folder per secret, a file per key (one file: the
    value itself)."""
    secrets: dict[str, Any] = {}
    for sub in sorted(path.iterdir()):
        if not sub.is_dir():
            raise ConfigError(f"secrets folder {path}: {sub.name} is not a folder (each secret is a folder of files)")
        values = {f.name: f.read_text(encoding="utf-8").strip() for f in sorted(sub.iterdir()) if f.is_file()}
        secrets[sub.name] = next(iter(values.values())) if len(values) == 1 else values
    return secrets


def read_secrets(files: Sequence[str | os.PathLike[str]]) -> tuple[dict[str, Any], list[str]]:
    """The secrets Streamlit would see from these files, and the files that were there. ConfigError when one
    cannot be read (not TOML, not UTF-8)."""
    secrets: dict[str, Any] = {}
    found: list[str] = []
    for name in files:
        path = Path(name).expanduser()
        try:
            if str(name).endswith(".toml"):
                if not path.is_file():
                    continue
                part = tomllib.loads(path.read_text(encoding="utf-8"))
            elif path.is_dir():
                part = _read_folder(path)
            else:
                continue
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"secrets file {path} is not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"secrets file {path} is not UTF-8 text ({exc.reason}): save it as UTF-8") from None
        except OSError as exc:
            raise ConfigError(f"secrets file {path} cannot be read ({exc.strerror or exc})") from None
        secrets.update(part)  # as Streamlit: a later file's top-level table replaces the earlier one whole
        found.append(str(path))
    return secrets, found


def _missing(table: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    return [k for k in keys if not str(table.get(k) or "").strip()]


def _providers(auth: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    named = {k: v for k, v in auth.items() if isinstance(v, Mapping) and any(p in v for p in PROVIDER_KEYS)}
    if any(k in auth for k in PROVIDER_KEYS) and DEFAULT_PROVIDER not in named:
        named = {DEFAULT_PROVIDER: auth, **named}
    return named


def sign_in(files: Sequence[str | os.PathLike[str]]) -> SignIn | None:
    """The [auth] configuration in these secrets files; None when there is none (sign-in off). ConfigError
    naming each missing or bad key, and the files, when the table is there but Streamlit could not use it."""
    secrets, found = read_secrets(files)
    auth = secrets.get("auth")
    if auth is None:
        return None
    where = ", ".join(found)
    if not isinstance(auth, Mapping):
        raise ConfigError(f"auth in {where} must be a table ([auth] with {', '.join(AUTH_KEYS + PROVIDER_KEYS)}); "
                          f"see {DOCS}")
    problems = [f"[auth] has no {k}" for k in _missing(auth, AUTH_KEYS)]
    redirect = str(auth.get("redirect_uri") or "").strip()
    if redirect and (not redirect.startswith(("http://", "https://")) or not redirect.endswith(CALLBACK_PATH)):
        problems.append(f"[auth] redirect_uri {redirect!r} must be the studio's own address ending in "
                        f"{CALLBACK_PATH} (e.g. https://studio.example.com{CALLBACK_PATH}), registered with the "
                        "provider")
    secret = str(auth.get("cookie_secret") or "")
    if secret and len(secret.encode()) < MIN_COOKIE_SECRET:
        problems.append(f"[auth] cookie_secret is {len(secret.encode())} bytes: use a long random string "
                        "(python -c 'import secrets; print(secrets.token_hex(32))')")
    providers = _providers(auth)
    if not providers:
        problems.append(f"[auth] names no provider: add {', '.join(PROVIDER_KEYS)} to [auth] "
                        "(or to an [auth.<provider>] table)")
    for name, table in providers.items():
        shown = "[auth]" if table is auth else f"[auth.{name}]"
        problems += [f"{shown} has no {k}" for k in _missing(table, PROVIDER_KEYS)]
        if "_" in name:
            problems.append(f"{shown}: a provider's name may not contain '_' (Streamlit refuses it)")
    if problems:
        raise ConfigError(f"sign-in is configured but incomplete in {where}: " + "; ".join(problems) +
                          f". See {DOCS}.")
    return SignIn(tuple(providers), redirect, tuple(found))


def is_loopback(address: str | None) -> bool:
    """True when `address` (Streamlit's server.address) reaches this machine only."""
    if not address:
        return False  # unset: Streamlit listens on every interface
    host = address.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name, a unix:// socket: reachable through whatever serves it


def describe_address(address: str | None) -> str:
    return address if address else "every interface (no server.address set)"


def bind_problem(address: str | None, files: Sequence[str | os.PathLike[str]]) -> str | None:
    """Why the studio may not serve on `address` with these secrets files, or None.

    A broken [auth] table is a problem anywhere (nobody could sign in); no [auth] table at all is one only
    off loopback."""
    try:
        config = sign_in(files)
    except ConfigError as exc:
        return f"Omni Studio cannot start: {exc}"
    if config is not None or is_loopback(address):
        return None
    looked = ", ".join(str(Path(f).expanduser()) for f in files) or "(no secrets files)"
    return (f"Omni Studio will not listen on {describe_address(address)} without sign-in: everyone who can reach "
            "it would act as the local admin (generate on your endpoints, deploy and delete them).\n"
            f"Either configure sign-in — an [auth] table in {SECRETS_HINT} for your OpenID Connect provider, and "
            f"an [access] policy in studio.toml saying who may do what ({DOCS}):\n\n{EXAMPLE}\n\n"
            "— or listen on this machine only: HOST=127.0.0.1 make studio (the default), "
            "or --server.address 127.0.0.1.\n"
            f"Secrets files looked at (none has an [auth] table): {looked}")
