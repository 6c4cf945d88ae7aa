"""Studio settings: one validated object from environment variables and an optional `studio.toml`.

Precedence: environment (`OMNI_STUDIO_<FIELD>`, upper case) > `studio.toml` (path from `OMNI_STUDIO_CONFIG`,
else ./studio.toml) > defaults. The defaults run fully offline on the embedded engine.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from protocol.errors import ConfigError

BackendName = Literal["offline", "omni", "sagemaker"]
ENV_PREFIX = "OMNI_STUDIO_"
DEFAULT_CONFIG_FILE = "studio.toml"


class IceServer(BaseModel):
    """One STUN/TURN entry for WebRTC, as RTCIceServer expects it."""

    urls: list[str] | str
    username: str | None = None
    credential: str | None = None


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Which backend the studio talks to. `offline` starts the embedded engine on 127.0.0.1.
    backend: BackendName = "offline"
    # `omni`: any vLLM-Omni server, e.g. http://gpu-box:8091
    omni_url: str | None = None
    # Where the history database and generated files live.
    data_dir: Path = Path(".studio-data")
    # WebRTC ICE servers: empty for local use (no outbound STUN); STUN/TURN entries for remote users.
    ice_servers: list[IceServer] = Field(default_factory=list)
    # Timeouts (seconds)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    request_timeout_s: float = Field(default=120.0, gt=0)

    # SageMaker backend
    region: str = "us-east-1"
    profile: str | None = None
    voice_endpoint: str | None = None
    image_endpoint: str | None = None
    video_endpoint: str | None = None
    bucket: str | None = None
    prefix: str = "omni-studio"
    kms_key: str | None = None
    state_file: Path = Path(".vllm_omni_media_state.json")
    # The endpoints page: how often deploy/resume/delete describe the endpoints (real ones take ~10 min;
    # the rehearsal's emulator seconds), and whether the cost banner looks for running endpoints.
    infra_poll_s: float = Field(default=15.0, gt=0)
    cost_banner: Literal["auto", "always", "off"] = "auto"  # auto: when a state file exists or on SageMaker

    @field_validator("omni_url")
    @classmethod
    def _url_shape(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"omni_url must start with http:// or https:// (got {v!r}), e.g. http://gpu-box:8091")
        return v.rstrip("/")

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with some fields changed, validated again (e.g. from CLI flags or a sidebar picker)."""
        data = self.model_dump(exclude_unset=True)  # what was never set stays a default (see model_fields_set)
        data.update({k: v for k, v in changes.items() if v is not None})
        return _validate(data, "overrides")


def _validate(data: dict[str, Any], origin: str) -> Settings:
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"invalid studio settings ({origin}): {problems}") from None


def _from_env(environ: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is None or raw == "":
            continue
        if name == "ice_servers":
            try:
                out[name] = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{ENV_PREFIX}ICE_SERVERS must be JSON, e.g. '[{{\"urls\": \"stun:stun.example.org:3478\"}}]' ({exc})"
                ) from None
        else:
            out[name] = raw
    return out


def load_settings(environ: dict[str, str] | None = None, config_file: Path | None = None) -> Settings:
    """Read and validate the settings once. Raises ConfigError naming the bad setting."""
    environ = dict(os.environ if environ is None else environ)
    path = config_file or Path(environ.get(ENV_PREFIX + "CONFIG", DEFAULT_CONFIG_FILE))
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data.update(tomllib.loads(path.read_text()))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    elif config_file is not None:
        raise ConfigError(f"settings file {path} does not exist")
    data.update(_from_env(environ))
    return _validate(data, f"environment and {path}")
