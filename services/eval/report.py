"""An evaluation's results (`results`: one dict, the JSON of `eval report`) and its renderings (csv, md, html).

Every figure is computed by services/eval/stats.py from the stored items and ratings, with its sample size.
The HTML is self-contained (inline CSS and SVG, no script, no network).
"""

from __future__ import annotations

import html
import itertools
import json
from typing import Any

from services import csvcells
from services.eval import stats
from services.eval.rated import fmt
from services.eval.registry import evaluation
from services.eval.store import EvalStore


def columns(res: dict[str, Any]) -> tuple[str, ...]:
    """The per-variant columns of this evaluation's report (its family's: listen has WER; voice adds
    intelligibility)."""
    return evaluation(res["modality"]).columns(res)


def comparisons(store: EvalStore, eval_id: str) -> list[stats.Comparison]:
    by_id = {i.id: i for i in store.items(eval_id)}
    return [stats.Comparison(by_id[r.item_a].variant, by_id[r.item_b].variant, r.winner, r.item_a, r.item_b, r.rater)
            for r in store.ratings(eval_id) if r.item_a in by_id and r.item_b in by_id]


def results(store: EvalStore, eval_id: str) -> dict[str, Any]:
    ev = store.get(eval_id)
    items = store.items(eval_id)
    comps = comparisons(store, eval_id)
    labels = ev.spec.labels
    part = evaluation(ev.modality)
    tallies = stats.variant_tallies(comps, labels)
    variants = []
    for label in labels:
        mine = [i for i in items if i.variant == label]
        ok = [i for i in mine if i.status == "succeeded"]
        latency = stats.summary(i.figures.get("latency_s") for i in ok)
        row: dict[str, Any] = {"label": label, "items": len(ok), "failed": sum(i.status == "failed" for i in mine),
                               **tallies[label], "latency_p50_s": latency["p50"], "latency_p95_s": latency["p95"],
                               "latency_n": latency["n"]}
        row |= part.timing(ok)
        cost = stats.cost_per_item(i.figures.get("cost_usd") for i in ok)
        row |= {"cost_per_item_usd": cost["usd"], "cost_n": cost["n"]}
        variants.append(row | part.measured(ev.spec, ok))
    rows = {v["label"]: v for v in variants}
    separation = [part.separate(a, b, tallies[a], tallies[b], rows) for a, b in itertools.combinations(labels, 2)]
    raters: dict[str, int] = {}
    for c in comps:
        raters[c.rater] = raters.get(c.rater, 0) + 1
    from services.eval.listening import intelligibility_label
    return {
        "id": ev.id, "name": ev.name, "modality": ev.modality, "created_at": ev.created_at,
        "intelligibility_target": intelligibility_label(ev.spec.intelligibility),
        "items": len(items), "succeeded": sum(i.status == "succeeded" for i in items),
        "failed": sum(i.status == "failed" for i in items), "ratings": len(comps),
        "variants": variants, "pairs": stats.win_matrix(comps, labels), "separation": separation,
        "raters": [{"name": k, "ratings": v} for k, v in sorted(raters.items())],
        "agreement": stats.agreement(comps),
        "method": {"win_rate": "(wins + ties/2) / ratings", "interval": "Wilson score, 95 %", "z": stats.Z95,
                   "percentiles": stats.PERCENTILE_METHOD,
                   "agreement": "percent agreement and Cohen's kappa on pairs rated by both raters",
                   "more_ratings": "smallest n per variant at which the Wilson intervals at the observed rates "
                                   "stop overlapping, minus the smaller current count",
                   "wer": stats.WER_METHOD},
    }


def verdicts(res: dict[str, Any]) -> list[str]:
    """Plain sentences on whether the intervals separate the variants."""
    return evaluation(res["modality"]).verdicts(res)


def variant_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's rows as its columns name them: each interval (`…ci95`) as its `…_low` and `…_high` ends."""
    rows = []
    for v in res["variants"]:
        ends = {}
        for key in [k for k in v if k.endswith("ci95")]:
            low, high = v.get(key) or [None, None]
            ends |= {f"{key}_low": low, f"{key}_high": high}
        rows.append({k: (ends | v).get(k) if k not in ends else ends[k] for k in columns(res)})
    return rows


def to_csv(res: dict[str, Any]) -> str:
    """One row per variant; a label a spreadsheet would run as a formula is quoted (services/csvcells.py)."""
    return csvcells.to_csv(variant_rows(res), columns(res))


