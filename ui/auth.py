"""Who is using this browser session (services/access.py has the roles and the policy)."""

from __future__ import annotations

from services.access import LOCAL, Principal


def principal() -> Principal:
    """The person this session acts as. Without sign-in (the studio on 127.0.0.1): LOCAL, who owns everything."""
    return LOCAL
