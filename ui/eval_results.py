"""The Evaluations page's results: a short table that fits the page (services/eval/table.py) with every figure a
click away, the family's chart (a point and its 95 % interval per variant), the verdicts — for a rated family the
pairwise matrix, the raters and their agreement — and the exports. Drawn from the family's part as data
(`rated`, `chart`); the figures are services/eval's.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from protocol.errors import StudioError
from services.eval.export import export_zip, import_ratings_outcome
from services.eval.family import Chart
from services.eval.rated import fmt
from services.eval.registry import evaluation
from services.eval.report import render, results, variant_rows, verdicts, wer_lines
from services.eval.store import EvalStore
from services.eval.table import people_rows
from ui.code_views import code_panel
from ui.resources import uploads_allowed
from ui.text import plain

# The report's keys for people, in "Every figure" (the data and the exports keep the snake_case keys)
VARIANT_LABELS = {"label": "variant", "win_rate": "win rate", "ci95_low": "95 % low", "ci95_high": "95 % high",
                  "latency_p50_s": "latency p50 (s)", "latency_p95_s": "latency p95 (s)", "latency_n": "latencies",
                  "ttfa_p50_ms": "first audio p50 (ms)", "ttfa_p95_ms": "first audio p95 (ms)",
                  "cost_per_item_usd": "cost per item (USD)", "wer": "WER (corpus)", "wer_ci95_low": "WER 95 % low",
                  "wer_ci95_high": "WER 95 % high", "ref_words": "reference words", "word_errors": "word errors",
                  "intelligibility_wer": "intelligibility WER", "intelligibility_ci95_low": "intelligibility 95 % low",
                  "intelligibility_ci95_high": "intelligibility 95 % high", "intelligibility_n": "takes heard",
                  "intelligibility_words": "words spoken"}
CHART_ROW_PX = 56  # the chart's height per variant


def results_section(store: EvalStore, eval_id: str) -> None:
    """The short table, every figure, the chart, the verdicts; a rated family's matrix and raters; the exports."""
    res = results(store, eval_id)
    part = evaluation(res["modality"])
    rows = variant_rows(res)
    st.dataframe(pd.DataFrame(people_rows(res)), hide_index=True, width="stretch")
    with st.expander("Every figure, with its sample size"):
        every = pd.DataFrame(rows).dropna(axis=1, how="all").rename(columns=VARIANT_LABELS).set_index("variant")
        st.dataframe(every.map(fmt).T, width="stretch")  # one column per variant: it fits however many figures
    if part.rated:
        for line in wer_lines(res):
            st.caption(plain(line))
    _chart(part.chart, rows)
    for line in ([] if part.rated else wer_lines(res)) + verdicts(res):
        st.markdown(plain(line))
    if part.rated:
        _rated(res)
    _exports(store, eval_id, res, rated=part.rated)
    _variant_code(store, eval_id)


def _variant_code(store: EvalStore, eval_id: str) -> None:
    """A variant's request as code (services/code/evaluation.py): its first item made, on its own target."""
    made: dict[str, str] = {}
    for item in store.items(eval_id, status="succeeded"):
        made.setdefault(item.variant, item.id)
    if not made:
        return
    labels = [label for label in store.get(eval_id).spec.labels if label in made]  # the SPEC's order
    label = st.selectbox("Code for a variant", labels, key=f"eval-code-{eval_id}",
                         help="the request the variant's settings make for its first prompt, as a script")
    code_panel(store.history, made[label], key=f"eval-{eval_id}-")


def _chart(chart: Chart, rows: list[dict[str, Any]]) -> None:
    """Each variant's main figure (a point) and its 95 % interval (a band), a band per variant tall enough to read
    (Streamlit's default height squashed 2–4 rows into a strip)."""
    data = pd.DataFrame([r for r in rows if r.get(chart.point) is not None])
    if data.empty:
        return
    axis = alt.X(f"{chart.low}:Q", title=chart.title, **(
        {"axis": alt.Axis(format="%")} if chart.percent else {"scale": alt.Scale(domain=[0, 1])}))
    base = alt.Chart(data).encode(y=alt.Y("label:N", title=None, sort=None))
    st.altair_chart((base.mark_rule(strokeWidth=4).encode(x=axis, x2=f"{chart.high}:Q")
                     + base.mark_point(filled=True, size=120).encode(x=f"{chart.point}:Q")).properties(
        height=max(CHART_ROW_PX * 2, CHART_ROW_PX * len(data))), width="stretch")


def _rated(res: dict[str, Any]) -> None:
    """The pairwise matrix, the raters and how far they agree."""
    st.caption("Pairwise: the row's wins–losses–ties against the column")
    labels = [v["label"] for v in res["variants"]]
    matrix = pd.DataFrame({a: {b: f"{c['wins']}–{c['losses']}–{c['ties']}" for b, c in row.items()}
                           for a, row in res["pairs"].items()}).T
    st.dataframe(matrix.reindex(index=labels, columns=labels).fillna("—"))
    if res["raters"]:
        st.caption("Raters: " + ", ".join(f"{r['name']} ({r['ratings']})" for r in res["raters"]))
    for a in res["agreement"]:
        kappa = "—" if a["kappa"] is None else f"{a['kappa']:.2f}"
        st.caption(plain(f"{a['raters'][0]} and {a['raters'][1]} agree on {a['percent_agreement']:.0%} of the "
                         f"{a['n']} pairs both rated (Cohen's kappa {kappa})"))


def _exports(store: EvalStore, eval_id: str, res: dict[str, Any], *, rated: bool) -> None:
    """The downloads (a blind sheet only for a rated family) and, for a rated one, the ratings import."""
    c = st.columns(4)
    c[0].download_button("Export ZIP", lambda: export_zip(store, eval_id), file_name=f"{eval_id}.zip",
                         mime="application/zip", on_click="ignore", key="ev_zip")
    if rated:
        c[1].download_button("Blind sheet ZIP", lambda: export_zip(store, eval_id, blind=True),
                             file_name=f"{eval_id}-blind.zip", mime="application/zip", on_click="ignore",
                             key="ev_blind")
    c[2].download_button("Report HTML", render(res, "html"), file_name=f"{eval_id}.html", mime="text/html",
                         on_click="ignore", key="ev_html")
    c[3].download_button("Results JSON", render(res, "json"), file_name=f"{eval_id}.json", mime="application/json",
                         on_click="ignore", key="ev_json")
    if not rated or not store.actor.can("evaluate") or not uploads_allowed():
        return
    upload = st.file_uploader("Import a filled ratings CSV (item_a, item_b, winner, rater)", type=["csv"],
                              key="ev_import")
    if upload is not None and st.button("Import ratings", key="ev_import_go"):
        try:
            st.success(import_ratings_outcome(store, eval_id, upload.getvalue()).text(eval_id))
        except StudioError as exc:
            st.error(plain(exc))
