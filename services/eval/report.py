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
from services.eval.store import EvalStore
from services.pricing import usd

VARIANT_COLUMNS = ("label", "items", "failed", "ratings", "wins", "losses", "ties", "win_rate", "ci95_low",
                   "ci95_high", "latency_p50_s", "latency_p95_s", "latency_n", "ttfa_p50_ms", "ttfa_p95_ms",
                   "cost_per_item_usd")
LISTEN_COLUMNS = ("label", "items", "failed", "wer", "wer_ci95_low", "wer_ci95_high", "utterances", "ref_words",
                  "word_errors", "latency_p50_s", "latency_p95_s", "latency_n", "cost_per_item_usd")
INTELLIGIBILITY_COLUMNS = ("intelligibility_wer", "intelligibility_ci95_low", "intelligibility_ci95_high",
                           "intelligibility_n", "intelligibility_words")


def columns(res: dict[str, Any]) -> tuple[str, ...]:
    """The per-variant columns of this evaluation's report (listen: WER; voice: win rates and intelligibility)."""
    if res["modality"] == "listen":
        return LISTEN_COLUMNS
    return VARIANT_COLUMNS + (INTELLIGIBILITY_COLUMNS if res.get("intelligibility_target") else ())


def _wer_row(prefix: str, pairs: list[tuple[int, int]]) -> dict[str, Any]:
    w = stats.wer_bootstrap(pairs)
    return {f"{prefix}wer": w["wer"], f"{prefix}ci95": w["ci95"], f"{prefix}n": w["n"], f"{prefix}words": w["words"],
            f"{prefix}errors": w["errors"]}


def heard_figures(modality: str, intelligibility: Any, ok: list[Any]) -> dict[str, Any]:
    """Listen: the corpus WER of the variant's transcripts with its bootstrap interval; voice: the intelligibility
    of its speech (the same figures over the takes a listen target heard)."""
    if modality == "listen":
        w = _wer_row("", [(i.figures["errors"], i.figures["words"]) for i in ok if "words" in i.figures])
        return {"wer": w["wer"], "wer_ci95": w["ci95"], "utterances": w["n"], "ref_words": w["words"],
                "word_errors": w["errors"]}
    if modality == "voice" and intelligibility:
        return _wer_row("intelligibility_", [(i.figures["intel_errors"], i.figures["intel_words"])
                                             for i in ok if "intel_words" in i.figures])
    return {}


def comparisons(store: EvalStore, eval_id: str) -> list[stats.Comparison]:
    by_id = {i.id: i for i in store.items(eval_id)}
    return [stats.Comparison(by_id[r.item_a].variant, by_id[r.item_b].variant, r.winner, r.item_a, r.item_b, r.rater)
            for r in store.ratings(eval_id) if r.item_a in by_id and r.item_b in by_id]


def results(store: EvalStore, eval_id: str) -> dict[str, Any]:
    ev = store.get(eval_id)
    items = store.items(eval_id)
    comps = comparisons(store, eval_id)
    labels = ev.spec.labels
    tallies = stats.variant_tallies(comps, labels)
    variants = []
    for label in labels:
        mine = [i for i in items if i.variant == label]
        ok = [i for i in mine if i.status == "succeeded"]
        latency = stats.summary(i.figures.get("latency_s") for i in ok)
        row: dict[str, Any] = {"label": label, "items": len(ok), "failed": sum(i.status == "failed" for i in mine),
                               **tallies[label], "latency_p50_s": latency["p50"], "latency_p95_s": latency["p95"],
                               "latency_n": latency["n"]}
        if ev.modality == "voice":
            ttfa = stats.summary(i.figures.get("ttfa_ms") for i in ok)
            row |= {"ttfa_p50_ms": ttfa["p50"], "ttfa_p95_ms": ttfa["p95"], "ttfa_n": ttfa["n"]}
        cost = stats.cost_per_item(i.figures.get("cost_usd") for i in ok)
        row |= {"cost_per_item_usd": cost["usd"], "cost_n": cost["n"]}
        variants.append(row | heard_figures(ev.modality, ev.spec.intelligibility, ok))
    separation = []
    for a, b in itertools.combinations(labels, 2):
        ta, tb = tallies[a], tallies[b]
        overlap = stats.intervals_overlap(ta["ci95"], tb["ci95"])
        if ev.modality == "listen":  # WER is measured, not rated: its bootstrap intervals decide
            wa, wb = (next(v for v in variants if v["label"] == x) for x in (a, b))
            overlap = stats.intervals_overlap(wa["wer_ci95"], wb["wer_ci95"])
            separation.append({"a": a, "b": b, "overlap": overlap, "more_ratings": None, "n_each": None})
            continue
        more = None
        if overlap and ta["ratings"] and tb["ratings"]:
            more = stats.more_ratings_to_separate(ta["win_rate"], ta["ratings"], tb["win_rate"], tb["ratings"])
        separation.append({"a": a, "b": b, "overlap": overlap,
                           "more_ratings": None if more is None else more["more"],
                           "n_each": None if more is None else more["n_each"]})
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


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def verdicts(res: dict[str, Any]) -> list[str]:
    """Plain sentences on whether the intervals separate the variants."""
    out = []
    if res["modality"] == "listen":
        return [f"{s['a']} vs {s['b']}: the WER 95 % intervals " + (
            "overlap — no significant difference at these utterances." if s["overlap"] else
            "do not overlap — a significant difference.") for s in res["separation"]]
    for s in res["separation"]:
        if not s["overlap"]:
            out.append(f"{s['a']} vs {s['b']}: the 95 % intervals do not overlap — a significant difference.")
        elif s["more_ratings"] is not None:
            out.append(f"{s['a']} vs {s['b']}: no significant difference yet — about {s['more_ratings']} more "
                       f"ratings would separate them (if the win rates hold).")
        else:
            out.append(f"{s['a']} vs {s['b']}: no significant difference (the win rates are equal, or there are "
                       "no ratings yet).")
    return out


