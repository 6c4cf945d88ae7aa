"""The IAM role EventBridge Scheduler assumes to delete a deployment's endpoints at their TTL.

Either the one given (`--scheduler-role-arn`: `check_scheduler_role` reads its trust and simulates
sagemaker:DeleteEndpoint on every endpoint before anything is created), or deploy's own
(`omni-studio-ttl-<deployment id>` under the path /omni-studio/, trusting scheduler.amazonaws.com for this
account only, with an inline policy allowing sagemaker:DeleteEndpoint on exactly these endpoints' ARNs, tagged):
`ensure_role` creates it, `delete_role` removes it. infra/ttl.py holds the schedules that use it.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from infra.aws import AWS_ERRORS, AwsContext, error_code, translate
from infra.errors import AccessDenied, UsageError
from infra.model import PROJECT, DeploymentSpec
from infra.state import DeploymentState

SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"
ROLE_PATH = f"/{PROJECT}/"
POLICY_NAME = f"{PROJECT}-delete-endpoints"


# ---------------------------------------------------------------------------------------------------------
# Names and policies
def role_name(spec: DeploymentSpec) -> str:
    return f"{PROJECT}-ttl-{spec.deployment_id}"


def partition(region: str) -> str:
    return "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"


def endpoint_arn(spec: DeploymentSpec, name: str) -> str:
    """SageMaker ARNs carry the resource name in lower case."""
    return f"arn:{partition(spec.region)}:sagemaker:{spec.region}:{spec.account}:endpoint/{name.lower()}"


def role_arn_for(spec: DeploymentSpec) -> str:
    return f"arn:{partition(spec.region)}:iam::{spec.account}:role{ROLE_PATH}{role_name(spec)}"


def delete_policy(endpoint_arns: Iterable[str]) -> dict[str, Any]:
    """The permission Scheduler needs: DeleteEndpoint on exactly these endpoints."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "DeleteTheStudioEndpointsAtTheirTTL", "Effect": "Allow", "Action": "sagemaker:DeleteEndpoint",
        "Resource": sorted(set(endpoint_arns))}]}


