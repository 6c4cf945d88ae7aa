"""One writer per state file (infra/lock.py), against the emulator and moto: a second deploy on the same file is
refused at once naming the first (or waits for it and then finds the deployment recorded) — never a second
deployment; a deploy killed with SIGKILL leaves no lock behind; a delete during a deploy waits for it and then
removes everything, alarms and scaling too. Sweep lists the alarms and scalable targets (with policies) of a
deployment no state file names, and of endpoints that are gone, and deletes them.

A deploy is held at a known point with its progress callback (after its state file is saved, before anything
is created), so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from infra.cli import main as infra_main
from infra.deploy import deploy
from infra.model import DeployOptions
from infra.progress import Progress, WaitSettings
from infra.state import DeploymentState

if TYPE_CHECKING:
    from tests.emulator_support import EmulatorHandle

pytest_plugins = ["tests.emulator_support"]
ROOT = Path(__file__).resolve().parent.parent
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"
FAST = WaitSettings(poll_s=0.05, timeout_s=30, delete_timeout_s=30)
CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "30"]


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    return tmp_path / "deploy-state.json"


class Paused:
    """A progress callback that stops the deploy at its first `step` event until `go` is set."""

    def __init__(self, step: str = "state") -> None:
        self.step = step
        self.reached = threading.Event()
        self.go = threading.Event()

    def __call__(self, p: Progress) -> None:
        if p.step == self.step and not self.reached.is_set():
            self.reached.set()
            assert self.go.wait(120), "never released"


class Worker:
    """`fn()` in a thread; `result()` joins it and returns (or raises) what it did."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._out: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._out["value"] = fn()
        except BaseException as exc:  # handed to the test thread
            self._out["error"] = exc

    def result(self, timeout_s: float = 120.0) -> Any:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "still running"
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]


