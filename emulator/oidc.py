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
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from emulator.oidc_provider import (
    CODE_TTL_S,
    DEFAULT_CLIENT_ID,
    DEFAULT_CLIENT_SECRET,
    DEFAULT_REDIRECT_URIS,
    DEFAULT_USERS,
    TOKEN_TTL_S,
    Grant,
    Provider,
    User,
    check_uri,
    parse_users,
)
from offline.launch import free_port, spawn, stop, wait_http_ok

HOST = "127.0.0.1"
DEFAULT_PORT = 8093


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
            provider.codes[code] = Grant(user, params["client_id"], params["redirect_uri"], params.get("nonce"),
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

