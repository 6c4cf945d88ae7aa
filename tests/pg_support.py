"""A real PostgreSQL for the tests: one throwaway cluster per test process (each pytest-xdist worker its own),
and a fresh database per test, copied from a template that is migrated once.

The cluster is Debian's `postgresql` package (initdb, pg_ctl under /usr/lib/postgresql/<version>/bin) in a temp
folder: its data, its log and its socket, on a free port of 127.0.0.1, with durability off (fsync,
synchronous_commit, full_page_writes: a test's data outlives nothing). PostgreSQL refuses to run as root, so as
root (CI) the folder is the `postgres` user's and the binaries run through `runuser -u postgres`. The tests
connect over the socket in that folder. Missing binaries fail the tests that need them, naming the apt-get line.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg
import pytest

from offline.launch import free_port

INSTALL = "apt-get install -y postgresql"
TEMPLATE = "history_template"


def binaries() -> Path:
    """The newest installed PostgreSQL's bin folder; the test fails (not skips) naming the package when none is."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        pytest.fail(f"PostgreSQL's binaries (initdb, pg_ctl) are missing: {INSTALL}", pytrace=False)
    return Path(found[-1]).parent


class Cluster:
    """A running throwaway cluster: `database()` makes a fresh database from the migrated template."""

    def __init__(self) -> None:
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
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-o", options, "-w", "start")
        self.admin = psycopg.connect(host=str(self.root), port=self.port, user=self.user, dbname="postgres",
                                     autocommit=True)
        self.admin.execute(f"CREATE DATABASE {TEMPLATE}")

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

    def migrate_template(self, migrate: object) -> None:
        """Run `migrate(url)` on the template once (it must let go of its connections before the copies)."""
        migrate(self.url(TEMPLATE))  # type: ignore[operator]

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
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
