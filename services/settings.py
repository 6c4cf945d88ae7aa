"""Studio settings: one validated object from environment variables and an optional `studio.toml`.

Precedence: environment (`OMNI_STUDIO_<FIELD>`) > `studio.toml` (the file `OMNI_STUDIO_CONFIG` names, else
./studio.toml when there is one; `OMNI_STUDIO_CONFIG=` set empty reads no file) > defaults. The defaults
run fully offline on the embedded engine. pydantic-settings reads both sources; `load_settings` turns
whatever is wrong into one ConfigError naming the setting and where it was read from.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from protocol.catalog import PAGE_NAMES
from protocol.errors import ConfigError
from protocol.sagemaker import DEFAULT_REGION, ENDPOINT_NAME
from services.access import AccessPolicy
from services.kinds import BackendName

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

ENV_PREFIX = "OMNI_STUDIO_"
CONFIG_ENV = ENV_PREFIX + "CONFIG"
DEFAULT_CONFIG_FILE = "studio.toml"
ICE_EXAMPLE = '[{"urls": "stun:stun.example.org:3478"}]'


class IceServer(BaseModel):
    """One STUN/TURN entry for WebRTC, as RTCIceServer expects it."""

    urls: list[str] | str
    username: str | None = None
    credential: str | None = None


SERVER_SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https"}
SERVER_URL_MAX = 2048

PageName = Literal[PAGE_NAMES]  # type: ignore[valid-type]  # the catalog's pages


class DemoMode(BaseModel):
    """A studio locked for a customer-facing screen: only these pages, these voices, no uploads."""

    model_config = {"extra": "forbid"}
    pages: list[PageName] = Field(default_factory=lambda: ["voice"], min_length=1)
    voices: list[str] = Field(default_factory=list)  # empty: every voice the target offers
    uploads: bool = False  # reference images, voice recordings (so no cloning)
    title: str | None = None  # shown instead of "Omni Studio"

    def voices_shown(self, voices: list[str]) -> list[str]:
        """The target's voices this demo offers, in the demo's order (matched case-insensitively)."""
        if not self.voices:
            return voices
        have = {v.lower(): v for v in voices}
        shown = [have[v.lower()] for v in self.voices if v.lower() in have]
        if not shown:
            raise ConfigError(f"demo.voices {self.voices} names none of this target's voices ({', '.join(voices)}); "
                              "set demo.voices to some of them")
        return shown

    def task_types_shown(self, task_types: tuple[str, ...]) -> tuple[str, ...]:
        """Without uploads there is no reference recording, so no cloning (Base)."""
        return tuple(t for t in task_types if self.uploads or t != "Base")


class ServerEntry(BaseModel):
    """A vLLM-Omni server an admin registered in the settings (`[[servers]]` in studio.toml): the studio's
    closed set of targets (services/targets.py) offers it by its name."""

    model_config = {"extra": "forbid"}
    url: str
    name: str | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return check_server_url(v)


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


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="forbid")

    # Which backend the studio talks to. `offline` starts the embedded engine on 127.0.0.1.
    backend: BackendName = "offline"
    # `omni`: any vLLM-Omni server, e.g. http://gpu-box:8091
    omni_url: str | None = None
    # More vLLM-Omni servers an admin registered ([[servers]] url, name): with omni_url and the servers added on
    # the sidebar, the only URLs the studio's server sends requests to (services/targets.py).
    servers: list[ServerEntry] = Field(default_factory=list)
    # Where the history database and generated files live.
    data_dir: Path = Path(".studio-data")
    # The history's database: empty for SQLite at <data_dir>/history.sqlite3; postgresql://user:password@host:5432/db
    # for a server a team shares (docs/storage.md).
    database_url: str = ""
    # How long a replica holds a video job it runs without renewing: when it dies, another replica takes the job
    # over this long after its last renewal (services/history/jobs.py).
    job_lease_s: float = Field(default=60.0, ge=1.0, le=3600.0)
    # Where the media (the records' files) live: empty = <data_dir>/media; a folder; or s3://bucket/prefix, shared by
    # every studio host (services/media_store). kms_key_id: SSE-KMS for that bucket's objects (else the bucket's own
    # default encryption); not the same setting as kms_key, which is the SageMaker async requests' key.
    media_url: str = ""
    kms_key_id: str | None = None
    # WebRTC ICE servers: empty for local use (no outbound STUN); STUN/TURN entries for remote users.
    ice_servers: list[IceServer] = Field(default_factory=list)
    # Timeouts (seconds)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    request_timeout_s: float = Field(default=120.0, gt=0)

    # SageMaker backend
    region: str = DEFAULT_REGION
    profile: str | None = None
    voice_endpoint: str | None = None
    # The model behind the voice endpoint (e.g. Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice), for credentials that may
    # invoke endpoints but not describe them; else the state file's, else looked up (DescribeEndpoint …).
    voice_model: str | None = None
    image_endpoint: str | None = None
    video_endpoint: str | None = None
    listen_endpoint: str | None = None  # opt-in (`python -m infra deploy --with listen`)
    omni_endpoint: str | None = None  # opt-in (`python -m infra deploy --with omni`): Qwen3-Omni, multi-GPU
    sound_endpoint: str | None = None  # opt-in (`python -m infra deploy --with sound`): Stable Audio Open
    # SageMaker endpoints serving streaming /v1/chat/completions that Converse's reply may use, besides the omni
    # endpoint: an admin names them here (the closed set of targets, services/targets.py).
    chat_endpoints: list[str] = Field(default_factory=list)
    bucket: str | None = None
    prefix: str = "omni-studio"
    kms_key: str | None = None
    state_file: Path = Path(".vllm_omni_media_state.json")
    # The endpoints page: how often deploy/resume/delete describe the endpoints (real ones take ~10 min;
    # the rehearsal's emulator seconds), and whether the cost banner looks for running endpoints.
    infra_poll_s: float = Field(default=15.0, gt=0)
    cost_banner: Literal["auto", "always", "off"] = "auto"  # auto: when a state file exists or on SageMaker

    # Team studio (docs/team.md): who gets which role once signed in ([access] in studio.toml), and the demo
    # lock for customer-facing screens ([demo]).
    access: AccessPolicy = Field(default_factory=AccessPolicy)
    demo: DemoMode | None = None

    @field_validator("chat_endpoints")
    @classmethod
    def _endpoint_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not ENDPOINT_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a SageMaker endpoint name: letters, digits and hyphens, at most "
                                 "63, starting and ending with a letter or digit")
        return v

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, v: str) -> str:
        v = v.strip()
        if v:
            parse_database_url(v)  # ValueError: what is wrong (load_settings names the setting and where it was read)
        return v

    @field_validator("media_url")
    @classmethod
    def _media_url(cls, v: str) -> str:
        return check_media_url(v)

    @field_validator("kms_key_id")
    @classmethod
    def _kms_key_id(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None or not v.strip():
            return None
        v = v.strip()
        if not KMS_KEY.fullmatch(v):
            raise ValueError(f"{v!r} is not a KMS key: write its id (1234abcd-12ab-34cd-56ef-1234567890ab), its ARN "
                             "(arn:aws:kms:region:account:key/id) or an alias (alias/omni-studio-media)")
        if "media_url" in info.data and s3_location(info.data["media_url"]) is None:  # (a bad media_url: its own error)
            raise ValueError("kms_key_id encrypts the media bucket's objects, and media_url names no bucket: set "
                             f"media_url to s3://bucket/prefix (e.g. {MEDIA_URL_EXAMPLE}) or leave kms_key_id empty")
        return v

    @field_validator("omni_url")
    @classmethod
    def _url_shape(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        return check_server_url(v)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   *_: PydanticBaseSettingsSource, **__: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        # `Settings(...)` is its arguments over the defaults; load_settings adds the environment and studio.toml.
        return (init_settings,)

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with some fields changed, validated again (e.g. from CLI flags or a sidebar picker)."""
        data = self.model_dump(exclude_unset=True)  # what was never set stays a default (see model_fields_set)
        data.update({k: v for k, v in changes.items() if v is not None})
        try:
            return Settings(**data)
        except ValidationError as exc:
            raise _config_error(exc, lambda field: (field, " (override)")) from None


