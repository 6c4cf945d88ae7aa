"""The deployment model: what one studio deployment is, as plain typed values.

`DeployOptions` is what a person asks for (CLI flags or the endpoints page); `plan()` checks it and turns
it into a `DeploymentSpec`: one pinned image, one `EndpointSpec` per studio (voice, image, video) with its
model, `InstancePool`, names, tags and the exact boto3 requests that create it. The spec is saved in the
state file, so `resume` rebuilds exactly the same requests (same names: nothing is ever duplicated).
"""

from __future__ import annotations

import functools
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from infra.errors import UsageError
from protocol.catalog import FAMILIES
from protocol.catalog import LARGE_GPU_POOL, PUBLISHED_POOL  # noqa: F401  (infra's default pools, re-exported)
from protocol.catalog import model as catalog_model
from protocol.instances import fit_line, fitting, misfit
from protocol.sagemaker import DEFAULT_ROLES, ROLES, Role
from protocol.speech import VOICE_MODELS, task_types_for_model

EndpointKind = Literal["realtime", "async"]

PROJECT = "omni-studio"
IMAGE_ACCOUNT = "763104351884"  # the AWS Deep Learning Containers registry
DEFAULT_IMAGE_TAG = "omni-sagemaker-cuda-v1.6"  # v1.5 was the first with bidirectional streaming
# The host sidecar that terminates the HTTP/2 bidi stream lives on this AMI; CUDA 13 images need its driver.
INFERENCE_AMI_VERSION = "al2023-ami-sagemaker-inference-gpu-4-1"
VARIANT_NAME = "AllTraffic"
MAX_POOL_ENTRIES = 5
S3_MODEL_DIR = "/opt/ml/model"  # where SageMaker puts ModelDataSource files in the container

# Tags on every resource. `omni-studio:deployment` marks a resource as the studio's (sweep looks for it).
TAG_PROJECT = "project"
TAG_DEPLOYMENT = "omni-studio:deployment"
TAG_ROLE = "omni-studio:role"
TAG_CREATOR = "omni-studio:creator"
TAG_CREATED = "omni-studio:created"
RESERVED_TAGS = (TAG_DEPLOYMENT, TAG_ROLE, TAG_CREATOR, TAG_CREATED)
DEFAULT_TTL = "8h"  # endpoints delete themselves after this long unless --no-ttl (infra/ttl.py)


@dataclass(frozen=True)
class RoleProfile:
    """What each studio's endpoint runs (the published sample's models and instance pools)."""

    role: Role
    model_id: str  # SM_VLLM_MODEL
    kind: EndpointKind
    startup_timeout_s: int  # ContainerStartupHealthCheckTimeoutInSeconds: image pull + model load
    default_pool: tuple[str, ...]
    extra_env: tuple[tuple[str, str], ...] = ()


ROLE_PROFILES: dict[Role, RoleProfile] = {  # one per family of the catalog (protocol/catalog.py)
    f.name: RoleProfile(f.name, f.default_model, f.endpoint_kind, f.startup_timeout_s, f.default_pool, f.extra_env)
    for f in FAMILIES
}


DEFAULT_VOICE_MODEL = ROLE_PROFILES["voice"].model_id
# What each task type lets a person do (said next to a model id, e.g. when --voice-model is unknown).
TASK_TYPE_TEXT = {
    "CustomVoice": "preset voices, with style instructions",
    "VoiceDesign": "a voice designed from a description",
    "Base": "cloning a voice from a short recording",
}


def voice_model_label(model_id: str) -> str:
    """`Qwen/...-Base: Base (cloning a voice from a short recording)`."""
    return f"{model_id}: " + ", ".join(f"{t} ({TASK_TYPE_TEXT[t]})" for t in task_types_for_model(model_id))


