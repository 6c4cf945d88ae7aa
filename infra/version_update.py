"""One endpoint moved to another version, for upgrade and rollback (infra/upgrade.py runs one per endpoint, each in
its own thread).

`UpdateRun` records the new version in the state file before creating its model and endpoint config, sends
UpdateEndpoint — blue/green with a bake and the endpoint's rollback alarm where SageMaker's deployment
guardrails apply (`deployment_config`), a plain update where they do not or the DeploymentConfig is refused —
waits until the endpoint settles, and records the version then in use (`switch_version`). Each endpoint's
`VersionOutcome` says from which version to which, how, and how it ended.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infra import versions as vs
from infra.aws import AWS_ERRORS, AwsContext, error_code, error_message, translate
from infra.errors import EndpointFailed, InfraError
from infra.model import EndpointSpec, Role
from infra.progress import Progress, ProgressCallback, WaitSettings, format_duration
from infra.state import DeploymentState, ResourceRecord, utc_now
from services.endpoint_view import EndpointView, describe_endpoint

BLUE_GREEN = "blue/green"
PLAIN = "plain update"
IN_PROGRESS = ("Updating", "SystemUpdating", "RollingBack", "Creating")


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



def switch_version(state: DeploymentState, role: Role, number: int) -> None:
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


def guardrails_refused(exc: BaseException) -> bool:
    text = error_message(exc).lower()
    return error_code(exc) == "ValidationException" and any(
        w in text for w in ("deploymentconfig", "deployment config", "guardrail", "blue/green", "rollback"))

class UpdateRun:
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
            if config is None or not guardrails_refused(exc):
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
            switch_version(state, role, target["number"])
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
