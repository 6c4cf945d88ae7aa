"""IAM: moto stores roles and policies; the emulator answers what moto does not implement.

- `SimulatePrincipalPolicy` (moto: "has not been implemented", a 500): evaluated here from the role's
  inline and attached policies as moto holds them — explicit Deny wins, then an Allow whose Action and
  Resource match (wildcards `*` and `?`; NotAction/NotResource too), else implicitDeny. Statements with a
  `Condition` are not evaluated and count as not matching (the simulation errs towards "denied"); a
  permissions boundary or SCP is not modelled.
- `may_assume` / `allowed` are what a schedule's role is checked with when it fires: Scheduler must be
  trusted by the role and the role must allow the call, or the call fails as AccessDenied.

Every other IAM action goes to moto unchanged.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from starlette.responses import Response

from emulator.errors import AwsError, query_xml_response, request_id

if TYPE_CHECKING:
    from emulator.forward import MotoClients

NS = "https://iam.amazonaws.com/doc/2010-05-08/"


def _list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str | dict) else list(value or [])


def _pattern(glob: str, *, ignore_case: bool) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(f"^{regex}$", re.IGNORECASE if ignore_case else 0)


def _matches(globs: list[str], value: str, *, ignore_case: bool) -> bool:
    return any(_pattern(g, ignore_case=ignore_case).match(value) for g in globs)


def _document(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else json.loads(urllib.parse.unquote(str(value)))


def _applies(st: dict[str, Any], action: str, resource: str) -> bool:
    if "Condition" in st:
        return False  # not evaluated here (see the module's note)
    if "Action" in st:
        hit = _matches(_list(st["Action"]), action, ignore_case=True)
    else:
        hit = not _matches(_list(st.get("NotAction")), action, ignore_case=True)
    if not hit:
        return False
    if "Resource" in st:
        return _matches(_list(st["Resource"]), resource, ignore_case=False)
    return not _matches(_list(st.get("NotResource")), resource, ignore_case=False)


def evaluate(policies: list[tuple[str, str, dict[str, Any]]], action: str, resource: str) -> tuple[str, list[dict[str, str]]]:
    """(EvalDecision, MatchedStatements) for `policies` = [(policy id, policy type, document)]."""
    allows: list[dict[str, str]] = []
    for policy_id, policy_type, doc in policies:
        for st in _list(doc.get("Statement")):
            if not isinstance(st, dict) or not _applies(st, action, resource):
                continue
            matched = {"SourcePolicyId": policy_id, "SourcePolicyType": policy_type}
            if st.get("Effect") == "Deny":
                return "explicitDeny", [matched]
            if st.get("Effect") == "Allow":
                allows.append(matched)
    return ("allowed", allows) if allows else ("implicitDeny", [])


def role_name_of(arn: str) -> str:
    if ":role/" not in arn:
        raise AwsError("InvalidInput", f"PolicySourceArn {arn!r} is not a role ARN; the emulator simulates roles only")
    return arn.rsplit("/", 1)[-1]


def _fetch(moto: MotoClients, role: str) -> tuple[dict[str, Any], list[tuple[str, str, dict[str, Any]]]]:
    """The role (its trust policy) and its permission policies, read from moto (blocking)."""
    iam = moto.client("iam")
    try:
        got = iam.get_role(RoleName=role)["Role"]
    except iam.exceptions.NoSuchEntityException:
        raise AwsError("NoSuchEntity", f"The role with name {role} cannot be found.", 404) from None
    policies: list[tuple[str, str, dict[str, Any]]] = []
    for name in iam.list_role_policies(RoleName=role).get("PolicyNames", []):
        doc = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        policies.append((name, "IAM Policy", _document(doc)))
    for attached in iam.list_attached_role_policies(RoleName=role).get("AttachedPolicies", []):
        version = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]["DefaultVersionId"]
        doc = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=version)["PolicyVersion"]["Document"]
        policies.append((attached["PolicyName"], "IAM Policy", _document(doc)))
    return got, policies


def trusts(role: dict[str, Any], service_principal: str) -> bool:
    for st in _list(_document(role.get("AssumeRolePolicyDocument") or {}).get("Statement")):
        principal = st.get("Principal") if isinstance(st, dict) else None
        services = _list(principal.get("Service")) if isinstance(principal, dict) else []
        if st.get("Effect") == "Allow" and service_principal in services and _matches(
                _list(st.get("Action")), "sts:AssumeRole", ignore_case=True):
            return True
    return False


def check_call(moto: MotoClients, role_arn: str, service_principal: str, action: str, resource: str) -> str | None:
    """Why a service assuming `role_arn` may not call `action` on `resource`; None when it may (blocking)."""
    try:
        role, policies = _fetch(moto, role_name_of(role_arn))
    except AwsError as err:
        return f"{err.code}: {err.message}"
    if not trusts(role, service_principal):
        return f"AccessDenied: {service_principal} is not trusted to assume the role {role_arn}"
    decision, _ = evaluate(policies, action, resource)
    if decision != "allowed":
        return (f"AccessDeniedException: User: {role_arn} is not authorized to perform: {action} on resource: "
                f"{resource} ({decision})")
    return None


def simulate_principal_policy(moto: MotoClients, form: dict[str, list[str]]) -> Response:
    """The query-protocol answer to SimulatePrincipalPolicy (blocking: run it in a thread)."""
    def members(prefix: str) -> list[str]:
        keys = sorted((k for k in form if k.startswith(prefix + ".member.")), key=lambda k: int(k.rsplit(".", 1)[-1]))
        return [form[k][0] for k in keys]

    try:
        source = (form.get("PolicySourceArn") or [""])[0]
        actions, resources = members("ActionNames"), members("ResourceArns") or ["*"]
        if not source or not actions:
            raise AwsError("ValidationError", "PolicySourceArn and at least one ActionNames member are required")
        _, policies = _fetch(moto, role_name_of(source))
    except AwsError as err:
        return query_xml_response(err)
    results = []
    for action in actions:
        for resource in resources:
            decision, matched = evaluate(policies, action, resource)
            statements = "".join(f"<member><SourcePolicyId>{escape(m['SourcePolicyId'])}</SourcePolicyId>"
                                 f"<SourcePolicyType>{escape(m['SourcePolicyType'])}</SourcePolicyType></member>"
                                 for m in matched)
            results.append(f"<member><EvalActionName>{escape(action)}</EvalActionName>"
                           f"<EvalResourceName>{escape(resource)}</EvalResourceName>"
                           f"<EvalDecision>{decision}</EvalDecision><MatchedStatements>{statements}</MatchedStatements>"
                           "<MissingContextValues/></member>")
    rid = request_id()
    xml = (f'<SimulatePrincipalPolicyResponse xmlns="{NS}"><SimulatePrincipalPolicyResult>'
           f"<IsTruncated>false</IsTruncated><EvaluationResults>{''.join(results)}</EvaluationResults>"
           f"</SimulatePrincipalPolicyResult><ResponseMetadata><RequestId>{rid}</RequestId></ResponseMetadata>"
           "</SimulatePrincipalPolicyResponse>")
    return Response(xml, media_type="text/xml", headers={"x-amzn-RequestId": rid})
