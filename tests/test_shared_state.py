"""A team studio's deployment state and lock in its PostgreSQL database (infra/shared_state.py), on the SageMaker
emulator and this test process's PostgreSQL cluster.

Two replicas are two runners with their own state file (in folders of their own, as on two hosts: no flock is
shared) and their own connection pool to one database. Their Endpoints pages press Deploy at once: one deploys, the
other is refused naming the holder, and sees the deployment the first made; a replica killed while it holds the lock
leaves no lock behind; `python -m infra state import|export` moves a CLI deployment into the team's database and
back, bytes unchanged, and never over another deployment unless told.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from infra.actions import ActionRunner
from infra.errors import StateLocked
from infra.lock import StateLock, adopt
from infra.model import DeployOptions
from infra.progress import WaitSettings
from infra.shared_state import SharedState
from infra.state import DeploymentState
from services.access import Principal
from services.history.db import engine, shown
from tests.cli_support import run_cli

if TYPE_CHECKING:
    from tests.emulator_support import EmulatorHandle
    from bench.pg_cluster import Cluster

pytest_plugins = ["tests.emulator_support"]
ROOT = Path(__file__).resolve().parent.parent
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"
FAST = WaitSettings(poll_s=0.05, timeout_s=60, delete_timeout_s=60)
ADMIN = Principal(id="ada@example.com", role="admin", name="Ada")
NAME = "team-state.json"


@pytest.fixture
def database(pg_cluster: Cluster) -> Iterator[str]:
    name = pg_cluster.database()
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.drop(name)


class Replica:
    """One replica's view: its own state file copy and its own pool to the team's database."""

    def __init__(self, folder: Path, url: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.state_file = folder / NAME
        self.engine = engine(url, folder)
        self.shared = SharedState(self.engine, shown(self.engine))
        self.runner = ActionRunner(self.state_file, shared=self.shared)

    def page_run(self) -> DeploymentState | None:
        """What its Endpoints page reads on a run: its copy brought up to date first (ui/resources.py)."""
        self.shared.pull(self.state_file)
        return DeploymentState.load(self.state_file) if self.state_file.exists() else None


def wait_done(runner: ActionRunner, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while runner.busy:
        assert time.monotonic() < deadline, runner.current()
        time.sleep(0.05)


def endpoints(handle: EmulatorHandle) -> list[str]:
    return sorted(e["EndpointName"] for e in handle.client("sagemaker").list_endpoints()["Endpoints"])


def test_two_replicas_press_deploy_at_once_one_deploys_the_other_names_it(emulator_env: EmulatorHandle,
                                                                          database: str, tmp_path: Path) -> None:
    a, b = Replica(tmp_path / "a", database), Replica(tmp_path / "b", database)
    emulator_env.configure(delays={"create_s": 600})  # A's endpoint stays Creating: A holds the lock meanwhile
    options = DeployOptions(role_arn=ROLE_ARN, roles=("voice",), ttl=None)
    a.runner.deploy(options, actor=ADMIN, wait=FAST, smoke=False)
    deadline = time.monotonic() + 60
    while not (a.state_file.exists() and endpoints(emulator_env)):
        assert time.monotonic() < deadline, a.runner.current()
        time.sleep(0.05)

    with pytest.raises(StateLocked) as refused:  # B's Deploy, at once: no second deployment
        b.runner.deploy(options, actor=ADMIN, wait=FAST, smoke=False)
    said = str(refused.value)
    assert f"deployment state {NAME} (shared in {a.shared.where}) is in use" in said
    assert "`python -m infra deploy` from the studio's Endpoints page (pid" in said
    assert len(endpoints(emulator_env)) == 1

    seen = b.page_run()  # B's page shows the deployment A is making: every planned name, A's endpoint Creating
    assert seen is not None and seen.deployment_id == DeploymentState.load(a.state_file).deployment_id
    assert seen.endpoints["voice"].endpoint.name in endpoints(emulator_env)

    a.runner.stop(actor=ADMIN)  # A stops waiting (what it made stays recorded) and lets the lock go
    wait_done(a.runner)
    emulator_env.configure(delays={"create_s": 0})
    b.runner.delete(actor=ADMIN, wait=FAST)  # now B may: it deletes what A made, from its own copy
    wait_done(b.runner)
    assert b.runner.current().ok, b.runner.current()
    assert endpoints(emulator_env) == [] and not b.state_file.exists()
    assert a.page_run() is None and not a.state_file.exists()  # A's copy follows: the deployment is gone


def test_a_replica_killed_while_it_holds_the_lock_leaves_no_lock(database: str, tmp_path: Path) -> None:
    b = Replica(tmp_path / "b", database)
    holder = ("import sys, time; from pathlib import Path; from infra.lock import StateLock; "
              "from infra.shared_state import SharedState; from services.history.db import engine; "
              "e = engine(sys.argv[1], Path(sys.argv[2])); "
              "StateLock(Path(sys.argv[2]) / sys.argv[3], 'python -m infra deploy', via='replica A', "
              "shared=SharedState(e, 'db')).acquire(); print('held', flush=True); time.sleep(600)")
    (tmp_path / "a").mkdir()
    proc = subprocess.Popen([sys.executable, "-c", holder, database, str(tmp_path / "a"), NAME], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(StateLocked) as refused:
            StateLock(b.state_file, "python -m infra delete", shared=b.shared).acquire()
        assert f"from replica A (pid {proc.pid}" in str(refused.value)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    # The server ended A's session with its process, and its lock with it: B takes it (waiting for the server to
    # notice the closed connection, which it does at once on a local socket).
    with adopt(StateLock(b.state_file, "python -m infra delete", shared=b.shared).acquire(wait_s=30)):
        pass


def test_state_import_and_export_move_a_deployment_unchanged_and_never_over_another(
        emulator_env: EmulatorHandle, database: str, tmp_path: Path) -> None:
    cli_file = tmp_path / "cli" / NAME
    deploy = run_cli([sys.executable, "-m", "infra", "deploy", "voice", "--role-arn", ROLE_ARN, "--state-file",
                      str(cli_file), "--no-ttl", "--no-smoke", "--poll-seconds", "0.05"], cwd=ROOT,
                     capture_output=True, text=True)
    assert deploy.returncode == 0, deploy.stderr
    env = {**os.environ, "OMNI_STUDIO_DATABASE_URL": database}

    def state(*args: str) -> subprocess.CompletedProcess:
        return run_cli([sys.executable, "-m", "infra", "state", *args], cwd=ROOT, env=env, capture_output=True,
                       text=True)

    imported = state("import", "--state-file", str(cli_file))
    deployment_id = json.loads(cli_file.read_text())["deployment_id"]
    assert imported.returncode == 0, imported.stderr
    assert f"imported deployment {deployment_id} from {cli_file}" in imported.stdout
    replica = Replica(tmp_path / "replica", database)  # the team studio's replica now runs it
    assert replica.page_run() is not None and replica.state_file.read_bytes() == cli_file.read_bytes()

    out_file = tmp_path / "elsewhere" / NAME
    exported = state("export", "--state-file", str(out_file))
    assert exported.returncode == 0, exported.stderr
    assert out_file.read_bytes() == cli_file.read_bytes()

    other = tmp_path / "other" / NAME  # another deployment under the same name: refused, naming both
    other.parent.mkdir()
    other.write_text(cli_file.read_text().replace(deployment_id, "d-another"))
    refused = state("import", "--state-file", str(other))
    assert refused.returncode == 2
    assert f"already holds deployment {deployment_id}" in refused.stderr and "--replace" in refused.stderr
    assert state("export", "--state-file", str(other)).returncode == 2  # nor over another deployment's file
    assert "d-another" in other.read_text()

    no_db = run_cli([sys.executable, "-m", "infra", "state", "import", "--state-file", str(cli_file)], cwd=ROOT,
                    env={k: v for k, v in env.items() if k != "OMNI_STUDIO_DATABASE_URL"}, capture_output=True,
                    text=True)
    assert no_db.returncode == 2 and "--database-url" in no_db.stderr
