"""Roles and the access policy (services/access.py), the endpoint actions' guard (infra/actions.py) and the
audit log (services/audit.py): a creator calling an admin action is refused in the entry point itself,
nothing is touched, and the refusal is on record; an admin's action is recorded with its outcome."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import streamlit as st
from pydantic import ValidationError
from streamlit.testing.v1 import AppTest

from infra.actions import ActionRunner
from infra.model import DeployOptions
from infra.progress import WaitSettings
from services.access import LOCAL, AccessPolicy, BadToken, Forbidden, Principal, cli_principal, require
from services.audit import AuditLog
from services.history import History

ROOT = Path(__file__).resolve().parent.parent
ADMIN = Principal(id="ann@example.com", name="Ann", role="admin", signed_in=True)
CREATOR = Principal(id="bob@example.com", name="Bob", role="creator", signed_in=True)
VIEWER = Principal(id="vic@example.com", name="Vic", role="viewer", signed_in=True)
POLICY = AccessPolicy(admins=["Ann@Example.com"], creators=["group:creative", "bob@example.com"],
                      viewers=["*@example.com"])


@pytest.mark.parametrize(("email", "groups", "role"), [
    ("ann@example.com", (), "admin"),
    ("ANN@example.com", (), "admin"),            # e-mails compare case-insensitively
    ("bob@example.com", (), "creator"),
    ("cat@example.com", ("creative",), "creator"),  # by group claim
    ("ann@example.com", ("creative",), "admin"),    # the highest role any entry gives
    ("vic@example.com", (), "viewer"),             # by domain
    ("eve@example.org", (), None),                 # named by no entry: no access
    ("eve@example.org", ("Creative",), None),      # group names are exact
    ("", ("creative",), "creator"),
])
def test_policy_gives_the_highest_role_an_entry_gives(email: str, groups: tuple, role: str | None) -> None:
    assert POLICY.role_of(email, groups) == role


def test_policy_principal_needs_an_email_and_a_role() -> None:
    p = POLICY.principal("Cat@Example.com", name="Cat", groups="creative")
    assert p == Principal(id="cat@example.com", name="Cat", role="creator", groups=("creative",), signed_in=True)
    assert POLICY.principal("eve@example.org") is None
    assert POLICY.principal(None, groups=["creative"]) is None  # a token without an e-mail owns nothing


ISSUER = "https://login.example.com"
VERIFIED = {"iss": ISSUER, "email": "ann@example.com", "email_verified": True, "name": "Ann", "groups": []}


@pytest.mark.parametrize("verified", [True, "true", "TRUE"])  # some providers send the claim as a string
def test_a_token_with_a_verified_email_is_admitted(verified: object) -> None:
    actor = POLICY.admit({**VERIFIED, "email_verified": verified})
    assert actor == Principal(id="ann@example.com", name="Ann", role="admin", signed_in=True)
    assert POLICY.admit({**VERIFIED, "email": "eve@example.org"}) is None  # verified, named by no entry


@pytest.mark.parametrize("verified", [False, "false", "", "yes", 1, None, [True]])
def test_an_email_the_token_does_not_say_is_verified_is_refused_even_from_a_trusted_issuer(verified: object) -> None:
    trusting = POLICY.model_copy(update={"trust_unverified_email_from": [ISSUER]})
    for policy in (POLICY, trusting):
        with pytest.raises(BadToken, match=r"the sign-in token's e-mail \(ann@example.com\) is not verified"):
            policy.admit({**VERIFIED, "email_verified": verified})


def test_a_token_without_the_claim_is_refused_unless_its_issuer_is_trusted_by_name() -> None:
    silent = {k: v for k, v in VERIFIED.items() if k != "email_verified"}
    with pytest.raises(BadToken) as err:
        POLICY.admit(silent)
    assert "does not say that its e-mail (ann@example.com) is verified" in str(err.value)
    assert "trust_unverified_email_from" in str(err.value) and ISSUER in str(err.value)
    trusting = AccessPolicy(admins=["ann@example.com"], trust_unverified_email_from=[f" {ISSUER}/ "])
    assert trusting.admit(silent).role == "admin"
    for other in ({**silent, "iss": "https://evil.example"}, {k: v for k, v in silent.items() if k != "iss"},
                  {**silent, "iss": [ISSUER]}):
        with pytest.raises(BadToken, match="does not say that its e-mail"):
            trusting.admit(other)
    with pytest.raises(ValidationError, match="an empty issuer"):
        AccessPolicy(trust_unverified_email_from=[" "])


@pytest.mark.parametrize(("change", "says"), [
    ({"email": ["ann@example.com", "eve@example.org"]}, "has no usable e-mail (its email claim is [\"ann@"),
    ({"email": 42}, "has no usable e-mail (its email claim is 42,"),
    ({"email": None}, "has no usable e-mail (its email claim is null,"),
    ({"email": "ann"}, "has no usable e-mail"),
    ({"email": "a@b@example.com"}, "has no usable e-mail"),
    ({"groups": "studio-admins,creative"}, None),  # one group as a string: a group of that name
    ({"groups": {"studio-admins": True}}, "groups claim is {\"studio-admins\": true}, not a list of group names"),
    ({"groups": 7}, "groups claim is 7, not a list"),
    ({"groups": ["creative", 7]}, "groups claim is [\"creative\", 7], not a list"),
    ({"name": ["A", "B"]}, None),  # an odd name is not the person: the e-mail stands in
])
def test_claims_of_the_wrong_type_are_a_bad_token_never_a_traceback(change: dict, says: str | None) -> None:
    claims = {**VERIFIED, **change}
    if says is None:
        actor = POLICY.admit(claims)
        assert actor is not None and isinstance(actor.name, str) and all(isinstance(g, str) for g in actor.groups)
        return
    with pytest.raises(BadToken) as err:
        POLICY.admit(claims)
    assert says in str(err.value)
    missing = {k: v for k, v in VERIFIED.items() if k != "email"}
    with pytest.raises(BadToken, match="its email claim is missing"):
        POLICY.admit(missing)


@pytest.mark.parametrize(("entry", "says"), [
    ("", "an empty entry"), ("bob", "not an e-mail"), ("@example.com", "not an e-mail"), ("group:", "names no group"),
])
def test_bad_policy_entries_are_named(entry: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        AccessPolicy(creators=[entry])


def test_roles_are_ordered_and_refusals_say_who_may() -> None:
    for action in ("generate", "clone_voice", "evaluate", "load_test", "share"):
        require(CREATOR, action)
        with pytest.raises(Forbidden, match="only a creator or an admin may"):
            require(VIEWER, action)
    require(VIEWER, "view")
    for action in ("deploy", "resume", "smoke", "delete", "upgrade", "rollback", "extend", "stop"):
        require(ADMIN, action)
        require(LOCAL, action)
        require(cli_principal(), action)
        with pytest.raises(Forbidden) as err:
            require(CREATOR, action)
        assert "Bob (creator) may not" in str(err.value) and "only an admin may" in str(err.value)
        assert "admins" in str(err.value)  # names the list to be added to


def _runner(tmp_path: Path) -> tuple[ActionRunner, AuditLog, Path]:
    audit = AuditLog(History(tmp_path / "data"))
    state = tmp_path / "state.json"
    return ActionRunner(state, audit=audit), audit, state


def test_a_creator_is_refused_every_endpoint_action_before_anything_happens(tmp_path: Path) -> None:
    runner, audit, state = _runner(tmp_path)
    wait = WaitSettings(poll_s=0.05)
    calls = {
        "deploy": lambda: runner.deploy(DeployOptions(roles=("image",), region="us-east-1",
                                                      role_arn="arn:aws:iam::123456789012:role/x"),
                                        actor=CREATOR, wait=wait),
        "resume": lambda: runner.resume(actor=CREATOR, wait=wait),
        "smoke": lambda: runner.smoke(actor=CREATOR),
        "delete": lambda: runner.delete(actor=CREATOR, wait=wait),
        "upgrade": lambda: runner.upgrade("omni-sagemaker-cuda-v1.7", actor=CREATOR, wait=wait),
        "rollback": lambda: runner.rollback(actor=CREATOR, wait=wait),
        "extend": lambda: runner.extend("4h", actor=CREATOR),
        "stop": lambda: runner.stop(actor=CREATOR),
    }
    for kind, call in calls.items():
        with pytest.raises(Forbidden, match="only an admin"):
            call()
        assert runner.current() is None, f"{kind} started an action"
    assert not state.exists() and not runner._stop.is_set()
    entries = audit.entries()
    assert [(e.action, e.who, e.role, e.outcome) for e in reversed(entries)] == \
        [(kind, "bob@example.com", "creator", "refused") for kind in calls]
    assert all("only an admin may" in (e.summary or "") for e in entries)
    assert entries[-1].detail["command"].startswith("python -m infra deploy")


def test_an_admins_action_is_recorded_with_its_outcome(tmp_path: Path) -> None:
    runner, audit, state = _runner(tmp_path)
    runner.smoke(actor=ADMIN)  # no deployment recorded: the action runs and fails, saying so
    deadline = time.monotonic() + 30
    while not runner.current().done:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    action = runner.current()
    assert action.ok is False
    (entry,) = audit.entries()
    assert (entry.who, entry.role, entry.action, entry.outcome) == ("ann@example.com", "admin", "smoke", "failed")
    assert entry.summary == action.error and entry.finished_at is not None
    assert entry.detail["command"] == action.command and entry.target == str(state)


def test_saved_voices_are_in_the_audit_log_with_their_consent(tmp_path: Path, history_url: str | None) -> None:
    history = History(tmp_path / "data", database_url=history_url)
    audit = AuditLog(history)
    entry_id = audit.record(ADMIN, "deploy", target="state.json")
    audit.finish(entry_id, ok=True, summary="all endpoints InService")
    history.acting_as(CREATOR).voices.record("http://127.0.0.1:8091", "maria", "consent-2026-0042", who="Bob")
    entry, deployed = audit.entries()  # newest first: endpoint actions and voice clones together
    assert (deployed.who, deployed.action, deployed.outcome, deployed.summary) == \
        (ADMIN.id, "deploy", "ok", "all endpoints InService")
    assert (entry.who, entry.action, entry.outcome) == ("bob@example.com", "clone_voice", "ok")
    assert entry.detail == {"voice": "maria", "consent_id": "consent-2026-0042"}
    assert "consent 'consent-2026-0042'" in entry.summary
    assert [e.action for e in audit.entries(who=ADMIN.id)] == ["deploy"]
    assert [e.action for e in audit.entries(who=CREATOR.id)] == ["clone_voice"]


def _endpoints_page(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, who: Principal) -> AppTest:
    import ui.auth

    monkeypatch.setattr(ui.auth, "principal", lambda: who)
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OMNI_STUDIO_STATE_FILE", str(tmp_path / "state.json"))
    monkeypatch.setenv("OMNI_STUDIO_COST_BANNER", "off")
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "pages" / "endpoints.py"), default_timeout=60)
    at.run()
    assert not at.exception, at.exception[0].message if at.exception else ""
    return at


def test_the_endpoints_page_offers_actions_to_admins_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _endpoints_page(monkeypatch, tmp_path, CREATOR)
    assert not [b for b in at.button if b.key == "deploy_go"]
    assert any("only an admin deploys" in i.value for i in at.info)
    AuditLog(History(tmp_path / "data")).record(CREATOR, "delete", target="state.json", outcome="refused",
                                                summary="Bob (creator) may not delete endpoints")
    at = _endpoints_page(monkeypatch, tmp_path, ADMIN)
    assert [b for b in at.button if b.key == "deploy_go"]
    (log,) = [e for e in at.expander if e.label.startswith("Audit log")]
    table = log.dataframe[0].value
    assert list(table["who"]) == ["bob@example.com (creator)"] and list(table["outcome"]) == ["refused"]
