"""The studio's media — the files its records keep (takes, transcripts' recordings, job inputs and outputs,
voices, conversations, load reports) — behind one setting, `media_url` (`OMNI_STUDIO_MEDIA_URL`):

    empty                  <data_dir>/media, today's folder (folder.py)
    /srv/omni-media        another folder, e.g. one every host mounts
    s3://bucket/prefix     a bucket every host of a team studio shares (s3.py); `kms_key_id` (OMNI_STUDIO_KMS_KEY_ID)
                           encrypts its objects with SSE-KMS under that key

    store = open_media_store(settings)
    store.put(record_id, "take.wav", data)     # <where>/<record id>/take.wav, written whole or not at all
    store.get(record_id, "take.wav")           # bytes; MediaMissing "the file take.wav of record … is missing from …"
    store.url(record_id, "take.wav", 300)      # a presigned GET (SigV4) for the browser; None for a folder
    store.delete_record(record_id)             # every file of the record, nothing else
    store.check()                              # MediaHealth: a probe written, read back and removed

Names and record ids are single plain segments (services.history.base.safe_name's rule: no separators, no
dot-files), so a file can never land outside its record.

The rule the history's stores follow, so that a record never points at nothing:

    media is written BEFORE its record commits, and deleted AFTER the record is.

A failure in between leaves, at worst, files no record names (an orphan a sweep can remove), never a record whose
file is gone. So: `put` every file, then commit the row (a failed put means no row); commit the deletion of the row,
then `delete_record` (a failed removal is reported, the record is already gone). The folder store makes `put`
durable before it returns (the file and its folder flushed), so a crash right after the commit still finds it.

Every error is a StudioError a person can act on, naming the folder or s3://bucket/prefix: a full disk
(MediaError), an unwritable folder (MediaError), a missing file (MediaMissing), a missing bucket (ConfigError), access
denied (ServerError, naming the permission), no credentials (ConfigError), an unreachable endpoint
(BackendUnreachable). Those messages name the server's storage: the history shows a viewer its own words and logs
these (services.history.base.read_kept).
"""

from __future__ import annotations

from pathlib import Path

from services.addresses import s3_location
from services.media_store.base import (
    URL_EXPIRES_DEFAULT_S,
    URL_EXPIRES_MAX_S,
    MediaError,
    MediaHealth,
    MediaMissing,
    MediaStore,
    plain_name,
)
from services.media_store.folder import FolderMediaStore
from services.settings import Settings

MEDIA_DIR = "media"  # <data_dir>/media: where media lived before media_url, and where it lives when it is empty

__all__ = [
    "MEDIA_DIR", "URL_EXPIRES_DEFAULT_S", "URL_EXPIRES_MAX_S", "FolderMediaStore", "MediaError", "MediaHealth",
    "MediaMissing", "MediaStore", "open_media_store", "plain_name",
]


def open_media_store(settings: Settings) -> MediaStore:
    """The store `settings.media_url` names (already checked by the settings): makes no network call."""
    where = s3_location(settings.media_url)
    if where is None:
        folder = Path(settings.media_url).expanduser() if settings.media_url else settings.data_dir / MEDIA_DIR
        return FolderMediaStore(folder)
    from services.media_store.s3 import S3MediaStore  # boto3's import only for a studio that uses a bucket

    bucket, prefix = where
    return S3MediaStore(bucket, prefix, region=settings.region, profile=settings.profile,
                        kms_key_id=settings.kms_key_id)
