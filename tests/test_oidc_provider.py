"""The local OpenID Connect provider (emulator/oidc.py), spoken to over HTTP as Streamlit's Authlib client
speaks to it: discovery, the authorize page and its redirect, the code for tokens (HTTP Basic client
authentication, PKCE S256), an RS256 id_token that the JWKS verifies, userinfo, and end-session. What a
careless provider would let through is refused: a code used twice, the wrong verifier or secret, a redirect
URI it does not know (only the registered ones get codes: by default the studio's on 127.0.0.1:8501 and
localhost:8501), a post-logout redirect off the registered origins. A user may be given an unverified e-mail,
or no email_verified claim at all, for the studio's refusal of unverified e-mails.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from emulator.oidc import start_oidc
from emulator.oidc_provider import DEFAULT_REDIRECT_URIS, parse_users
from tests.cli_support import run_cli

STUDIO = "http://127.0.0.1:8502/oauth2callback"  # not a default: registered by the fixture
GOODBYE = "https://intranet.example.com/signed-out"  # a post-logout page off the studio's origin
USERS = [{"email": "ann@example.com", "name": "Ann Admin", "groups": ["studio-admins"]},
         {"email": "bob@example.com", "name": "Bob Creator", "groups": ["creative", "staff"]},
         {"email": "una@example.com", "name": "Una Unverified", "email_verified": False},
         {"email": "sil@example.com", "name": "Sil Silent", "email_verified": None}]


@pytest.fixture(scope="module")
def provider():
    with start_oidc(USERS, redirect_uris=[STUDIO], post_logout_uris=[GOODBYE]) as running:
        yield running


@pytest.fixture
def http():
    with httpx.Client(trust_env=False, timeout=10) as client:
        yield client


def _authorize(http: httpx.Client, provider, user: str, redirect: str = STUDIO, **extra: str) -> tuple[str, str, str]:
    """Open the authorize page, press `user`'s button; (code, verifier, nonce) from the redirect."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    nonce = secrets.token_hex(8)
    params = {"response_type": "code", "client_id": provider.client_id, "redirect_uri": redirect,
              "scope": "openid email profile", "state": "st-123", "nonce": nonce, "code_challenge": challenge,
              "code_challenge_method": "S256", "prompt": "select_account", **extra}
    page = http.get(f"{provider.url}/authorize", params=params)
    assert page.status_code == 200, page.text
    assert "Ann Admin" in page.text and "Bob Creator" in page.text  # one button each
    form = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', page.text.split("<form")[1]))
    back = http.post(f"{provider.url}/authorize", data={**form, "user": user})
    assert back.status_code == 302
    target = urlsplit(back.headers["location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == redirect
    query = parse_qs(target.query)
    assert query["state"] == ["st-123"]
    return query["code"][0], verifier, nonce


def _token(http: httpx.Client, provider, code: str, verifier: str, secret: str | None = None,
           redirect: str = STUDIO) -> httpx.Response:
    return http.post(f"{provider.url}/token", auth=(provider.client_id, secret or provider.client_secret),
                     data={"grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
                           "code_verifier": verifier})


def _claims(http: httpx.Client, provider, reply: httpx.Response) -> dict:
    keys = KeySet.import_key_set(http.get(f"{provider.url}/jwks").json())
    return jwt.decode(reply.json()["id_token"], keys, algorithms=["RS256"]).claims


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
    for other in ("http://evil.example/cb", DEFAULT_REDIRECT_URIS[0], STUDIO + "/more", STUDIO.upper()):
        page = http.get(f"{provider.url}/authorize", params={**base, "redirect_uri": other})
        assert page.status_code == 400 and f"redirect_uri &#x27;{other}&#x27; is not registered" in page.text
        assert f"--redirect-uri {other}" in page.text  # how to register it
        posted = http.post(f"{provider.url}/authorize", data={**base, "redirect_uri": other, "user": "ann@example.com"})
        assert posted.status_code == 400 and "location" not in posted.headers  # no code, no redirect
    page = http.get(f"{provider.url}/authorize", params={**base, "client_id": "someone-else"})
    assert page.status_code == 400 and "unknown client_id" in page.text
    no_openid = http.get(f"{provider.url}/authorize", params={**base, "scope": "email", "state": "s"})
    assert no_openid.status_code == 302 and "error=invalid_scope" in no_openid.headers["location"]


def test_end_session_returns_to_a_registered_origin_or_uri_only(provider, http: httpx.Client) -> None:
    # Streamlit sends its /oauth2callback; any page of a registered redirect URI's origin is the same studio
    for uri in (STUDIO, "http://127.0.0.1:8502/", "http://127.0.0.1:8502/image?x=1", GOODBYE):
        back = http.get(f"{provider.url}/logout", params={"post_logout_redirect_uri": uri, "state": "s"})
        assert back.status_code == 302 and back.headers["location"].startswith(uri), (uri, back.headers)
    for uri in ("http://evil.example/", "http://127.0.0.1:8501/oauth2callback", "https://127.0.0.1:8502/",
                "http://127.0.0.1:8502@evil.example/", "http://localhost:8502/", GOODBYE + "/else", "javascript:x"):
        refused = http.get(f"{provider.url}/logout", params={"post_logout_redirect_uri": uri})
        assert refused.status_code == 400 and "location" not in refused.headers, uri
        assert "is not registered with this provider" in refused.text and "--post-logout-uri" in refused.text
    assert "Signed out" in http.get(f"{provider.url}/logout").text  # nowhere to go back to: the provider's page


def test_without_redirect_uris_only_the_local_studios_are_served(http: httpx.Client) -> None:
    """The default: a studio from `make studio` on this machine, at 127.0.0.1:8501 or localhost:8501."""
    assert DEFAULT_REDIRECT_URIS == ("http://127.0.0.1:8501/oauth2callback", "http://localhost:8501/oauth2callback")
    with start_oidc(USERS) as local:
        for uri in DEFAULT_REDIRECT_URIS:
            code, verifier, _ = _authorize(http, local, "ann@example.com", redirect=uri)
            assert _token(http, local, code, verifier, redirect=uri).status_code == 200
        base = {"response_type": "code", "client_id": local.client_id, "scope": "openid"}
        for other in ("http://evil.example/oauth2callback", "http://127.0.0.1:8502/oauth2callback"):
            page = http.get(f"{local.url}/authorize", params={**base, "redirect_uri": other})
            assert page.status_code == 400 and f"--redirect-uri {other}" in page.text
        assert http.get(f"{local.url}/logout", params={"post_logout_redirect_uri": "http://localhost:8501/"}
                        ).status_code == 302
        assert http.get(f"{local.url}/logout", params={"post_logout_redirect_uri": "http://evil.example/"}
                        ).status_code == 400


def test_a_user_may_have_an_unverified_email_or_no_such_claim(provider, http: httpx.Client) -> None:
    page = http.get(f"{provider.url}/authorize", params={
        "response_type": "code", "client_id": provider.client_id, "redirect_uri": STUDIO, "scope": "openid"})
    assert "Una Unverified &lt;una@example.com&gt; <small>(e-mail not verified)</small>" in page.text
    assert "Sil Silent &lt;sil@example.com&gt; <small>(no email_verified claim)</small>" in page.text
    for user, verified in (("bob@example.com", True), ("una@example.com", False), ("sil@example.com", None)):
        code, verifier, _ = _authorize(http, provider, user)
        reply = _token(http, provider, code, verifier)
        claims = _claims(http, provider, reply)
        info = http.get(f"{provider.url}/userinfo",
                        headers={"Authorization": f"Bearer {reply.json()['access_token']}"}).json()
        for said in (claims, info):
            assert said["email"] == user and said.get("email_verified", "absent") == (
                "absent" if verified is None else verified)


def test_the_command_line_registers_redirect_uris_and_checks_them() -> None:
    ready = subprocess.Popen([sys.executable, "-m", "emulator.oidc", "--port", "0", "--redirect-uri", STUDIO,
                              "--redirect-uri", "http://localhost:8502/oauth2callback"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = json.loads(ready.stdout.readline())
    finally:
        ready.terminate()
        ready.communicate(timeout=15)
    assert line["oidc"] == "ready" and line["redirect_uris"] == [STUDIO, "http://localhost:8502/oauth2callback"]
    for flag, value in (("--redirect-uri", "localhost:8501/oauth2callback"), ("--post-logout-uri", "/signed-out"),
                        ("--redirect-uri", "http://127.0.0.1:8501/oauth2callback#x")):
        bad = run_cli([sys.executable, "-m", "emulator.oidc", "--port", "0", flag, value],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and f"{flag} {value!r} must be an absolute http(s) URI" in bad.stderr, bad.stderr


def test_users_json_is_checked() -> None:
    assert [u.email for u in parse_users('[{"email": "a@x.org"}, {"email": "b@x.org", "groups": ["g"]}]')] == [
        "a@x.org", "b@x.org"]
    for bad, words in [("not json", "must be JSON"), ("[]", "non-empty"), ('[{"name": "x"}]', 'needs an "email"'),
                       ('[{"email": "a@x", "groups": "g"}]', "groups must be a list"),
                       ('[{"email": "a@x", "email_verified": "yes"}]', "email_verified must be true, false or null"),
                       ('[{"email": "a@x"}, {"email": "A@x"}]', "twice")]:
        with pytest.raises(ValueError, match=words):
            parse_users(bad)
