"""Long infra operations run in the background, one at a time per state file, watched from elsewhere.

The endpoints page starts `deploy`, `add`, `resume`, `smoke`, `delete`, `upgrade` or `rollback` here and re-reads
`runner.current()` on each refresh: what is running, the CLI command it corresponds to, its progress lines so far,
and how it ended. Nothing here knows about Streamlit; every operation is the infra library call the CLI makes.

    runner = ActionRunner(state_file, audit=AuditLog(history))
    runner.deploy(DeployOptions(...), actor=who, wait=WaitSettings(poll_s=5))  # at once; InfraError if busy
    action = runner.current()   # Action: kind, command, lines, done, ok, summary, error

Each action holds the state file's lock (infra/lock.py) from its start to its end, like the CLI command it
mirrors: when another command (the CLI, another studio) is writing the file, starting one raises StateLocked
naming that command, and nothing starts.

Every action names who asks (`actor`, services/access.py): only an admin may start one (or stop one);
anyone else gets Forbidden before anything is touched. Each start, refusal and outcome goes to the audit log
when the runner has one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.delete import delete_deployment
from infra.deploy import deploy, resume
from infra.errors import InfraError, StateLocked
from infra.lock import Shared, StateLock, adopt
from infra.model import DeployOptions, Role, deploy_command, shell_command
from infra.progress import Progress, WaitSettings, format_duration
from infra.smoke import SmokeCheck, smoke_deployment
from infra.state import DeploymentState
from infra.upgrade import DEFAULT_BAKE_S, rollback, upgrade
from protocol.errors import StudioError
from services.access import Forbidden, Principal, require
from services.audit import AuditLog

MAX_LINES = 400  # progress lines kept per action (a long wait repeats itself)


@dataclass
class Action:
    kind: str  # deploy | add | resume | smoke | delete | upgrade | rollback | extend
    command: str  # the CLI line that does the same
    started_at: float = field(default_factory=time.time)
    lines: list[str] = field(default_factory=list)
    done: bool = False
    ok: bool | None = None
    summary: str | None = None  # one line: what came of it
    error: str | None = None
    finished_at: float | None = None

    @property
    def elapsed_s(self) -> float:
        return (self.finished_at or time.time()) - self.started_at


def progress_line(p: Progress) -> str:
    who = p.role or "deployment"
    extra = []
    if p.status:
        extra.append(p.status)
    if p.instance_type:
        extra.append(p.instance_type)
    if p.elapsed_s is not None:
        extra.append(format_duration(p.elapsed_s))
    return f"{who}: {p.message}" + (f" ({', '.join(extra)})" if extra else "")


def smoke_line(check: SmokeCheck) -> str:
    return f"{check.role}: smoke {'ok' if check.ok else 'FAILED'} — {check.detail}"


class ActionRunner:
    """At most one running action per state file; the last one stays readable after it ends."""

    def __init__(self, state_file: Path, *, smoke_dir: Path | None = None, audit: AuditLog | None = None,
                 shared: Shared | None = None) -> None:
        self.state_file = Path(state_file)
        self.audit = audit
        self.shared = shared  # a team studio's database: the state and its lock are shared (infra/shared_state.py)
        self.smoke_dir = Path(smoke_dir) if smoke_dir else self.state_file.parent / "smoke"
        self._lock = threading.Lock()
        self._action: Action | None = None
        self._stop = threading.Event()

    # -- reading ------------------------------------------------------------------------------------
    def current(self) -> Action | None:
        """A copy of the running (or last) action, safe to render."""
        with self._lock:
            if self._action is None:
                return None
            a = self._action
            return Action(a.kind, a.command, a.started_at, list(a.lines), a.done, a.ok, a.summary, a.error,
                          a.finished_at)

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._action is not None and not self._action.done

    # -- starting -----------------------------------------------------------------------------------
    def deploy(self, options: DeployOptions, *, actor: Principal, wait: WaitSettings = WaitSettings(), smoke: bool = True) -> Action:
        def work(action: Action) -> tuple[bool, str]:
            result = deploy(options, state_file=self.state_file, wait=wait, progress=self._progress(action),
                            stop=self._stop)
            return self._finish_deploy(action, result, smoke)

        return self._start("deploy", deploy_command(options, str(self.state_file)), work, actor)

    def resume(self, *, actor: Principal, wait: WaitSettings = WaitSettings(), smoke: bool = True) -> Action:
        def work(action: Action) -> tuple[bool, str]:
            result = resume(self.state_file, wait=wait, progress=self._progress(action), stop=self._stop)
            return self._finish_deploy(action, result, smoke)

        return self._start("resume", shell_command("resume", ["--state-file", str(self.state_file)]), work, actor)

    def add(self, families: Sequence[Role], *, actor: Principal, wait: WaitSettings = WaitSettings(), smoke: bool = True,
            models: Sequence[str] = (), instance_types: Sequence[str] = ()) -> Action:
        """`python -m infra add` (infra/add.py): new endpoints for the deployment, then their smoke test."""
        from infra.add import add_command, add_endpoints

        def work(action: Action) -> tuple[bool, str]:
            result = add_endpoints(self.state_file, families, models=models, instance_types=instance_types, wait=wait,
                                   progress=self._progress(action), stop=self._stop)
            return self._finish_deploy(action, result, smoke, roles=tuple(result.outcomes))

        return self._start("add", add_command(families, state_file=str(self.state_file), models=models,
                                              instance_types=instance_types, smoke=smoke), work, actor)

    def smoke(self, *, actor: Principal) -> Action:
        def work(action: Action) -> tuple[bool, str]:
            report = self._smoke(action)
            return report.ok, "smoke test passed" if report.ok else "smoke test FAILED"

        return self._start("smoke", shell_command("smoke", ["--state-file", str(self.state_file),
                                                            "--out-dir", str(self.smoke_dir)]), work, actor)

    def delete(self, *, actor: Principal, wait: WaitSettings = WaitSettings(), purge_s3: bool = False) -> Action:
        def work(action: Action) -> tuple[bool, str]:
            said: list[str] = []  # what the progress lines already named (endpoints, configs, models, versions)
            line = self._progress(action)

            def progress(p: Progress) -> None:
                said.append(p.message)
                line(p)

            report = delete_deployment(self.state_file, wait=wait, purge_s3=purge_s3, progress=progress)
            for d in report.deletions:  # then the rest (scaling, TTL schedules): each resource once in the log
                if not any(f"{d.kind} {d.name}:" in m for m in said):
                    self._line(action, d.line())
            if report.ok:
                return True, "everything is gone" + (" (state file removed)" if report.state_removed else "")
            return False, "still there: " + ", ".join(report.remaining)

        args = ["--state-file", str(self.state_file)] + (["--purge-s3"] if purge_s3 else [])
        return self._start("delete", shell_command("delete", args), work, actor)

    def upgrade(self, image_tag: str, roles: Sequence[Role] = (), *, actor: Principal, bake_s: float = DEFAULT_BAKE_S,
                wait: WaitSettings = WaitSettings(), smoke: bool = True) -> Action:
        """`python -m infra upgrade` (infra/upgrade.py): a new version per endpoint, blue/green, smoke-tested."""
        def work(action: Action) -> tuple[bool, str]:
            report = upgrade(self.state_file, image_tag, tuple(roles) or None, bake_s=bake_s, smoke=smoke,
                             smoke_dir=self.smoke_dir, wait=wait, progress=self._progress(action),
                             smoke_progress=lambda c: self._line(action, smoke_line(c)), stop=self._stop)
            return self._finish_versions(action, report, f"now on {image_tag}")

        args = [*roles, "--image-tag", image_tag, "--state-file", str(self.state_file)]
        args += ([] if bake_s == DEFAULT_BAKE_S else ["--bake-seconds", f"{bake_s:g}"]) + ([] if smoke else ["--no-smoke"])
        return self._start("upgrade", shell_command("upgrade", args), work, actor)

    def rollback(self, roles: Sequence[Role] = (), *, actor: Principal, wait: WaitSettings = WaitSettings(), smoke: bool = True) -> Action:
        """`python -m infra rollback`: back to the version the current one superseded."""
        def work(action: Action) -> tuple[bool, str]:
            report = rollback(self.state_file, tuple(roles) or None, smoke=smoke, smoke_dir=self.smoke_dir, wait=wait,
                              progress=self._progress(action),
                              smoke_progress=lambda c: self._line(action, smoke_line(c)), stop=self._stop)
            return self._finish_versions(action, report, "back on the previous version")

        args = [*roles, "--state-file", str(self.state_file)] + ([] if smoke else ["--no-smoke"])
        return self._start("rollback", shell_command("rollback", args), work, actor)

    def extend(self, ttl: str, *, actor: Principal, yes: bool = False) -> Action:
        """`python -m infra extend --ttl` (infra/ttl.py): every remaining endpoint deletes itself at now + ttl."""
        from infra.extend import extend_deployment
        from infra.ttl_choice import iso

        def work(action: Action) -> tuple[bool, str]:
            report = extend_deployment(self.state_file, ttl, yes=yes, progress=lambda text: self._line(action, text))
            for name in report.gone:
                self._line(action, f"{name}: already gone")
            return True, f"the endpoints now delete themselves at {iso(report.expires_at)}"

        args = ["--ttl", ttl, "--state-file", str(self.state_file)] + (["--yes"] if yes else [])
        return self._start("extend", shell_command("extend", args), work, actor)

    def stop(self, *, actor: Principal) -> None:
        """Ask a running deploy/resume to stop waiting (what exists stays recorded; resume goes on)."""
        self._allowed(actor, "stop", "")
        if self.audit is not None:
            self.audit.record(actor, "stop", target=str(self.state_file), outcome="ok",
                              summary="asked the running action to stop waiting")
        self._stop.set()

    # -- internals ----------------------------------------------------------------------------------
    def _finish_deploy(self, action: Action, result: Any, smoke: bool, roles: Sequence[Role] | None = None
                       ) -> tuple[bool, str]:
        for outcome in result.outcomes.values():
            self._line(action, outcome.summary())
        if not result.ok:
            err = result.error()
            return False, str(err) if err else "the deployment did not finish"
        if not smoke:
            return True, "all endpoints InService (smoke test skipped)"
        report = self._smoke(action, result.state, roles)
        return report.ok, "all endpoints InService, smoke test passed" if report.ok else \
            "all endpoints InService, but the smoke test FAILED"

    def _finish_versions(self, action: Action, report: Any, done: str) -> tuple[bool, str]:
        for outcome in report.outcomes.values():
            self._line(action, outcome.summary())
            for note in outcome.notes:
                self._line(action, f"  {note}")
        err = report.error()
        return report.ok, (", ".join(report.outcomes) + f": {done}") if report.ok else str(err)

    def _smoke(self, action: Action, state: DeploymentState | None = None, roles: Sequence[Role] | None = None) -> Any:
        return smoke_deployment(state or DeploymentState.load(self.state_file), self.smoke_dir, roles,
                                progress=lambda c: self._line(action, smoke_line(c)))

    def _progress(self, action: Action) -> Callable[[Progress], None]:
        def say(p: Progress) -> None:
            line = progress_line(p)
            if p.step == "wait":  # said again at every poll: one line per thing waited on, its time moving on
                head = f"{p.role or 'deployment'}: {p.message}"
                with self._lock:
                    for i in range(len(action.lines) - 1, max(-1, len(action.lines) - 8), -1):
                        if action.lines[i] == head or action.lines[i].startswith(head + " ("):
                            action.lines[i] = line
                            return
            self._line(action, line)

        return say

    def _line(self, action: Action, line: str) -> None:
        with self._lock:
            action.lines.append(line)
            del action.lines[:-MAX_LINES]

    def _allowed(self, actor: Principal, kind: str, command: str) -> None:
        """Forbidden (and a refusal in the audit log) unless `actor` may do `kind`."""
        try:
            require(actor, kind)  # type: ignore[arg-type]
        except Forbidden as exc:
            if self.audit is not None:
                self.audit.record(actor, kind, target=str(self.state_file), detail={"command": command},
                                  outcome="refused", summary=str(exc))
            raise

    def _start(self, kind: str, command: str, work: Callable[[Action], tuple[bool, str]], actor: Principal) -> Action:
        self._allowed(actor, kind, command)
        with self._lock:
            if self._action is not None and not self._action.done:
                raise InfraError(f"{self._action.kind} is still running for {self.state_file}; wait for it to end")
            # The state file's lock (infra/lock.py), taken here so a command already writing the file (a CLI
            # deploy, say) refuses this one at once, naming it; the action's thread holds it to the end.
            try:
                lock = StateLock(self.state_file, f"python -m infra {kind}", via="the studio's Endpoints page",
                                 hint="wait for it to end, then try again", shared=self.shared).acquire()
            except StateLocked as exc:
                refused: StateLocked | None = exc
            else:
                refused = None
                action = self._action = Action(kind, command)
                self._stop.clear()
        if refused is not None:
            if self.audit is not None:
                self.audit.record(actor, kind, target=str(self.state_file), detail={"command": command},
                                  outcome="refused", summary=str(refused))
            raise refused
        try:
            entry = None if self.audit is None else \
                self.audit.record(actor, kind, target=str(self.state_file), detail={"command": command})
        except BaseException:
            lock.release()  # never left held by an action that did not start
            with self._lock:
                action.ok, action.error, action.done, action.finished_at = False, "not started", True, time.time()
            raise

        def run() -> None:
            try:
                with adopt(lock):
                    ok, summary = work(action)
                error = None if ok else summary
            except StudioError as exc:
                ok, summary, error = False, f"{kind} failed", str(exc)
            except Exception as exc:  # nothing may leave the action "running" forever
                ok, summary, error = False, f"{kind} failed", f"unexpected {type(exc).__name__}: {exc}"
            if entry is not None:  # on record before anyone sees the action done
                try:
                    self.audit.finish(entry, ok=ok, summary=error or summary)
                except StudioError:  # the outcome is on the page either way; the start was recorded
                    pass
            with self._lock:
                action.ok, action.summary, action.error = ok, summary, error
                action.done, action.finished_at = True, time.time()

        threading.Thread(target=run, name=f"infra-{kind}", daemon=True).start()
        return action
