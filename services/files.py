"""Reading a file the user names: a prompts file, a SPEC, a reference recording or image, a ratings CSV.

`read_user_file(path, what=..., limit=...)` reads regular files only, and at most `limit` bytes (the limits are
in protocol/limits.py). Without it `/dev/zero` is read until memory runs out and a FIFO waits forever for a
writer. Every refusal is an InvalidInput naming the file and, for size, the limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from protocol.errors import InvalidInput

# What a path that is not a regular file is, as a person calls it.
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def read_user_file(path: Path | str, *, what: str, limit: int, hint: str = "") -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them.

    `what` names the file in messages (e.g. "--audio", "prompts_file"); `hint` (e.g. "; give a recording file")
    ends the message when the file cannot be read at all. InvalidInput for a missing or unreadable file, for
    anything but a regular file (a folder, a FIFO, a device such as /dev/zero, a socket) and for a file over
    `limit` bytes (its size checked before reading, and again while reading, in case it grows).
    """
    path = Path(path)
    try:
        # stat first: a FIFO or a device is refused without being opened (opening a FIFO waits for a writer)
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(what, path, mode, hint)
        # O_NONBLOCK: should the path be swapped for a FIFO after the stat, opening it still does not wait
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {path} ({exc.strerror or exc}){hint}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(what, path, info.st_mode, hint)
        if info.st_size > limit:
            raise _too_large(what, path, info.st_size, limit)
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise InvalidInput(f"cannot read {what} {path} ({exc.strerror or exc}){hint}") from None
    if len(data) > limit:
        raise _too_large(what, path, None, limit)
    return data


def _not_regular(what: str, path: Path, mode: int, hint: str) -> InvalidInput:
    return InvalidInput(f"cannot read {what} {path}: it is {_kind(mode)}, not a regular file{hint or '; give a file'}")


def _too_large(what: str, path: Path, size: int | None, limit: int) -> InvalidInput:
    got = f"it is {_size(size)}" if size is not None else "it grew while being read"
    return InvalidInput(f"cannot read {what} {path}: {got}, over the limit of {_size(limit)}; give a smaller file")
