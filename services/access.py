"""Who may do what in the studio: the signed-in person (`Principal`), the three roles, and the policy that
gives each person a role (docs/team.md).

    policy = AccessPolicy(admins=["ann@example.com"], creators=["group:creative"], viewers=["*@example.com"])
    actor = policy.principal("bob@example.com", name="Bob", groups=["creative"])   # role "creator", or None
    actor = policy.admit(st_user_claims)  # the same from a sign-in token's claims; BadToken when they name nobody
    require(actor, "deploy")        # Forbidden: "Bob (creator) may not deploy endpoints: only an admin may …"

The roles are ordered: a viewer sees shared galleries, evaluations and reports; a creator also generates,
clones voices (with consent), runs evaluations and load sweeps against endpoints that already run, and
shares what they made; an admin also deploys, resumes, upgrades, extends, rolls back and deletes endpoints.
Every entry point that does one of these calls `require` itself (services.history, services.eval,
services.load, infra.actions), so a hidden button is never the only guard.

Without sign-in (the studio on 127.0.0.1, today's single-user behaviour) every page acts as `LOCAL`, an
admin who owns everything; the command-line tools act as `cli_principal()`, the shell user, also an admin
(whoever runs them holds the AWS credentials anyway).
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from protocol.errors import StudioError

Role = Literal["viewer", "creator", "admin"]
ROLES: tuple[Role, ...] = ("viewer", "creator", "admin")  # in order: each may do what the ones before may
Action = Literal[
    "view", "generate", "clone_voice", "evaluate", "load_test", "share",
    "deploy", "resume", "smoke", "delete", "upgrade", "rollback", "extend", "stop", "add_server", "add",
]
NEEDS: dict[Action, Role] = {
    "view": "viewer",
    "generate": "creator", "clone_voice": "creator", "evaluate": "creator", "load_test": "creator",
    "share": "creator",
    "deploy": "admin", "resume": "admin", "smoke": "admin", "delete": "admin", "upgrade": "admin",
    "rollback": "admin", "extend": "admin", "stop": "admin", "add_server": "admin", "add": "admin",
}
DOING: dict[Action, str] = {  # how a refusal names the action
    "view": "open the studio", "generate": "generate speech, images or videos", "clone_voice": "save a cloned voice",
    "evaluate": "run or rate evaluations", "load_test": "run load sweeps", "share": "share with the team",
    "deploy": "deploy endpoints", "resume": "resume a deployment", "smoke": "run the smoke test on endpoints",
    "delete": "delete endpoints", "upgrade": "upgrade endpoints", "rollback": "roll endpoints back",
    "extend": "extend an endpoint's time to live", "stop": "stop an endpoint operation",
    "add_server": "add a vLLM-Omni server to the studio's targets",
    "add": "add an endpoint to a deployment",
}
GROUP_PREFIX = "group:"


class Forbidden(StudioError):
    """The person's role does not allow the action; the message says who may and how to get the role."""


class BadToken(StudioError):
    """The sign-in token names nobody the policy can trust (no usable e-mail, an unverified one, a groups claim
    that is not a list of names); the message says what is wrong with the token."""


@dataclass(frozen=True)
class Principal:
    """Who acts. `id` owns history records: the e-mail (lower case) when signed in, `local` without sign-in,
    `cli:<user>` from the command line."""

    id: str
    name: str
    role: Role
    groups: tuple[str, ...] = ()
    signed_in: bool = False

    def can(self, action: Action) -> bool:
        return ROLES.index(self.role) >= ROLES.index(NEEDS[action])

    @property
    def label(self) -> str:
        return f"{self.name} ({self.role})"


LOCAL = Principal(id="local", name="you", role="admin")


def cli_principal() -> Principal:
    """The person at the shell: an admin (they hold the AWS credentials the command uses)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid)
        user = "unknown"
    return Principal(id=f"cli:{user}", name=user, role="admin")


def require(actor: Principal, action: Action) -> None:
    """Raise Forbidden unless `actor`'s role allows `action`."""
    if actor.can(action):
        return
    needed = NEEDS[action]
    who = "an admin" if needed == "admin" else f"a {needed} or an admin"
    raise Forbidden(f"{actor.label} may not {DOING[action]}: only {who} may. Ask a studio admin to add you to "
                    f"the `{needed}s` list of the access policy (docs/team.md).")


