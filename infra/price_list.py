"""On-demand hosting prices for a region: the AWS Price List API first, the bundled table when it cannot be
reached — and the answer always says which it was and how old its figures are.

    prices = region_prices(session, "eu-west-1", ["ml.g6.xlarge", "ml.g5.xlarge"])
    prices.usd("ml.g6.xlarge"), prices.source_of("ml.g6.xlarge"), prices.describe()

The Price List API (`pricing:GetProducts`, service code `AmazonSageMaker`) answers in us-east-1 for every
region; each product is a JSON string, and one instance name has several (hosting, training, notebooks):
the hosting one is read (`infra.pricing.price_from_products`), its `publicationDate` is the figures' date.
A type the API has no hosting price for in that region falls back to the table on its own, and says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal

from botocore.config import Config

from infra.errors import InfraError
from infra.pricing import (
    PRICE_LIST_REGION,
    PRICE_LIST_SOURCE,
    PriceTable,
    load_prices,
    price_from_products,
)

SERVICE_CODE = "AmazonSageMaker"
PriceSource = Literal["price list", "table", "table (us-east-1 rate)", "none"]
API_NAME = "the AWS Price List API"
TABLE_NAME = "the bundled price table (services/prices.json)"


@dataclass(frozen=True)
class RegionPrices:
    region: str
    api_used: bool  # True: the Price List API answered (some types may still come from the table)
    usd_per_hour: dict[str, float | None]
    sources: dict[str, PriceSource]
    api_date: date | None  # the Price List's publicationDate
    table_date: date
    fallback_reason: str | None = None  # why the API was not used
    notes: list[str] = field(default_factory=list)

    def usd(self, instance_type: str) -> float | None:
        return self.usd_per_hour.get(instance_type)

    def source_of(self, instance_type: str) -> PriceSource:
        return self.sources.get(instance_type, "none")

    def describe(self) -> str:
        """One line: which source, its date, and why the table stood in."""
        table = f"{TABLE_NAME}, as of {self.table_date.isoformat()}"
        if not self.api_used:
            return f"prices from {table} — {self.fallback_reason}"
        from_table = [t for t, s in self.sources.items() if s.startswith("table")]
        text = f"prices from {API_NAME}" + (f", published {self.api_date.isoformat()}" if self.api_date else "")
        if from_table:
            text += f"; {', '.join(from_table)} from {table} (the API has no hosting price for them in {self.region})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "source": "price list" if self.api_used else "table",
                "api_date": None if self.api_date is None else self.api_date.isoformat(),
                "table_date": self.table_date.isoformat(), "fallback_reason": self.fallback_reason,
                "usd_per_hour": dict(self.usd_per_hour), "sources": dict(self.sources), "describe": self.describe()}


def publication_date(price_list: Iterable[str | dict[str, Any]]) -> date | None:
    """The newest `publicationDate` among GetProducts' entries (None when none carries one)."""
    dates = []
    for item in price_list:
        product = json.loads(item) if isinstance(item, str) else item
        text = str(product.get("publicationDate") or "")
        try:
            dates.append(date.fromisoformat(text[:10]))
        except ValueError:
            continue
    return max(dates) if dates else None


def fetch_from_api(session: Any, region: str, instance_types: Iterable[str]) -> tuple[dict[str, float | None], date | None]:
    """Each type's hosting rate in `region` from the Price List API (None where it has none). Raises
    InfraError when the API cannot be reached or refuses (network, credentials, pricing:GetProducts)."""
    from infra.aws import AWS_ERRORS, translate

    client = session.client("pricing", region_name=PRICE_LIST_REGION, config=Config(
        retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30,
        user_agent_extra="omni-studio-infra"))
    found: dict[str, float | None] = {}
    newest: date | None = None
    for itype in dict.fromkeys(instance_types):
        filters = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
                   {"Type": "TERM_MATCH", "Field": "instanceName", "Value": itype}]
        price = None
        try:
            for page in client.get_paginator("get_products").paginate(ServiceCode=SERVICE_CODE, Filters=filters,
                                                                        FormatVersion="aws_v1"):
                items = page.get("PriceList", [])
                price = price_from_products(items, itype)
                if price is not None:
                    published = publication_date(items)
                    if published is not None and (newest is None or published > newest):
                        newest = published
                    break
        except AWS_ERRORS as exc:
            raise translate(exc, f"read the price of {itype} in {region} from the AWS Price List API "
                                 "(pricing:GetProducts)") from None
        found[itype] = price
    return found, newest


def refresh_prices(ctx: Any, instance_types: Iterable[str], region: str) -> PriceTable:
    """A price table of each instance type's hosting rate in `region`, read from the Price List API now
    (`python -m infra cost --refresh-prices`). Needs pricing:GetProducts."""
    found, _published = fetch_from_api(ctx.session, region, instance_types)
    return PriceTable(source=PRICE_LIST_SOURCE, as_of=datetime.now(UTC).date(), currency="USD",
                      regions={region: {t: p for t, p in found.items() if p is not None}},
                      note="Refreshed by `python -m infra cost --refresh-prices`.")


def region_prices(session: Any, region: str, instance_types: Iterable[str], *, table: PriceTable | None = None,
                  use_api: bool = True) -> RegionPrices:
    """Prices of `instance_types` in `region`: the Price List API, else the bundled table (saying why)."""
    types = list(dict.fromkeys(instance_types))
    table = table or load_prices()
    from_api: dict[str, float | None] = {}
    api_date: date | None = None
    reason: str | None = "not asked (--no-price-list)" if not use_api else None
    if use_api:
        try:
            from_api, api_date = fetch_from_api(session, region, types)
        except InfraError as exc:
            reason = f"{API_NAME} could not be reached: {exc}"
    usd: dict[str, float | None] = {}
    sources: dict[str, PriceSource] = {}
    for t in types:
        if from_api.get(t) is not None:
            usd[t], sources[t] = from_api[t], "price list"
            continue
        price = table.hourly(t, region)
        usd[t] = price.usd_per_hour
        sources[t] = ("none" if price.usd_per_hour is None else
                      "table (us-east-1 rate)" if price.basis == "reference region" else "table")
    return RegionPrices(region, reason is None, usd, sources, api_date, table.as_of, reason)