def trust_policy(account: str) -> dict[str, Any]:
    """Scheduler may assume the role, for schedules of this account only (the confused-deputy guard)."""
    return {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": SCHEDULER_PRINCIPAL}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"aws:SourceAccount": account}}}]}


# ---------------------------------------------------------------------------------------------------------
# The role given with --scheduler-role-arn
def _document(value: Any) -> dict[str, Any]:
    """A policy document as IAM returns it: a dict from boto3, or URL-encoded JSON text."""
    if isinstance(value, dict):
        return value
    return json.loads(urllib.parse.unquote(str(value)))


def _statements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    items = doc.get("Statement", [])
    return items if isinstance(items, list) else [items]


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def trusts_scheduler(doc: dict[str, Any]) -> bool:
    for st in _statements(doc):
        services = _as_list((st.get("Principal") or {}).get("Service")) if isinstance(st.get("Principal"), dict) else []
        actions = [a.lower() for a in _as_list(st.get("Action"))]
        if st.get("Effect") == "Allow" and SCHEDULER_PRINCIPAL in services and (
                {"sts:assumerole", "sts:*", "*"} & set(actions)):
            return True
    return False


def check_scheduler_role(ctx: AwsContext, spec: DeploymentSpec, role_arn: str,
                         progress: Callable[[str], None] = lambda _: None) -> None:
    """The role given for the schedules: it exists, trusts EventBridge Scheduler, and may call
    sagemaker:DeleteEndpoint on every endpoint of the deployment (iam:SimulatePrincipalPolicy). Raises
    UsageError / AccessDenied naming the statement or policy to add; a check the caller may not run is said
    through `progress` and skipped (the schedules would then fail at their time)."""
    if not re.match(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$", role_arn):
        raise UsageError(f"--scheduler-role-arn {role_arn!r} is not an IAM role ARN (arn:aws:iam::123456789012:role/Name)")
    iam = ctx.client("iam")
    name = role_arn.rsplit("/", 1)[-1]
    arns = [endpoint_arn(spec, e.endpoint_name) for e in spec.endpoints]
    policy = json.dumps(delete_policy(arns), indent=2)
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except AWS_ERRORS as exc:
        if error_code(exc) == "NoSuchEntity":
            raise UsageError(f"--scheduler-role-arn {role_arn}: there is no such role in account {spec.account}. Create "
                             "it (trusting scheduler.amazonaws.com) or leave the option out: deploy then creates one "
                             "with exactly the permission it needs") from None
        if error_code(exc) in ("AccessDenied", "AccessDeniedException"):
            progress(f"could not read the scheduler role {name} (iam:GetRole is denied): its trust and permissions "
                     "are not checked; if it lacks them the endpoints will NOT delete themselves")
            return
        raise translate(exc, f"read the scheduler role {name}") from None
    if not trusts_scheduler(_document(role.get("AssumeRolePolicyDocument") or {})):
        statement = json.dumps(trust_policy(spec.account)["Statement"][0], indent=2)
        raise UsageError(f"the scheduler role {role_arn} does not let EventBridge Scheduler assume it: add this "
                         f"statement to its trust relationships (IAM → Roles → {name} → Trust relationships):\n"
                         f"{statement}")
    try:
        results: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"PolicySourceArn": role_arn, "ActionNames": ["sagemaker:DeleteEndpoint"],
                                  "ResourceArns": arns}
        while True:
            page = iam.simulate_principal_policy(**kwargs)
            results += page.get("EvaluationResults", [])
            if not page.get("IsTruncated"):
                break
            kwargs["Marker"] = page["Marker"]
    except AWS_ERRORS as exc:
        if error_code(exc) in ("AccessDenied", "AccessDeniedException"):
            progress(f"could not check what the scheduler role {name} may do (iam:SimulatePrincipalPolicy is denied "
                     "to you); if it lacks sagemaker:DeleteEndpoint the endpoints will NOT delete themselves")
            return
        raise translate(exc, f"check the permissions of the scheduler role {name}") from None
    denied = sorted(r.get("EvalResourceName", "?") for r in results if r.get("EvalDecision") != "allowed")
    if denied:
        raise AccessDenied(f"the scheduler role {role_arn} may not delete {', '.join(denied)} (sagemaker:DeleteEndpoint "
                           f"is not allowed), so these endpoints would NOT delete themselves. Nothing was created. "
                           f"Add this policy to the role (IAM → Roles → {name} → Add permissions → Create inline "
                           f"policy), or leave --scheduler-role-arn out and deploy creates a role with it:\n{policy}")
    progress(f"scheduler role {name}: trusts scheduler.amazonaws.com and may delete the {len(arns)} endpoint(s)")


# ---------------------------------------------------------------------------------------------------------
# Deploy's own role
def ensure_role(ctx: AwsContext, state: DeploymentState, progress: Callable[[str], None]) -> str:
    """Create deploy's own role for the schedules (or find it), record it in the state, and give it DeleteEndpoint
    on exactly the deployment's endpoints. Its ARN."""
    spec = state.spec
    iam = ctx.client("iam")
    name = role_name(spec)
    try:
        arn = iam.create_role(RoleName=name, Path=ROLE_PATH, AssumeRolePolicyDocument=json.dumps(trust_policy(spec.account)),
                              Description=f"EventBridge Scheduler deletes the endpoints of studio deployment "
                                          f"{spec.deployment_id} at their TTL", Tags=spec.tags(None))["Role"]["Arn"]
        progress(f"scheduler role {name} created (trusts scheduler.amazonaws.com; may delete only these endpoints)")
    except AWS_ERRORS as exc:
        if error_code(exc) != "EntityAlreadyExists":
            raise
        arn = iam.get_role(RoleName=name)["Role"]["Arn"]
    with state.lock:
        state.ttl["role_arn"], state.ttl["role_created"] = arn, True  # type: ignore[index]
    state.save()
    arns = [endpoint_arn(spec, e.endpoint_name) for e in spec.endpoints]
    iam.put_role_policy(RoleName=name, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(delete_policy(arns)))
    return arn


def delete_role(ctx: AwsContext, name: str) -> str:
    """Inline policies, attached policies, then the role; "already gone" is fine."""
    iam = ctx.client("iam")
    try:
        for policy in iam.list_role_policies(RoleName=name).get("PolicyNames", []):
            iam.delete_role_policy(RoleName=name, PolicyName=policy)
        for attached in iam.list_attached_role_policies(RoleName=name).get("AttachedPolicies", []):
            iam.detach_role_policy(RoleName=name, PolicyArn=attached["PolicyArn"])
    except AWS_ERRORS as exc:
        if error_code(exc) == "NoSuchEntity":
            return "already gone"
        raise
    try:
        iam.delete_role(RoleName=name)
    except AWS_ERRORS as exc:
        if error_code(exc) in ("ResourceNotFoundException", "NoSuchEntity"):
            return "already gone"
        raise
    return "deleted"
