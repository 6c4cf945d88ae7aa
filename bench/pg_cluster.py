"""A throwaway PostgreSQL server: for the history tests (tests/conftest.py's `pg_cluster`: one cluster per test
process, each pytest-xdist worker its own, and a fresh database per test copied from a template migrated once) and
the benches that measure on PostgreSQL (bench/history_backends.py, bench/replicas.py).

    cluster = Cluster()            # or Cluster(durable=True): PostgreSQL's own durability, for a benchmark
    url = cluster.url(cluster.database())
    ...
    cluster.stop()

The cluster is Debian's `postgresql` package (initdb, postgres under /usr/lib/postgresql/<version>/bin) in a temp
folder: its data, its log and its socket, on a free port of 127.0.0.1, by default with durability off (fsync,
synchronous_commit, full_page_writes: a test's data outlives nothing). PostgreSQL refuses to run as root, so as
root (CI) the folder is the `postgres` user's and the binaries run through `runuser -u postgres`. The server is
a child that dies with the process that started it however it ends, like every server the tests start. Clients
connect over the socket in that folder. Missing binaries raise MissingPostgres, naming the apt-get line (a test
that needs the cluster then fails with it: never a skip).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from offline.launch import free_port

INSTALL = "apt-get install -y postgresql"
TEMPLATE = "history_template"
DIES_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]  # util-linux


class MissingPostgres(RuntimeError):
    """PostgreSQL's binaries are not installed; the message names the package."""


def binaries() -> Path:
    """The newest installed PostgreSQL's bin folder; MissingPostgres naming the package when none is."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise MissingPostgres(f"PostgreSQL's binaries (initdb, postgres) are missing: {INSTALL}")
    return Path(found[-1]).parent


class Cluster:
    """A running throwaway cluster: `database()` makes a fresh database from the migrated template."""

    def __init__(self, *, durable: bool = False) -> None:
        """`durable`: PostgreSQL's own defaults (every commit flushed to disk), for a benchmark; else durability
        off, as a test's throwaway data needs."""
        self.bin = binaries()
        self.root = Path(tempfile.mkdtemp(prefix="omni-pg-"))
        self.as_root = os.geteuid() == 0
        self.user = "postgres" if self.as_root else pwd.getpwuid(os.geteuid()).pw_name
        if self.as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.port = free_port()
        self._run("initdb", "-D", str(self.root / "data"), "-U", self.user, "-A", "trust", "-E", "UTF8",
                  "--locale=C.UTF-8", "--no-sync", "--no-instructions")
        # the server is a child that dies with this process, however it ends (setpriv --pdeathsig at each step:
        # runuser dies with us, postgres with runuser), so a killed test run leaves no cluster behind
        server = [str(self.bin / "postgres"), "-D", str(self.root / "data"), "-p", str(self.port), "-k",
                  str(self.root), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"]
        if not durable:
            server += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        command = [*DIES_WITH_PARENT, *server]
        if self.as_root:
            command = [*DIES_WITH_PARENT, "runuser", "-u", "postgres", "--", *command]
        self.log = (self.root / "log").open("wb")
        self.server = subprocess.Popen(command, cwd=self.root, stdin=subprocess.DEVNULL, stdout=self.log,
                                       stderr=subprocess.STDOUT)
        self.admin = self._connect_when_up()
        self.admin.execute(f"CREATE DATABASE {TEMPLATE}")

    def _connect_when_up(self) -> psycopg.Connection:
        deadline = time.monotonic() + 60
        while True:
            try:
                return psycopg.connect(host=str(self.root), port=self.port, user=self.user, dbname="postgres",
                                       autocommit=True, connect_timeout=5)
            except psycopg.OperationalError:
                if self.server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostgreSQL did not start: " + (self.root / "log").read_text()[-2000:]) from None
                time.sleep(0.05)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.root)
        if done.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr or done.stdout}\n{log[-2000:]}")

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@/{database}?host={self.root}&port={self.port}"

    def database(self, template: str = TEMPLATE) -> str:
        """A fresh database, a copy of the migrated template (template1: an empty one): its name."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.admin.execute(f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY")
        return name

    def drop(self, name: str) -> None:
        self.admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        try:
            self.admin.close()
            pid = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGINT)  # postgres's fast shutdown: its connections ended (runuser then exits too)
            try:
                self.server.wait(30)
            except subprocess.TimeoutExpired:
                self.server.kill()  # and postgres with it (its parent-death signal)
                self.server.wait()
        finally:
            self.log.close()
            shutil.rmtree(self.root, ignore_errors=True)