def variant_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for v in res["variants"]:
        ends = {}
        for key in ("ci95", "wer_ci95", "intelligibility_ci95"):
            low, high = v.get(key) or [None, None]
            ends |= {f"{key}_low": low, f"{key}_high": high}
        rows.append({k: (ends | v).get(k) if k not in ends else ends[k] for k in columns(res)})
    return rows


def to_csv(res: dict[str, Any]) -> str:
    """One row per variant; a label a spreadsheet would run as a formula is quoted (services/csvcells.py)."""
    return csvcells.to_csv(variant_rows(res), columns(res))


def _wer_text(wer: float | None, ci: list[float] | None, n: int, words: int) -> str:
    if wer is None:
        return f"— (n={n} utterances)"
    interval = "" if ci is None else f" [{ci[0]:.1%}, {ci[1]:.1%}]"
    return f"{wer:.1%}{interval} (n={n} utterances, {words} words)"


def wer_lines(res: dict[str, Any]) -> list[str]:
    """One sentence per variant: its corpus WER with the bootstrap interval and sizes (listen, or a voice
    evaluation's intelligibility), then how it was computed."""
    if res["modality"] == "listen":
        lines = [f"{v['label']}: WER {_wer_text(v['wer'], v['wer_ci95'], v['utterances'], v['ref_words'])}"
                 for v in res["variants"]]
    elif res.get("intelligibility_target"):
        lines = [f"{v['label']}: intelligibility WER {_wer_text(v['intelligibility_wer'], v['intelligibility_ci95'],
                                                                v['intelligibility_n'], v['intelligibility_words'])}"
                 for v in res["variants"]]
        lines.append(f"Heard by {res['intelligibility_target']}.")
    else:
        return []
    return [*lines, f"Method: {res['method']['wer']}."]


def to_markdown(res: dict[str, Any]) -> str:
    if res["modality"] == "listen":
        return "\n".join([f"# {res['name']} (listen, {res['id']})", "",
                          f"{res['succeeded']} of {res['items']} items transcribed, {res['failed']} failed.", "",
                          *[f"- {line}" for line in wer_lines(res)], *[f"- {s}" for s in verdicts(res)]]) + "\n"
    lines = [f"# {res['name']} ({res['modality']}, {res['id']})", "",
             f"{res['succeeded']} of {res['items']} items made, {res['failed']} failed; {res['ratings']} ratings by "
             f"{len(res['raters'])} rater(s).", "",
             "| variant | items | ratings | W / L / T | win rate | 95 % CI | latency p50 / p95 (s) | cost / item |",
             "|---|---|---|---|---|---|---|---|"]
    for v in res["variants"]:
        ci = "—" if v["ci95"] is None else f"[{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]"
        cost = "unknown" if v["cost_per_item_usd"] is None else usd(v["cost_per_item_usd"], "unit")
        lines.append(f"| {v['label']} | {v['items']} | {v['ratings']} | {v['wins']} / {v['losses']} / {v['ties']} | "
                     f"{_fmt(v['win_rate'])} | {ci} | {_fmt(v['latency_p50_s'])} / {_fmt(v['latency_p95_s'])} "
                     f"(n={v['latency_n']}) | {cost} |")
    lines += ["", *[f"- {s}" for s in verdicts(res)], *[f"- {line}" for line in wer_lines(res)]]
    for a in res["agreement"]:
        lines.append(f"- raters {a['raters'][0]} and {a['raters'][1]}: {a['percent_agreement']:.0%} agreement, "
                     f"Cohen's κ {_fmt(a['kappa'])} on {a['n']} shared pairs")
    return "\n".join(lines) + "\n"


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


def _method_text(res: dict[str, Any]) -> str:
    if res["modality"] == "listen":
        return "Word error rates are objective: no blind rating. " + html.escape(res["method"]["wer"]) + "."
    return "Win rate = (wins + ties/2) / ratings, 95 % Wilson interval; percentiles nearest-rank."


def to_html(res: dict[str, Any], *, extra: str = "") -> str:
    """A self-contained page: the table, the chart, the win matrix, the verdicts, the raters."""
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in columns(res))
    body = "".join("<tr>" + "".join(f"<td>{e(_fmt(r[c]))}</td>" for c in columns(res)) + "</tr>"
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
                    f"Cohen's κ {e(_fmt(a['kappa']))} (n={a['n']})</li>" for a in res["agreement"])
    verdict = "".join(f"<li>{e(s)}</li>" for s in [*verdicts(res), *wer_lines(res)])
    rated = "" if res["modality"] == "listen" else (
        f"<h2>Win rates (95 % intervals)</h2>{_chart(res)}<h2>Pairwise wins/losses/ties</h2><table>{matrix}</table>"
        f"<h2>Raters</h2><ul>{raters}</ul><ul>{agree}</ul>")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{e(res['name'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:4px 8px;text-align:right}}</style></head><body>
<h1>{e(res['name'])}</h1><p>{e(res['modality'])} evaluation {e(res['id'])}: {res['succeeded']} of {res['items']} items
made, {res['failed']} failed; {res['ratings']} ratings. {_method_text(res)}</p>
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