def voice_models_text() -> str:
    """The voice models --voice-model accepts, one a line, with what each can do."""
    return "\n".join(f"  {voice_model_label(m)}" + ("  [default]" if m == DEFAULT_VOICE_MODEL else "")
                     for m in VOICE_MODELS)


def check_voice_model(value: str | None) -> str:
    """The voice endpoint's model id: one of protocol.speech.VOICE_MODELS (spelled as typed, any case), the
    published default when not given. UsageError listing the known ones and their task types otherwise."""
    if value is None:
        return DEFAULT_VOICE_MODEL
    name = value.strip()
    for known in VOICE_MODELS:
        if name.lower() == known.lower():
            return known
    import difflib

    close = difflib.get_close_matches(name, list(VOICE_MODELS), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UsageError(f"--voice-model {value!r} is not a voice model the studio knows{hint}. Choose one of:\n"
                     + voice_models_text())


def image_uri(region: str, tag: str) -> str:
    return f"{IMAGE_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/vllm:{tag}"


@functools.cache
def known_instance_types() -> frozenset[str]:
    """The ProductionVariant instance types botocore's SageMaker model knows (parsed once, shared loader)."""
    from services.aws import botocore_session

    model = botocore_session().get_service_model("sagemaker")
    return frozenset(model.shape_for("ProductionVariantInstanceType").enum)


def normalise_instance_type(value: str) -> str:
    """`g6.xlarge` or `ml.g6.xlarge` -> `ml.g6.xlarge`, checked against SageMaker's list."""
    name = value.strip().lower()
    if not name:
        raise UsageError("empty instance type in --instance-types (e.g. ml.g6.xlarge,ml.g5.xlarge)")
    if not name.startswith("ml."):
        name = "ml." + name
    if name not in known_instance_types():
        close = sorted(t for t in known_instance_types() if t.split(".")[1] == name.split(".")[1])[:6]
        hint = f"; {name.split('.')[1]} sizes are: {', '.join(close)}" if close else ""
        raise UsageError(f"{value!r} is not a SageMaker endpoint instance type{hint}")
    return name


@dataclass(frozen=True)
class InstancePool:
    """A priority-ordered list (1–5, unique) of instance types for one production variant."""

    types: tuple[str, ...]

    def __post_init__(self) -> None:
        if not 1 <= len(self.types) <= MAX_POOL_ENTRIES:
            raise UsageError(f"an instance pool holds 1 to {MAX_POOL_ENTRIES} instance types (got {len(self.types)})")
        dupes = sorted({t for t in self.types if self.types.count(t) > 1})
        if dupes:
            raise UsageError(f"instance types in a pool must be unique; repeated: {', '.join(dupes)}")

    @classmethod
    def parse(cls, value: str | Iterable[str]) -> InstancePool:
        items = value.split(",") if isinstance(value, str) else list(value)
        return cls(tuple(normalise_instance_type(v) for v in items))

    @property
    def first(self) -> str:
        return self.types[0]

    def variant_fields(self) -> dict[str, Any]:
        """One type: plain `InstanceType`; several: `InstancePools` with priorities (1 = first choice)."""
        if len(self.types) == 1:
            return {"InstanceType": self.types[0]}
        return {"InstancePools": [{"InstanceType": t, "Priority": i} for i, t in enumerate(self.types, start=1)]}

    def flag(self) -> str:
        return ",".join(self.types)


@dataclass(frozen=True)
class EndpointSpec:
    role: Role
    endpoint_name: str
    config_name: str
    model_name: str
    model_id: str
    pool: InstancePool
    kind: EndpointKind
    startup_timeout_s: int
    environment: dict[str, str] = field(default_factory=dict)
    model_data_uri: str | None = None  # model files from S3 (networks without internet)
    image_tag: str | None = None  # set once `infra upgrade` moved this endpoint to another image (None: the spec's)

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role, "endpoint_name": self.endpoint_name, "config_name": self.config_name,
            "model_name": self.model_name, "model_id": self.model_id, "instance_types": list(self.pool.types),
            "kind": self.kind, "startup_timeout_s": self.startup_timeout_s, "environment": dict(self.environment),
            "model_data_uri": self.model_data_uri, "image_tag": self.image_tag,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EndpointSpec:
        return cls(
            role=d["role"], endpoint_name=d["endpoint_name"], config_name=d["config_name"],
            model_name=d["model_name"], model_id=d["model_id"], pool=InstancePool(tuple(d["instance_types"])),
            kind=d["kind"], startup_timeout_s=int(d["startup_timeout_s"]), environment=dict(d["environment"]),
            model_data_uri=d.get("model_data_uri"), image_tag=d.get("image_tag"),
        )


@dataclass(frozen=True)
class DeploymentSpec:
    deployment_id: str
    region: str
    account: str
    creator: str  # the STS caller ARN that planned it
    created_at: str  # ISO 8601, UTC
    image_tag: str
    role_arn: str
    bucket: str | None  # for the async (video) endpoint; None when video is not deployed
    prefix: str
    name_prefix: str
    kms_key: str | None
    subnets: tuple[str, ...]
    security_groups: tuple[str, ...]
    user_tags: dict[str, str]
    endpoints: tuple[EndpointSpec, ...]

    @property
    def image_uri(self) -> str:
        return image_uri(self.region, self.image_tag)

    def image_tag_of(self, ep: EndpointSpec) -> str:
        """The image tag an endpoint runs: its own after an upgrade, else the deployment's."""
        return ep.image_tag or self.image_tag

    def image_uri_of(self, ep: EndpointSpec) -> str:
        return image_uri(self.region, self.image_tag_of(ep))

    @property
    def roles(self) -> tuple[Role, ...]:
        return tuple(e.role for e in self.endpoints)

    @property
    def voice_model(self) -> str | None:
        """The voice endpoint's model id (None when the deployment has no voice endpoint)."""
        return next((e.model_id for e in self.endpoints if e.role == "voice"), None)

    def endpoint(self, role: Role) -> EndpointSpec:
        for e in self.endpoints:
            if e.role == role:
                return e
        raise KeyError(role)

    def s3_uri(self, folder: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}/{folder}/"

    # -- tags ------------------------------------------------------------------------------------
    def tags(self, role: Role | None) -> list[dict[str, str]]:
        tags = {TAG_PROJECT: PROJECT, **self.user_tags, TAG_DEPLOYMENT: self.deployment_id,
                TAG_CREATOR: self.creator[:256], TAG_CREATED: self.created_at}
        if role is not None:
            tags[TAG_ROLE] = role
        return [{"Key": k, "Value": v} for k, v in tags.items()]

    # -- the boto3 requests ----------------------------------------------------------------------
    def create_model_request(self, ep: EndpointSpec) -> dict[str, Any]:
        container: dict[str, Any] = {"Image": self.image_uri_of(ep), "Environment": dict(ep.environment)}
        if ep.model_data_uri:
            container["ModelDataSource"] = {"S3DataSource": {
                "S3Uri": ep.model_data_uri, "S3DataType": "S3Prefix", "CompressionType": "None"}}
        req: dict[str, Any] = {"ModelName": ep.model_name, "ExecutionRoleArn": self.role_arn,
                               "PrimaryContainer": container, "Tags": self.tags(ep.role)}
        if self.subnets:
            req["VpcConfig"] = {"Subnets": list(self.subnets), "SecurityGroupIds": list(self.security_groups)}
        return req

    def create_endpoint_config_request(self, ep: EndpointSpec) -> dict[str, Any]:
        variant: dict[str, Any] = {
            "VariantName": VARIANT_NAME,
            "ModelName": ep.model_name,
            "InitialInstanceCount": 1,
            **ep.pool.variant_fields(),
            "ContainerStartupHealthCheckTimeoutInSeconds": ep.startup_timeout_s,
            "InferenceAmiVersion": INFERENCE_AMI_VERSION,
        }
        if ep.model_data_uri:
            variant["ModelDataDownloadTimeoutInSeconds"] = 3600
        req: dict[str, Any] = {"EndpointConfigName": ep.config_name, "ProductionVariants": [variant],
                               "Tags": self.tags(ep.role)}
        # No endpoint-config KmsKeyId: SageMaker refuses it for instance types with local NVMe storage
        # (g4dn, g5, g6, g6e all have it; that storage is encrypted by the hardware). The key protects
        # what leaves the instance instead: the async outputs and the bucket.
        if ep.kind == "async":
            output: dict[str, Any] = {"S3OutputPath": self.s3_uri("outputs"), "S3FailurePath": self.s3_uri("failures")}
            if self.kms_key:
                output["KmsKeyId"] = self.kms_key
            req["AsyncInferenceConfig"] = {"OutputConfig": output,
                                           "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1}}
        return req

    def create_endpoint_request(self, ep: EndpointSpec) -> dict[str, Any]:
        return {"EndpointName": ep.endpoint_name, "EndpointConfigName": ep.config_name, "Tags": self.tags(ep.role)}

    # -- persistence -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment_id": self.deployment_id, "region": self.region, "account": self.account,
            "creator": self.creator, "created_at": self.created_at, "image_tag": self.image_tag,
            "image_uri": self.image_uri, "role_arn": self.role_arn, "bucket": self.bucket, "prefix": self.prefix,
            "name_prefix": self.name_prefix, "kms_key": self.kms_key, "subnets": list(self.subnets),
            "security_groups": list(self.security_groups), "user_tags": dict(self.user_tags),
            "endpoints": [e.to_dict() for e in self.endpoints],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeploymentSpec:
        return cls(
            deployment_id=d["deployment_id"], region=d["region"], account=d["account"], creator=d["creator"],
            created_at=d["created_at"], image_tag=d["image_tag"], role_arn=d["role_arn"], bucket=d.get("bucket"),
            prefix=d["prefix"], name_prefix=d["name_prefix"], kms_key=d.get("kms_key"),
            subnets=tuple(d.get("subnets", ())), security_groups=tuple(d.get("security_groups", ())),
            user_tags=dict(d.get("user_tags", {})), endpoints=tuple(EndpointSpec.from_dict(e) for e in d["endpoints"]),
        )


# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeployOptions:
    """What a person asks for. Values are as typed (CLI strings); `plan()` checks every one."""

    roles: Sequence[Role] = DEFAULT_ROLES  # the opt-in families (listen) only when named
    region: str | None = None
    profile: str | None = None
    role_arn: str | None = None  # or SAGEMAKER_EXECUTION_ROLE_ARN
    image_tag: str = DEFAULT_IMAGE_TAG
    # Each entry "a,b,c" (every endpoint) or "voice=a,b" (one endpoint); priority order.
    instance_types: Sequence[str] = ()
    bucket: str | None = None
    prefix: str = PROJECT
    name_prefix: str = PROJECT
    kms_key: str | None = None
    subnets: Sequence[str] = ()
    security_groups: Sequence[str] = ()
    # Each entry "s3://bucket/models/" (a folder holding <model id>/ per endpoint) or "voice=s3://...".
    model_s3_uri: Sequence[str] = ()
    tags: Sequence[str] = ()  # "key=value"
    voice_model: str | None = None  # a protocol.speech.VOICE_MODELS id; None: DEFAULT_VOICE_MODEL
    models: Sequence[str] = ()  # "image=<model id>": another model for one endpoint (GPU fit checked)
    # Lifecycle (infra/ttl.py, infra/scaling.py): a TTL ("8h", "90m", "2d" or an ISO time; None = --no-ttl),
    # the role EventBridge Scheduler assumes (None: deploy creates one), `yes` confirms a TTL over 7 days;
    # at most `max_instances` per endpoint, the async video endpoint scaling to 0 when idle unless told not to.
    ttl: str | None = DEFAULT_TTL
    scheduler_role_arn: str | None = None
    yes: bool = False
    max_instances: int = 1
    scale_to_zero: bool = True


def shell_command(subcommand: str, args: Sequence[str] = ()) -> str:
    """`python -m infra <subcommand> ...` with each argument quoted for a POSIX shell."""
    import shlex

    return " ".join(["python", "-m", "infra", subcommand, *(shlex.quote(a) for a in args)])


def deploy_command(options: DeployOptions, state_file: str | None = None) -> str:
    """The CLI line that does what `deploy(options)` does (the endpoints page shows it)."""
    roles = tuple(options.roles)
    extra = [r for r in roles if r not in DEFAULT_ROLES]
    if set(DEFAULT_ROLES) <= set(roles):  # the default endpoints, and any opt-in one added with --with
        args: list[str] = [a for r in extra for a in ("--with", r)]
    else:
        args = list(roles)
    flags: list[tuple[str, str | None]] = [
        ("--region", options.region), ("--profile", options.profile), ("--role-arn", options.role_arn),
        ("--image-tag", None if options.image_tag == DEFAULT_IMAGE_TAG else options.image_tag),
        ("--bucket", options.bucket), ("--prefix", None if options.prefix == PROJECT else options.prefix),
        ("--name-prefix", None if options.name_prefix == PROJECT else options.name_prefix),
        ("--kms-key", options.kms_key), ("--state-file", state_file),
        ("--voice-model", None if options.voice_model in (None, DEFAULT_VOICE_MODEL) else options.voice_model),
        ("--ttl", None if options.ttl in (None, DEFAULT_TTL) else options.ttl),
        ("--scheduler-role-arn", options.scheduler_role_arn),
        ("--max-instances", None if options.max_instances == 1 else str(options.max_instances)),
    ]
    flags += [("--instance-types", v) for v in options.instance_types] + [("--model", v) for v in options.models]
    flags += [("--subnets", v) for v in options.subnets] + [("--security-groups", v) for v in options.security_groups]
    flags += [("--model-s3-uri", v) for v in options.model_s3_uri] + [("--tags", v) for v in options.tags]
    for flag, value in flags:
        if value:
            args += [flag, value]
    args += (["--no-ttl"] if options.ttl is None else []) + ([] if options.scale_to_zero else ["--no-scale-to-zero"])
    args += ["--yes"] if options.yes else []
    return shell_command("deploy", args)


_NAME_PREFIX = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IMAGE_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_TAG_TEXT = re.compile(r"^[\w\s.:/=+\-@]*$")


def new_deployment_id(now: datetime) -> str:
    """Readable and unique: the UTC time plus a few random hex digits."""
    return f"{now:%y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def _split_role_values(values: Sequence[str], option: str, roles: Sequence[Role]) -> tuple[str | None, dict[Role, str]]:
    """["a,b", "voice=c"] -> ("a,b", {"voice": "c"}); the unqualified value applies to every endpoint."""
    shared: str | None = None
    per_role: dict[Role, str] = {}
    for raw in values:
        head, sep, tail = raw.partition("=")
        if sep and head.strip().lower() in ROLES:
            role: Role = head.strip().lower()  # type: ignore[assignment]
            if role not in roles:
                raise UsageError(f"{option} {raw!r} names the {role} endpoint, which this deployment does not include")
            if role in per_role:
                raise UsageError(f"{option} is given twice for the {role} endpoint")
            per_role[role] = tail.strip()
        else:
            if shared is not None:
                raise UsageError(f"{option} is given twice for every endpoint; use ROLE=... for one endpoint")
            shared = raw.strip()
    return shared, per_role


def parse_tags(values: Sequence[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for raw in values:
        for item in (p for p in raw.split(",") if p.strip()):
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key:
                raise UsageError(f"--tags {item!r} must be KEY=VALUE, e.g. --tags cost-center=1234,owner=ana")
            if key.lower().startswith("aws:") or key in RESERVED_TAGS:
                raise UsageError(f"tag key {key!r} is reserved (aws:* and the studio's own omni-studio:* keys)")
            if len(key) > 128 or len(value) > 256 or not _TAG_TEXT.match(key) or not _TAG_TEXT.match(value):
                raise UsageError(f"tag {item!r}: keys up to 128 and values up to 256 characters of letters, digits, "
                                 "spaces and _ . : / = + - @")
            tags[key] = value
    if len(tags) > 40:
        raise UsageError(f"at most 40 tags of your own (got {len(tags)}); the studio adds its own 5")
    return tags


def default_bucket(account: str, region: str) -> str:
    return f"{PROJECT}-{account}-{region}"


def plan(options: DeployOptions, *, account: str, creator: str, region: str, now: datetime | None = None,
         deployment_id: str | None = None, role_arn_env: str | None = None) -> DeploymentSpec:
    """Check the options and build the spec. Raises UsageError naming the option to fix — including a pool
    entry whose GPU memory cannot hold the endpoint's model (protocol/instances.py), before anything exists."""
    now = now or datetime.now(UTC)
    roles = _checked_roles(options.roles)
    _model_ids(options, roles)  # a model option is named before the role ARN
    role_arn = _checked_role_arn(options.role_arn or role_arn_env)
    if not _IMAGE_TAG.match(options.image_tag or ""):
        raise UsageError(f"--image-tag {options.image_tag!r} is not an image tag (e.g. {DEFAULT_IMAGE_TAG})")
    deployment_id = deployment_id or new_deployment_id(now)
    name_prefix = _checked_name_prefix(options.name_prefix, deployment_id)
    prefix = (options.prefix or PROJECT).strip().strip("/")
    if not prefix or any(not part for part in prefix.split("/")):
        raise UsageError(f"--prefix {options.prefix!r} must be a non-empty S3 folder such as omni-studio")
    bucket = _checked_bucket(options.bucket or default_bucket(account, region)) if "video" in roles else None
    subnets, groups = _checked_network(options.subnets, options.security_groups)
    kms_key = (options.kms_key or "").strip() or None
    if kms_key and not _KMS_KEY.match(kms_key):
        raise UsageError(f"--kms-key {kms_key!r}: give a key id, key ARN or alias/<name>")
    user_tags = parse_tags(options.tags)
    endpoints = _endpoint_specs(options, name_prefix, deployment_id)
    return DeploymentSpec(
        deployment_id=deployment_id, region=region, account=account, creator=creator,
        created_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), image_tag=options.image_tag, role_arn=role_arn,
        bucket=bucket, prefix=prefix, name_prefix=name_prefix, kms_key=kms_key, subnets=subnets,
        security_groups=groups, user_tags=user_tags, endpoints=endpoints,
    )


_KMS_KEY = re.compile(r"^(arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:(key|alias)/[\w/-]+|alias/[\w/-]+|[0-9a-f-]{36})$")


def _checked_roles(requested: Sequence[str]) -> tuple[Role, ...]:
    roles = tuple(dict.fromkeys(requested))
    if not roles:
        raise UsageError(f"no endpoint to deploy: name one or more of {', '.join(ROLES)} "
                         f"(or none for {', '.join(DEFAULT_ROLES)})")
    unknown = [r for r in roles if r not in ROLES]
    if unknown:
        raise UsageError(f"unknown endpoint {unknown[0]!r}: choose from {', '.join(ROLES)}")
    return tuple(r for r in ROLES if r in roles)  # stable order


def _model_ids(options: DeployOptions, roles: tuple[Role, ...]) -> dict[Role, str]:
    """Each endpoint's model: --model ROLE=ID, --voice-model, else the family's default. A model of another
    family is refused; one the catalog does not know is accepted (plan_warnings() says so)."""
    if options.voice_model is not None and "voice" not in roles:
        raise UsageError(f"--voice-model {options.voice_model!r} chooses the voice endpoint's model, but this "
                         "deployment does not include voice: add voice to the endpoints or leave --voice-model out")
    shared, chosen = _split_role_values(options.models, "--model", roles)
    if shared is not None:
        raise UsageError(f"--model {shared!r} must name its endpoint, e.g. --model image=black-forest-labs/FLUX.2-klein-4B")
    if options.voice_model is not None and "voice" in chosen:
        raise UsageError("--voice-model and --model voice=… both choose the voice model: give one of them")
    model_ids: dict[Role, str] = {r: ROLE_PROFILES[r].model_id for r in roles}
    for role, value in chosen.items():
        if not value:
            raise UsageError(f"--model {role}= needs a model id after the =")
        known = catalog_model(value)
        if known is not None and known.family != role:
            raise UsageError(f"--model {role}={value}: {known.id} is {"an" if known.family[0] in "aeiou" else "a"} {known.family} model; "
                             f"the {role} endpoint serves {role} models")
        model_ids[role] = known.id if known is not None else value
    if "voice" in roles and "voice" not in chosen:
        model_ids["voice"] = check_voice_model(options.voice_model)
    return model_ids


def _checked_role_arn(value: str | None) -> str:
    role_arn = (value or "").strip()
    if not role_arn:
        raise UsageError("an execution role is needed: pass --role-arn arn:aws:iam::<account>:role/<name> or set "
                         "SAGEMAKER_EXECUTION_ROLE_ARN (the role SageMaker assumes to pull the image and write to S3)")
    if not _ROLE_ARN.match(role_arn):
        raise UsageError(f"--role-arn {role_arn!r} is not an IAM role ARN (arn:aws:iam::123456789012:role/Name)")
    return role_arn


def _checked_name_prefix(value: str | None, deployment_id: str) -> str:
    name_prefix = (value or PROJECT).strip()
    longest = f"{name_prefix}-{max(ROLES, key=len)}-{deployment_id}"
    if not _NAME_PREFIX.match(name_prefix) or len(longest) > 63:
        raise UsageError(f"--name-prefix {name_prefix!r}: letters, digits and hyphens, at most "
                         f"{63 - len(longest) + len(name_prefix)} characters (names are <prefix>-<role>-<id>)")
    return name_prefix


def _checked_bucket(value: str) -> str:
    bucket = value.strip()
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise UsageError(f"--bucket {bucket!r} is not a valid S3 bucket name (3–63 lower-case letters, digits, "
                         "dots and hyphens)")
    return bucket


def _checked_network(raw_subnets: Sequence[str], raw_groups: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    subnets = tuple(s.strip() for raw in raw_subnets for s in raw.split(",") if s.strip())
    groups = tuple(s.strip() for raw in raw_groups for s in raw.split(",") if s.strip())
    if bool(subnets) != bool(groups):
        raise UsageError("a VPC needs both --subnets and --security-groups (or neither)")
    for s in subnets:
        if not re.match(r"^subnet-[0-9a-f]{8,17}$", s):
            raise UsageError(f"--subnets {s!r} is not a subnet id (subnet-0123abcd...)")
    for g in groups:
        if not re.match(r"^sg-[0-9a-f]{8,17}$", g):
            raise UsageError(f"--security-groups {g!r} is not a security group id (sg-0123abcd...)")
    if len(subnets) > 16 or len(groups) > 5:
        raise UsageError("at most 16 subnets and 5 security groups")
    return subnets, groups


def pools_and_models(options: DeployOptions) -> tuple[dict[Role, InstancePool], dict[Role, str]]:
    """Each endpoint's instance pool and model, as `deploy` would use them, the GPU fit of every entry
    checked (UsageError naming what to change); `infra plan` plans exactly these."""
    roles = _checked_roles(options.roles)
    model_ids = _model_ids(options, roles)
    shared_types, role_types = _split_role_values(options.instance_types, "--instance-types", roles)
    pools: dict[Role, InstancePool] = {}
    for role in roles:
        raw_types = role_types.get(role, shared_types)
        pools[role] = InstancePool.parse(raw_types) if raw_types is not None else \
            InstancePool(ROLE_PROFILES[role].default_pool)
        check_gpu_fit(role, model_ids[role], pools[role])
    return pools, model_ids


def _endpoint_specs(options: DeployOptions, name_prefix: str, deployment_id: str) -> tuple[EndpointSpec, ...]:
    pools, model_ids = pools_and_models(options)
    shared_models, role_models = _split_role_values(options.model_s3_uri, "--model-s3-uri", tuple(pools))
    endpoints = []
    for role, pool in pools.items():
        profile = ROLE_PROFILES[role]
        model_id = model_ids[role]
        env = {"SM_VLLM_MODEL": model_id, **dict(profile.extra_env)}
        model_uri = None
        if (raw_model := role_models.get(role)) is not None:
            model_uri = _s3_folder(raw_model, "--model-s3-uri")
        elif shared_models is not None:
            model_uri = _s3_folder(shared_models, "--model-s3-uri") + model_id + "/"
        if model_uri:
            # Files come from S3 into /opt/ml/model; keep the public model id as the served name and never
            # reach for the Hugging Face hub (the network may have no internet at all).
            env.update(SM_VLLM_MODEL=S3_MODEL_DIR, SM_VLLM_SERVED_MODEL_NAME=model_id, HF_HUB_OFFLINE="1")
        name = f"{name_prefix}-{role}-{deployment_id}"
        endpoints.append(EndpointSpec(
            role=role, endpoint_name=name, config_name=name, model_name=name, model_id=model_id,
            pool=pool, kind=profile.kind, startup_timeout_s=profile.startup_timeout_s, environment=env,
            model_data_uri=model_uri,
        ))
    return tuple(endpoints)


def check_gpu_fit(role: Role, model_id: str, pool: InstancePool) -> None:
    """UsageError when an entry of `pool` cannot serve `model_id`: the model's need, the entry's GPU memory,
    and the types that fit. SageMaker may provision any entry of a pool, so every entry must fit. A model
    or instance type the catalog does not know passes (plan_warnings() names the unknown model)."""
    known = catalog_model(model_id)
    if known is None:
        return
    bad = [(t, why) for t in pool.types if (why := misfit(known, t)) is not None]
    if bad:
        fits = ", ".join(fitting(known)) or "no single instance type the studio lists"
        raise UsageError(f"the {role} endpoint's pool cannot serve its model: " + "; ".join(why for _, why in bad)
                         + f". Instance types that fit: {fits} (--instance-types {role}=…)")


def plan_warnings(spec: DeploymentSpec) -> list[str]:
    """What deploying `spec` goes ahead with but a person should know: models the catalog does not know."""
    return [f"the {ep.role} endpoint's model {ep.model_id} is not in the studio's catalog: its GPU memory is "
            "unknown, so no pool entry was checked against it (deploying anyway)"
            for ep in spec.endpoints if catalog_model(ep.model_id) is None]


def gpu_fit_line(model_id: str) -> str:
    """`needs ≈ 5.1 GB; fits on ml.g4dn.xlarge, …` for plan, status and the Endpoints page."""
    return fit_line(catalog_model(model_id), model_id)


def _s3_folder(uri: str, option: str) -> str:
    uri = uri.strip()
    if not re.match(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$", uri):
        raise UsageError(f"{option} {uri!r} must be an S3 folder such as s3://my-bucket/models/")
    return uri if uri.endswith("/") else uri + "/"