def wer_lines(res: dict[str, Any]) -> list[str]:
    """One sentence per variant on its measured figures — its corpus WER with the bootstrap interval and sizes
    (listen, or a voice evaluation's intelligibility) — then how it was computed; none when nothing is measured."""
    return evaluation(res["modality"]).measured_lines(res)


def to_markdown(res: dict[str, Any]) -> str:
    return evaluation(res["modality"]).markdown(res)


def _chart(res: dict[str, Any]) -> str:
    """Win rates with their 95 % intervals as inline SVG."""
    rows = res["variants"]
    h = 30 * len(rows) + 30
    parts = [f'<svg width="520" height="{h}" role="img" '
             'aria-label="win rates with 95 % intervals">',
             f'<line x1="{120 + 175}" y1="0" x2="{120 + 175}" y2="{h - 20}" stroke="#bbb" stroke-dasharray="4"/>']
    for i, v in enumerate(rows):
        y = 20 + 30 * i
        parts.append(f'<text x="0" y="{y + 4}" font-size="12">{html.escape(v["label"])}</text>')
        if v["ci95"] is not None:
            lo, hi = (120 + 350 * x for x in v["ci95"])
            parts.append(f'<line x1="{lo:.1f}" y1="{y}" x2="{hi:.1f}" y2="{y}" stroke="#336" stroke-width="2"/>')
            parts.append(f'<circle cx="{120 + 350 * v["win_rate"]:.1f}" cy="{y}" r="5" fill="#c33"/>')
    parts.append(f'<text x="120" y="{h - 5}" font-size="10">0</text><text x="462" y="{h - 5}" font-size="10">1</text>')
    parts.append("</svg>")
    return "".join(parts)


def to_html(res: dict[str, Any], *, extra: str = "") -> str:
    """A self-contained page: the table, the chart, the win matrix, the verdicts, the raters."""
    e = html.escape
    part = evaluation(res["modality"])
    head = "".join(f"<th>{e(c)}</th>" for c in columns(res))
    body = "".join("<tr>" + "".join(f"<td>{e(fmt(r[c]))}</td>" for c in columns(res)) + "</tr>"
                   for r in variant_rows(res))
    labels = [v["label"] for v in res["variants"]]
    matrix = "<tr><th></th>" + "".join(f"<th>vs {e(b)}</th>" for b in labels) + "</tr>"
    for a in labels:
        cells = "".join("<td>—</td>" if a == b else
                        f"<td>{res['pairs'][a][b]['wins']}/{res['pairs'][a][b]['losses']}/{res['pairs'][a][b]['ties']}"
                        f" (n={res['pairs'][a][b]['n']})</td>" for b in labels)
        matrix += f"<tr><th>{e(a)}</th>{cells}</tr>"
    raters = "".join(f"<li>{e(r['name'])}: {r['ratings']} ratings</li>" for r in res["raters"])
    agree = "".join(f"<li>{e(a['raters'][0])} and {e(a['raters'][1])}: {a['percent_agreement']:.0%} agreement, "
                    f"Cohen's κ {e(fmt(a['kappa']))} (n={a['n']})</li>" for a in res["agreement"])
    verdict = "".join(f"<li>{e(s)}</li>" for s in [*verdicts(res), *wer_lines(res)])
    rated = "" if not part.rated else (
        f"<h2>Win rates (95 % intervals)</h2>{_chart(res)}<h2>Pairwise wins/losses/ties</h2><table>{matrix}</table>"
        f"<h2>Raters</h2><ul>{raters}</ul><ul>{agree}</ul>")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{e(res['name'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:4px 8px;text-align:right}}</style></head><body>
<h1>{e(res['name'])}</h1><p>{e(res['modality'])} evaluation {e(res['id'])}: {res['succeeded']} of {res['items']} items
made, {res['failed']} failed; {res['ratings']} ratings. {e(part.method_text(res))}</p>
<table><tr>{head}</tr>{body}</table>
{rated}<ul>{verdict}</ul>
{extra}
</body></html>
"""


def render(res: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(res, indent=2) + "\n"
    if fmt == "csv":
        return to_csv(res)
    if fmt == "md":
        return to_markdown(res)
    if fmt == "html":
        return to_html(res)
    raise ValueError(f"unknown format {fmt!r}")