class Output:
    """Everything the CLI printed so far (capsys, read as it goes, from any thread)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys, self.out, self.err = capsys, "", ""

    def read(self) -> Output:
        got = self.capsys.readouterr()
        self.out, self.err = self.out + got.out, self.err + got.err
        return self

    def until(self, words: str, timeout_s: float = 60.0) -> str:
        """stderr so far, once it holds `words`."""
        deadline = time.monotonic() + timeout_s
        while words not in self.read().err:
            assert time.monotonic() < deadline, f"{words!r} never said; stderr: {self.err[-2000:]}"
            time.sleep(0.05)
        return self.err


def lock_path(state_file: Path) -> Path:
    """Where the lock lives: next to the state file (never the state file: every save replaces that)."""
    return state_file.with_name(state_file.name + ".lock")


def endpoints(handle: EmulatorHandle) -> list[str]:
    return sorted(e["EndpointName"] for e in handle.client("sagemaker").list_endpoints()["Endpoints"])


def alarms(handle: EmulatorHandle) -> list[str]:
    return sorted(a["AlarmName"] for a in handle.client("cloudwatch").describe_alarms()["MetricAlarms"])


def targets(handle: EmulatorHandle) -> list[str]:
    aas = handle.client("application-autoscaling")
    return sorted(t["ResourceId"] for t in aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"])


def cli_deploy(state_file: Path, *extra: str) -> list[str]:
    return ["deploy", "voice", "image", "--role-arn", ROLE_ARN, "--state-file", str(state_file), "--no-ttl",
            "--no-smoke", *CLI_FAST, *extra]


# ---------------------------------------------------------------------------------------------------------
def test_a_second_deploy_on_the_same_state_file_is_refused_or_waits_never_a_second_deployment(
        emulator_env: EmulatorHandle, state_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paused = Paused()
    first = Worker(lambda: deploy(DeployOptions(role_arn=ROLE_ARN, roles=("voice", "image"), ttl=None),
                                  state_file=state_file, wait=FAST, progress=paused))
    assert paused.reached.wait(60)
    holder = json.loads(lock_path(state_file).read_text())
    assert (holder["pid"], holder["command"]) == (os.getpid(), "python -m infra deploy")

    # At once: exit 2, naming who holds the file and how to wait; nothing asked of AWS.
    calls = emulator_env.state()["calls"]
    assert infra_main(cli_deploy(state_file)) == 2
    err = capsys.readouterr().err
    assert f"is in use: held by `python -m infra deploy` (pid {os.getpid()}, since " in err
    assert "--wait-lock SECONDS" in err and "Traceback" not in err
    assert emulator_env.state()["calls"] == calls

    # --wait-lock: it waits (and says so) until the first has finished, then finds that deployment recorded.
    output = Output(capsys)
    second = Worker(lambda: infra_main(cli_deploy(state_file, "--wait-lock", "120")))
    output.until("waiting up to 120 s for the state file")
    assert endpoints(emulator_env) == []  # the first is still held before its first create
    paused.go.set()
    result = first.result()
    assert result.ok
    assert second.result() == 6
    assert "already records deployment " + result.state.deployment_id in output.until("already records")

    state = DeploymentState.load(state_file)
    assert state.deployment_id == result.state.deployment_id
    assert endpoints(emulator_env) == sorted(r.endpoint.name for r in state.endpoints.values())  # two, not four


def test_a_deploy_killed_with_sigkill_leaves_no_lock_behind(emulator_env: EmulatorHandle, state_file: Path,
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    emulator_env.configure(delays={"create_s": 600})  # the endpoint stays Creating: the deploy is mid-wait
    with open(tmp_path / "deploy.err", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "infra", "deploy", "voice", "--role-arn", ROLE_ARN,
                                 "--state-file", str(state_file), "--no-ttl", "--no-smoke", "--poll-seconds", "0.05",
                                 "--wait-timeout", "900"], cwd=ROOT, env=dict(os.environ), stdout=subprocess.DEVNULL,
                                stderr=log)
    try:
        deadline = time.monotonic() + 120
        while not (state_file.exists() and lock_path(state_file).exists()
                   and json.loads(lock_path(state_file).read_text() or "{}").get("pid") == proc.pid
                   and "Creating" in (tmp_path / "deploy.err").read_text()):
            assert proc.poll() is None, (tmp_path / "deploy.err").read_text()
            assert time.monotonic() < deadline, (tmp_path / "deploy.err").read_text()
            time.sleep(0.05)
        assert infra_main(["extend", "--ttl", "2h", "--state-file", str(state_file)]) == 2
        assert f"held by `python -m infra deploy` (pid {proc.pid}, since " in capsys.readouterr().err
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL
    # The kernel released the lock with the process: the next command proceeds (its pid is still written there).
    assert json.loads(lock_path(state_file).read_text())["pid"] == proc.pid
    assert infra_main(["extend", "--ttl", "2h", "--state-file", str(state_file)]) == 0
    assert "now delete themselves at" in capsys.readouterr().out


def test_delete_during_a_deploy_is_refused_or_waits_then_removes_alarms_and_scaling_too(
        emulator_env: EmulatorHandle, state_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paused = Paused()
    first = Worker(lambda: deploy(DeployOptions(role_arn=ROLE_ARN, roles=("voice",), ttl=None, max_instances=2),
                                  state_file=state_file, wait=FAST, progress=paused))
    assert paused.reached.wait(60)
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 2
    assert "held by `python -m infra deploy`" in capsys.readouterr().err
    assert state_file.exists()

    output = Output(capsys)
    deleting = Worker(lambda: infra_main(["delete", "--state-file", str(state_file), "--wait-lock", "120", *CLI_FAST]))
    output.until("waiting up to 120 s for the state file")
    paused.go.set()
    result = first.result()
    assert result.ok  # the deploy finished whole (InService, its rollback alarm, its scaling) before delete began
    name = result.state.record("voice").endpoint.name
    assert deleting.result() == 0
    out = output.read().out
    assert f"endpoint {name}: deleted" in out and f"scalable target endpoint/{name}/variant/AllTraffic: deleted" in out
    assert endpoints(emulator_env) == [] and alarms(emulator_env) == [] and targets(emulator_env) == []
    assert not state_file.exists() and not lock_path(state_file).exists()


def test_sweep_lists_and_deletes_alarms_and_scalable_targets_no_state_file_names(
        emulator_env: EmulatorHandle, state_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert deploy(DeployOptions(role_arn=ROLE_ARN, roles=("voice", "video"), ttl=None, bucket="studio-sweep-scaling"),
                  state_file=state_file, wait=FAST).ok
    state = DeploymentState.load(state_file)
    voice, video = state.record("voice").endpoint.name, state.record("video").endpoint.name
    target = f"endpoint/{video}/variant/AllTraffic"
    assert infra_main(["sweep", "--state-file", str(state_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["orphans"] == []  # all known, all there

    state_file.unlink()  # the state file is lost
    lost = state_file.with_name("lost.json")
    assert infra_main(["sweep", "--state-file", str(lost), "--json"]) == 0
    found = {(o["kind"], o["name"]): o for o in json.loads(capsys.readouterr().out)["orphans"]}
    expected = {("alarm", f"{voice}-errors-rollback"), ("alarm", f"{video}-errors-rollback"),
                ("alarm", f"{video}-has-backlog-without-capacity"), ("scalable target", target),
                ("scaling policy", f"{video}-backlog-per-instance"), ("scaling policy", f"{video}-scale-out-from-zero")}
    assert expected <= set(found)
    assert {found[k]["deployment_id"] for k in expected} == {state.deployment_id}
    assert found[("scaling policy", f"{video}-scale-out-from-zero")]["parent"] == target
    assert infra_main(["sweep", "--state-file", str(lost)]) == 0
    table = capsys.readouterr().out
    assert f"{video}-has-backlog-without-capacity" in table and target in table

    assert infra_main(["sweep", "--state-file", str(lost), "--delete", "--yes", *CLI_FAST]) == 0
    out = capsys.readouterr().out
    assert f"alarm {voice}-errors-rollback: deleted" in out and f"scalable target {target}: deleted" in out
    assert endpoints(emulator_env) == [] and alarms(emulator_env) == [] and targets(emulator_env) == []
    assert emulator_env.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="sagemaker")["ScalingPolicies"] == []


def test_sweep_lists_alarms_and_targets_whose_endpoint_is_gone_even_when_a_state_file_names_them(
        emulator_env: EmulatorHandle, state_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert deploy(DeployOptions(role_arn=ROLE_ARN, roles=("voice",), ttl=None, max_instances=2),
                  state_file=state_file, wait=FAST).ok
    name = DeploymentState.load(state_file).record("voice").endpoint.name
    emulator_env.client("sagemaker").delete_endpoint(EndpointName=name)  # behind infra's back
    deadline = time.monotonic() + 30
    while name in endpoints(emulator_env):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert infra_main(["sweep", "--state-file", str(state_file), "--json"]) == 0
    found = {(o["kind"], o["name"]): o["detail"] for o in json.loads(capsys.readouterr().out)["orphans"]}
    gone = f"its endpoint {name} is gone"
    assert found[("alarm", f"{name}-errors-rollback")] == gone
    assert found[("scalable target", f"endpoint/{name}/variant/AllTraffic")] == gone
    assert found[("scaling policy", f"{name}-invocations-per-instance")] == gone
    assert infra_main(["sweep", "--state-file", str(state_file), "--delete", "--yes", *CLI_FAST]) == 0
    capsys.readouterr()
    assert alarms(emulator_env) == [] and targets(emulator_env) == []
