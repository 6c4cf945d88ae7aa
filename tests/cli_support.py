"""`run_cli`: `subprocess.run` for the tests' `python -m services|infra|emulator …` runs, through a fork server.

    from tests.cli_support import run_cli
    p = run_cli([sys.executable, "-m", "services", "speak", ...], cwd=ROOT, env=env, capture_output=True,
                text=True, timeout=60, input="text")          # a subprocess.CompletedProcess, as subprocess.run's

About 230 command runs in the suite each spent ~0.5 s of CPU importing the same modules before doing anything;
on a 2-core machine that is close to a minute of the suite's wall time. Each test process starts one server
(tests/zygote.py) that has imported them, and every run is a process forked from it: its own pid, environment,
working folder, standard streams and exit code, `python -m MODULE`'s own entry — a real process, started warm.
Anything else (another program, `-c`, a run that is not captured) goes to `subprocess.run` unchanged, and a
test whose subject is a command's own start (what it imports, how the interpreter starts) calls
`subprocess.run` itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WARM = ("services", "infra", "emulator")  # the modules tests/zygote.py has imported
_lock = threading.Lock()
_server: dict[int, tuple[subprocess.Popen, str]] = {}  # per test process (pid): the server and its socket


def _socket() -> str:
    """This test process's fork server's socket (started on first use)."""
    with _lock:
        running = _server.get(os.getpid())
        if running is not None and running[0].poll() is None:
            return running[1]
        folder = tempfile.mkdtemp(prefix="omni-zygote-")
        path = os.path.join(folder, "s")
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "zygote.py"), path], cwd=ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            proc.kill()
            raise RuntimeError("the tests' fork server (tests/zygote.py) did not start")
        _server[os.getpid()] = (proc, path)
        return path


def run_cli(args: Sequence[str], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
            input: str | bytes | None = None, timeout: float | None = None, capture_output: bool = False,
            text: bool = False, check: bool = False, **other: Any) -> subprocess.CompletedProcess:
    """As `subprocess.run(args, ...)`; a captured `python -m services|infra|emulator` run is forked warm."""
    argv = [os.fsdecode(a) for a in args]  # bytes as Python's start-up decodes them (surrogateescape)
    warm = (argv[:2] == [sys.executable, "-m"] and len(argv) > 2 and argv[2].split(".")[0] in WARM
            and capture_output and not other)
    if not warm:
        return subprocess.run(args, cwd=cwd, env=env, input=input, timeout=timeout, capture_output=capture_output,
                              text=text, check=check, **other)
    with tempfile.TemporaryDirectory(prefix="omni-cli-") as tmp:
        streams = {name: os.path.join(tmp, name) for name in ("stdin", "stdout", "stderr")}
        data = input.encode() if isinstance(input, str) else (input or b"")
        Path(streams["stdin"]).write_bytes(data)
        Path(streams["stdout"]).touch()
        Path(streams["stderr"]).touch()
        request = {"argv": argv[1:], "cwd": str(cwd or os.getcwd()), "env": dict(os.environ if env is None else env),
                   **streams}
        code = _call(request, argv, timeout, streams, text)
        out, err = (Path(streams[n]).read_bytes() for n in ("stdout", "stderr"))
    done = subprocess.CompletedProcess(args, code, *((out.decode(), err.decode()) if text else (out, err)))
    if check:
        done.check_returncode()
    return done


def _call(request: dict, argv: list[str], timeout: float | None, streams: dict[str, str], text: bool) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(_socket())
        conn.sendall(json.dumps(request).encode() + b"\n")
        answers = conn.makefile("r", encoding="utf-8")
        conn.settimeout(60)  # the fork itself
        pid = json.loads(answers.readline())["pid"]
        conn.settimeout(timeout)
        try:
            line = answers.readline()
        except TimeoutError:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = (Path(streams[n]).read_bytes() for n in ("stdout", "stderr"))
            raise subprocess.TimeoutExpired(argv, timeout or 0, *((out.decode(), err.decode()) if text else (out, err)))
        return int(json.loads(line)["exit"])
