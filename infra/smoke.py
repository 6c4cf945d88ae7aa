"""Smoke tests through the studio's own services layer — the code path the pages use.

    report = run_smoke(backend, out_dir)      # backend: services.backend.Backend

Each family's check is its own (services/smoke/<family>.py, registered by services/families/<family>.py; what it
sends and what passes is said there). This module runs the checks of the families asked for, in catalog order,
sharing one `SmokeContext` (the voice check's recording is heard by the listen and omni checks; the image check's
PNG conditions the video), and keeps a deployment's results in its state file.

`deployment_backend(state)` builds the SageMaker backend for a deployment from its state file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.model import DEFAULT_ROLES, ROLES, Role
from protocol.errors import StudioError
from protocol.speech import TaskType, task_types_for_model
from services import families
from services.pricing import usd
from services.smoke import OMNI_TIMEOUT_S, VIDEO_TIMEOUT_S, VOICE_TIMEOUT_S, SmokeCheck, SmokeContext

if TYPE_CHECKING:
    from infra.state import DeploymentState
    from infra.status import StatusReport
    from services.backend import Backend
    from services.converse.native import SessionOpener
    from services.settings import Settings

SCALE_OUT_MINUTES = 10  # an instance from 0 on AWS: the alarm, a GPU instance, the image and the model


@dataclass
class SmokeReport:
    target: str
    checks: list[SmokeCheck]

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def check(self, role: Role) -> SmokeCheck | None:
        return next((c for c in self.checks if c.role == role), None)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "target": self.target, "checks": [c.to_dict() for c in self.checks]}


SmokeProgress = Callable[[SmokeCheck], None]


def run_smoke(backend: Backend, out_dir: Path, roles: Sequence[Role] = DEFAULT_ROLES, *,
              progress: SmokeProgress | None = None, voice_timeout_s: float = VOICE_TIMEOUT_S,
              video_timeout_s: float = VIDEO_TIMEOUT_S, voice_task: TaskType | None = None,
              duplex: str | SessionOpener | None = None, omni_timeout_s: float = OMNI_TIMEOUT_S) -> SmokeReport:
    """Run the smoke test of each role in `roles` (catalog order; the published three unless an opt-in family
    is named) and save what they produce.
    `voice_task`: the task type the voice model serves (None: the server's default, a preset voice).
    `duplex`: where the omni check holds its session — a server's URL, or an opener (a SageMaker endpoint's
    bidirectional stream: `smoke_deployment` passes one); None: the backend's own URL (the offline engine, a
    vLLM-Omni server)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = SmokeContext(out_dir, backend.label, url=_backend_url(backend), voice_task=voice_task, duplex=duplex,
                       timeouts={"voice": voice_timeout_s, "video": video_timeout_s, "omni": omni_timeout_s})
    for role in (r for r in ROLES if r in roles):
        t0 = time.perf_counter()
        check_of = families.code(role).smoke
        try:
            if check_of is None:
                check = SmokeCheck(role, False, f"the {role} family has no smoke check")
            else:
                check = check_of(backend, ctx)
        except StudioError as exc:
            check = SmokeCheck(role, False, str(exc))
        check.elapsed_s = time.perf_counter() - t0
        ctx.checks.append(check)
        if progress is not None:
            progress(check)
    return SmokeReport(backend.target, ctx.checks)


def _backend_url(backend: Backend) -> str | None:
    """The server a backend's requests go to, when it is one URL (the offline engine, a vLLM-Omni server)."""
    return backend.target if backend.target.startswith(("http://", "https://")) else None


# ---------------------------------------------------------------------------------------------------------
def deployment_settings(state: DeploymentState, base: Settings | None = None) -> Settings:
    """Studio settings pointing at the deployment's endpoints (region, names, bucket, prefix, KMS key)."""
    from services.settings import load_settings

    base = base or load_settings()
    return base.with_overrides(**state.studio_settings())


def deployment_backend(state: DeploymentState, base: Settings | None = None) -> Backend:
    """The studio's SageMaker backend (services.sagemaker) pointed at a deployment's endpoints."""
    from services.backend import create_backend

    return create_backend(deployment_settings(state, base))


def endpoint_duplex(state: DeploymentState, settings: Settings) -> SessionOpener | None:
    """The omni endpoint's duplex session over the HTTP/2 bidirectional stream (None: the deployment has none)."""
    from services.converse.sagemaker import EndpointSession, aws_session

    record = state.endpoints.get("omni")
    if record is None:
        return None
    return EndpointSession(aws_session(settings), record.endpoint.name, connect_timeout=settings.connect_timeout_s)


def record_smoke(state: DeploymentState, report: SmokeReport) -> None:
    """Keep each endpoint's last smoke result in the state file (the endpoints page shows it)."""
    from infra.state import utc_now

    with state.lock:
        for check in report.checks:
            if check.role in state.endpoints:
                state.endpoints[check.role].smoke = {"ok": check.ok, "detail": check.detail, "at": utc_now(),
                                                     "path": None if check.path is None else str(check.path)}
    state.save()


def scale_up_note(report: StatusReport, roles: Sequence[Role] | None = None) -> str | None:
    """What a smoke test of `roles` (default: all) costs beyond the banner: each InService endpoint it would
    call at 0 instances (the video endpoint idles there) scales up to one — minutes of waiting and an hourly
    price from then on. None when every endpoint it calls has an instance. The page asks with it; the CLI says it."""
    cold = [e for e in report.endpoints if e.status == "InService" and e.current_instances == 0
            and (not roles or e.role in roles)]
    if not cold:
        return None
    parts = []
    for e in cold:
        price = e.price.usd_per_hour if e.price is not None else None
        cost = f"{usd(price, 'rate')}/hour" if price is not None else "its instance's price (not in the price table)"
        parts.append(f"the {e.role or e.endpoint_name} endpoint ({e.endpoint_name}) runs 0 instances: the smoke "
                     f"test's request scales it up to 1 {e.instance_type or 'instance'}, which bills {cost}")
    text = "; ".join(parts)
    return (text[0].upper() + text[1:] + f". It waits for that instance — about {SCALE_OUT_MINUTES} minutes on "
            "AWS — and the instance bills until autoscaling takes the endpoint back to 0 once no request waits "
            "(15 idle minutes or more).")


def smoke_deployment(state: DeploymentState, out_dir: Path, roles: Sequence[Role] | None = None, *,
                     progress: SmokeProgress | None = None) -> SmokeReport:
    """The smoke test of a deployment through the studio's SageMaker backend, its result kept in the state
    file. Raises StudioError only when the backend cannot be built (the test did not run)."""
    settings = deployment_settings(state)
    backend = deployment_backend(state, settings)
    voice_model = state.spec.voice_model
    voice_task = task_types_for_model(voice_model)[0] if voice_model else None
    try:
        report = run_smoke(backend, out_dir, tuple(roles) if roles else state.spec.roles, progress=progress,
                           voice_task=voice_task, duplex=endpoint_duplex(state, settings))
    finally:
        backend.close()
    record_smoke(state, report)
    return report
