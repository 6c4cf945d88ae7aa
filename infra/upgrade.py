"""Upgrade the pinned image of a deployment's endpoints, and roll back.

    report = upgrade(path, "omni-sagemaker-cuda-v1.7", roles=["voice"], progress=print)
    report = rollback(path, roles=["voice"])          # back to the version the current one superseded

Upgrade, per endpoint (side by side, one thread each: infra/version_update.py), after every check (the tag
differs from the one in use, the endpoint is InService, the quotas allow a second fleet): a new version
`<endpoint>-v<n>` — a model with the new image and an endpoint config like the current one, recorded in the
state file before it is created — then UpdateEndpoint. SageMaker's deployment guardrails apply to real-time and
asynchronous endpoints alike (and to instance pools); they exclude Marketplace containers and Inf1 instances
(docs: "Deployment guardrails", "Exclusions"). So every studio endpoint is updated blue/green with a
`DeploymentConfig`: all traffic at once to the new fleet, a baking period (`--bake-seconds`, default 600) during
which SageMaker watches the endpoint's rollback alarm (infra/versions.py; deploy puts it) and rolls back by itself
if it trips. An endpoint the guardrails exclude, or a refusal of the DeploymentConfig, gets a plain
UpdateEndpoint (SageMaker's default: blue/green all at once, no bake, no alarm) — the outcome says which was used.

When the endpoint is InService on the new config, the smoke test runs on it (infra/smoke.py); if it fails,
the endpoint is updated back to the previous version at once. The state file records every version (image
tag, config, time, strategy, smoke result, why it failed). The superseded version's model and config are kept
until the next successful upgrade, so `rollback` works; older ones are removed then. `delete` removes all.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra import versions as vs
from infra.aws import AWS_ERRORS, AwsContext, translate
from infra.errors import (
    CredentialsError,
    EndpointFailed,
    InfraError,
    QuotaShortfall,
    StateError,
    UsageError,
)
from infra.lock import locked
from infra.model import ROLES, Role
from infra.progress import Progress, ProgressCallback, WaitSettings
from infra.quotas import check_quotas
from infra.state import DEFAULT_STATE_FILE, DeploymentState, utc_now
from infra.version_update import (
    IN_PROGRESS,
    PLAIN,
    UpdateRun,
    VersionOutcome,
    deployment_config,
    switch_version,
)
from protocol.errors import StudioError
from services.endpoint_view import describe_endpoint

DEFAULT_BAKE_S = 600
MAX_BAKE_S = 3600  # WaitIntervalInSeconds: 0..3600
IMAGE_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
SmokeProgress = Callable[[Any], None]


def _quiet(_: Any) -> None:
    pass


@dataclass
class VersionReport:
    action: str  # upgrade | rollback
    state: DeploymentState
    outcomes: dict[Role, VersionOutcome]

    @property
    def ok(self) -> bool:
        return bool(self.outcomes) and all(o.ok for o in self.outcomes.values())

    def error(self) -> InfraError | None:
        errors = [o.error for o in self.outcomes.values() if o.error is not None]
        for e in errors:
            if isinstance(e, CredentialsError):
                return e
        if errors:
            return errors[0]
        bad = [o for o in self.outcomes.values() if not o.ok]
        if bad:
            return EndpointFailed("; ".join(o.summary() for o in bad))
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "ok": self.ok, "deployment_id": self.state.deployment_id,
                "state_file": str(self.state.path), "endpoints": {r: o.to_dict() for r, o in self.outcomes.items()},
                "versions": {r: vs.summary(self.state, r) for r in self.outcomes}}


# ---------------------------------------------------------------------------------------------------------
def check_image_tag(tag: str | None) -> str:
    value = (tag or "").strip()
    if not IMAGE_TAG.match(value):
        raise UsageError(f"--image-tag {tag!r} is not an image tag (letters, digits, _ . -; e.g. "
                         "omni-sagemaker-cuda-v1.7)")
    return value


def check_bake(seconds: float) -> int:
    if not 0 <= seconds <= MAX_BAKE_S:
        raise UsageError(f"--bake-seconds {seconds:g} is out of range: SageMaker bakes 0 to {MAX_BAKE_S} seconds")
    return int(seconds)


def _open(state_file: Path, region: str | None, profile: str | None) -> tuple[DeploymentState, AwsContext]:
    state = DeploymentState.load(Path(state_file))
    if region and region != state.region:
        raise StateError(f"{state_file} records a deployment in {state.region}, not {region}: leave --region out")
    ctx = AwsContext(state.region, profile)
    identity = ctx.identity()
    if identity.account != state.spec.account:
        raise StateError(f"{state_file} records a deployment in account {state.spec.account}, but these credentials "
                         f"are for account {identity.account}: use the profile of account {state.spec.account}")
    return state, ctx


def _roles(state: DeploymentState, roles: Sequence[Role] | None) -> tuple[Role, ...]:
    chosen = tuple(dict.fromkeys(roles or state.spec.roles))
    missing = [r for r in chosen if r not in state.endpoints]
    if missing:
        raise UsageError(f"the deployment {state.deployment_id} has no {missing[0]} endpoint (it has "
                         f"{', '.join(state.spec.roles)})")
    return tuple(r for r in ROLES if r in chosen)


def _in_service(ctx: AwsContext, state: DeploymentState, roles: Sequence[Role], notify: ProgressCallback) -> None:
    """Every endpoint InService, on a version the state file knows (adopted as current if it is not)."""
    for role in roles:
        name = state.record(role).endpoint.name
        try:
            view = describe_endpoint(ctx.sagemaker, name)
        except AWS_ERRORS as exc:
            raise translate(exc, f"describe the {role} endpoint {name}") from None
        status = view.status
        if status != "InService":
            hint = ("wait until it is InService (`python -m infra status`)" if status in IN_PROGRESS else
                    "bring it back with `python -m infra resume` first")
            raise InfraError(f"the {role} endpoint {name} is {status}, not InService: {hint}")
        running = view.config_name
        h = vs.history(state, role)
        if running != vs.current(state, role)["config_name"]:
            known = next((v for v in h["versions"] if v["config_name"] == running), None)
            if known is None:
                raise StateError(f"the {role} endpoint {name} runs the endpoint config {running}, which the state "
                                 f"file {state.path} does not record: it was changed outside infra; update it back "
                                 f"to {vs.current(state, role)['config_name']} or delete and deploy again")
            switch_version(state, role, known["number"])
            notify(Progress(role, "version", f"{name} runs v{known['number']} ({running}): recorded as the version "
                                             "in use (an earlier command ended before it could say so)"))


def _quota_check(ctx: AwsContext, state: DeploymentState, roles: Sequence[Role], notify: ProgressCallback) -> None:
    pools = {r: state.spec.endpoint(r).pool for r in roles}
    report = check_quotas(ctx, pools)
    if not report.ok:
        raise QuotaShortfall("an update brings the new fleet up beside the old one (blue/green), so every pool entry "
                             "needs a free instance while it runs; nothing was changed.\n" + report.message(), report)
    notify(Progress(None, "quota", "quotas allow a second fleet during the update: " + ", ".join(
        f"{line.instance_type} {line.free:g} free" for line in report.lines)))


# ---------------------------------------------------------------------------------------------------------
def _each(roles: Sequence[Role], fn: Callable[[Role], VersionOutcome]) -> dict[Role, VersionOutcome]:
    with ThreadPoolExecutor(max_workers=max(1, len(roles)), thread_name_prefix="infra-version") as pool:
        return dict(zip(roles, pool.map(fn, roles), strict=True))


def _smoke(run: UpdateRun, report: VersionReport, smoke_dir: Path, smoke_progress: SmokeProgress) -> list[Role]:
    """Smoke-test the endpoints now on their new version; record each result on it. The roles that failed."""
    from infra.smoke import smoke_deployment

    roles = [r for r, o in report.outcomes.items() if o.ok]
    if not roles:
        return []
    run.progress(Progress(None, "smoke", f"smoke test of {', '.join(roles)} on the version now in service"))
    try:
        smoke = smoke_deployment(run.state, smoke_dir, roles, progress=smoke_progress)
    except StudioError as exc:  # the backend could not be built: the test did not run
        for r in roles:
            report.outcomes[r].notes.append(f"the smoke test did not run: {exc}")
            report.outcomes[r].status = "error"
            report.outcomes[r].error = EndpointFailed(
                f"the {r} endpoint runs v{report.outcomes[r].to_version}, but the smoke test did not run ({exc}); "
                "`python -m infra smoke` checks it, `python -m infra rollback` returns to the previous version")
        return []
    failed = []
    for r in roles:
        check = smoke.check(r)
        result = {"ok": bool(check and check.ok), "detail": check.detail if check else "not run", "at": utc_now()}
        with run.state.lock:
            vs.current(run.state, r)["smoke"] = result
        report.outcomes[r].smoke = result
        if not result["ok"]:
            failed.append(r)
    run.state.save()
    return failed


# ---------------------------------------------------------------------------------------------------------
@locked("python -m infra upgrade")
def upgrade(state_file: Path = DEFAULT_STATE_FILE, image_tag: str = "", roles: Sequence[Role] | None = None, *,
            region: str | None = None, profile: str | None = None, bake_s: float = DEFAULT_BAKE_S,
            smoke: bool = True, smoke_dir: Path = Path("."), wait: WaitSettings = WaitSettings(),
            progress: ProgressCallback | None = None, smoke_progress: SmokeProgress | None = None,
            stop: threading.Event | None = None) -> VersionReport:
    """Move the endpoints to `image_tag` (see the module). Raises UsageError (a tag already in use, an unknown
    endpoint, a bad tag or bake), StateError, QuotaShortfall before changing anything; returns the report."""
    progress = progress or _quiet
    tag = check_image_tag(image_tag)
    bake = check_bake(bake_s)
    state, ctx = _open(Path(state_file), region, profile)
    chosen = _roles(state, roles)
    same = [r for r in chosen if vs.current(state, r)["image_tag"] == tag]
    if same:
        v = vs.current(state, same[0])
        raise UsageError(f"the {', '.join(same)} endpoint{'s' if len(same) > 1 else ''} already run{'' if len(same) > 1 else 's'} "
                         f"{tag} (v{v['number']}): nothing to upgrade — name another --image-tag, or leave "
                         f"{', '.join(same)} out")
    _in_service(ctx, state, chosen, progress)
    _quota_check(ctx, state, chosen, progress)
    run = UpdateRun(ctx, state, wait, progress, stop or threading.Event())
    run.action_name = "upgrade"

    def one(role: Role) -> VersionOutcome:
        leaving = vs.current(state, role)
        outcome = VersionOutcome(role, state.record(role).endpoint.name, leaving["number"], image_tag=tag)

        def work() -> None:
            alarm = vs.ensure_alarm(ctx, state, role, lambda m: progress(Progress(role, "alarm", m)))
            target = run.create_version(role, tag, outcome)
            config, strategy, why = deployment_config(state.spec.endpoint(role), bake, alarm)
            run.note(role, outcome, why)
            view = run.update(role, target, config, strategy, outcome)
            if view is not None:
                run.settle(role, view, target, outcome, leaving=leaving)

        return run.guard(role, outcome, work)

    report = VersionReport("upgrade", state, _each(chosen, one))
    if smoke:
        for role in _smoke(run, report, Path(smoke_dir), smoke_progress or _quiet):
            _roll_back_after_smoke(run, report.outcomes[role])
    for role, outcome in report.outcomes.items():
        if outcome.ok:  # keep the version in use and the one it superseded; remove the others' resources
            keep = {vs.current(state, role)["number"]} | {p["number"] for p in [vs.previous(state, role)] if p}
            old = [v["number"] for v in vs.history(state, role)["versions"] if v["number"] not in keep
                   and not v["resources_deleted"] and v["status"] not in ("creating", "updating")]
            if old:
                try:
                    vs.delete_version_resources(ctx, state, role, old,
                                                lambda m, r=role: progress(Progress(r, "cleanup", m)))
                except AWS_ERRORS as exc:
                    outcome.notes.append(f"older versions not removed ({translate(exc, 'remove them')}); "
                                         "`python -m infra delete` removes every version")
    return report


def _roll_back_after_smoke(run: UpdateRun, outcome: VersionOutcome) -> None:
    """The new version failed its smoke test: back to the version it superseded, at once."""
    state, role = run.state, outcome.role
    first = outcome.strategy
    failed = vs.current(state, role)
    prev = vs.previous(state, role)
    reason = f"the smoke test failed on v{failed['number']}: {(failed.get('smoke') or {}).get('detail', '')}"
    if prev is None:  # cannot happen after an upgrade; said rather than assumed
        outcome.status, outcome.error = "error", EndpointFailed(reason + "; no previous version to return to")
        return
    run.progress(Progress(role, "rollback", f"{reason}; rolling back to v{prev['number']} ({prev['image_tag']})"))

    def work() -> None:
        view = run.update(role, prev, None, PLAIN, outcome)
        if view is not None and view.status == "InService" and view.config_name == prev["config_name"]:
            with state.lock:
                failed["status"], failed["detail"] = "rolled back", reason
                prev["status"] = "in service"
            switch_version(state, role, prev["number"])
            outcome.status, outcome.detail, outcome.rolled_back_by = "rolled back", reason, "infra"
            outcome.strategy = f"{first}, then back by a plain update"
            run.progress(Progress(role, "done", f"back on v{prev['number']} ({prev['image_tag']})", "InService"))
        elif view is not None:
            outcome.status = "error"
            outcome.error = EndpointFailed(f"{reason}; the rollback to v{prev['number']} did not finish: "
                                           f"{view.status} on {view.config_name} "
                                           f"({view.failure_reason or 'no reason given'})")

    run.guard(role, outcome, work)
    if outcome.status != "rolled back":
        outcome.strategy = first


@locked("python -m infra rollback")
def rollback(state_file: Path = DEFAULT_STATE_FILE, roles: Sequence[Role] | None = None, *,
             region: str | None = None, profile: str | None = None, smoke: bool = True,
             smoke_dir: Path = Path("."), wait: WaitSettings = WaitSettings(),
             progress: ProgressCallback | None = None, smoke_progress: SmokeProgress | None = None,
             stop: threading.Event | None = None) -> VersionReport:
    """Return each endpoint to the version its current one superseded. UsageError when one has none."""
    progress = progress or _quiet
    state, ctx = _open(Path(state_file), region, profile)
    chosen = _roles(state, roles)
    for role in chosen:
        if vs.previous(state, role) is None:
            cur = vs.current(state, role)
            older = [v for v in vs.history(state, role)["versions"] if v["number"] < cur["number"]]
            why = (f"v{cur['number']} ({cur['image_tag']}) is its first version" if not older else
                   f"the versions before v{cur['number']} were rolled back, failed or removed after a later upgrade")
            raise UsageError(f"the {role} endpoint has no previous version to roll back to: {why} "
                             "(`python -m infra status` lists its versions; `python -m infra upgrade --image-tag TAG` "
                             "moves it to another image)")
    _in_service(ctx, state, chosen, progress)
    _quota_check(ctx, state, chosen, progress)
    run = UpdateRun(ctx, state, wait, progress, stop or threading.Event())
    run.action_name = "roll back"

    def one(role: Role) -> VersionOutcome:
        leaving, target = vs.current(state, role), vs.previous(state, role)
        assert target is not None
        outcome = VersionOutcome(role, state.record(role).endpoint.name, leaving["number"], target["number"],
                                 target["image_tag"])

        def work() -> None:
            run.note(role, outcome, f"back to v{target['number']} ({target['image_tag']}): a plain UpdateEndpoint "
                                    "(SageMaker's default: blue/green, all at once, no bake)")
            view = run.update(role, target, None, PLAIN, outcome)
            if view is None:
                return
            if view.status == "InService" and view.config_name == target["config_name"]:
                with state.lock:
                    leaving["status"] = "rolled back"
                    leaving["detail"] = f"rolled back to v{target['number']} by `python -m infra rollback` at {utc_now()}"
                    target["status"] = "in service"
                switch_version(state, role, target["number"])
                outcome.status = "in service"
                progress(Progress(role, "done", f"{outcome.endpoint_name} InService on v{target['number']} "
                                                f"({target['image_tag']})", "InService"))
            else:
                outcome.status, outcome.detail = "failed", view.failure_reason or f"{view.status} on {view.config_name}"

        return run.guard(role, outcome, work)

    report = VersionReport("rollback", state, _each(chosen, one))
    if smoke:
        for role in _smoke(run, report, Path(smoke_dir), smoke_progress or _quiet):
            o = report.outcomes[role]
            o.status = "error"
            o.error = EndpointFailed(f"the {role} endpoint is back on v{o.to_version}, but its smoke test failed: "
                                     f"{(o.smoke or {}).get('detail')}")
    return report
