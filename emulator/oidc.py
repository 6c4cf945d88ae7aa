"""A local OpenID Connect provider: for the sign-in tests, and for trying the team studio's sign-in on one
machine (docs/team.md, "Sign-in"). Loopback only; its users are whoever the JSON it is given names.

    python -m emulator.oidc [--port 8093] [--users '[{"email": "ann@example.com", "name": "Ann",
                             "groups": ["studio-admins"], "email_verified": true}, ...]'] [--client-id omni-studio]
                             [--client-secret SECRET] [--redirect-uri http://127.0.0.1:8502/oauth2callback ...]
                             [--post-logout-uri http://127.0.0.1:8502/ ...]

Once listening it prints one JSON line: {"oidc": "ready", "url": ..., "server_metadata_url": ...,
"client_id": ..., "client_secret": ..., "redirect_uris": [...]} — the values for `.streamlit/secrets.toml`'s
[auth] table, and the redirect URIs it serves (the studio's `redirect_uri` must be one of them).

What it serves (the authorization code flow, as Streamlit's Authlib client speaks it):
- `/.well-known/openid-configuration` — discovery;
- `/authorize` — a page listing the users, one button each (no passwords: whoever reaches 127.0.0.1 picks);
  the button sends the browser back to the redirect URI with a one-time code and the state. Only the
  registered redirect URIs (`--redirect-uri`, repeatable; by default the studio's local
  http://127.0.0.1:8501/oauth2callback and http://localhost:8501/oauth2callback) get codes: any other is a
  400 page naming it and how to register it, never a redirect;
- `/token` — the code (client authenticated by HTTP Basic or form fields, PKCE S256 checked when the
  authorization asked for it) for an access token and an RS256 id_token signed with a key made at start
  (iss, aud, sub, iat, exp, nonce, email, email_verified, name and the groups claim; a user may be given
  `"email_verified": false`, or null to leave the claim out, to try the studio's refusal of unverified e-mails);
- `/jwks` — that key's public half; `/userinfo` — the claims for an access token;
- `/logout` — the end-session endpoint: back to `post_logout_redirect_uri` when it is on a registered
  redirect URI's origin (Streamlit sends its /oauth2callback) or registered itself (`--post-logout-uri`);
  any other is a 400 page naming it.

From Python (tests, scripts), started through offline.launch.spawn like every other server:

    with start_oidc(USERS, redirect_uris=[...]) as provider:
        provider.server_metadata_url, provider.client_id, provider.client_secret
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import html
import json
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from offline.launch import free_port, spawn, stop, wait_http_ok

HOST = "127.0.0.1"
DEFAULT_PORT = 8093
DEFAULT_CLIENT_ID = "omni-studio"
DEFAULT_CLIENT_SECRET = "local-oidc-secret-not-for-real-use"
# The people of `make`-free trials (docs/team.md's example policy gives them admin, creator and viewer).
DEFAULT_USERS: list[dict[str, Any]] = [
    {"email": "ann@example.com", "name": "Ann Admin", "groups": ["studio-admins"]},
    {"email": "bob@example.com", "name": "Bob Creator", "groups": ["creative"]},
    {"email": "vic@example.com", "name": "Vic Viewer", "groups": []},
]
# What a studio started with `make studio` on this machine sends (both hosts: each is its own cookie origin).
DEFAULT_REDIRECT_URIS: tuple[str, ...] = ("http://127.0.0.1:8501/oauth2callback",
                                          "http://localhost:8501/oauth2callback")
CODE_TTL_S = 120
TOKEN_TTL_S = 3600


@dataclass(frozen=True)
class User:
    email: str
    name: str
    groups: tuple[str, ...] = ()
    sub: str = ""
    email_verified: bool | None = True  # None: the id_token has no email_verified claim

    @property
    def subject(self) -> str:
        return self.sub or self.email


def parse_users(text: str) -> list[User]:
    """Users from JSON: a list of {"email", "name"?, "groups"?, "sub"?, "email_verified"? (true unless given:
    true, false, or null for no such claim)}. ValueError naming what is wrong."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError("--users must be JSON, a list of {\"email\": ..., \"name\": ..., \"groups\": [...]} "
                         f"({exc})") from None
    if not isinstance(raw, list) or not raw:
        raise ValueError("--users must be a non-empty JSON list of users")
    users = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("email"), str) or "@" not in item["email"]:
            raise ValueError(f"--users[{i}] needs an \"email\" (got {item!r})")
        groups = item.get("groups") or []
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise ValueError(f"--users[{i}].groups must be a list of strings (got {groups!r})")
        verified = item.get("email_verified", True)
        if verified is not None and not isinstance(verified, bool):
            raise ValueError(f"--users[{i}].email_verified must be true, false or null (no such claim in the "
                             f"token), got {verified!r}")
        users.append(User(item["email"], str(item.get("name") or item["email"]), tuple(groups),
                          str(item.get("sub") or ""), verified))
    if len({u.email.lower() for u in users}) != len(users):
        raise ValueError("--users names an e-mail twice")
    return users


