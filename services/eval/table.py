"""The results table a page shows: one row per variant in a few short columns — its family's own cells (a rated
family: ratings, wins–losses–ties, win rate and its interval in one cell; listen: WER; voice adds first audio and
intelligibility) between the items made and latency and cost — so it fits beside the sidebar. Every figure, with
its sample size, stays in the report (`variant_rows`, the CSV, the JSON)."""

from __future__ import annotations

from typing import Any

from services.eval.registry import evaluation
from services.pricing import usd


def _latency(v: dict[str, Any]) -> str | None:
    p50, p95 = v.get("latency_p50_s"), v.get("latency_p95_s")
    if p50 is None:
        return None
    return f"{p50:.2f} / {p95:.2f}" if p95 is not None else f"{p50:.2f}"


def people_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The short table's rows (a column empty for every variant is left out; "failed" only when any failed)."""
    part = evaluation(res["modality"])
    failed = any(v["failed"] for v in res["variants"])
    rows = []
    for v in res["variants"]:
        row: dict[str, Any] = {"variant": v["label"], "items": v["items"]}
        if failed:
            row["failed"] = v["failed"]
        row |= part.summary(v, res)
        cost = v.get("cost_per_item_usd")
        row |= {"latency p50 / p95 (s)": _latency(v), "cost / item": None if cost is None else usd(cost, "unit")}
        rows.append(row)
    empty = {k for k in rows[0] if all(r.get(k) is None for r in rows)} if rows else set()
    return [{k: val for k, val in r.items() if k not in empty} for r in rows]
