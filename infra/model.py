"""The deployment model: what one studio deployment is, as plain typed values.

`DeployOptions` is what a person asks for (CLI flags or the endpoints page); `plan()` (infra/planning.py) checks
it and turns it into a `DeploymentSpec`: one pinned image, one `EndpointSpec` per studio (voice, image, video) with its
model, `InstancePool`, names, tags and the exact boto3 requests that create it. The spec is saved in the
state file, so `resume` rebuilds exactly the same requests (same names: nothing is ever duplicated).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from infra.errors import UsageError
from protocol.catalog import FAMILIES
from protocol.catalog import LARGE_GPU_POOL, PUBLISHED_POOL  # noqa: F401  (infra's default pools, re-exported)
from protocol.sagemaker import DEFAULT_ROLES, ROLES, Role  # noqa: F401  (infra's names for them, re-exported)
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

    def model_of(self, role: Role) -> str | None:
        """The model id the `role` endpoint serves (None when the deployment has no such endpoint)."""
        return next((e.model_id for e in self.endpoints if e.role == role), None)

    @property
    def voice_model(self) -> str | None:
        """The voice endpoint's model id, what the Voice page's modes depend on (None: no voice endpoint)."""
        return self.model_of("voice")

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
