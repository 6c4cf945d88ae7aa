"""Run a module (or a script) as a child that never outlives its parent (started by `offline.launch.spawn`).

    python -m offline._child --parent-pid PID MODULE|SCRIPT.py [ARGS...]

Before loading anything heavy it asks Linux to send it SIGTERM when its parent dies (prctl
PR_SET_PDEATHSIG), and exits at once if the parent is already gone; then it runs `python -m MODULE ARGS`
(or `python SCRIPT.py ARGS`) in this process. Doing this in the child avoids `preexec_fn`, which is unsafe in a multi-threaded parent
such as Streamlit. SIGTERM is turned into SystemExit so the module's own clean-up (`finally`, context
managers, atexit) runs, and its own children are told in turn.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import runpy
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            print(f"warning: prctl(PR_SET_PDEATHSIG) failed: errno {ctypes.get_errno()}", file=sys.stderr)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        sys.exit(0)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[0] != "--parent-pid":
        sys.exit("usage: python -m offline._child --parent-pid PID MODULE [ARGS...]")
    die_with_parent(int(argv[1]))
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    target, args = argv[2], argv[3:]
    sys.argv = [target, *args]
    if target.endswith(".py"):
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
