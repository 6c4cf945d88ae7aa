"""What every media store offers (`MediaStore`), its errors, and the name rule keys are built with."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from protocol.errors import InvalidInput, StudioError

URL_EXPIRES_DEFAULT_S = 300
URL_EXPIRES_MAX_S = 7 * 24 * 3600  # SigV4's longest presigned URL


class MediaError(StudioError):
    """A media file cannot be written, read or removed; the message names the folder or s3://bucket/prefix and what
    to do. It names the server's storage: a store showing it to a viewer logs it and shows its own (as
    services.history.base.read_kept does)."""


class MediaMissing(MediaError):
    """The file a record names is not in the store."""


@dataclass(frozen=True)
class MediaHealth:
    """What `MediaStore.check` found: usable or not, where, and (when not) the message saying why."""

    ok: bool
    where: str
    problem: str | None = None


def plain_name(name: str, what: str = "file name") -> str:
    """`name` as one path segment — no separators, no dot-files, no `.`/`..` — so a name can neither leave its
    record nor collide with a store's temporary files. The history names its files by the same rule
    (services.history.base.safe_name)."""
    if not isinstance(name, str):
        raise InvalidInput(f"a media {what} is text, not {type(name).__name__}")
    if not name or "/" in name or "\\" in name or name in (".", "..") or name.startswith("."):
        raise InvalidInput(f"not a plain file name for the history: {name!r}")
    return name


class MediaStore(ABC):
    """A record's files, under `<where>/<record id>/<name>`. Writes are whole: a reader sees the old file, the new one
    or none, never a part. `where` names the place in messages (a folder path or s3://bucket/prefix)."""

    where: str

    @abstractmethod
    def put(self, record_id: str, name: str, data: bytes) -> None:
        """Write (or replace) one file of the record."""

    @abstractmethod
    def get(self, record_id: str, name: str) -> bytes:
        """One file's bytes; MediaMissing naming the file, the record and the place when it is not there."""

    @abstractmethod
    def exists(self, record_id: str, name: str) -> bool: ...

    @abstractmethod
    def delete_record(self, record_id: str) -> int:
        """Remove every file of the record (none there: 0) and nothing else; how many were removed."""

    @abstractmethod
    def list_record(self, record_id: str) -> list[str]:
        """The record's file names, sorted (none: [])."""

    @abstractmethod
    def url(self, record_id: str, name: str, expires_s: int = URL_EXPIRES_DEFAULT_S, *,
            download_as: str | None = None) -> str | None:
        """A short-lived address the browser can fetch the file from, or None when the studio serves the bytes
        itself (a folder). `download_as`: the browser saves it under that file name instead of showing it."""

    @abstractmethod
    def check(self) -> MediaHealth:
        """Whether the store can be used now: written, read back and removed (a probe file), never raising."""


def check_expiry(expires_s: int) -> int:
    if isinstance(expires_s, bool) or not isinstance(expires_s, int) or not 1 <= expires_s <= URL_EXPIRES_MAX_S:
        raise InvalidInput(f"a media URL lives 1 to {URL_EXPIRES_MAX_S} seconds (7 days); got {expires_s!r}")
    return expires_s
