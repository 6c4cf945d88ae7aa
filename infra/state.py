"""DeploymentState: what one deployment planned and created, in a JSON file next to the operator.

The file is written BEFORE the first create (with every planned name) and after each step, always
atomically (a temporary file in the same folder, then os.replace), so a crash or expired credentials at any
moment leave a file that `resume` and `delete` can trust: they describe each planned name to learn whether
it exists. It holds names, ARNs, statuses and the spec; never credentials.

Readers outside infra (the services layer's SageMaker settings) find flat keys at the top: `region`,
`endpoint_names` ({"voice": ..., "image": ..., "video": ...}), `voice_model` (the voice endpoint's model id,
null without a voice endpoint), `bucket`, `prefix`, `kms_key`; `studio_settings()` turns them into Settings
overrides.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from infra.errors import StateError, UsageError
from infra.lock import mirror
from infra.model import ROLES, DeploymentSpec, Role
from protocol.errors import ConfigError, InvalidInput
from protocol.limits import STATE_FILE_MAX_BYTES
from protocol.sagemaker import (
    DEFAULT_STATE_FILE,
    STATE_FORMAT,
    Phase,
    ResourceStatus,
    StateFileInvalid,
    parse_state_file,
)
from services.aws import validate_region
from services.files import read_user_file

__all__ = ["DEFAULT_STATE_FILE", "STATE_FORMAT", "DeploymentState", "EndpointRecord", "Phase", "ResourceRecord",
           "ResourceStatus", "utc_now"]


def write_atomically(path: Path, text: str) -> None:
    """`text` at `path` whole or not at all: a temporary file in the same folder, fsync, then os.replace (0600)."""
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ResourceRecord:
    """One SageMaker resource: `planned` (name chosen, maybe not created), `created` (by us), `reused`
    (found by describe on resume), `deleted`."""

    name: str
    arn: str | None = None
    status: ResourceStatus = "planned"

    @property
    def exists(self) -> bool:
        return self.status in ("created", "reused")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arn": self.arn, "status": self.status}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ResourceRecord:
        return cls(name=d["name"], arn=d.get("arn"), status=d.get("status", "planned"))


@dataclass
class EndpointRecord:
    role: Role
    model: ResourceRecord
    config: ResourceRecord
    endpoint: ResourceRecord
    endpoint_status: str | None = None  # as DescribeEndpoint last said
    instance_type: str | None = None  # the pool entry actually provisioned
    failure_reason: str | None = None
    creation_time: str | None = None  # the endpoint's CreationTime (billing starts about then)
    in_service_at: str | None = None
    smoke: dict[str, Any] | None = None  # the last smoke test result for this endpoint

    def resources(self) -> list[tuple[str, ResourceRecord]]:
        return [("endpoint", self.endpoint), ("endpoint config", self.config), ("model", self.model)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role, "model": self.model.to_dict(), "endpoint_config": self.config.to_dict(),
            "endpoint": self.endpoint.to_dict(), "endpoint_status": self.endpoint_status,
            "instance_type": self.instance_type, "failure_reason": self.failure_reason,
            "creation_time": self.creation_time, "in_service_at": self.in_service_at, "smoke": self.smoke,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EndpointRecord:
        return cls(
            role=d["role"], model=ResourceRecord.from_dict(d["model"]),
            config=ResourceRecord.from_dict(d["endpoint_config"]), endpoint=ResourceRecord.from_dict(d["endpoint"]),
            endpoint_status=d.get("endpoint_status"), instance_type=d.get("instance_type"),
            failure_reason=d.get("failure_reason"), creation_time=d.get("creation_time"),
            in_service_at=d.get("in_service_at"), smoke=d.get("smoke"),
        )


@dataclass
class DeploymentState:
    spec: DeploymentSpec
    endpoints: dict[Role, EndpointRecord]
    path: Path
    phase: Phase = "planned"
    bucket_created: bool = False  # we created the bucket (so --purge-s3 may remove it when empty)
    # protocol.sagemaker.EndpointVersions per endpoint as plain dicts (infra.versions reads and writes them)
    versions: dict[Role, dict[str, Any]] = field(default_factory=dict)
    updated_at: str = field(default_factory=utc_now)
    # protocol.sagemaker.TtlState / ScalingState as plain dicts (infra.ttl and infra.scaling read them)
    ttl: dict[str, Any] | None = None
    scaling: dict[Role, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @classmethod
    def new(cls, spec: DeploymentSpec, path: Path) -> DeploymentState:
        records = {
            e.role: EndpointRecord(e.role, ResourceRecord(e.model_name), ResourceRecord(e.config_name),
                                   ResourceRecord(e.endpoint_name))
            for e in spec.endpoints
        }
        return cls(spec=spec, endpoints=records, path=Path(path))

    # -- reading -----------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> DeploymentState:
        """Read and validate the file (protocol.sagemaker.DeploymentStateFile, the one shape every reader
        checks). StateError names the file and the field when it is missing, unreadable or damaged."""
        path = Path(path)
        if not path.exists():
            raise StateError(f"no state file at {path}: nothing was deployed from here (or pass --state-file "
                             "with the file `infra deploy` wrote)")
        try:  # regular files only, bounded: /dev/zero or a FIFO named as the state file must not hang
            raw = read_user_file(path, what="the state file", limit=STATE_FILE_MAX_BYTES)
        except InvalidInput as exc:
            raise StateError(str(exc)) from None

        def damaged(problem: str) -> StateError:
            return StateError(f"the state file {path} is damaged ({problem}); keep it for the names it holds and "
                              "use `python -m infra sweep` to find what exists")

        try:
            data = parse_state_file(raw)
        except StateFileInvalid as exc:
            raise damaged(str(exc)) from None
        if data.format is None and data.spec is None:
            raise StateError(f"the state file {path} holds only the endpoint names the studio reads, not a deployment "
                             "record: infra needs the file `python -m infra deploy` wrote (`python -m infra sweep` "
                             "finds the studio's resources without one)")
        if data.format != STATE_FORMAT:
            raise damaged(f"format is {data.format!r}, expected {STATE_FORMAT!r}")
        if data.spec is None or data.endpoints is None:
            raise damaged(f"{'spec' if data.spec is None else 'endpoints'}: Field required")
        try:
            region = validate_region(data.spec.region, what="spec.region")
        except ConfigError as exc:
            raise damaged(str(exc)) from None
        try:
            spec = dataclasses.replace(DeploymentSpec.from_dict(data.spec.model_dump()), region=region)
        except UsageError as exc:  # a value the model's own checks refuse (e.g. an instance pool of 7 types)
            raise damaged(str(exc)) from None
        endpoints = {r: EndpointRecord.from_dict(data.endpoints[r].model_dump()) for r in ROLES if r in data.endpoints}
        versions = {r: v.model_dump() for r, v in data.versions.items()}
        return cls(versions=versions, spec=spec, endpoints=endpoints, path=path, phase=data.phase, bucket_created=data.bucket_created,
                   updated_at=data.updated_at, ttl=None if data.ttl is None else data.ttl.model_dump(),
                   scaling={r: s.model_dump() for r, s in data.scaling.items()})

    @property
    def region(self) -> str:
        return self.spec.region

    @property
    def deployment_id(self) -> str:
        return self.spec.deployment_id

    def record(self, role: Role) -> EndpointRecord:
        return self.endpoints[role]

    def resource_names(self) -> set[tuple[str, str]]:
        """(kind, name) of every resource this state plans or holds: what sweep must not call an orphan."""
        names = {(kind, rec.name) for ep in self.endpoints.values() for kind, rec in ep.resources()}
        for history in self.versions.values():  # every version's model and config (infra.versions)
            for v in history.get("versions", []):
                names |= {("model", v["model_name"]), ("endpoint config", v["config_name"])}
        if self.ttl and self.ttl.get("schedule_group"):  # the TTL's schedule group and role (infra.ttl)
            names.add(("schedule group", self.ttl["schedule_group"]))
        if self.ttl and self.ttl.get("role_arn"):
            names.add(("iam role", self.ttl["role_arn"].rsplit("/", 1)[-1]))
        return names

    def studio_settings(self) -> dict[str, Any]:
        """Settings overrides for the studio's SageMaker backend (services.settings.Settings fields)."""
        names = {f"{role}_endpoint": rec.endpoint.name for role, rec in self.endpoints.items()}
        return {"backend": "sagemaker", "region": self.region, "bucket": self.spec.bucket,
                "prefix": self.spec.prefix, "kms_key": self.spec.kms_key, "state_file": self.path, **names}

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "format": STATE_FORMAT,
                "deployment_id": self.deployment_id,
                "region": self.region,
                "phase": self.phase,
                "updated_at": self.updated_at,
                # Flat copies for readers outside infra (the services layer's SageMaker settings):
                "endpoint_names": {role: rec.endpoint.name for role, rec in self.endpoints.items()},
                "voice_model": self.spec.voice_model,
                "bucket": self.spec.bucket,
                "prefix": self.spec.prefix,
                "kms_key": self.spec.kms_key,
                "bucket_created": self.bucket_created,
                "endpoints": {role: rec.to_dict() for role, rec in self.endpoints.items()},
                "versions": {role: dict(v) for role, v in self.versions.items()},
                "spec": self.spec.to_dict(),
                "ttl": None if self.ttl is None else dict(self.ttl),
                "scaling": {role: dict(s) for role, s in self.scaling.items()},
            }

    # -- writing -----------------------------------------------------------------------------------
    @property
    def lock(self) -> threading.RLock:
        """Held while changing records from a worker thread, so a save sees each change whole."""
        return self._lock

    def save(self) -> None:
        """Write atomically (write_atomically); in a team studio, to its database too (infra/lock.mirror)."""
        with self._lock:
            self.updated_at = utc_now()
            text = json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"
            try:
                write_atomically(self.path, text)
            except OSError as exc:
                raise StateError(f"cannot write the state file {self.path}: {exc.strerror}; pass --state-file "
                                 "with a writable path") from None
            mirror(self.path)

    def remove(self) -> None:
        with self._lock:
            self.path.unlink(missing_ok=True)
            mirror(self.path)
