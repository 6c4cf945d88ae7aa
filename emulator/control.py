"""The control plane: SageMaker (JSON 1.1, `X-Amz-Target: SageMaker.<Op>`), Service Quotas
(`ServiceQuotasV20190624.<Op>`) and STS GetCallerIdentity (query protocol), all on `POST /`.

Each operation takes the decoded request and returns the response members; requests are first checked
against botocore's input shape (enums, ranges, lengths, patterns), as the real services do.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emulator import shapes, versions
from emulator.capacity import quota_name
from emulator.errors import AwsError, validation
from emulator.records import Deployment, EndpointRecord
from emulator.registry import Registry

SAGEMAKER = "sagemaker"
SERVICE_QUOTAS = "service-quotas"
Handler = Callable[[Registry, dict[str, Any]], dict[str, Any]]


def check_input(service: str, op_name: str, params: dict[str, Any]) -> None:
    op = shapes.operation(service, op_name)
    if op is None:
        raise AwsError("UnknownOperationException", f"The emulator does not implement {op_name}", 400)
    problems = shapes.validation_problems(op.input_shape, params)
    if problems:
        raise validation(shapes.format_problems(problems))


# --------------------------------------------------------------------------------------------------
# SageMaker: models and endpoint configs — each kept as the request that created it
@dataclass(frozen=True)
class _KeptAsRequest:
    """Create, Describe, Delete and List of a resource SageMaker keeps as its create request: `noun` names
    its members (`ModelName`, `ModelArn`) and operations (`CreateModel` …); `plural` is List's answer key."""

    noun: str
    plural: str
    records: Callable[[Registry], dict[str, Any]]  # name -> record (with .name, .arn, .created, .spec)
    create: Callable[[Registry, str, dict[str, Any], list[dict[str, str]]], Any]
    get: Callable[[Registry, str], Any]
    delete: Callable[[Registry, str], None]

    def handlers(self) -> dict[str, Handler]:
        name, arn = f"{self.noun}Name", f"{self.noun}Arn"

        def create(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
            spec = {k: v for k, v in p.items() if k not in (name, "Tags")}
            return {arn: self.create(reg, p[name], spec, p.get("Tags", [])).arn}

        def describe(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
            r = self.get(reg, p[name])
            return {name: r.name, arn: r.arn, "CreationTime": r.created, **r.spec}

        def delete(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
            self.delete(reg, p[name])
            return {}

        def list_all(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
            items, token = _page(list(self.records(reg).values()), p, name=lambda r: r.name, created=lambda r: r.created)
            return {self.plural: [{name: r.name, arn: r.arn, "CreationTime": r.created} for r in items], **token}

        return {f"Create{self.noun}": create, f"Describe{self.noun}": describe, f"Delete{self.noun}": delete,
                f"List{self.plural}": list_all}


_MODELS = _KeptAsRequest("Model", "Models", lambda reg: reg.models, Registry.create_model, Registry.model,
                         Registry.delete_model)
_CONFIGS = _KeptAsRequest("EndpointConfig", "EndpointConfigs", lambda reg: reg.configs,
                          Registry.create_endpoint_config, Registry.endpoint_config, Registry.delete_endpoint_config)


# --------------------------------------------------------------------------------------------------
# SageMaker: endpoints
def create_endpoint(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    return {"EndpointArn": reg.create_endpoint(p["EndpointName"], p["EndpointConfigName"], p.get("Tags", [])).arn}


def update_endpoint(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    return {"EndpointArn": reg.update_endpoint(p["EndpointName"], p["EndpointConfigName"], p.get("DeploymentConfig"),
                                               bool(p.get("RetainDeploymentConfig"))).arn}


def delete_endpoint(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    reg.delete_endpoint(p["EndpointName"])
    return {}


def _variant_summary(d: Deployment, *, live: bool, status: str | None, since: float) -> dict[str, Any]:
    v = d.variant
    count = d.instance_count if live else 0
    out: dict[str, Any] = {
        "VariantName": d.name,
        "CurrentWeight": float(v.get("InitialVariantWeight", 1.0)),
        "DesiredWeight": float(v.get("InitialVariantWeight", 1.0)),
        "CurrentInstanceCount": count,
        "DesiredInstanceCount": d.instance_count if d.desired_count is None else d.desired_count,
    }
    if d.images:
        out["DeployedImages"] = d.images
    if v.get("InstancePools"):
        # Where SageMaker reports the type in use: the pool entry holding the instances.
        out["InstancePools"] = [
            {"InstanceType": e["InstanceType"], "CurrentInstanceCount": count if e["InstanceType"] == d.instance_type else 0}
            for e in sorted(v["InstancePools"], key=lambda e: e["Priority"])
        ]
    if v.get("ServerlessConfig"):
        out["CurrentServerlessConfig"] = out["DesiredServerlessConfig"] = v["ServerlessConfig"]
    if status is not None:
        out["VariantStatus"] = [{"Status": status, "StatusMessage": d.status_message[:1024], "StartTime": since}]
    return out


def describe_endpoint(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    ep: EndpointRecord = reg.endpoint(p["EndpointName"])
    out: dict[str, Any] = {
        "EndpointName": ep.name,
        "EndpointArn": ep.arn,
        "EndpointConfigName": ep.config_name,
        "EndpointStatus": ep.status,
        "CreationTime": ep.created,
        "LastModifiedTime": ep.modified,
    }
    if ep.failure_reason:
        out["FailureReason"] = ep.failure_reason
    if ep.status == "Creating":
        out["ProductionVariants"] = [_variant_summary(d, live=False, status="Creating", since=ep.status_since) for d in ep.pending]
    elif ep.status == "Failed":
        out["ProductionVariants"] = [_variant_summary(d, live=False, status=None, since=ep.status_since) for d in ep.pending or ep.live]
    else:
        variant_status = "Deleting" if ep.status == "Deleting" else None
        out["ProductionVariants"] = [_variant_summary(d, live=True, status=variant_status, since=ep.status_since) for d in ep.live]
    if ep.status == "Updating" and ep.pending_config:
        baking = bool(ep.blue)  # the new fleet has the traffic; the old one waits out the bake
        out["PendingDeploymentSummary"] = {
            "EndpointConfigName": ep.pending_config,
            "StartTime": ep.status_since,
            "ProductionVariants": [
                {k: v for k, v in _variant_summary(d, live=baking, status="Baking" if baking else "Creating",
                                                   since=ep.status_since).items()
                 if k not in ("DeployedImages",)}
                | ({"InstanceType": d.instance_type} if d.instance_type else {})
                for d in (ep.live if baking else ep.pending)
            ],
        }
    out.update(versions.describe_extras(ep))
    if ep.async_config:
        out["AsyncInferenceConfig"] = ep.async_config
    return out


def list_endpoints(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    def summary(e: EndpointRecord) -> dict[str, Any]:
        return {
            "EndpointName": e.name, "EndpointArn": e.arn, "CreationTime": e.created,
            "LastModifiedTime": e.modified, "EndpointStatus": e.status,
        }

    candidates = list(reg.endpoints.values())
    if status := p.get("StatusEquals"):
        candidates = [e for e in candidates if e.status == status]
    if before := p.get("LastModifiedTimeBefore"):
        candidates = [e for e in candidates if e.modified < float(before)]
    if after := p.get("LastModifiedTimeAfter"):
        candidates = [e for e in candidates if e.modified > float(after)]
    items, token = _page(candidates, p, name=lambda e: e.name, created=lambda e: e.created, status=lambda e: e.status)
    return {"Endpoints": [summary(e) for e in items], **token}


# --------------------------------------------------------------------------------------------------
# SageMaker: tags
def add_tags(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    reg.add_tags(p["ResourceArn"], p["Tags"])
    return {"Tags": p["Tags"]}


def delete_tags(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    reg.delete_tags(p["ResourceArn"], p["TagKeys"])
    return {}


def list_tags(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    tags = reg.list_tags(p["ResourceArn"])
    start = _decode_token(p.get("NextToken"))
    size = int(p.get("MaxResults") or 50)
    out: dict[str, Any] = {"Tags": tags[start:start + size]}
    if start + size < len(tags):
        out["NextToken"] = _encode_token(start + size)
    return out


SAGEMAKER_OPS: dict[str, Handler] = {
    **_MODELS.handlers(),
    **_CONFIGS.handlers(),
    "CreateEndpoint": create_endpoint,
    "DescribeEndpoint": describe_endpoint,
    "DeleteEndpoint": delete_endpoint,
    "ListEndpoints": list_endpoints,
    "UpdateEndpoint": update_endpoint,
    "AddTags": add_tags,
    "DeleteTags": delete_tags,
    "ListTags": list_tags,
}


def sagemaker_call(reg: Registry, op_name: str, params: dict[str, Any]) -> dict[str, Any]:
    handler = SAGEMAKER_OPS.get(op_name)
    if handler is None:
        raise AwsError(
            "UnknownOperationException",
            f"The local SageMaker emulator does not implement {op_name}; it serves "
            + ", ".join(sorted(SAGEMAKER_OPS)),
        )
    check_input(SAGEMAKER, op_name, params)
    return handler(reg, params)


# --------------------------------------------------------------------------------------------------
# Listing helpers: SageMaker's sort orders, time filters and opaque NextToken paging.
def _encode_token(offset: int) -> str:
    return base64.b64encode(f"offset:{offset}".encode()).decode()


def _decode_token(token: str | None) -> int:
    if not token:
        return 0
    try:
        kind, _, value = base64.b64decode(token.encode(), validate=True).decode().partition(":")
        if kind == "offset" and value.isdigit():
            return int(value)
    except (ValueError, UnicodeDecodeError):
        pass
    raise validation(f"Invalid pagination token {token!r}: pass the NextToken of the previous page unchanged")


def _page(
    items: list[Any],
    p: dict[str, Any],
    *,
    name: Callable[[Any], str],
    created: Callable[[Any], float],
    status: Callable[[Any], str] | None = None,
) -> tuple[list[Any], dict[str, str]]:
    if contains := p.get("NameContains"):
        items = [i for i in items if contains.lower() in name(i).lower()]
    if before := p.get("CreationTimeBefore"):
        items = [i for i in items if created(i) < float(before)]
    if after := p.get("CreationTimeAfter"):
        items = [i for i in items if created(i) > float(after)]
    sort_by = p.get("SortBy", "CreationTime")
    key: Callable[[Any], Any] = {"Name": lambda i: name(i).lower(), "Status": status or created}.get(sort_by, created)
    items = sorted(items, key=key, reverse=p.get("SortOrder", "Descending") == "Descending")
    start = _decode_token(p.get("NextToken"))
    size = int(p.get("MaxResults") or 10)  # SageMaker's default page size is 10
    token = {"NextToken": _encode_token(start + size)} if start + size < len(items) else {}
    return items[start:start + size], token


# --------------------------------------------------------------------------------------------------
# Service Quotas: "ml.<type> for endpoint usage" for every instance type botocore knows.
def quota_code(instance_type: str) -> str:
    return "L-" + hashlib.sha256(quota_name(instance_type).encode()).hexdigest()[:8].upper()


def _instance_types() -> list[str]:
    return shapes.enum_values(SAGEMAKER, "ProductionVariantInstanceType")


def _quota(reg: Registry, instance_type: str) -> dict[str, Any]:
    code = quota_code(instance_type)
    return {
        "ServiceCode": "sagemaker",
        "ServiceName": "Amazon SageMaker",
        "QuotaArn": f"arn:aws:servicequotas:{reg.config.region}:{reg.config.account_id}:sagemaker/{code}",
        "QuotaCode": code,
        "QuotaName": quota_name(instance_type),
        "Value": float(reg.config.quota_for(instance_type)),
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
        "QuotaAppliedAtLevel": "ACCOUNT",
        "Description": f"The maximum number of {instance_type} instances allowed across all endpoints in this account and Region.",
    }


def _require_sagemaker(p: dict[str, Any]) -> None:
    if p.get("ServiceCode") != "sagemaker":
        raise AwsError(
            "NoSuchResourceException",
            f"The emulator only has quotas for service code 'sagemaker' (got {p.get('ServiceCode')!r})",
        )


def list_service_quotas(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    _require_sagemaker(p)
    quotas = [_quota(reg, t) for t in _instance_types()]
    if code := p.get("QuotaCode"):
        quotas = [q for q in quotas if q["QuotaCode"] == code]
    start = _decode_token(p.get("NextToken"))
    size = int(p.get("MaxResults") or 100)
    out: dict[str, Any] = {"Quotas": quotas[start:start + size]}
    if start + size < len(quotas):
        out["NextToken"] = _encode_token(start + size)
    return out


def get_service_quota(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    _require_sagemaker(p)
    for t in _instance_types():
        if quota_code(t) == p["QuotaCode"]:
            return {"Quota": _quota(reg, t)}
    raise AwsError("NoSuchResourceException", f"The request failed because the specified quota {p['QuotaCode']} does not exist.")


def list_services(reg: Registry, p: dict[str, Any]) -> dict[str, Any]:
    return {"Services": [{"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker"}]}


QUOTA_OPS: dict[str, Handler] = {
    "ListServiceQuotas": list_service_quotas,
    "GetServiceQuota": get_service_quota,
    "ListServices": list_services,
}


def quotas_call(reg: Registry, op_name: str, params: dict[str, Any]) -> dict[str, Any]:
    handler = QUOTA_OPS.get(op_name)
    if handler is None:
        raise AwsError("UnknownOperationException", f"The emulator's Service Quotas implements only {', '.join(QUOTA_OPS)}")
    op = shapes.operation(SERVICE_QUOTAS, op_name)
    problems = shapes.validation_problems(op.input_shape if op else None, params)
    if problems:
        raise AwsError("IllegalArgumentException", shapes.format_problems(problems))
    return handler(reg, params)


# --------------------------------------------------------------------------------------------------
# STS
def caller_identity_xml(reg: Registry, access_key_id: str, request_id: str) -> str:
    account = reg.config.account_id
    user_id = "AIDA" + hashlib.sha256(access_key_id.encode()).hexdigest()[:17].upper()
    return (
        '<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>'
        f"<Arn>arn:aws:iam::{account}:user/omni-studio-emulator</Arn><UserId>{user_id}</UserId>"
        f"<Account>{account}</Account></GetCallerIdentityResult>"
        f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></GetCallerIdentityResponse>"
    )


