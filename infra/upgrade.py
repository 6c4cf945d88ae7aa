"""Upgrade the pinned image of a deployment's endpoints, and roll back.

    report = upgrade(path, "omni-sagemaker-cuda-v1.7", roles=["voice"], progress=print)
    report = rollback(path, roles=["voice"])          # back to the version the current one superseded

Upgrade, per endpoint (side by side, one thread each), after every check (the tag differs from the one in
use, the endpoint is InService, the quotas allow a second fleet): a new version `<endpoint>-v<n>` — a model
with the new image and an endpoint config like the current one, recorded in the state file before it is
created — then UpdateEndpoint. SageMaker's deployment guardrails apply to real-time and asynchronous endpoints
alike (and to instance pools); they exclude Marketplace containers and Inf1 instances (docs: "Deployment
guardrails", "Exclusions"). So every studio endpoint is updated blue/green with a `DeploymentConfig`: all
traffic at once to the new fleet, a baking period (`--bake-seconds`, default 600) during which SageMaker
watches the endpoint's rollback alarm (infra/versions.py; deploy puts it) and rolls back by itself if it
trips. An endpoint the guardrails exclude, or a refusal of the DeploymentConfig, gets a plain UpdateEndpoint
(SageMaker's default: blue/green all at once, no bake, no alarm) — the outcome says which was used.

When the endpoint is InService on the new config, the smoke test runs on it (infra/smoke.py); if it fails,
the endpoint is updated back to the previous version at once. The state file records every version (image
tag, config, time, strategy, smoke result, why it failed). The superseded version's model and config are kept
until the next successful upgrade, so `rollback` works; older ones are removed then. `delete` removes all.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra import versions as vs
from infra.aws import AWS_ERRORS, AwsContext, error_code, error_message, translate
from infra.errors import (
    CredentialsError,
    EndpointFailed,
    InfraError,
    QuotaShortfall,
    StateError,
    UsageError,
)
from infra.lock import locked
from infra.model import ROLES, EndpointSpec, Role
from infra.progress import Progress, ProgressCallback, WaitSettings, format_duration
from infra.quotas import check_quotas
from infra.state import DEFAULT_STATE_FILE, DeploymentState, ResourceRecord, utc_now
from protocol.errors import StudioError
from services.endpoint_view import EndpointView, describe_endpoint

DEFAULT_BAKE_S = 600
MAX_BAKE_S = 3600  # WaitIntervalInSeconds: 0..3600
IMAGE_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
BLUE_GREEN = "blue/green"
PLAIN = "plain update"
IN_PROGRESS = ("Updating", "SystemUpdating", "RollingBack", "Creating")
SmokeProgress = Callable[[Any], None]


def _quiet(_: Any) -> None:
    pass


@dataclass
class VersionOutcome:
    """What happened to one endpoint: from which version to which, how, and how it ended."""

    role: Role
    endpoint_name: str
    from_version: int
    to_version: int | None = None
    image_tag: str | None = None
    strategy: str | None = None  # blue/green | plain update
    status: str = "error"  # in service | rolled back | failed | error | timed out
    detail: str = ""
    rolled_back_by: str | None = None  # SageMaker (an alarm or a failed fleet) | infra (the smoke test)
    smoke: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    error: InfraError | None = None

    @property
    def ok(self) -> bool:
        return self.status == "in service"

    def summary(self) -> str:
        to = f"v{self.to_version}" + (f" ({self.image_tag})" if self.image_tag else "")
        how = f" by {self.strategy}" if self.strategy else ""
        if self.ok:
            return f"{self.role}: v{self.from_version} -> {to} in service{how}"
        if self.status == "rolled back":
            return f"{self.role}: {to} rolled back by {self.rolled_back_by}; v{self.from_version} serves: {self.detail}"
        return f"{self.role}: {to} {self.status}: {self.error or self.detail}"

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "endpoint_name": self.endpoint_name, "from_version": self.from_version,
                "to_version": self.to_version, "image_tag": self.image_tag, "strategy": self.strategy,
                "status": self.status, "ok": self.ok, "detail": self.detail, "rolled_back_by": self.rolled_back_by,
                "smoke": self.smoke, "notes": self.notes, "error": None if self.error is None else str(self.error)}


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
            _switch(state, role, known["number"])
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


def _switch(state: DeploymentState, role: Role, number: int) -> None:
    """Make version `number` the one in use: the spec and the endpoint record name its model and config."""
    with state.lock:
        v = vs.version(state, role, number)
        h = vs.history(state, role)
        h["current"] = number
        ep = state.spec.endpoint(role)
        tag = None if v["image_tag"] == state.spec.image_tag else v["image_tag"]
        new_ep = dataclasses.replace(ep, model_name=v["model_name"], config_name=v["config_name"], image_tag=tag)
        state.spec = dataclasses.replace(state.spec, endpoints=tuple(new_ep if e.role == role else e
                                                                     for e in state.spec.endpoints))
        rec = state.record(role)
        if rec.model.name != v["model_name"]:
            rec.model = ResourceRecord(v["model_name"], None, "created")
        if rec.config.name != v["config_name"]:
            rec.config = ResourceRecord(v["config_name"], None, "created")
        rec.smoke = v.get("smoke")
    state.save()


def deployment_config(ep: EndpointSpec, bake_s: int, alarm: str | None) -> tuple[dict[str, Any] | None, str, str]:
    """The UpdateEndpoint DeploymentConfig for this endpoint, the strategy's name, and why."""
    excluded = [t for t in ep.pool.types if t.startswith("ml.inf1.")]
    if excluded:
        return None, PLAIN, (f"SageMaker's deployment guardrails exclude Inf1 instances ({', '.join(excluded)}): "
                             "a plain update (all at once, no bake, no automatic rollback)")
    policy: dict[str, Any] = {
        "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": bake_s},
        "TerminationWaitInSeconds": 0,
        # Covers provisioning the new fleet (its container start-up) and the bake.
        "MaximumExecutionTimeoutInSeconds": max(600, min(28800, ep.startup_timeout_s + bake_s + 1800)),
    }
    config: dict[str, Any] = {"BlueGreenUpdatePolicy": policy}
    why = f"blue/green: all traffic at once to the new fleet, a {bake_s} s bake"
    if alarm:
        config["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": alarm}]}
        why += f" watching the alarm {alarm} (SageMaker rolls back if it trips)"
    else:
        why += " without a rollback alarm (none could be put): only the smoke test can roll back"
    return config, BLUE_GREEN, why


