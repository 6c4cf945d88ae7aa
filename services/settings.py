"""Studio settings: one validated object from environment variables and an optional `studio.toml`.

Precedence: environment (`OMNI_STUDIO_<FIELD>`) > `studio.toml` (the file `OMNI_STUDIO_CONFIG` names, else
./studio.toml when there is one; `OMNI_STUDIO_CONFIG=` set empty reads no file) > defaults. The defaults
run fully offline on the embedded engine. pydantic-settings reads both sources; `load_settings` turns
whatever is wrong into one ConfigError naming the setting and where it was read from.

Former names are still read: `omni_url` / `OMNI_STUDIO_OMNI_URL` as `server_url` (RENAMED), and `backend = "omni"`
as "server" (services/kinds.py).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator
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
from services.addresses import (
    MEDIA_URL_EXAMPLE,
    check_kms_key,
    check_media_url,
    check_server_url,
    parse_database_url,
    s3_location,
)
from services.kinds import BackendField

ENV_PREFIX = "OMNI_STUDIO_"
CONFIG_ENV = ENV_PREFIX + "CONFIG"
DEFAULT_CONFIG_FILE = "studio.toml"
ICE_EXAMPLE = '[{"urls": "stun:stun.example.org:3478"}]'


class IceServer(BaseModel):
    """One STUN/TURN entry for WebRTC, as RTCIceServer expects it."""

    urls: list[str] | str
    username: str | None = None
    credential: str | None = None


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


# Settings read under a former name (a studio.toml or an environment written before the rename): former → today's.
# One source giving both, differently, is refused naming both; between sources the usual precedence holds (an
# OMNI_STUDIO_SERVER_URL wins over an old studio.toml's omni_url).
RENAMED: dict[str, str] = {"omni_url": "server_url"}


def _same_url(a: Any, b: Any) -> bool:
    try:
        return check_server_url(a) == check_server_url(b)
    except ValueError:
        return a == b


def _renamed(data: dict[str, Any], spelled: Callable[[str], str], place: str) -> dict[str, Any]:
    """One source's values with each former name read as today's; ConfigError when it gives both, differing."""
    data = dict(data)
    for old, new in RENAMED.items():
        if old in data:
            value = data.pop(old)
            if new in data and not _same_url(data[new], value):
                raise ConfigError(f"{spelled(old)} and {spelled(new)}{place} differ ({value!r}, {data[new]!r}) and "
                                  f"are one setting ({old} is {new}'s former name): keep {spelled(new)} only")
            data.setdefault(new, value)
    return data


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="forbid")

    # Which backend the studio talks to. `offline` starts the embedded engine on 127.0.0.1. (`omni`, the server's
    # old name, is read as `server`: services/kinds.py.)
    backend: BackendField = "offline"
    # `server`: any vLLM-Omni server, e.g. http://gpu-box:8091 (`omni_url`, its old name, is read too: RENAMED)
    server_url: str | None = None
    # More vLLM-Omni servers an admin registered ([[servers]] url, name): with server_url and the servers added on
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
        v = check_kms_key(v)  # (a bad media_url is its own error: info.data holds no media_url then)
        if v is not None and "media_url" in info.data and s3_location(info.data["media_url"]) is None:
            raise ValueError("kms_key_id encrypts the media bucket's objects, and media_url names no bucket: set "
                             f"media_url to s3://bucket/prefix (e.g. {MEDIA_URL_EXAMPLE}) or leave kms_key_id empty")
        return v

    @field_validator("server_url")
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

    @model_validator(mode="before")
    @classmethod
    def _former_names(cls, data: Any) -> Any:
        # Settings(omni_url=…) or with_overrides(omni_url=…) too (the sources rename their own: see load_settings)
        return _renamed(data, str, " (arguments)") if isinstance(data, dict) else data

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with some fields changed, validated again (e.g. from CLI flags or a sidebar picker)."""
        data = self.model_dump(exclude_unset=True)  # what was never set stays a default (see model_fields_set)
        data.update({RENAMED.get(k, k): v for k, v in changes.items() if v is not None})  # a former name overrides too
        try:
            return Settings(**data)
        except ValidationError as exc:
            raise _config_error(exc, lambda field: (field, " (override)")) from None


class _Environment(EnvSettingsSource):
    """The OMNI_STUDIO_* variables of a given environment (os.environ unless a test passes its own)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        super().__init__(Settings)
        self.env_vars = parse_env_vars(environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()  # today's names only: a variable naming no field is not read
        data |= {old: v for old in RENAMED if (v := self.env_vars.get((ENV_PREFIX + old).lower())) is not None}
        return _renamed(data, lambda field: (ENV_PREFIX + field).upper(), " (environment variables)")

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


class _Toml(TomlConfigSettingsSource):
    def __call__(self) -> dict[str, Any]:
        return _renamed(super().__call__(), str, f" in {Path(self.toml_file_path).absolute()}")


def _toml(path: Path) -> TomlConfigSettingsSource:
    shown = path.absolute()
    try:
        return _Toml(Settings, toml_file=path)
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
            names = (field, *(old for old, new in RENAMED.items() if new == field))  # the environment first
            variable = next((v for n in names if (v := _env_name(environ, n)) is not None), None)
            if variable is not None:
                return variable, " (environment variable)"
            key = next((n for n in names if toml is not None and n in toml.toml_data), None)
            return (key, f" in {path.absolute()}") if key is not None else (field, "")

        raise _config_error(exc, where) from None
