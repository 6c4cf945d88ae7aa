"""The embedded offline engine, started by the studio itself: once per process, on a free loopback port.

    engine = shared_engine()      # starts `python -m offline` the first time, waits for /health
    engine.url                    # "http://127.0.0.1:<port>"

The engine is a child process that never outlives the studio: it is terminated at interpreter exit,
and on Linux it also gets SIGTERM if the studio dies abruptly (PR_SET_PDEATHSIG, set by the child
itself before it loads anything — see `spawn` and offline/_child.py). If it exits before answering
`/health`, `EngineStartError` carries the tail of its log.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from protocol.errors import StudioError

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
_PORT_ATTEMPTS = 3  # a free port can be taken between probing and binding: retry on another


class StartError(StudioError):
    """A local server did not come up; the message says why."""


class EngineStartError(StartError):
    """The offline engine did not come up; the message says why and where its log is."""


def wait_http_ok(url: str, proc: subprocess.Popen | None = None, *, timeout: float = 60.0,
                 what: str = "the server", log_tail: Any = None) -> None:
    """Poll `url` (loopback, no proxies) until it answers 200. StartError naming `what` when `proc` exits
    first or `timeout` passes; `log_tail()` (optional) is added to the message."""
    def tail() -> str:
        return f"; its log ends with:\n{log_tail()}" if log_tail is not None else ""

    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0, trust_env=False) as http:
        while time.monotonic() < deadline:
            code = proc.poll() if proc is not None else None
            if code is not None:
                raise StartError(f"{what} exited with code {code} before answering {url}{tail()}")
            try:
                if http.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise StartError(f"{what} did not answer {url} within {timeout:.0f} s{tail()}")


def free_port(host: str = HOST) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Engine:
    """A running offline engine child process."""

    url: str
    process: subprocess.Popen
    log_path: Path

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)


def spawn(module: str, args: list[str], *, name: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
          stdout: Any = subprocess.DEVNULL, stderr: Any = subprocess.STDOUT, new_session: bool = False) -> subprocess.Popen:
    """Start `python -m module args` (or `python script.py args`) as a child that never outlives this process, however it ends.

    The child sets PR_SET_PDEATHSIG itself (offline/_child.py). That signal fires when the *thread* that
    forked the child exits, not the process, and Streamlit runs each script run on a short-lived thread:
    so the fork happens on a dedicated thread that then just waits for the child. Every server the studio,
    the tests, the benchmarks and the rehearsal start goes through here. `new_session`: the child gets its own
    session, so a terminal's Ctrl-C (SIGINT to the foreground process group) reaches only this process, which
    then stops the child itself after its own clean-up (the rehearsal, `python -m emulator exec`).
    """
    started = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["proc"] = proc = subprocess.Popen(
                [sys.executable, "-m", "offline._child", "--parent-pid", str(os.getpid()), module, *args],
                cwd=cwd, env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=new_session,
            )
        except BaseException as exc:
            box["error"] = exc
            return
        finally:
            started.set()
        proc.wait()

    threading.Thread(target=run, name=f"child-{name}", daemon=True).start()
    started.wait()
    if "error" in box:
        raise StartError(f"cannot start {name} ({box['error']})")
    return box["proc"]


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """End a child `spawn` started: SIGTERM, then SIGKILL if it is still there after `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _wait_healthy(engine: Engine, timeout: float) -> None:
    try:
        wait_http_ok(f"{engine.url}/health", engine.process, timeout=timeout,
                     what=f"the offline engine (log {engine.log_path})", log_tail=engine.log_tail)
    except StartError as exc:
        engine.stop()
        raise EngineStartError(str(exc)) from None


def start_engine(*, port: int | None = None, timeout: float = START_TIMEOUT_S,
                 env: dict[str, str] | None = None) -> Engine:
    """Start a new offline engine child and wait until it is healthy (use shared_engine() in the app). `env`: settings
    added to this process's environment for the engine (its OMNI_ENGINE_… sizes and limits, say)."""
    last: EngineStartError | None = None
    for _ in range(1 if port else _PORT_ATTEMPTS):
        p = port or free_port()
        fd, name = tempfile.mkstemp(prefix=f"omni-offline-engine-{p}-", suffix=".log")
        os.close(fd)
        with open(name, "ab", buffering=0) as log:
            proc = spawn("offline", ["--host", HOST, "--port", str(p)], name=f"the offline engine on port {p}",
                         stdout=log, env=None if env is None else {**os.environ, **env})
        engine = Engine(url=f"http://{HOST}:{p}", process=proc, log_path=Path(name))
        atexit.register(engine.stop)
        try:
            _wait_healthy(engine, timeout)
            return engine
        except EngineStartError as exc:
            last = exc
            if "address already in use" not in engine.log_tail().lower():
                raise
    assert last is not None
    raise last


class _EngineSlot:
    """Where the studio process keeps its one engine (a child process: one per studio, by design)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine: Engine | None = None

    def get(self) -> Engine:
        with self._lock:
            if self._engine is None or not self._engine.alive:
                self._engine = start_engine()
            return self._engine


_shared = _EngineSlot()


def shared_engine() -> Engine:
    """The process's offline engine, started on first use (and again if it died)."""
    return _shared.get()
