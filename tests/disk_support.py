"""A real, tiny, full filesystem for tests of a full disk: a tmpfs of a given size, mounted in a private mount
namespace (`unshare --mount`) that only the command run there sees. Needs root (or CAP_SYS_ADMIN) and util-linux's
unshare; tests skip, saying why, where that is not available."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

# $1 the size, $2 the mount point, then the command: it runs with the tmpfs mounted, and the mount ends with it.
_MOUNT_AND_RUN = 'mount -t tmpfs -o "size=$1,mode=0755" tmpfs "$2" || exit 97; shift 2; exec "$@"'


def _command(size: str, mount: Path, argv: Sequence[str]) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _MOUNT_AND_RUN, "sh", size, str(mount),
            *argv]


@functools.cache
def _unavailable() -> str | None:
    if shutil.which("unshare") is None:
        return "a tiny real filesystem needs util-linux's unshare, which is not installed"
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(_command("4k", Path(d), ["true"]), capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        return ("a tiny real filesystem needs a private mount namespace and a tmpfs mount (root or CAP_SYS_ADMIN): "
                f"{p.stderr.strip() or f'exit code {p.returncode}'}")
    return None


def require_tiny_disk() -> None:
    """Skip the test, saying why, when a tiny tmpfs cannot be mounted here."""
    if (why := _unavailable()) is not None:
        pytest.skip(why)


def run_on_tiny_disk(mount: Path, size: str, argv: Sequence[str], **kw) -> subprocess.CompletedProcess[str]:
    """`argv` run with a fresh tmpfs of `size` (e.g. "256k") mounted at `mount` (made if missing), seen by it
    alone; whatever it writes there is gone when it ends."""
    require_tiny_disk()
    mount.mkdir(parents=True, exist_ok=True)
    return subprocess.run(_command(size, mount, argv), capture_output=True, text=True, **kw)
