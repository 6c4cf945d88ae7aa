"""Percentiles and summaries, computed one way everywhere: load sweeps, conversations, evaluations, benchmarks.

Percentiles use the **nearest-rank** definition: for n values sorted ascending, x[1] ≤ … ≤ x[n], the p-th
percentile (0 < p ≤ 100) is x[⌈p/100 · n⌉], and the 0th is x[1]. It is always one of the recorded values (no
interpolation), so anyone can recompute it from a report's samples by sorting and counting: with 20 samples
p95 is the 19th smallest, with 10 samples it is the largest, and p50 of 4 values is the 2nd smallest. Every
summary carries its sample size `n`, because a p95 of 8 samples says less than one of 800.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

PERCENTILE_METHOD = "nearest-rank"


def percentile(values: Iterable[float], p: float) -> float | None:
    """The nearest-rank p-th percentile of `values` (see the module docstring); None when there are none."""
    if not 0 <= p <= 100:
        raise ValueError(f"a percentile is between 0 and 100, not {p}")
    ordered = sorted(float(v) for v in values)
    if not ordered:
        return None
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(values: Iterable[float | None], *, digits: int = 4) -> dict[str, Any]:
    """`{"n", "p50", "p95", "max"}` of the values that are not None (nearest-rank; None throughout when n = 0)."""
    kept = [float(v) for v in values if v is not None]
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, digits)
    return {"n": len(kept), "p50": r(percentile(kept, 50)), "p95": r(percentile(kept, 95)),
            "max": r(max(kept) if kept else None)}
