"""Hourly on-demand prices of SageMaker endpoint instances: a shipped, dated table (services/prices.json).

Both the load sweeps (services/load: what an audio minute, an image, a video second costs) and infra (status,
cost, sweep; infra/pricing.py adds the Price List API refresh) read it here, the lowest layer that needs it.
`cost_of_seconds` prices instance time for all of them (an endpoint's uptime, a sweep's cap, an item's latency);
`spend` is what endpoints have cost so far and cost per hour, computed once for a screen (the cost banner and the
Endpoints page show the same figure, labelled when the account is the local emulator's).

A region missing from the table is priced with us-east-1's rate and says so (`basis`); an instance type
missing from it has no price rather than a guessed one.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

from protocol.errors import ConfigError

SHIPPED_PRICES = Path(__file__).with_name("prices.json")
REFERENCE_REGION = "us-east-1"
STALE_AFTER_DAYS = 180

SECONDS_PER_HOUR = 3600.0

PriceBasis = Literal["table", "reference region", "unknown"]


def cost_of_seconds(usd_per_hour: float | None, seconds: float | None) -> float | None:
    """What `seconds` of instance time cost at `usd_per_hour` (SageMaker bills per second): the one place the
    studio turns an hourly rate and a duration into dollars. None when either is unknown; negative time is 0."""
    if usd_per_hour is None or seconds is None:
        return None
    return usd_per_hour * max(seconds, 0.0) / SECONDS_PER_HOUR


@dataclass(frozen=True)
class Metered:
    """One endpoint's instance time as SageMaker and the price table say it: what its cost is computed from."""

    name: str
    usd_per_instance_hour: float | None  # its list price (None: the table has none)
    instances: int | None  # running now (None: not said, one assumed; 0: scaled to zero, nothing billed now)
    since: float | None  # when it began to bill (its CreationTime, epoch s); None: it bills nothing (gone, Failed)


SPEND_DIGITS = 4  # an endpoint's cost so far is kept to $0.0001, what a screen shows of a figure under a dollar


@dataclass(frozen=True)
class Spend:
    """What endpoints cost, computed once for everything a screen shows of it (the cost banner, the Endpoints page's
    table and totals): each endpoint's cost so far at one instant `at` — list price × the time since it began to
    bill, as SageMaker bills per second — rounded once to $0.0001, and the total the sum of those parts, so a
    table of them adds up to the total beside it; per hour, what runs now. `emulated`: these endpoints are the
    local SageMaker emulator's — the dollars price instances that never ran, and every figure says so."""

    at: float
    so_far: dict[str, float | None]
    per_hour: dict[str, float | None]
    emulated: bool = False

    @property
    def cost_so_far_usd(self) -> float:
        return round(sum(v for v in self.so_far.values() if v is not None), SPEND_DIGITS)

    @property
    def usd_per_hour(self) -> float:
        return sum(v for v in self.per_hour.values() if v is not None)

    def of(self, names: Iterable[str]) -> Spend:
        """The part of it that `names` cost (one deployment's endpoints of a region's)."""
        kept = set(names)
        return Spend(self.at, {n: v for n, v in self.so_far.items() if n in kept},
                     {n: v for n, v in self.per_hour.items() if n in kept}, self.emulated)

    def label(self, text: str) -> str:
        """`text` as a figure of this spend is labelled: "Cost so far (emulated)" on the emulator."""
        return f"{text} (emulated)" if self.emulated else text


def spend(endpoints: Iterable[Metered], *, at: float, emulated: bool = False) -> Spend:
    """The one computation of what `endpoints` cost at `at` (epoch seconds): see `Spend`."""
    so_far: dict[str, float | None] = {}
    per_hour: dict[str, float | None] = {}
    for e in endpoints:
        rate = e.usd_per_instance_hour
        if e.since is None:  # gone or Failed: nothing billed, nothing running
            so_far[e.name] = per_hour[e.name] = None
            continue
        cost = cost_of_seconds(rate, at - e.since)
        so_far[e.name] = None if cost is None else round(cost, SPEND_DIGITS)
        per_hour[e.name] = 0.0 if e.instances == 0 else None if rate is None else rate * (e.instances or 1)
    return Spend(at, so_far, per_hour, emulated)


Money = Literal["total", "rate", "unit"]


def usd(value: float | None, style: Money = "total") -> str:
    """Money, written one way per kind of figure (— when unknown):
    total — what was or will be spent: cents ($1,234.56), but 4 places under a dollar ($0.0412);
    rate  — an hourly price, as the price list quotes it: 4 places ($0.7364, $10.4000);
    unit  — a cost per image, audio minute, item: 4 significant digits, never an exponent ($0.009389)."""
    if value is None:
        return "—"
    if style == "rate":
        return f"${value:,.4f}"
    if style == "total":
        return f"${value:,.2f}" if abs(value) >= 1 else f"${value:,.4f}"
    if value == 0 or abs(value) >= 1:
        return f"${value:,.4f}" if abs(value) < 1000 else f"${value:,.2f}"
    decimals = 3 - math.floor(math.log10(abs(value)))
    return f"${value:.{decimals}f}"


class PriceTableError(ConfigError):
    """The price table file is missing or is not a price table; the message names the file."""


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
        return f"{usd(self.usd_per_hour, 'rate')}/h{suffix}"


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
    """The shipped table, or the one at `path` (e.g. saved by `python -m infra cost --refresh-prices
    --save-prices`). Parsed once per file version: the pages ask on every refresh. PriceTableError naming the
    file when it is missing or damaged."""
    path = Path(path) if path else SHIPPED_PRICES
    try:
        return _parse_prices(path, path.stat().st_mtime_ns)
    except FileNotFoundError:
        raise PriceTableError(f"price table {path} does not exist (leave --prices out to use the shipped table)") from None


@functools.lru_cache(maxsize=8)
def _parse_prices(path: Path, _version: int) -> PriceTable:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        regions = {str(r): {str(k): float(v) for k, v in t.items()} for r, t in data["regions"].items()}
        return PriceTable(source=str(data["source"]), as_of=date.fromisoformat(data["as_of"]),
                          currency=str(data.get("currency", "USD")), regions=regions,
                          note=str(data.get("note", "")), path=path)
    except FileNotFoundError:
        raise PriceTableError(f"price table {path} does not exist (leave --prices out to use the shipped table)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PriceTableError(f"price table {path} is not a valid price file ({exc})") from None
