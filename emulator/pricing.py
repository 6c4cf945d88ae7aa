"""A stand-in for the AWS Price List API (`pricing`, JSON 1.1, `X-Amz-Target: AWSPriceListService.GetProducts`).

It answers GetProducts for service code `AmazonSageMaker` as the real API does: `FormatVersion` and a
`PriceList` of JSON *strings*, one per product, each with `product.attributes` (`regionCode`,
`instanceName`, `usagetype` such as `USE1-Host:ml.g6.xlarge`, `component`), `terms.OnDemand.<sku>.
<offer term>.priceDimensions.<rate code>.pricePerUnit.USD` as a decimal string, `version` and
`publicationDate`. Every instance name has several products (real-time hosting, training, notebooks), so a
reader must pick the hosting one by its usage type, as it must against AWS.

The figures are the emulator's own (a few GPU types in a few regions, `PRICES`; `EmulatorConfig.prices`
replaces them), not a copy of AWS's price list. Like AWS, the API answers requests signed for us-east-1,
eu-central-1 or ap-south-1 only, whatever region the emulator serves.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from emulator import shapes
from emulator.auth import caller_from_headers
from emulator.errors import AwsError

SERVICE = "pricing"
SERVICE_CODE = "AmazonSageMaker"
PRICE_LIST_REGIONS = ("us-east-1", "eu-central-1", "ap-south-1")
PUBLICATION_DATE = "2026-11-14T18:05:32Z"
VERSION = "20261114180532"
ON_DEMAND_TERM = "JRTCKXETXF"  # the offer term code AWS uses for on-demand
RATE_CODE = "6YS6EN2CT7"

# Region -> instance type -> on-demand USD per hour of real-time hosting (the emulator's figures).
PRICES: dict[str, dict[str, float]] = {
    "us-east-1": {"ml.g4dn.xlarge": 0.7364, "ml.g5.xlarge": 1.4084, "ml.g6.xlarge": 1.1267,
                  "ml.g6e.xlarge": 2.6112},
    "us-west-2": {"ml.g4dn.xlarge": 0.7364, "ml.g5.xlarge": 1.4084, "ml.g6.xlarge": 1.1267,
                  "ml.g6e.xlarge": 2.6112},
    "eu-west-1": {"ml.g4dn.xlarge": 0.8212, "ml.g5.xlarge": 1.5780, "ml.g6.xlarge": 1.2618,
                  "ml.g6e.xlarge": 2.9244},
    "eu-central-1": {"ml.g4dn.xlarge": 0.8740, "ml.g5.xlarge": 1.6900, "ml.g6.xlarge": 1.3520},
}
# Usage-type prefixes AWS uses per region (the part before "-Host:").
USAGE_PREFIX = {"us-east-1": "USE1", "us-east-2": "USE2", "us-west-2": "USW2", "eu-west-1": "EU",
                "eu-central-1": "EUC1", "ap-south-1": "APS3", "ap-northeast-1": "APN1"}
LOCATIONS = {"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-2": "US West (Oregon)",
             "eu-west-1": "EU (Ireland)", "eu-central-1": "EU (Frankfurt)", "ap-south-1": "Asia Pacific (Mumbai)",
             "ap-northeast-1": "Asia Pacific (Tokyo)"}
# The other products every instance name has: (component, usage type infix, price factor).
OTHER_COMPONENTS = (("Training", "Train", 1.2), ("Notebook", "Notebk", 0.85))


def authorize(headers: Mapping[str, str], meter: Any, allowed_calls: int | None) -> None:
    """Signed, for a Price List region, within the credential-expiry fault's count."""
    caller = caller_from_headers(headers)
    if caller.region not in PRICE_LIST_REGIONS:
        raise AwsError("InvalidSignatureException",
                       f"Credential should be scoped to a valid region: the Price List API answers in "
                       f"{', '.join(PRICE_LIST_REGIONS)}, the request was signed for {caller.region}", 403)
    meter.charge(caller, allowed_calls)


def _sku(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:16].upper()


