"""Add: new endpoints for a running deployment — a family of the catalog it does not have yet (an opt-in one such as
listen, omni or sound, or one left out at deploy), planned with the deployment's own settings.

    result = add_endpoints(path, ["sound"], progress=print_progress)   # DeployResult of the new endpoints only

Order of work, as deploy's: the options (the families, --model, --instance-types) checked before any AWS call →
credentials (the deployment's account) → every endpoint already there InService (a deployment being deleted, not
finished or with an endpoint gone is settled first) → the plan, with the deployment's region, image tag (the one its endpoints
run now), execution role, S3 prefix, name prefix, KMS key, network and tags, the GPU fit of every pool entry → the
quota pre-check of the new pools (nothing is recorded when it fails) → the new endpoints recorded in the state
file's spec, with their autoscaling and TTL, BEFORE the first create (a crash from here on is finished by
`python -m infra resume`) → the TTL schedules → each new endpoint brought to InService (infra/converge.py, as
resume does). The endpoints already there are not touched. `status`, `smoke`, `upgrade` and `delete` then treat
the added endpoints like any other: they are in the spec.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path

from infra.aws import AwsContext
from infra.deploy import DeployResult, converge, quota_check
from infra.errors import RESUME_HINT, StateError, UsageError
from infra.lock import locked
from infra.model import ROLES, DeployOptions, EndpointSpec, Role, shell_command
from infra.planning import gpu_fit_line, plan, plan_warnings
from infra.progress import Progress, ProgressCallback, WaitSettings, lifecycle_say
from infra.state import DEFAULT_STATE_FILE, DeploymentState, EndpointRecord, ResourceRecord

# The options whose values may name one endpoint (ROLE=…): on `add`, only an endpoint being added.
PER_ENDPOINT = (("--model", "models"), ("--instance-types", "instance_types"), ("--model-s3-uri", "model_s3_uri"))


def _quiet(_: Progress) -> None:
    pass


def addable(state: DeploymentState) -> tuple[Role, ...]:
    """The catalog's families the deployment has no endpoint for, in catalog order (what `add` may add)."""
    return tuple(r for r in ROLES if r not in state.endpoints)


def add_command(families: Sequence[str], *, state_file: str | None = None, models: Sequence[str] = (),
                instance_types: Sequence[str] = (), smoke: bool = True) -> str:
    """The CLI line that does what `add_endpoints` does (the endpoints page shows it)."""
    args = list(families) + [a for v in instance_types for a in ("--instance-types", v)]
    args += [a for v in models for a in ("--model", v)]
    args += (["--state-file", state_file] if state_file else []) + ([] if smoke else ["--no-smoke"])
    return shell_command("add", args)


def check_families(state: DeploymentState, families: Sequence[str]) -> tuple[Role, ...]:
    """The families asked for, in catalog order; UsageError for none, an unknown one (naming the catalog's and
    those the deployment may add) or one the deployment already has (saying how to finish it if unfinished)."""
    asked = [f.strip().lower() for f in families if f.strip()]
    free = addable(state)
    can = f"this deployment can add {', '.join(free)}" if free else "this deployment already has every family"
    if not asked:
        raise UsageError(f"name the family to add: {can}")
    for name in asked:
        if name not in ROLES:
            raise UsageError(f"unknown family {name!r}: the catalog has {', '.join(ROLES)}; {can}")
        if name in state.endpoints:
            rec = state.endpoints[name]
            unfinished = rec.endpoint_status != "InService" or not rec.endpoint.exists
            raise UsageError(
                f"the deployment already has a {name} endpoint ({rec.endpoint.name}"
                + (f", recorded but not finished: {RESUME_HINT} to finish it" if unfinished else "")
                + f"); {can}. Another model on it is a new deployment, another image `python -m infra upgrade`")
    return tuple(r for r in ROLES if r in asked)


def _check_ttl(state: DeploymentState) -> None:
    """A deployment whose TTL has passed takes nothing new: its endpoints are gone or going."""
    from datetime import UTC, datetime

    from infra.ttl_choice import parse_iso

    ttl = state.ttl or {}
    if ttl.get("enabled") and ttl.get("expires_at") and parse_iso(ttl["expires_at"]) <= datetime.now(UTC):
        raise StateError(f"deployment {state.deployment_id}'s TTL ended at {ttl['expires_at']}: its endpoints delete "
                         "themselves, so nothing is added to it. `python -m infra extend --ttl 8h` if they are still "
                         "there, or deploy anew")


