"""Hourly on-demand prices of SageMaker endpoint instances: a shipped, dated table (infra/prices.json)
that the AWS Price List API can refresh — only when asked (`cost --refresh-prices`), never by itself.

A region missing from the table is priced with us-east-1's rate and says so (`basis`); an instance type
missing from it has no price rather than a guessed one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from infra.errors import UsageError

SHIPPED_PRICES = Path(__file__).with_name("prices.json")
REFERENCE_REGION = "us-east-1"
STALE_AFTER_DAYS = 180
PRICE_LIST_REGION = "us-east-1"  # the Price List API answers in us-east-1 (also eu-central-1, ap-south-1)
PRICE_LIST_SOURCE = "AWS Price List API (pricing:GetProducts, service AmazonSageMaker, on-demand Hosting)"

PriceBasis = Literal["table", "reference region", "unknown"]


@dataclass(frozen=True)
class Price:
    instance_type: str
    region: str
    usd_per_hour: float | None
    basis: PriceBasis  # "reference region": the us-east-1 rate stands in for a region the table lacks

    @property
    def known(self) -> bool:
        return self.usd_per_hour is not None

    def label(self) -> str:
        if self.usd_per_hour is None:
            return "no price"
        suffix = f" (≈, {REFERENCE_REGION} rate)" if self.basis == "reference region" else ""
        return f"${self.usd_per_hour:.4f}/h{suffix}"


@dataclass(frozen=True)
class PriceTable:
    source: str
    as_of: date
    currency: str
    regions: dict[str, dict[str, float]]
    note: str = ""
    path: Path | None = field(default=None, compare=False)

    def hourly(self, instance_type: str, region: str) -> Price:
        if (v := self.regions.get(region, {}).get(instance_type)) is not None:
            return Price(instance_type, region, float(v), "table")
        if region not in self.regions and (v := self.regions.get(REFERENCE_REGION, {}).get(instance_type)) is not None:
            return Price(instance_type, region, float(v), "reference region")
        return Price(instance_type, region, None, "unknown")

    def age_days(self, today: date | None = None) -> int:
        return ((today or datetime.now(UTC).date()) - self.as_of).days

    def stale(self, today: date | None = None) -> bool:
        return self.age_days(today) > STALE_AFTER_DAYS

    def describe(self) -> str:
        return f"list prices as of {self.as_of.isoformat()} from {self.source.split(', ')[0]}"

    def merged(self, newer: PriceTable) -> PriceTable:
        """This table with `newer`'s figures on top (a refresh may cover only some types)."""
        regions = {r: dict(t) for r, t in self.regions.items()}
        for r, t in newer.regions.items():
            regions.setdefault(r, {}).update(t)
        return PriceTable(newer.source, newer.as_of, newer.currency, regions, newer.note, newer.path)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "as_of": self.as_of.isoformat(), "currency": self.currency,
                "note": self.note, "regions": self.regions}

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")


def load_prices(path: Path | None = None) -> PriceTable:
    """The shipped table, or the one at `path` (e.g. saved by `cost --refresh-prices --save-prices`).
    Parsed once per file version: the endpoints page asks on every refresh."""
    path = Path(path) if path else SHIPPED_PRICES
    try:
        return _parse_prices(path, path.stat().st_mtime_ns)
    except FileNotFoundError:
        raise UsageError(f"price table {path} does not exist (leave --prices out to use the shipped table)") from None


@functools.lru_cache(maxsize=8)
def _parse_prices(path: Path, _version: int) -> PriceTable:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        regions = {str(r): {str(k): float(v) for k, v in t.items()} for r, t in data["regions"].items()}
        return PriceTable(source=str(data["source"]), as_of=date.fromisoformat(data["as_of"]),
                          currency=str(data.get("currency", "USD")), regions=regions,
                          note=str(data.get("note", "")), path=path)
    except FileNotFoundError:
        raise UsageError(f"price table {path} does not exist (leave --prices out to use the shipped table)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"price table {path} is not a valid price file ({exc})") from None


def cost_so_far(usd_per_hour: float | None, seconds: float | None) -> float | None:
    if usd_per_hour is None or seconds is None:
        return None
    return usd_per_hour * max(seconds, 0.0) / 3600.0


# ---------------------------------------------------------------------------------------------------------
# The Price List API (only on request: it needs credentials and the internet)
def price_from_products(price_list: Iterable[str | dict[str, Any]], instance_type: str) -> float | None:
    """The on-demand hourly USD rate of real-time hosting on `instance_type` in GetProducts' PriceList.

    SageMaker products for one instance name cover training, notebooks, hosting, ...; hosting is the one
    whose usage type reads `<REGION>-Host:<instance type>`.
    """
    for item in price_list:
        product = json.loads(item) if isinstance(item, str) else item
        attrs = product.get("product", {}).get("attributes", {})
        usage = str(attrs.get("usagetype", ""))
        if not usage.endswith(f"Host:{instance_type}"):
            continue
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = dim.get("pricePerUnit", {}).get("USD")
                if usd is not None and float(usd) > 0:
                    return float(usd)
    return None


def refresh_prices(ctx: Any, instance_types: Iterable[str], region: str) -> PriceTable:
    """Ask the Price List API for each instance type's hosting rate in `region`. Needs pricing:GetProducts."""
    from infra.aws import AWS_ERRORS, translate

    client = ctx.session.client("pricing", region_name=PRICE_LIST_REGION)
    found: dict[str, float] = {}
    for itype in dict.fromkeys(instance_types):
        filters = [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": itype},
        ]
        try:
            pages = client.get_paginator("get_products").paginate(ServiceCode="AmazonSageMaker", Filters=filters)
            price = None
            for page in pages:
                price = price_from_products(page.get("PriceList", []), itype)
                if price is not None:
                    break
        except AWS_ERRORS as exc:
            raise translate(exc, f"read the price of {itype} from the AWS Price List API") from None
        if price is not None:
            found[itype] = price
    return PriceTable(source=PRICE_LIST_SOURCE, as_of=datetime.now(UTC).date(), currency="USD",
                      regions={region: found}, note="Refreshed by `python -m infra cost --refresh-prices`.")