def product(region: str, instance_type: str, usd: float, component: str = "Hosting", infix: str = "Host") -> str:
    """One PriceList entry, a JSON string shaped like AWS's."""
    sku = _sku(region, instance_type, component)
    term = f"{sku}.{ON_DEMAND_TERM}"
    rate = f"{term}.{RATE_CODE}"
    usage = f"{USAGE_PREFIX.get(region, region.upper())}-{infix}:{instance_type}"
    location = LOCATIONS.get(region, region)
    item = {
        "product": {
            "productFamily": "ML Instance",
            "attributes": {
                "regionCode": region, "servicecode": SERVICE_CODE, "usagetype": usage, "locationType": "AWS Region",
                "location": location, "servicename": "Amazon SageMaker", "instanceName": instance_type,
                "component": component, "operation": "RunInstance", "computeType": "Instance",
            },
            "sku": sku,
        },
        "serviceCode": SERVICE_CODE,
        "terms": {"OnDemand": {term: {
            "priceDimensions": {rate: {
                "unit": "Hrs", "endRange": "Inf", "appliesTo": [], "rateCode": rate, "beginRange": "0",
                "description": f"${usd:.4f} per {component} {instance_type} instance hour in {location}",
                "pricePerUnit": {"USD": f"{usd:.10f}"},
            }},
            "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": ON_DEMAND_TERM,
            "termAttributes": {},
        }}},
        "version": VERSION,
        "publicationDate": PUBLICATION_DATE,
    }
    return json.dumps(item, separators=(",", ":"))


def _catalog(prices: Mapping[str, Mapping[str, float]]) -> list[tuple[dict[str, str], str]]:
    """(attributes, PriceList string) of every product, hosting and the others."""
    out = []
    for region, table in prices.items():
        for itype, usd in table.items():
            entries = [product(region, itype, usd)] + [product(region, itype, round(usd * factor, 4), component, infix)
                                                       for component, infix, factor in OTHER_COMPONENTS]
            for text in entries:
                out.append((json.loads(text)["product"]["attributes"], text))
    return out


def _matches(attributes: dict[str, str], filters: list[dict[str, Any]]) -> bool:
    lowered = {k.lower(): str(v) for k, v in attributes.items()}
    for f in filters:
        field, value, kind = str(f.get("Field", "")).lower(), str(f.get("Value", "")), f.get("Type", "TERM_MATCH")
        have = lowered.get(field)
        if field == "servicecode":
            have = SERVICE_CODE
        if have is None:
            return False
        if kind in ("TERM_MATCH", "EQUALS") and have.lower() != value.lower():
            return False
        if kind == "CONTAINS" and value.lower() not in have.lower():
            return False
        if kind == "ANY_OF" and have.lower() not in {v.strip().lower() for v in value.split(",")}:
            return False
        if kind == "NONE_OF" and have.lower() in {v.strip().lower() for v in value.split(",")}:
            return False
    return True


def get_products(prices: Mapping[str, Mapping[str, float]], p: dict[str, Any]) -> dict[str, Any]:
    if p.get("ServiceCode") != SERVICE_CODE:
        raise AwsError("NotFoundException", f"The emulator's Price List answers for {SERVICE_CODE} only "
                                            f"(got service code {p.get('ServiceCode')!r})")
    found = [text for attrs, text in _catalog(prices) if _matches(attrs, p.get("Filters") or [])]
    start = 0
    if token := p.get("NextToken"):
        try:
            start = int(base64.b64decode(token.encode(), validate=True).decode().removeprefix("offset:"))
        except ValueError:
            raise AwsError("InvalidNextTokenException", "The pagination token is invalid. Try again without a "
                                                        "pagination token.") from None
    size = int(p.get("MaxResults") or 100)
    out: dict[str, Any] = {"FormatVersion": p.get("FormatVersion") or "aws_v1", "PriceList": found[start:start + size]}
    if start + size < len(found):
        out["NextToken"] = base64.b64encode(f"offset:{start + size}".encode()).decode()
    return out


def pricing_call(prices: Mapping[str, Mapping[str, float]] | None, op_name: str, params: dict[str, Any]) -> dict[str, Any]:
    """One Price List operation (GetProducts only), its input checked against botocore's model first."""
    if op_name != "GetProducts":
        raise AwsError("UnknownOperationException", f"The emulator's Price List implements only GetProducts (not {op_name})")
    op = shapes.operation(SERVICE, op_name)
    problems = shapes.validation_problems(op.input_shape if op else None, params)
    if problems:
        raise AwsError("InvalidParameterException", shapes.format_problems(problems))
    return get_products(PRICES if prices is None else prices, params)
