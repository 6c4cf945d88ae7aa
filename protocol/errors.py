"""Errors are values the UI can show: each carries a message a person can act on."""

from __future__ import annotations


class StudioError(Exception):
    """Base of every error the services layer raises on purpose. `str(err)` is the message to show."""


class InvalidInput(StudioError):
    """The user's input cannot be sent as it is; the message names what to fix."""


class BackendUnreachable(StudioError):
    """The backend did not answer (connection refused, DNS, TLS, timeout); the message names the target."""


class ServerError(StudioError):
    """The server answered with an error; the message is the server's own, with its status when known."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StreamError(StudioError):
    """A streaming session ended abnormally (cut mid-way, protocol error). Audio received so far is kept."""


class JobFailed(StudioError):
    """An asynchronous job failed; the message is the failure text the server left."""


class ConfigError(StudioError):
    """A setting is missing or invalid; the message names the setting and where it is read from."""
