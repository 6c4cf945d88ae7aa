"""What infra's long commands report as they go, and how long they wait: shared by deploy, resume, upgrade,
rollback, delete and sweep (and the CLI and the Endpoints page that show it).

    progress(Progress(role, "wait", f"{name} Creating", status, elapsed_s, instance_type))
    WaitSettings(poll_s=15, timeout_s=7200)          # real endpoints; tests use fractions of a second
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infra.model import Role


@dataclass(frozen=True)
class WaitSettings:
    """How often to describe and how long to wait. Real endpoints take ~10 minutes; tests use fractions."""

    poll_s: float = 15.0
    timeout_s: float = 2 * 3600.0  # provisioning (≤ 1 h) + container start-up health check (≤ 1 h)
    delete_timeout_s: float = 1800.0


@dataclass(frozen=True)
class Progress:
    """One thing that happened. `role` is None for deployment-wide steps (quota, state, bucket)."""

    role: Role | None
    step: str  # plan | quota | state | bucket | model | endpoint config | endpoint | wait | done | failed | error
    message: str
    status: str | None = None  # DescribeEndpoint's EndpointStatus
    elapsed_s: float | None = None  # since the endpoint's CreationTime (or since we started on it)
    instance_type: str | None = None  # the pool entry in use, once SageMaker reports it


ProgressCallback = Callable[[Progress], None]


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = int(round(seconds))
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def lifecycle_say(progress: ProgressCallback) -> Callable[[Role | None, str, str], None]:
    """The lifecycle's messages (infra/lifecycle.py) as Progress."""
    return lambda role, step, text: progress(Progress(role, step, text))
