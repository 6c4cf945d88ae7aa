"""Entry point of the offline engine child process started by services/engine.py.

    python -m services._engine_child --parent-pid PID [python -m offline options...]

Before loading anything heavy it asks Linux to send it SIGTERM when its parent dies
(prctl PR_SET_PDEATHSIG), and exits at once if the parent is already gone; then it runs
`python -m offline` in this process. Doing this in the child avoids `preexec_fn`, which is unsafe
in a multi-threaded parent such as Streamlit.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
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


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "--parent-pid":
        sys.exit("usage: python -m services._engine_child --parent-pid PID [offline options]")
    die_with_parent(int(argv[1]))
    from offline.__main__ import main as offline_main

    offline_main(argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
