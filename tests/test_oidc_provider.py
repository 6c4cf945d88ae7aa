"""The local OpenID Connect provider (emulator/oidc.py), spoken to over HTTP as Streamlit's Authlib client
speaks to it: discovery, the authorize page and its redirect, the code for tokens (HTTP Basic client
authentication, PKCE S256), an RS256 id_token that the JWKS verifies, userinfo, and end-session. What a
careless provider would let through is refused: a code used twice, the wrong verifier or secret, a redirect
URI it does not know.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from emulator.oidc import parse_users, start_oidc

STUDIO = "http://127.0.0.1:8501/oauth2callback"
USERS = [{"email": "ann@example.com", "name": "Ann Admin", "groups": ["studio-admins"]},
         {"email": "bob@example.com", "name": "Bob Creator", "groups": ["creative", "staff"]}]


@pytest.fixture(scope="module")
def provider():
    with start_oidc(USERS, redirect_uris=[STUDIO]) as running:
        yield running


@pytest.fixture
def http():
    with httpx.Client(trust_env=False, timeout=10) as client:
        yield client


def _authorize(http: httpx.Client, provider, user: str, **extra: str) -> tuple[str, str, str]:
    """Open the authorize page, press `user`'s button; (code, verifier, nonce) from the redirect."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    nonce = secrets.token_hex(8)
    params = {"response_type": "code", "client_id": provider.client_id, "redirect_uri": STUDIO,
              "scope": "openid email profile", "state": "st-123", "nonce": nonce, "code_challenge": challenge,
              "code_challenge_method": "S256", "prompt": "select_account", **extra}
    page = http.get(f"{provider.url}/authorize", params=params)
    assert page.status_code == 200, page.text
    assert "Ann Admin" in page.text and "Bob Creator" in page.text  # one button each
    form = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', page.text.split("<form")[1]))
    back = http.post(f"{provider.url}/authorize", data={**form, "user": user})
    assert back.status_code == 302
    target = urlsplit(back.headers["location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == STUDIO
    query = parse_qs(target.query)
    assert query["state"] == ["st-123"]
    return query["code"][0], verifier, nonce


def _token(http: httpx.Client, provider, code: str, verifier: str, secret: str | None = None) -> httpx.Response:
    return http.post(f"{provider.url}/token", auth=(provider.client_id, secret or provider.client_secret),
                     data={"grant_type": "authorization_code", "code": code, "redirect_uri": STUDIO,
                           "code_verifier": verifier})


def test_discovery_names_every_endpoint_on_loopback(provider, http: httpx.Client) -> None:
    meta = http.get(provider.server_metadata_url).json()
    assert meta["issuer"] == provider.url and provider.url.startswith("http://127.0.0.1:")
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint", "end_session_endpoint"):
        assert meta[key].startswith(provider.url + "/")
    assert meta["code_challenge_methods_supported"] == ["S256"]  # Streamlit then sends PKCE
    assert meta["id_token_signing_alg_values_supported"] == ["RS256"]


def test_the_code_flow_gives_an_id_token_the_jwks_verifies(provider, http: httpx.Client) -> None:
    code, verifier, nonce = _authorize(http, provider, "bob@example.com")
    reply = _token(http, provider, code, verifier)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    keys = KeySet.import_key_set(http.get(f"{provider.url}/jwks").json())
    token = jwt.decode(body["id_token"], keys, algorithms=["RS256"])
    claims = token.claims
    assert token.header["alg"] == "RS256" and token.header["kid"] == keys.keys[0].kid
    assert claims["iss"] == provider.url and claims["aud"] == provider.client_id
    assert claims["sub"] == claims["email"] == "bob@example.com" and claims["name"] == "Bob Creator"
    assert claims["groups"] == ["creative", "staff"] and claims["nonce"] == nonce
    assert claims["iat"] <= time.time() < claims["exp"]
    info = http.get(f"{provider.url}/userinfo", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert info.json()["email"] == "bob@example.com" and info.json()["groups"] == ["creative", "staff"]


def test_a_code_is_good_once_with_its_own_verifier_and_the_client_secret(provider, http: httpx.Client) -> None:
    code, verifier, _ = _authorize(http, provider, "ann@example.com")
    assert _token(http, provider, code, verifier, secret="wrong").json()["error"] == "invalid_client"
    assert _token(http, provider, code, "not-the-verifier").json()["error"] == "invalid_grant"
    code, verifier, _ = _authorize(http, provider, "ann@example.com")
    assert _token(http, provider, code, verifier).status_code == 200
    again = _token(http, provider, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_unknown_clients_and_redirects_are_refused_on_the_page(provider, http: httpx.Client) -> None:
    base = {"response_type": "code", "client_id": provider.client_id, "redirect_uri": STUDIO, "scope": "openid"}
    page = http.get(f"{provider.url}/authorize", params={**base, "redirect_uri": "http://evil.example/cb"})
    assert page.status_code == 400 and "is not registered" in page.text  # never sent there
    page = http.get(f"{provider.url}/authorize", params={**base, "client_id": "someone-else"})
    assert page.status_code == 400 and "unknown client_id" in page.text
    no_openid = http.get(f"{provider.url}/authorize", params={**base, "scope": "email", "state": "s"})
    assert no_openid.status_code == 302 and "error=invalid_scope" in no_openid.headers["location"]


def test_end_session_returns_to_a_registered_uri_only(provider, http: httpx.Client) -> None:
    back = http.get(f"{provider.url}/logout", params={"post_logout_redirect_uri": STUDIO, "client_id": "x"})
    assert back.status_code == 302 and back.headers["location"] == STUDIO
    stay = http.get(f"{provider.url}/logout", params={"post_logout_redirect_uri": "http://evil.example/"})
    assert stay.status_code == 200 and "Signed out" in stay.text


def test_users_json_is_checked() -> None:
    assert [u.email for u in parse_users('[{"email": "a@x.org"}, {"email": "b@x.org", "groups": ["g"]}]')] == [
        "a@x.org", "b@x.org"]
    for bad, words in [("not json", "must be JSON"), ("[]", "non-empty"), ('[{"name": "x"}]', 'needs an "email"'),
                       ('[{"email": "a@x", "groups": "g"}]', "groups must be a list"),
                       ('[{"email": "a@x"}, {"email": "A@x"}]', "twice")]:
        with pytest.raises(ValueError, match=words):
            parse_users(bad)
