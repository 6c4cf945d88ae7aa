"""Media in a folder: `<root>/<record id>/<name>`, today's layout (root = <data_dir>/media by default)."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from pathlib import Path

from services.media_store.base import (
    URL_EXPIRES_DEFAULT_S,
    MediaError,
    MediaHealth,
    MediaMissing,
    MediaStore,
    check_expiry,
    plain_name,
)

PART_SUFFIX = ".part"  # a file being written: `.<name>.<random>.part`, a dot-file no list or name can reach


def _full(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


class FolderMediaStore(MediaStore):
    """Each file written to a temporary dot-file beside it, flushed to disk, then renamed over the name (atomic on
    one filesystem), and the folder flushed too: once `put` returns, the file survives a crash, so a record committed
    after it never names a file that is not there."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def _folder(self, record_id: str) -> Path:
        return self.root / plain_name(record_id, "record id")

    def put(self, record_id: str, name: str, data: bytes) -> None:
        folder = self._folder(record_id)
        path = folder / plain_name(name)
        tmp = folder / f".{path.name}.{uuid.uuid4().hex[:8]}{PART_SUFFIX}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)  # a reader sees the old file, the new one or none: never a part
            _sync_folder(folder)
        except OSError as exc:
            _remove(tmp)  # a full disk gets its space back, and the next write its chance
            if _full(exc):
                raise MediaError(f"No space left on device writing {path}: free space on {self.root} (the media "
                                 "folder, media_url) and run it again") from None
            raise MediaError(f"cannot write {path} ({exc.strerror or exc}): check that {self.root} (the media folder, "
                             "media_url) is a writable folder") from None

    def get(self, record_id: str, name: str) -> bytes:
        path = self._folder(record_id) / plain_name(name)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise MediaMissing(f"the file {name} of record {record_id} is missing from {self.root}") from None
        except IsADirectoryError:
            raise MediaMissing(f"the file {name} of record {record_id} is missing from {self.root} (a folder has "
                               "its name)") from None
        except OSError as exc:
            raise MediaError(f"cannot read {path} ({exc.strerror or exc}): check that {self.root} (the media folder, "
                             "media_url) is readable") from None

    def exists(self, record_id: str, name: str) -> bool:
        return (self._folder(record_id) / plain_name(name)).is_file()

    def delete_record(self, record_id: str) -> int:
        folder = self._folder(record_id)
        try:
            count = sum(1 for p in folder.iterdir() if not p.name.startswith("."))
            shutil.rmtree(folder)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise MediaError(f"cannot remove {folder} ({exc.strerror or exc}): check the permissions on "
                             f"{self.root}, or remove that folder by hand") from None
        return count

    def list_record(self, record_id: str) -> list[str]:
        folder = self._folder(record_id)
        try:
            return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".") and p.is_file())
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise MediaError(f"cannot list {folder} ({exc.strerror or exc}): check the permissions on "
                             f"{self.root}") from None

    def url(self, record_id: str, name: str, expires_s: int = URL_EXPIRES_DEFAULT_S, *,
            download_as: str | None = None) -> str | None:
        plain_name(record_id, "record id")
        plain_name(name)
        check_expiry(expires_s)
        return None  # the studio serves a folder's bytes itself

    def check(self) -> MediaHealth:
        probe = self.root / f".probe-{uuid.uuid4().hex[:12]}{PART_SUFFIX}"
        data = uuid.uuid4().bytes
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(data)
            if probe.read_bytes() != data:
                return MediaHealth(False, self.where, f"{self.root} gave back other bytes than were written to it")
            probe.unlink()
        except OSError as exc:
            _remove(probe)
            why = "no space left on the device" if _full(exc) else (exc.strerror or str(exc))
            return MediaHealth(False, self.where, f"the media folder {self.root} cannot be written ({why}): point "
                                                  "media_url (OMNI_STUDIO_MEDIA_URL) at a writable folder, or free space")
        return MediaHealth(True, self.where)


def _remove(path: Path) -> None:
    """Remove a temporary file if it is there (its folder may not be: the error being handled says why)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _sync_folder(folder: Path) -> None:
    """Flush the folder's entries (the rename) to disk; a filesystem that cannot (some network ones) is let be."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