class _Environment(EnvSettingsSource):
    """The OMNI_STUDIO_* variables of a given environment (os.environ unless a test passes its own)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        super().__init__(Settings)
        self.env_vars = parse_env_vars(environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{ENV_PREFIX}{field_name.upper()} (environment variable) must be JSON, "
                              f"e.g. '{ICE_EXAMPLE}' ({exc})") from None


def _config_path(environ: Mapping[str, str], config_file: Path | None) -> Path | None:
    """The settings file to read, or None. A file named on purpose must be there; ./studio.toml may be absent."""
    if config_file is not None:
        path = Path(config_file).expanduser()
        if not path.is_file():
            raise ConfigError(f"settings file {path} {'is a folder' if path.is_dir() else 'does not exist'}")
        return path
    named = environ.get(CONFIG_ENV)
    if named is None:
        path = Path(DEFAULT_CONFIG_FILE)
        return path if path.is_file() else None
    if named == "":
        return None  # set empty on purpose: no settings file at all
    path = Path(named).expanduser()
    if path.is_dir():
        raise ConfigError(f"{CONFIG_ENV} names {path}, which is a folder: name a TOML settings file "
                          f"(e.g. {path / DEFAULT_CONFIG_FILE}), or unset {CONFIG_ENV} to read ./{DEFAULT_CONFIG_FILE}")
    if not path.is_file():
        raise ConfigError(f"{CONFIG_ENV} names {path}, which does not exist: create it, point {CONFIG_ENV} at "
                          f"your settings file, or unset it to read ./{DEFAULT_CONFIG_FILE}")
    return path


def _toml(path: Path) -> TomlConfigSettingsSource:
    shown = path.absolute()
    try:
        return TomlConfigSettingsSource(Settings, toml_file=path)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"settings file {shown} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"settings file {shown} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                          "save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"settings file {shown} cannot be read ({exc.strerror or exc})") from None


def _config_error(exc: ValidationError, where: Callable[[str], tuple[str, str]]) -> ConfigError:
    """One message for every problem pydantic found, each naming the setting and where it came from:
    `where(field)` gives the setting's name there (a variable, a key) and the place (" in /path/studio.toml")."""
    problems = []
    for e in exc.errors():
        loc = [str(p) for p in e["loc"]] or ["settings"]
        name, place = where(loc[0])
        name += "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc[1:])  # e.g. ice_servers[0].urls
        if e["type"] == "extra_forbidden":
            known = ", ".join(Settings.model_fields)
            problems.append(f"{name}{place}: not a studio setting (the settings are: {known})")
            continue
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] != "value_error" and isinstance(e.get("input"), str | int | float):
            msg += f" (got {e['input']!r})"
        problems.append(f"{name}{place}: {msg}")
    return ConfigError("invalid studio setting" + ("s: " if len(problems) > 1 else ": ") + "; ".join(problems))


def _env_name(environ: Mapping[str, str], field: str) -> str | None:
    """The variable that set `field` (matched case-insensitively, as pydantic-settings does), or None."""
    wanted = (ENV_PREFIX + field).upper()
    return next((k for k, v in environ.items() if k.upper() == wanted and v != ""), None)


def load_settings(environ: Mapping[str, str] | None = None, config_file: Path | None = None) -> Settings:
    """Read and validate the settings once. Raises ConfigError naming the bad setting and where it was read."""
    environ = dict(os.environ if environ is None else environ)
    path = _config_path(environ, config_file)
    toml = _toml(path) if path is not None else None
    sources = (_Environment(environ), *([toml] if toml is not None else []))
    try:
        return Settings(_build_sources=(sources, {}))
    except SettingsError as exc:  # a source could not read a value (the ICE JSON case raises ConfigError itself)
        raise ConfigError(f"studio settings from the environment: {exc}") from None
    except ValidationError as exc:
        def where(field: str) -> tuple[str, str]:
            variable = _env_name(environ, field)
            if variable is not None:
                return variable, " (environment variable)"
            if toml is not None and field in toml.toml_data:
                return field, f" in {path.absolute()}"
            return field, ""

        raise _config_error(exc, where) from None
