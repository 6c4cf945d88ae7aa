"""Planning a deployment: `plan()` checks what a person asked for (`DeployOptions`) and turns it into the
`DeploymentSpec` that infra deploys — the endpoints it includes, each one's model and instance pool (every entry's
GPU memory checked against the model), names, tags, bucket, network and KMS key — raising UsageError naming the
option to fix before anything exists. `python -m infra plan` and `add` plan with the same functions.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from infra.errors import UsageError
from infra.model import (
    DEFAULT_IMAGE_TAG,
    PROJECT,
    RESERVED_TAGS,
    ROLE_PROFILES,
    S3_MODEL_DIR,
    DeploymentSpec,
    DeployOptions,
    EndpointSpec,
    InstancePool,
    check_voice_model,
)
from protocol.catalog import family
from protocol.catalog import model as catalog_model
from protocol.instances import fit_line, fitting, misfit
from protocol.sagemaker import DEFAULT_ROLES, ROLES, Role


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
    # an async endpoint takes its requests and writes its answers through S3
    asynchronous = any(family(r).serving == "async" for r in roles)
    bucket = _checked_bucket(options.bucket or default_bucket(account, region)) if asynchronous else None
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


def _model_options(options: DeployOptions) -> dict[Role, tuple[str, str, Any]]:
    """Options that choose one family's model by themselves, each as `--model FAMILY=ID` checked its own way:
    `--voice-model ID` (one of the voice models the Voice page knows: what it can do depends on the checkpoint)."""
    return {} if options.voice_model is None else {"voice": ("--voice-model", options.voice_model, check_voice_model)}


def _model_ids(options: DeployOptions, roles: tuple[Role, ...]) -> dict[Role, str]:
    """Each endpoint's model: --model ROLE=ID (or a family's own option, `_model_options`), else the family's
    default. A model of another family is refused; one the catalog does not know is accepted (plan_warnings()
    says so)."""
    shared, chosen = _split_role_values(options.models, "--model", roles)
    for role, (option, value, check) in _model_options(options).items():
        if role not in roles:
            raise UsageError(f"{option} {value!r} chooses the {role} endpoint's model, but this deployment does not "
                             f"include {role}: add {role} to the endpoints or leave {option} out")
        if role in chosen:
            raise UsageError(f"{option} and --model {role}=… both choose the {role} model: give one of them")
        chosen[role] = check(value)
    if shared is not None:
        raise UsageError(f"--model {shared!r} must name its endpoint, e.g. --model image=black-forest-labs/FLUX.2-klein-4B")
    model_ids: dict[Role, str] = {r: ROLE_PROFILES[r].model_id for r in roles}
    for role, value in chosen.items():
        if not value:
            raise UsageError(f"--model {role}= needs a model id after the =")
        known = catalog_model(value)
        if known is not None and known.family != role:
            article = "an" if known.family[0] in "aeiou" else "a"
            raise UsageError(f"--model {role}={value}: {known.id} is {article} {known.family} model; "
                             f"the {role} endpoint serves {role} models")
        model_ids[role] = known.id if known is not None else value
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