def _guardrails_refused(exc: BaseException) -> bool:
    text = error_message(exc).lower()
    return error_code(exc) == "ValidationException" and any(
        w in text for w in ("deploymentconfig", "deployment config", "guardrail", "blue/green", "rollback"))


# ---------------------------------------------------------------------------------------------------------
class _Run:
    """One upgrade or rollback: the context, the settings, and the per-endpoint steps."""

    def __init__(self, ctx: AwsContext, state: DeploymentState, wait: WaitSettings, progress: ProgressCallback,
                 stop: threading.Event) -> None:
        self.ctx, self.state, self.wait, self.progress, self.stop = ctx, state, wait, progress, stop

    def note(self, role: Role, outcome: VersionOutcome, message: str, step: str = "version") -> None:
        outcome.notes.append(message)
        self.progress(Progress(role, step, message))

    def create_version(self, role: Role, tag: str, outcome: VersionOutcome) -> dict[str, Any]:
        """Record version n (before creating anything), then its model and endpoint config."""
        state, sm = self.state, self.ctx.sagemaker
        ep = state.spec.endpoint(role)
        with state.lock:
            h = vs.history(state, role)
            number = max(v["number"] for v in h["versions"]) + 1
            name = vs.version_name(state.record(role).endpoint.name, number)
            v = {"number": number, "image_tag": tag, "model_name": name, "config_name": name, "created_at": utc_now(),
                 "status": "creating", "strategy": None, "smoke": None, "detail": None, "resources_deleted": False}
            h["versions"].append(v)
        state.save()
        outcome.to_version, outcome.image_tag = number, tag
        new_ep = dataclasses.replace(ep, model_name=name, config_name=name, image_tag=tag)
        for kind, create in (("model", lambda: sm.create_model(**state.spec.create_model_request(new_ep))),
                             ("endpoint config",
                              lambda: sm.create_endpoint_config(**state.spec.create_endpoint_config_request(new_ep)))):
            try:
                create()
                self.progress(Progress(role, kind, f"v{number} {kind} {name} created"
                                       + (f" (image {state.spec.image_uri_of(new_ep)})" if kind == "model" else "")))
            except AWS_ERRORS as exc:
                if "already existing" not in error_message(exc).lower():
                    raise
                self.progress(Progress(role, kind, f"v{number} {kind} {name} exists: reused"))
        return v

    def update(self, role: Role, target: dict[str, Any], config: dict[str, Any] | None, strategy: str,
               outcome: VersionOutcome) -> EndpointView | None:
        """UpdateEndpoint to `target`'s config and wait until it settles; DescribeEndpoint's last answer
        (None when the wait ended first: timed out or stopped, said on the outcome)."""
        sm = self.ctx.sagemaker
        name = self.state.record(role).endpoint.name
        request: dict[str, Any] = {"EndpointName": name, "EndpointConfigName": target["config_name"]}
        if config is not None:
            request["DeploymentConfig"] = config
        try:
            sm.update_endpoint(**request)
        except AWS_ERRORS as exc:
            if config is None or not _guardrails_refused(exc):
                raise
            strategy = PLAIN
            self.note(role, outcome, f"SageMaker refused the blue/green DeploymentConfig ({error_message(exc)}): "
                                     "a plain update instead (all at once, no bake, no automatic rollback)")
            request.pop("DeploymentConfig")
            sm.update_endpoint(**request)
        outcome.strategy = strategy
        with self.state.lock:
            if target["status"] == "creating":  # a new version (a rollback's target keeps its record)
                target["status"], target["strategy"] = "updating", strategy
        self.state.save()
        self.progress(Progress(role, "update", f"UpdateEndpoint {name} -> {target['config_name']} ({strategy})",
                               status="Updating"))
        started = time.monotonic()
        while True:
            view = describe_endpoint(sm, name)
            if view.gone:
                raise EndpointFailed(f"{name} was deleted during the update (by hand or by its TTL): "
                                     "`python -m infra resume` brings it back")
            status = view.status
            elapsed = time.monotonic() - started
            if status not in IN_PROGRESS:
                return view
            pending = view.desc.get("PendingDeploymentSummary", {}).get("ProductionVariants", [])
            stage = next((s.get("Status") for p in pending for s in p.get("VariantStatus", [])), None)
            self.progress(Progress(role, "wait", f"{name} {status}" + (f" ({stage})" if stage else ""), status, elapsed,
                                   view.instance_type))
            if elapsed > self.wait.timeout_s:
                outcome.status = "timed out"
                outcome.error = EndpointFailed(
                    f"{name} is still {status} after {format_duration(self.wait.timeout_s)}: SageMaker goes on with "
                    "the update; `python -m infra status` shows when it ends, then run the command again")
                return None
            if self.stop.wait(self.wait.poll_s):
                outcome.status = "timed out"
                outcome.error = EndpointFailed(f"stopped while {name} was {status}; SageMaker goes on with the "
                                               "update — `python -m infra status` shows when it ends")
                return None

    def settle(self, role: Role, view: EndpointView, target: dict[str, Any], outcome: VersionOutcome,
               *, leaving: dict[str, Any]) -> bool:
        """After the wait: True when the endpoint runs `target` (made current), else the outcome says why."""
        state = self.state
        status, running = view.status, view.config_name
        reason = view.failure_reason or ""
        if status == "InService" and running == target["config_name"]:
            with state.lock:
                leaving["status"] = "superseded" if leaving["number"] < target["number"] else leaving["status"]
                target["status"], target["detail"] = "in service", None
            _switch(state, role, target["number"])
            outcome.status = "in service"
            self.progress(Progress(role, "done", f"{view.name} InService on v{target['number']} "
                                                 f"({target['image_tag']})", status, None, view.instance_type))
            return True
        with state.lock:
            target["status"] = "rolled back" if status == "InService" else "failed"
            target["detail"] = reason or f"endpoint status {status}, config {running}"
        state.save()
        outcome.status, outcome.detail = target["status"], target["detail"]
        if status == "InService":
            outcome.rolled_back_by = "SageMaker"
        self.progress(Progress(role, "failed", f"{view.name} {status} on {running}: {outcome.detail}",
                               status))
        return False

    def guard(self, role: Role, outcome: VersionOutcome, work: Callable[[], None]) -> VersionOutcome:
        try:
            work()
        except AWS_ERRORS as exc:
            outcome.status, outcome.error = "error", translate(exc, f"{self.action_name} the {role} endpoint")
        except InfraError as exc:
            outcome.status, outcome.error = "error", exc
        if outcome.error is not None:
            self.progress(Progress(role, "error", str(outcome.error)))
        self.state.save()
        return outcome

    action_name = "update"


def _each(roles: Sequence[Role], fn: Callable[[Role], VersionOutcome]) -> dict[Role, VersionOutcome]:
    with ThreadPoolExecutor(max_workers=max(1, len(roles)), thread_name_prefix="infra-version") as pool:
        return dict(zip(roles, pool.map(fn, roles), strict=True))


def _smoke(run: _Run, report: VersionReport, smoke_dir: Path, smoke_progress: SmokeProgress) -> list[Role]:
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
    run = _Run(ctx, state, wait, progress, stop or threading.Event())
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


def _roll_back_after_smoke(run: _Run, outcome: VersionOutcome) -> None:
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
            _switch(state, role, prev["number"])
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
    run = _Run(ctx, state, wait, progress, stop or threading.Event())
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
                _switch(state, role, target["number"])
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