def _check_endpoints(ctx: AwsContext, state: DeploymentState) -> None:
    """Only a deployment whose endpoints are all InService takes new ones: not one being deleted, nor one still being
    created, failed or with an endpoint gone (resume or delete settles those first, so the phase the add leaves is
    true of the whole deployment)."""
    from infra.aws import AWS_ERRORS, translate
    from services.endpoint_view import describe_endpoint

    for role, rec in state.endpoints.items():
        try:
            view = describe_endpoint(ctx.sagemaker, rec.endpoint.name)
        except AWS_ERRORS as exc:
            raise translate(exc, f"describe endpoint {rec.endpoint.name}") from None
        status = "gone" if view.gone else view.status
        if status == "InService":
            continue
        if state.phase == "deleting" or rec.endpoint.status == "deleted":
            raise StateError(f"deployment {state.deployment_id} is being deleted (its {role} endpoint "
                             f"{rec.endpoint.name} is {status}): nothing can be added to it; finish with "
                             "`python -m infra delete`, then deploy anew")
        raise StateError(f"the deployment's {role} endpoint {rec.endpoint.name} is {status}, not InService: settle "
                         f"the deployment first — {RESUME_HINT} (it creates what is missing and recreates what "
                         f"failed) or `python -m infra delete {role}` — then add")


def _running_tag(state: DeploymentState) -> str | None:
    """The image tag every endpoint runs now when it is not the spec's (after an upgrade), else None."""
    tags = {state.spec.image_tag_of(e) for e in state.spec.endpoints}
    return next(iter(tags)) if len(tags) == 1 and tags != {state.spec.image_tag} else None


def _check_per_endpoint(options: dict[str, Sequence[str]], adding: tuple[Role, ...]) -> None:
    for flag, key in PER_ENDPOINT:
        for raw in options.get(key, ()):
            head = raw.partition("=")[0].strip().lower()
            if "=" in raw and head in ROLES and head not in adding:
                raise UsageError(f"{flag} {raw!r} names the {head} endpoint, which this command does not add (it adds "
                                 f"{', '.join(adding)}): an endpoint already deployed keeps its model and pool")


def plan_added(state: DeploymentState, adding: tuple[Role, ...], *, creator: str | None = None,
               models: Sequence[str] = (), instance_types: Sequence[str] = (), model_s3_uri: Sequence[str] = ()
               ) -> tuple[EndpointSpec, ...]:
    """The new endpoints' specs with the deployment's own settings (UsageError: a model, a pool or a fit)."""
    spec = state.spec
    _check_per_endpoint({"models": models, "instance_types": instance_types, "model_s3_uri": model_s3_uri}, adding)
    options = DeployOptions(roles=adding, region=spec.region, role_arn=spec.role_arn, image_tag=spec.image_tag,
                            instance_types=tuple(instance_types), bucket=spec.bucket, prefix=spec.prefix,
                            name_prefix=spec.name_prefix, kms_key=spec.kms_key, subnets=spec.subnets,
                            security_groups=spec.security_groups, model_s3_uri=tuple(model_s3_uri),
                            models=tuple(models))
    drafted = plan(options, account=spec.account, creator=creator or spec.creator, region=spec.region,
                   deployment_id=spec.deployment_id)
    tag = _running_tag(state)
    return tuple(dataclasses.replace(e, image_tag=tag) if tag else e for e in drafted.endpoints)


def _record(state: DeploymentState, new: tuple[EndpointSpec, ...]) -> None:
    """The new endpoints in the spec (catalog order) with planned records, their scaling and the bucket an async
    one needs (in memory: the caller saves). The TTL record is the deployment's; its schedules cover the spec."""
    from infra.planning import default_bucket
    from infra.scaling import plan_scaling

    spec = state.spec
    endpoints = sorted((*spec.endpoints, *new), key=lambda e: ROLES.index(e.role))
    bucket = spec.bucket or (default_bucket(spec.account, spec.region) if any(e.kind == "async" for e in new) else None)
    # Their scaling as the deployment's: its most instances, and an async endpoint to zero unless its own does not.
    most = max((p["max_instances"] for p in state.scaling.values()), default=1)
    to_zero = all((state.scaling.get(e.role) or {}).get("min_instances", 1) == 0
                  for e in spec.endpoints if e.kind == "async")
    with state.lock:
        state.spec = dataclasses.replace(spec, endpoints=tuple(endpoints), bucket=bucket)
        records = {**state.endpoints, **{e.role: EndpointRecord(e.role, ResourceRecord(e.model_name),
                                                                ResourceRecord(e.config_name),
                                                                ResourceRecord(e.endpoint_name)) for e in new}}
        state.endpoints = {r: records[r] for r in ROLES if r in records}
        state.scaling.update(plan_scaling(dataclasses.replace(spec, endpoints=new), most, to_zero))
        state.phase = "creating"


