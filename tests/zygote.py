"""A fork server for the tests' command-line runs (tests/cli_support.py starts one per test process).

    python tests/zygote.py SOCKET

It imports the commands' modules once (`python -m services`, `python -m infra`, `python -m emulator`: about half a
second of every run is the interpreter importing them), then serves on the Unix socket SOCKET: each connection
is one command. The request is one JSON line — {"argv": [...], "cwd": ..., "env": {...}, "stdin": path,
"stdout": path, "stderr": path} — and the server forks a handler, which forks the command's own process and
answers `{"pid": N}` at once, then `{"exit": CODE}` when it ends (CODE negative: killed by that signal, as
subprocess reports it).

The command's process is a real one of its own: its own pid, environment, working folder, standard streams (the
files named), argv, signal handlers back at their defaults, and `python -m MODULE`'s own entry (runpy with
run_name="__main__"). What differs from a fresh interpreter is only that the modules were already imported — so a
test of what a command imports at start, or of the interpreter's own start-up, runs a real subprocess instead.
The server is single-threaded (a fork of a process with threads would copy their locks held), stops when its
parent (the test process) dies, and ends at EOF of its socket's listener.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys

PRELOAD = ("services.cli", "services.cli.common", "services.cli.speech", "services.cli.voices", "services.cli.listen",
           "services.cli.converse", "services.cli.media", "services.cli.load", "services.cli.eval",
           "services.cli.history", "infra.cli", "emulator.config", "emulator.launch", "services.history", "numpy", "httpx",
           "boto3")


def _run(request: dict) -> None:
    """In the command's process: become it, run it, exit with its code (never returns)."""
    code = 1
    try:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_DFL if signum != signal.SIGINT else signal.default_int_handler)
        os.setpgid(0, 0)  # its own group, as a subprocess the tests start would get with start_new_session
        for fd, path, mode in ((0, request["stdin"], os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                               (2, request["stderr"], os.O_WRONLY)):
            opened = os.open(path, mode)
            os.dup2(opened, fd)
            os.close(opened)
        # the streams as Python makes them for files: stdout block-buffered, stderr line-buffered, UTF-8
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        if argv[:1] != ["-m"] or len(argv) < 2:
            raise SystemExit(f"zygote: only `python -m MODULE ...` runs here, not {argv!r}")
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = request["cwd"]
        import runpy

        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 — as Python itself would: the traceback, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def _handle(conn: socket.socket) -> None:
    """In a handler process: start the command, say its pid, wait for it, say how it ended (never returns)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server ignores it (reaps itself); this one waits
    try:
        request = json.loads(conn.makefile("r", encoding="utf-8").readline())
        pid = os.fork()
        if pid == 0:
            conn.close()
            _run(request)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
    finally:
        os._exit(0)


def main(path: str) -> None:
    import ctypes

    for name in PRELOAD:
        __import__(name)
    try:  # stop when the test process that started this server dies (Linux: PR_SET_PDEATHSIG)
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel: no zombies
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        if os.fork() == 0:
            server.close()
            _handle(conn)
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1])
