"""The local OpenID Connect provider's state (emulator/oidc.py serves it): its users, its one client and the
redirect URIs registered for it, its signing key, and the one-time codes and access tokens it gave out.

    users = parse_users('[{"email": "ann@example.com", "groups": ["studio-admins"]}]')   # ValueError names the fault
    provider = Provider("http://127.0.0.1:8093", users, redirect_uris=(...))
    provider.metadata(), provider.jwks(), provider.id_token(grant), provider.claims(user)
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

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
class Grant:
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
    codes: dict[str, Grant] = field(default_factory=dict)
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

    def id_token(self, grant: Grant) -> str:
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
