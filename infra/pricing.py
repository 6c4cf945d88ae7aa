"""Hourly on-demand prices of SageMaker endpoint instances: the shipped, dated table (services/prices.json,
read by services/pricing.py, which the load sweeps share) that the AWS Price List API can refresh — only when
asked (`cost --refresh-prices`), never by itself.

A region missing from the table is priced with us-east-1's rate and says so (`basis`); an instance type
missing from it has no price rather than a guessed one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from infra.errors import UsageError
from services.pricing import (  # noqa: F401  (re-exported: infra's callers and tests import them from here)
    REFERENCE_REGION,
    SHIPPED_PRICES,
    STALE_AFTER_DAYS,
    Price,
    PriceBasis,
    PriceTable,
    PriceTableError,
)
from services.pricing import cost_of_seconds as cost_so_far  # noqa: F401  (an endpoint's uptime priced)
from services.pricing import load_prices as load_price_table

PRICE_LIST_REGION = "us-east-1"  # the Price List API answers in us-east-1 (also eu-central-1, ap-south-1)
PRICE_LIST_SOURCE = "AWS Price List API (pricing:GetProducts, service AmazonSageMaker, on-demand Hosting)"


def load_prices(path: Path | None = None) -> PriceTable:
    """The shipped table, or the one at `path`; a missing or damaged file is a UsageError (exit 2) naming it."""
    try:
        return load_price_table(path)
    except PriceTableError as exc:
        raise UsageError(str(exc)) from None


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
