"""The emulator's Price List stand-in through a real boto3 `pricing` client: GetProducts answers in the real
API's shape (PriceList entries are JSON strings; hosting, training and notebook products per instance name),
filters, paging, the Price List regions, and the config that replaces its figures."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from botocore.exceptions import ClientError

from infra.pricing import price_from_products

if TYPE_CHECKING:
    from tests.emulator_support import EmulatorHandle

pytest_plugins = ["tests.emulator_support"]


def _filters(region: str, instance_type: str | None = None) -> list[dict[str, str]]:
    out = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}]
    if instance_type:
        out.append({"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type})
    return out


def test_get_products_answers_json_strings_with_hosting_and_other_products(emulator: EmulatorHandle):
    pricing = emulator.client("pricing")
    out = pricing.get_products(ServiceCode="AmazonSageMaker", Filters=_filters("eu-west-1", "ml.g6.xlarge"),
                               FormatVersion="aws_v1")
    assert out["FormatVersion"] == "aws_v1"
    assert all(isinstance(item, str) for item in out["PriceList"])
    products = [json.loads(item) for item in out["PriceList"]]
    usage = sorted(p["product"]["attributes"]["usagetype"] for p in products)
    assert usage == ["EU-Host:ml.g6.xlarge", "EU-Notebk:ml.g6.xlarge", "EU-Train:ml.g6.xlarge"]
    hosting = next(p for p in products if p["product"]["attributes"]["component"] == "Hosting")
    (term,) = hosting["terms"]["OnDemand"].values()
    (dimension,) = term["priceDimensions"].values()
    assert dimension["unit"] == "Hrs" and dimension["pricePerUnit"]["USD"] == "1.2618000000"
    assert hosting["publicationDate"].endswith("Z") and hosting["serviceCode"] == "AmazonSageMaker"
    # The studio's reader picks the hosting product out of the three.
    assert price_from_products(out["PriceList"], "ml.g6.xlarge") == pytest.approx(1.2618)


def test_get_products_pages_and_filters(emulator: EmulatorHandle):
    pricing = emulator.client("pricing")
    pages = list(pricing.get_paginator("get_products").paginate(
        ServiceCode="AmazonSageMaker", Filters=_filters("us-east-1"), PaginationConfig={"PageSize": 5}))
    items = [i for page in pages for i in page["PriceList"]]
    assert len(pages) == 3 and len(items) == 12  # 4 instance types x (hosting, training, notebook)
    hosting = pricing.get_products(ServiceCode="AmazonSageMaker", Filters=[
        *_filters("us-east-1"), {"Type": "CONTAINS", "Field": "usagetype", "Value": "-Host:"}])["PriceList"]
    assert len(hosting) == 4
    assert pricing.get_products(ServiceCode="AmazonSageMaker", Filters=_filters("mars-north-1"))["PriceList"] == []


def test_price_list_refuses_other_services_and_regions_and_takes_configured_figures(emulator: EmulatorHandle):
    with pytest.raises(ClientError) as info:
        emulator.client("pricing").get_products(ServiceCode="AmazonEC2")
    assert info.value.response["Error"]["Code"] == "NotFoundException"

    import boto3

    other = boto3.session.Session().client(
        "pricing", region_name="eu-west-1", endpoint_url=emulator.http_url, aws_access_key_id="AKIAPRICINGTEST00001",
        aws_secret_access_key="x", aws_session_token="y")
    with pytest.raises(ClientError) as info:
        other.get_products(ServiceCode="AmazonSageMaker")
    assert info.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert "us-east-1, eu-central-1, ap-south-1" in info.value.response["Error"]["Message"]

    emulator.configure(prices={"ap-south-1": {"ml.g5.xlarge": 1.5}})
    found = emulator.client("pricing").get_products(ServiceCode="AmazonSageMaker",
                                                    Filters=_filters("ap-south-1", "ml.g5.xlarge"))["PriceList"]
    assert price_from_products(found, "ml.g5.xlarge") == 1.5
    assert emulator.client("pricing").get_products(ServiceCode="AmazonSageMaker",
                                                   Filters=_filters("us-east-1"))["PriceList"] == []


def test_refresh_prices_reads_the_same_pages_as_plan_and_leaves_out_types_without_a_price(
        emulator_env: EmulatorHandle):
    """`infra cost --refresh-prices` and `infra plan` page through GetProducts with one function."""
    from emulator.pricing import PRICES
    from infra.aws import AwsContext
    from infra.price_list import refresh_prices

    table = refresh_prices(AwsContext("us-east-1", None), ["ml.g6.xlarge", "ml.g4dn.xlarge", "ml.nosuch.xlarge"],
                           "us-east-1")
    assert table.regions == {"us-east-1": {"ml.g6.xlarge": PRICES["us-east-1"]["ml.g6.xlarge"],
                                           "ml.g4dn.xlarge": PRICES["us-east-1"]["ml.g4dn.xlarge"]}}
    assert "Price List API" in table.source and table.note.startswith("Refreshed by")