@dataclass
class _Grant:
    user: User
    client_id: str
    redirect_uri: str
    nonce: str | None
    scope: str
    challenge: str | None
    expires: float


@dataclass
class Provider:
    """The provider's state: its users, its one client, its signing key, the codes and tokens it gave out."""

    issuer: str
    users: list[User]
    client_id: str = DEFAULT_CLIENT_ID
    client_secret: str = DEFAULT_CLIENT_SECRET
    redirect_uris: tuple[str, ...] = DEFAULT_REDIRECT_URIS  # the only ones that get codes
    groups_claim: str = "groups"
    post_logout_uris: tuple[str, ...] = ()  # besides any URI on a redirect URI's origin
    codes: dict[str, _Grant] = field(default_factory=dict)
    tokens: dict[str, tuple[User, float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        from joserfc.jwk import RSAKey

        self.key = RSAKey.generate_key(2048, parameters={"kid": secrets.token_hex(8), "use": "sig", "alg": "RS256"},
                                       private=True)

    def metadata(self) -> dict[str, Any]:
        i = self.issuer
        return {
            "issuer": i, "authorization_endpoint": f"{i}/authorize", "token_endpoint": f"{i}/token",
            "userinfo_endpoint": f"{i}/userinfo", "jwks_uri": f"{i}/jwks", "end_session_endpoint": f"{i}/logout",
            "response_types_supported": ["code"], "grant_types_supported": ["authorization_code"],
            "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": ["openid", "email", "profile"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
            "claims_supported": ["sub", "iss", "aud", "exp", "iat", "nonce", "email", "email_verified", "name",
                                 self.groups_claim],
        }

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.key.as_dict(private=False)]}

    def claims(self, user: User) -> dict[str, Any]:
        claims = {"sub": user.subject, "email": user.email, "email_verified": user.email_verified, "name": user.name,
                  self.groups_claim: list(user.groups)}
        if user.email_verified is None:
            del claims["email_verified"]
        return claims

    def id_token(self, grant: _Grant) -> str:
        from joserfc import jwt

        now = int(time.time())
        payload = {"iss": self.issuer, "aud": grant.client_id, "iat": now, "auth_time": now, "exp": now + TOKEN_TTL_S,
                   **self.claims(grant.user)}
        if grant.nonce:
            payload["nonce"] = grant.nonce
        return jwt.encode({"alg": "RS256", "kid": self.key.kid, "typ": "JWT"}, payload, self.key)

    # -- checks shared by the page and the redirect
    def redirect_allowed(self, uri: str) -> bool:
        return uri in self.redirect_uris

    def logout_allowed(self, uri: str) -> bool:
        """A registered post-logout URI, or any URI on the origin of a registered redirect URI (the studio
        that signs in there is the one signing out)."""
        if uri in self.post_logout_uris:
            return True
        origin = _origin(uri)
        return origin is not None and origin in {_origin(r) for r in self.redirect_uris}

    def user(self, email: str) -> User | None:
        return next((u for u in self.users if u.email.lower() == email.lower()), None)


def _origin(uri: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an absolute http(s) URI, or None."""
    try:
        parts = urlsplit(uri)
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        return None
    if scheme not in ("http", "https") or not host:
        return None
    return scheme, host.lower(), port or (443 if scheme == "https" else 80)


def check_uri(uri: str, flag: str) -> str:
    """A URI given to --redirect-uri / --post-logout-uri: absolute http(s), no fragment. ValueError otherwise."""
    if _origin(uri) is None or urlsplit(uri).fragment:
        raise ValueError(f"{flag} {uri!r} must be an absolute http(s) URI without a #fragment, e.g. "
                         f"{DEFAULT_REDIRECT_URIS[0]}")
    return uri


def _with_query(uri: str, params: dict[str, str]) -> str:
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True) + [(k, v) for k, v in params.items() if v is not None]
    return urlunsplit(parts._replace(query=urlencode(query)))


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Local sign-in</title>
<style>body{{font-family:sans-serif;max-width:32rem;margin:3rem auto}}button{{display:block;width:100%;margin:.5rem 0;
padding:.8rem;font-size:1rem;text-align:left;cursor:pointer}}small{{color:#666}}</style></head><body>
<h1>Local sign-in</h1><p>A test provider on this machine (emulator/oidc.py): choose who you are.<br>
<small>Client {client}, back to {redirect}</small></p>{buttons}</body></html>"""


_VERIFIED_NOTE = {False: "e-mail not verified", None: "no email_verified claim"}


def _oauth_error(status: int, error: str, description: str) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status,
                        headers={"Cache-Control": "no-store"})


def _bad_request(text: str) -> HTMLResponse:  # never redirected: the client or its redirect URI is unknown
    return HTMLResponse(f"<!doctype html><h1>Bad sign-in request</h1><p>{html.escape(text)}</p>", status_code=400)


def _check_client(provider: Provider, params: dict[str, str]) -> str | None:
    """Why the client or its redirect URI is not this provider's (an error page, never a redirect), or None."""
    if params.get("client_id") != provider.client_id:
        return f"unknown client_id {params.get('client_id')!r} (this provider knows {provider.client_id!r})"
    uri = params.get("redirect_uri", "")
    if not provider.redirect_allowed(uri):
        return (f"redirect_uri {uri!r} is not registered with this provider (registered: "
                f"{', '.join(provider.redirect_uris)}). Register it by starting the provider with "
                f"--redirect-uri {uri or '<the studio URL>/oauth2callback'} (repeatable), or "
                "start_oidc(redirect_uris=[...]) from Python.")
    return None


def _check_request(params: dict[str, str]) -> str | None:
    """An error to send back to the client's redirect URI (its identity is known by now), or None."""
    if params.get("response_type") != "code":
        return "unsupported_response_type"
    if "openid" not in params.get("scope", "").split():
        return "invalid_scope"
    if params.get("code_challenge") and params.get("code_challenge_method", "plain") != "S256":
        return "invalid_request"
    return None


def create_app(provider: Provider) -> FastAPI:
    app = FastAPI(title="Local OpenID Connect provider", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/.well-known/openid-configuration")
    def discovery() -> dict[str, Any]:
        return provider.metadata()

    @app.get("/jwks")
    def jwks() -> dict[str, Any]:
        return provider.jwks()

    @app.get("/logout")
    def logout(post_logout_redirect_uri: str | None = None, state: str | None = None) -> Any:
        if not post_logout_redirect_uri:
            return HTMLResponse("<!doctype html><h1>Signed out</h1>")
        if not provider.logout_allowed(post_logout_redirect_uri):
            return _bad_request(
                f"post_logout_redirect_uri {post_logout_redirect_uri!r} is not registered with this provider: it "
                f"must be on the origin of a registered redirect URI ({', '.join(provider.redirect_uris)}) or "
                f"registered itself (registered: {', '.join(provider.post_logout_uris) or 'none'}). Register it by "
                f"starting the provider with --post-logout-uri {post_logout_redirect_uri}, or "
                "start_oidc(post_logout_uris=[...]) from Python.")
        return RedirectResponse(_with_query(post_logout_redirect_uri, {"state": state}), 302)

    _add_authorization(app, provider)
    _add_tokens(app, provider)
    return app


def _add_authorization(app: FastAPI, provider: Provider) -> None:
    """/authorize: the page of users to pick from, and the pick that sends a one-time code back."""
    @app.get("/authorize")
    def authorize_page(request: Request) -> Any:
        params = dict(request.query_params)
        problem = _check_client(provider, params)
        if problem:
            return _bad_request(problem)
        error = _check_request(params)
        if error:
            back = _with_query(params["redirect_uri"], {"error": error, "state": params.get("state")})
            return RedirectResponse(back, 302)
        hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                         for k, v in params.items() if k != "user")
        buttons = "".join(
            f'<form method="post" action="/authorize">{hidden}<input type="hidden" name="user" '
            f'value="{html.escape(u.email)}"><button type="submit">{html.escape(u.name)} &lt;{html.escape(u.email)}&gt;'
            f'{" <small>" + html.escape(", ".join(u.groups)) + "</small>" if u.groups else ""}'
            f'{" <small>(" + _VERIFIED_NOTE[u.email_verified] + ")</small>" if u.email_verified is not True else ""}'
            '</button></form>'
            for u in provider.users)
        return HTMLResponse(_PAGE.format(client=html.escape(provider.client_id),
                                         redirect=html.escape(params["redirect_uri"]), buttons=buttons))

    @app.post("/authorize")
    async def authorize(request: Request) -> Any:
        params = {k: str(v) for k, v in (await request.form()).items()}
        problem = _check_client(provider, params)
        if problem:
            return _bad_request(problem)
        error = _check_request(params)
        user = provider.user(params.get("user", ""))
        if error or user is None:
            return RedirectResponse(_with_query(params["redirect_uri"], {"error": error or "access_denied",
                                                                         "state": params.get("state")}), 302)
        code = secrets.token_urlsafe(24)
        with provider.lock:
            provider.codes[code] = _Grant(user, params["client_id"], params["redirect_uri"], params.get("nonce"),
                                          params.get("scope", ""), params.get("code_challenge"),
                                          time.monotonic() + CODE_TTL_S)
        return RedirectResponse(_with_query(params["redirect_uri"], {"code": code, "state": params.get("state")}), 302)


def _add_tokens(app: FastAPI, provider: Provider) -> None:
    """/token: a code for an access token and an id_token; /userinfo: the claims of an access token."""
    @app.post("/token")
    async def token(request: Request) -> Any:
        form = {k: str(v) for k, v in (await request.form()).items()}
        client_id, client_secret = form.get("client_id"), form.get("client_secret")
        basic = request.headers.get("authorization", "")
        if basic.lower().startswith("basic "):
            try:
                raw_id, _, raw_secret = base64.b64decode(basic[6:]).decode().partition(":")
                client_id, client_secret = unquote(raw_id), unquote(raw_secret)
            except (ValueError, UnicodeDecodeError):
                return _oauth_error(401, "invalid_client", "malformed HTTP Basic client credentials")
        if client_id != provider.client_id or not hmac.compare_digest(str(client_secret or ""), provider.client_secret):
            return _oauth_error(401, "invalid_client", "unknown client or wrong client secret")
        if form.get("grant_type") != "authorization_code":
            return _oauth_error(400, "unsupported_grant_type", "only authorization_code")
        with provider.lock:
            grant = provider.codes.pop(form.get("code", ""), None)  # one use only
        if grant is None or grant.expires < time.monotonic():
            return _oauth_error(400, "invalid_grant", "unknown, used or expired code")
        if grant.client_id != client_id or grant.redirect_uri != form.get("redirect_uri"):
            return _oauth_error(400, "invalid_grant", "the code was given to another client or redirect_uri")
        if grant.challenge:
            verifier = form.get("code_verifier", "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if not verifier or not hmac.compare_digest(digest, grant.challenge):
                return _oauth_error(400, "invalid_grant", "code_verifier does not match the code_challenge")
        access = secrets.token_urlsafe(24)
        with provider.lock:
            provider.tokens[access] = (grant.user, time.monotonic() + TOKEN_TTL_S)
        return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": TOKEN_TTL_S,
                             "scope": grant.scope, "id_token": provider.id_token(grant)},
                            headers={"Cache-Control": "no-store", "Pragma": "no-cache"})

    @app.get("/userinfo")
    def userinfo(request: Request) -> Any:
        auth = request.headers.get("authorization", "")
        with provider.lock:
            entry = provider.tokens.get(auth[7:]) if auth.lower().startswith("bearer ") else None
        if entry is None or entry[1] < time.monotonic():
            return JSONResponse({"error": "invalid_token"}, status_code=401,
                                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return provider.claims(entry[0])


# ---------------------------------------------------------------------------------------------------------
# Starting it
@dataclass
class RunningProvider:
    url: str
    client_id: str
    client_secret: str
    process: subprocess.Popen

    @property
    def server_metadata_url(self) -> str:
        return f"{self.url}/.well-known/openid-configuration"


@contextlib.contextmanager
def start_oidc(users: Sequence[dict[str, Any]] | None = None, *, redirect_uris: Sequence[str] | None = None,
               post_logout_uris: Sequence[str] = (), client_id: str = DEFAULT_CLIENT_ID, client_secret: str = DEFAULT_CLIENT_SECRET,
               groups_claim: str = "groups", port: int | None = None, timeout: float = 30.0,
               stdout: Any = subprocess.DEVNULL) -> Iterator[RunningProvider]:
    """`python -m emulator.oidc` as a child that never outlives this process; stopped on leaving. It gives
    codes to `redirect_uris` only (None: DEFAULT_REDIRECT_URIS, the studio on port 8501)."""
    port = port or free_port()
    args = ["--port", str(port), "--users", json.dumps(list(users or DEFAULT_USERS)), "--client-id", client_id,
            "--client-secret", client_secret, "--groups-claim", groups_claim]
    for uri in redirect_uris or ():
        args += ["--redirect-uri", uri]
    for uri in post_logout_uris:
        args += ["--post-logout-uri", uri]
    proc = spawn("emulator.oidc", args, name=f"the OIDC provider on port {port}", stdout=stdout)
    url = f"http://{HOST}:{port}"
    try:
        wait_http_ok(f"{url}/.well-known/openid-configuration", proc, timeout=timeout, what="the OIDC provider")
        yield RunningProvider(url, client_id, client_secret, proc)
    finally:
        stop(proc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulator.oidc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"on 127.0.0.1 (default {DEFAULT_PORT})")
    parser.add_argument("--users", default=None, help="JSON list of {email, name, groups, email_verified} "
                                                      "(default: ann, bob, vic @example.com, verified)")
    parser.add_argument("--client-id", default=DEFAULT_CLIENT_ID)
    parser.add_argument("--client-secret", default=DEFAULT_CLIENT_SECRET)
    parser.add_argument("--redirect-uri", action="append", default=[],
                        help="a redirect URI the client may use, the studio's URL + /oauth2callback (repeatable; "
                             f"default: {' and '.join(DEFAULT_REDIRECT_URIS)})")
    parser.add_argument("--post-logout-uri", action="append", default=[],
                        help="a post-logout redirect URI off the redirect URIs' origins (repeatable; any URI on "
                             "their origins is allowed already)")
    parser.add_argument("--groups-claim", default="groups", help="the id_token claim listing the groups")
    args = parser.parse_args(argv)
    try:
        users = parse_users(args.users) if args.users is not None else [
            User(u["email"], u["name"], tuple(u["groups"])) for u in DEFAULT_USERS]
        redirect_uris = tuple(check_uri(u, "--redirect-uri") for u in args.redirect_uri) or DEFAULT_REDIRECT_URIS
        post_logout_uris = tuple(check_uri(u, "--post-logout-uri") for u in args.post_logout_uri)
    except ValueError as exc:
        parser.error(str(exc))
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, args.port))
    except OSError as exc:
        raise SystemExit(f"cannot listen on {HOST}:{args.port}: {exc.strerror} (pick another --port)") from exc
    port = sock.getsockname()[1]
    provider = Provider(f"http://{HOST}:{port}", users, args.client_id, args.client_secret,
                        redirect_uris=redirect_uris, groups_claim=args.groups_claim, post_logout_uris=post_logout_uris)
    print(json.dumps({"oidc": "ready", "url": provider.issuer,
                      "server_metadata_url": f"{provider.issuer}/.well-known/openid-configuration",
                      "client_id": provider.client_id, "client_secret": provider.client_secret,
                      "redirect_uris": list(provider.redirect_uris)}), flush=True)
    config = uvicorn.Config(create_app(provider), log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())