@locked("python -m infra add")
def add_endpoints(state_file: Path = DEFAULT_STATE_FILE, families: Sequence[str] = (), *, models: Sequence[str] = (),
                  instance_types: Sequence[str] = (), model_s3_uri: Sequence[str] = (), region: str | None = None,
                  profile: str | None = None, wait: WaitSettings = WaitSettings(),
                  progress: ProgressCallback | None = None, stop: threading.Event | None = None) -> DeployResult:
    """Add endpoints for `families` to the deployment in `state_file` (see the module's doc). Raises UsageError
    (a family, a model, a pool), StateError (no deployment, another region or account, one being deleted, not
    settled or past its TTL), QuotaShortfall (nothing recorded or created), CredentialsError; returns the
    DeployResult of the new endpoints once creation started. Holds the state file's lock throughout."""
    progress = progress or _quiet
    if not Path(state_file).exists():
        asked = " ".join(f"--with {f}" for f in families) or "--with FAMILY"
        raise StateError(f"no deployment to add to: there is no state file at {state_file} (pass --state-file with "
                         f"the one `python -m infra deploy` wrote, or deploy with them: `python -m infra deploy {asked}`)")
    state = DeploymentState.load(Path(state_file))
    if region and region != state.region:
        raise StateError(f"{state_file} records a deployment in {state.region}, not {region}: leave --region out")
    adding = check_families(state, families)
    _check_ttl(state)
    plan_added(state, adding, models=models, instance_types=instance_types, model_s3_uri=model_s3_uri)  # no AWS yet
    ctx = AwsContext(state.region, profile)
    identity = ctx.identity()
    if identity.account != state.spec.account:
        raise StateError(f"{state_file} records a deployment in account {state.spec.account}, but these credentials "
                         f"are for account {identity.account}: use the profile of account {state.spec.account}")
    _check_endpoints(ctx, state)
    new = plan_added(state, adding, creator=identity.arn, models=models, instance_types=instance_types,
                     model_s3_uri=model_s3_uri)
    progress(Progress(None, "plan", f"adding to deployment {state.deployment_id} in {state.region}: "
                      + ", ".join(f"{e.role} on {e.pool.flag()} ({state.spec.image_tag_of(e)})" for e in new)))
    for e in new:
        progress(Progress(e.role, "plan", f"{e.model_id}: {gpu_fit_line(e.model_id)}"))
    warnings = plan_warnings(dataclasses.replace(state.spec, endpoints=new))
    if any(e.model_data_uri for e in state.spec.endpoints) and not any(e.model_data_uri for e in new):
        warnings.append("the deployment's endpoints load their model files from S3 (a network without internet?); "
                        "the new one downloads from the Hugging Face hub — pass --model-s3-uri if it cannot")
    for warning in warnings:
        progress(Progress(None, "warning", f"warning: {warning}"))
    report = quota_check(ctx, {e.role: e.pool for e in new}, progress)
    _record(state, new)
    say = lifecycle_say(progress)
    ttl = state.ttl or {}
    if ttl.get("enabled") and ttl.get("role_arn") and not ttl.get("role_created"):
        from infra.ttl_role import check_scheduler_role, role_arn_for

        if ttl["role_arn"] != role_arn_for(state.spec):  # the operator's role: may it delete the new ones too?
            check_scheduler_role(ctx, state.spec, ttl["role_arn"], lambda text: say(None, "ttl", text))
    state.save()  # before the first create: every new name is on disk, and resume finishes them
    progress(Progress(None, "state", f"{', '.join(adding)} recorded in {state.path} (before creating anything)"))
    from infra.ttl import ensure_ttl

    ensure_ttl(ctx, state, lambda text: say(None, "ttl", text), roles=adding)  # their schedules first
    result = converge(ctx, state, wait, progress, stop, roles=adding)
    result.quota = report
    return result