def _entry(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("an empty entry: write an e-mail (ann@example.com), a domain (*@example.com) or a group "
                         "(group:studio-admins)")
    if value.startswith(GROUP_PREFIX):
        if not value[len(GROUP_PREFIX):].strip():
            raise ValueError(f"{value!r} names no group: write group:<name as the sign-in provider sends it>")
        return value
    if value.count("@") != 1 or value.startswith("@") or value.endswith("@"):
        raise ValueError(f"{value!r} is not an e-mail, *@domain or group:<name> entry")
    return value.lower()


class AccessPolicy(BaseModel):
    """Who gets which role once signed in. Entries are e-mails (`ann@example.com`), whole domains
    (`*@example.com`) or groups from the sign-in token's `group_claim` (`group:studio-admins`). A person gets
    the highest role any entry gives them; someone signed in whom no entry names gets no access."""

    admins: list[str] = Field(default_factory=list)
    creators: list[str] = Field(default_factory=list)
    viewers: list[str] = Field(default_factory=list)
    group_claim: str = "groups"
    # Issuers (the token's `iss`) trusted to have checked their users' e-mails although their tokens carry no
    # `email_verified` claim. Anyone else must say `email_verified: true`; a claim that says false is refused
    # whoever sent it.
    trust_unverified_email_from: list[str] = Field(default_factory=list)

    @field_validator("admins", "creators", "viewers")
    @classmethod
    def _entries(cls, values: list[str]) -> list[str]:
        return [_entry(v) for v in values]

    @field_validator("trust_unverified_email_from")
    @classmethod
    def _issuers(cls, values: list[str]) -> list[str]:
        issuers = [v.strip().rstrip("/") for v in values]
        if not all(issuers):
            raise ValueError("an empty issuer: write the `iss` of the provider's tokens, e.g. "
                             "https://login.example.com")
        return issuers

    @property
    def empty(self) -> bool:
        return not (self.admins or self.creators or self.viewers)

    def role_of(self, email: str | None, groups: Sequence[str] = ()) -> Role | None:
        """The highest role an entry gives this e-mail or one of these groups, or None."""
        email = (email or "").strip().lower()
        domain = email.rpartition("@")[2] if "@" in email else None
        for role, entries in (("admin", self.admins), ("creator", self.creators), ("viewer", self.viewers)):
            for entry in entries:
                if entry.startswith(GROUP_PREFIX):
                    if entry[len(GROUP_PREFIX):] in groups:
                        return role  # type: ignore[return-value]
                elif email and (entry == email or (domain and entry == f"*@{domain}")):
                    return role  # type: ignore[return-value]
        return None

    def principal(self, email: str | None, *, name: str | None = None,
                  groups: Sequence[str] | str | None = None) -> Principal | None:
        """The signed-in person as a Principal, or None when the policy gives them no role."""
        if isinstance(groups, str):
            groups = [groups]
        groups = tuple(str(g) for g in (groups or ()))
        role = self.role_of(email, groups)
        if role is None or not email:
            return None
        email = email.strip().lower()
        return Principal(id=email, name=name or email, role=role, groups=groups, signed_in=True)

    def admit(self, claims: Mapping[str, Any]) -> Principal | None:
        """The person a sign-in token's claims (`st.user`) name, as a Principal; None when the policy gives
        them no role. BadToken, saying what is wrong, when the claims cannot name a person: the e-mail is
        missing or not a string, not verified (`email_verified` must be true — the bool, or the string some
        providers send — unless the claim is absent and the token's issuer is in
        `trust_unverified_email_from`), or the groups claim is not a list of names."""
        email = claims.get("email")
        if not isinstance(email, str) or email.strip().count("@") != 1:
            raise BadToken("the sign-in token has no usable e-mail (its email claim is "
                           f"{'missing' if 'email' not in claims else _shown(email)}, not one address)")
        if not _verified(claims, self.trust_unverified_email_from):
            raise BadToken(_unverified(claims, email.strip()))
        groups = claims.get(self.group_claim)
        if isinstance(groups, str):
            groups = [groups]  # a provider that sends one group as a string
        if groups is not None and not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
            raise BadToken(f"the sign-in token's {self.group_claim} claim is {_shown(groups)}, not a list of "
                           "group names")
        name = claims.get("name")
        return self.principal(email, name=name.strip() if isinstance(name, str) and name.strip() else None,
                              groups=groups)


def _verified(claims: Mapping[str, Any], trusted: Sequence[str]) -> bool:
    if "email_verified" not in claims:
        issuer = claims.get("iss")
        return isinstance(issuer, str) and issuer.strip().rstrip("/") in trusted
    value = claims["email_verified"]
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _unverified(claims: Mapping[str, Any], email: str) -> str:
    if "email_verified" in claims:
        return (f"the sign-in token's e-mail ({email}) is not verified (its email_verified claim is "
                f"{_shown(claims['email_verified'])}): verify the address with the sign-in provider, then sign in "
                "again")
    issuer = claims.get("iss")
    return (f"the sign-in token does not say that its e-mail ({email}) is verified: it has no email_verified claim "
            f"(issuer {'missing' if issuer is None else _shown(issuer)}). If this provider checks e-mails but never "
            "sends the claim, a studio admin can name its issuer in trust_unverified_email_from of the access "
            "policy (docs/team.md)")


def _shown(value: Any) -> str:
    """A claim's value in a message, cut short (a token's sender chose it)."""
    text = json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
