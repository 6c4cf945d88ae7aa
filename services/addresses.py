"""Where the studio reaches things, each address checked once: a vLLM-Omni server's URL, the history's database
URL, the media's folder or S3 bucket, and the KMS key that encrypts it.

Plain functions over strings (ValueError naming what to write), so the settings' validators (services/settings.py),
the sidebar's Add a server (services/targets.py), the history and the media store check an address the same way.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

SERVER_SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https"}
SERVER_URL_MAX = 2048


def check_server_url(url: str) -> str:
    """A vLLM-Omni server's base URL, normalised (ws/wss become http/https: the clients derive the WebSocket
    address themselves), or ValueError naming what to fix. The studio's server sends requests to it, so only a
    plain base is accepted: http, https, ws or wss; a host; no user name or password; no query or fragment; a
    path of plain segments at most (a server behind a proxy prefix), never `..` or escapes."""
    raw = str(url).strip()
    if not raw or len(raw) > SERVER_URL_MAX:
        raise ValueError(f"a server URL is 1 to {SERVER_URL_MAX} characters, e.g. http://gpu-box:8091")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in raw):
        raise ValueError("a server URL has no spaces or control characters")
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    if scheme not in SERVER_SCHEMES:
        raise ValueError(f"a server URL must start with http:// or https:// (ws:// and wss:// are taken too; "
                         f"got {raw!r}), e.g. http://gpu-box:8091")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError("a server URL carries no user name or password (nothing before @)")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the port in {raw!r} is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise ValueError(f"a server URL names a host, e.g. http://gpu-box:8091 (got {raw!r})")
    if parts.query or parts.fragment or raw.endswith(("?", "#")):
        raise ValueError("a server URL is the server's base only: no ?query or #fragment")
    path = parts.path.rstrip("/")
    if path and not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", path) or any(s in (".", "..") for s in path.split("/")):
        raise ValueError(f"a server URL's path is plain segments at most, like /omni (got {parts.path!r})")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return f"{SERVER_SCHEMES[scheme]}://{host}{'' if port is None else f':{port}'}{path}"


DATABASE_SCHEMES = ("postgresql", "postgresql+psycopg", "sqlite")


def parse_database_url(url: str) -> URL:
    """The `database_url` setting checked: postgresql://user:password@host:port/database (a socket folder as
    ?host=/path) or sqlite:///path; ValueError saying what is wrong (load_settings names the setting). PostgreSQL
    is reached with psycopg 3 (`postgresql+psycopg`), not SQLAlchemy's default psycopg2."""
    from sqlalchemy.engine import make_url  # here: every process reads the settings, few a database URL
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        shown = url.split("@")[-1]  # never a password in a message
        raise ValueError(f"not a database URL: {shown!r}; give postgresql://user:password@host:5432/database, or "
                         "leave it empty for SQLite in the data_dir") from None
    if parsed.drivername not in DATABASE_SCHEMES:
        raise ValueError("the history keeps to PostgreSQL (postgresql://…) or SQLite (sqlite:///path), not "
                         f"{parsed.drivername}://")
    if not parsed.database:
        raise ValueError("the URL names no database: postgresql://user:password@host:5432/<database>")
    return parsed.set(drivername="postgresql+psycopg") if parsed.drivername == "postgresql" else parsed


S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3's general-purpose bucket names
S3_PREFIX_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
MEDIA_URL_EXAMPLE = "s3://my-team-bucket/omni-studio"
KMS_KEY = re.compile(r"(arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:(key|alias)/[A-Za-z0-9/_-]+"
                     r"|alias/[A-Za-z0-9/_-]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
                     r"|mrk-[0-9a-f]{32})")


def check_media_url(url: str) -> str:
    """Where the studio keeps its media, normalised: "" (the folder <data_dir>/media), a folder path, or
    `s3://bucket` / `s3://bucket/prefix` (prefix without its slashes). ValueError naming what to write."""
    raw = str(url).strip()
    if not raw:
        return ""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in raw):
        raise ValueError(f"media_url has no spaces or control characters: write a folder or {MEDIA_URL_EXAMPLE}")
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", raw)
    if scheme is None:
        return raw  # a folder (relative ones are relative to the studio's working folder, as data_dir is)
    if scheme.group(1).lower() != "s3" or not raw[3:].startswith("//"):
        raise ValueError(f"media_url is a folder (e.g. /srv/omni-media, or empty for <data_dir>/media) or an S3 "
                         f"bucket written s3://bucket/prefix, e.g. {MEDIA_URL_EXAMPLE} (got {raw!r})")
    bucket, _, prefix = raw[5:].partition("/")
    if not S3_BUCKET.fullmatch(bucket) or ".." in bucket or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", bucket):
        raise ValueError(f"{bucket!r} in media_url is not an S3 bucket name (3 to 63 lowercase letters, digits, dots "
                         f"and hyphens, starting and ending with a letter or digit), e.g. {MEDIA_URL_EXAMPLE}")
    segments = prefix.strip("/").split("/") if prefix.strip("/") else []
    if "?" in prefix or "#" in prefix or any(not S3_PREFIX_SEGMENT.fullmatch(s) or s in (".", "..") for s in segments):
        raise ValueError(f"the prefix {prefix!r} in media_url is plain segments of letters, digits, '.', '_' and '-' "
                         f"joined by '/' (no '..', no empty segment, no ?query), e.g. {MEDIA_URL_EXAMPLE}")
    return f"s3://{bucket}" + (f"/{'/'.join(segments)}" if segments else "")


def s3_location(media_url: str) -> tuple[str, str] | None:
    """(bucket, prefix) of a checked media_url that names a bucket, else None (a folder)."""
    if not media_url.startswith("s3://"):
        return None
    bucket, _, prefix = media_url[5:].partition("/")
    return bucket, prefix


def check_kms_key(key: str | None) -> str | None:
    """A KMS key (its id, ARN or alias), stripped; None when empty; else ValueError saying how one is written."""
    if key is None or not key.strip():
        return None
    key = key.strip()
    if not KMS_KEY.fullmatch(key):
        raise ValueError(f"{key!r} is not a KMS key: write its id (1234abcd-12ab-34cd-56ef-1234567890ab), its ARN "
                         "(arn:aws:kms:region:account:key/id) or an alias (alias/omni-studio-media)")
    return key
