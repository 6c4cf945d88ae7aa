"""Infra errors: each names what to fix, and carries the CLI exit code that goes with it.

They derive from the services layer's StudioError, so the endpoints page shows them like any other error.
"""

from __future__ import annotations

from protocol.errors import StudioError

RESUME_HINT = "run `python -m infra resume`"


class InfraError(StudioError):
    """Base of every error infra raises on purpose. `str(err)` is the message to show."""

    exit_code = 1


class UsageError(InfraError):
    """An option or its value is wrong (the message names the option)."""

    exit_code = 2


class CredentialsError(InfraError):
    """Credentials are missing, expired or rejected."""

    exit_code = 3


class AccessDenied(InfraError):
    """The credentials work but lack a permission (the message names the action)."""

    exit_code = 3


class QuotaShortfall(InfraError):
    """Service Quotas do not allow the pools asked for; nothing was created. `report` has the figures."""

    exit_code = 4

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


class EndpointFailed(InfraError):
    """An endpoint went Failed (the message carries SageMaker's FailureReason) or did not come up in time."""

    exit_code = 5


class StateError(InfraError):
    """The state file is missing, unreadable, for another region, or already holds a deployment."""

    exit_code = 6


class AwsCallFailed(InfraError):
    """Any other AWS error; the message has the service's code and text."""

    exit_code = 1


class StateLocked(InfraError):
    """Another command is writing the same state file (infra/lock.py); the message names it."""

    exit_code = 2
