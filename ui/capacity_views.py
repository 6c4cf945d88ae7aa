"""The Capacity page's views: the work item's inputs, a sweep's live progress, and a report — its figures, the
TTFA/latency p50 and p95 and the throughput versus concurrency (altair, Streamlit's own chart library) with the
SLO line, the cost per unit, and a second report overlaid on the same charts; the saved reports, each with
whose it is and, on one's own, Share with the team."""

from __future__ import annotations

import time
from typing import Any

import altair as alt
import streamlit as st

from protocol.catalog import FAMILIES, family
from services.listen import ListenAudio, load_audio
from services.load import COST_KEY, THROUGHPUT_KEY, UNIT_WORD, LoadReport, Modality
from services.load.family import WorkInput
from services.load.plan import SLO_FIGURES, load_family
from services.pricing import usd
from ui.resources import NO_UPLOADS, uploads_allowed
from ui.text import plain
from ui.workspace_views import by_line, owner_of, share_toggle

THROUGHPUT_TITLE = {f.name: f.throughput_title for f in FAMILIES}
METRIC_TITLE = {key: f"{name} ({unit})" for key, (name, unit, _) in SLO_FIGURES.items()}
LEVEL_FIGURES = {key: (name, unit) for key, (name, unit, _) in SLO_FIGURES.items()}  # the levels table's columns


def slo_placeholder(modality: Modality) -> str:
    """An SLO for the box's placeholder, on the figure an SLO means when it names none."""
    return load_family(modality).slo_example


def work_inputs(modality: Modality) -> None:
    """What every request of the sweep asks for: its family's inputs (the same defaults as the CLI), drawn in
    order, those with a width sharing a row."""
    row: list[WorkInput] = []
    for item in load_family(modality).inputs:
        if item.width:
            row.append(item)
            continue
        _row(row)
        row = []
        _input(st, item)
    _row(row)


def _row(items: list[WorkInput]) -> None:
    if items:
        for column, item in zip(st.columns([i.width for i in items]), items):
            _input(column, item)


def _input(where: Any, item: WorkInput) -> None:
    if item.kind == "recording":
        if uploads_allowed():
            where.file_uploader(item.label, key=item.key)
        else:
            where.caption(f"{NO_UPLOADS} {item.note}")
    elif item.kind == "area":
        where.text_area(item.label, value=item.default, key=item.key, height=item.height)
    else:
        where.text_input(item.label, value=item.default, key=item.key)


def work_values(modality: Modality) -> dict[str, Any]:
    """The work item as the inputs hold it (read from the session state: a button's callback runs first); a
    recording given stands in for the fields it replaces."""
    state = st.session_state
    inputs = load_family(modality).inputs
    values = {i.field: state.get(i.key, i.default) for i in inputs if i.kind != "recording"}
    for given in (i for i in inputs if i.kind == "recording" and state.get(i.key) is not None):
        values = {k: v for k, v in values.items() if k not in given.replaces}
    return values


def recording_value(modality: Modality) -> ListenAudio | None:
    """The sweep's uploaded recording (a family that takes one: listen), checked (InvalidInput naming what to
    fix); None without one."""
    upload = next((st.session_state.get(i.key) for i in load_family(modality).inputs if i.kind == "recording"), None)
    return None if upload is None else load_audio(upload.getvalue(), upload.name)


def optional_price(text: str) -> float | None:
    """The price box: blank for the price table's rate."""
    from protocol.errors import InvalidInput

    text = str(text).strip().lstrip("$")
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidInput(f"the price per hour must be a number of dollars, e.g. 1.1267 (or blank for the price "
                           f"table's rate); got {text!r}") from None


def progress(run) -> None:
    """A running sweep's progress bar and its Stop button."""
    p = run.progress()
    if p is None:
        st.progress(0.0, text="warming up: one request before the first level…")
    else:
        st.progress(p.fraction, text=p.text())
    if st.button("Stop", key="cap_stop", help="no new requests; those in flight finish and the report keeps what ran"):
        run.stop()


def metric_of(report: LoadReport) -> str:
    """The figure the charts put first: the SLO's, else first audio for voice and latency for the rest."""
    if report.slo is not None:
        return report.slo.metric
    return (family(report.modality).load_figures or ("latency_s",))[0]


def chart_rows(reports: list[LoadReport], metric: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(p50/p95 rows, throughput rows) of every level of every report, for the charts and for tests."""
    figures, throughput = [], []
    for r in reports:
        name = r.label()
        for lv in r.levels:
            fig = lv.figure(metric)
            for pct in ("p50", "p95"):
                if fig[pct] is not None:
                    figures.append({"report": name, "concurrency": lv.concurrency, "percentile": pct,
                                    "value": fig[pct], "n": fig["n"]})
            if lv.throughput is not None:
                throughput.append({"report": name, "concurrency": lv.concurrency, "value": lv.throughput,
                                   "ok": lv.ok, "errors": lv.errors})
    return figures, throughput


def charts(reports: list[LoadReport]) -> None:
    """p50 and p95 versus concurrency with the SLO line; throughput versus concurrency. One colour per report."""
    first = reports[0]
    metric = metric_of(first)
    figures, throughput = chart_rows(reports, metric)
    ticks = sorted({lv.concurrency for r in reports for lv in r.levels})
    x = alt.X("concurrency:Q", title="requests in flight", scale=alt.Scale(type="log", base=2),
              axis=alt.Axis(values=ticks, format="d"))
    colour = alt.Color("report:N", legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=600))
    top = max((row["value"] for row in figures), default=0.0)
    slo = first.slo if first.slo is not None and first.slo.metric == metric else None
    # An SLO far above every figure would flatten them against the axis: the line then sits on the chart's top
    # edge and its label says where it really is.
    far = slo is not None and top > 0 and slo.limit > 2 * top
    y_scale = alt.Scale(domain=[0, top * 1.2], clamp=True) if far else alt.Undefined
    lines = alt.Chart(alt.Data(values=figures)).mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title=f"{METRIC_TITLE[metric]}, p50 and p95", scale=y_scale), color=colour,
        strokeDash=alt.StrokeDash("percentile:N", title="percentile"),
        tooltip=["report:N", "concurrency:Q", "percentile:N", "value:Q", "n:Q"])
    layers: list[Any] = [lines]
    if slo is not None:
        label = f"SLO: {slo.label()}" + (" (above this chart)" if far else "")
        rule = alt.Chart(alt.Data(values=[{"slo": top * 1.2 if far else slo.limit, "label": label}]))
        layers.append(rule.mark_rule(color="red", strokeDash=[6, 3]).encode(y="slo:Q", tooltip=["label:N"]))
        layers.append(rule.mark_text(align="left", dy=8 if far else -6, color="red").encode(
            y="slo:Q", text="label:N", x=alt.value(4)))
    c1, c2 = st.columns(2)
    with c1:
        st.markdown(f"**{METRIC_TITLE[metric].capitalize()} versus concurrency**")
        st.altair_chart(alt.layer(*layers), width="stretch")
    with c2:
        st.markdown(f"**Throughput versus concurrency** ({THROUGHPUT_TITLE[first.modality]})")
        line = alt.Chart(alt.Data(values=throughput)).mark_line(point=True).encode(
            x=x, y=alt.Y("value:Q", title=THROUGHPUT_TITLE[first.modality]), color=colour,
            tooltip=["report:N", "concurrency:Q", "value:Q", "ok:Q", "errors:Q"])
        st.altair_chart(line, width="stretch")


def summary(report: LoadReport) -> None:
    """Whose figures, the SLO's answer, the cost per unit and the levels' table."""
    d = report.to_dict()
    where = report.target + (f" on {report.instance_type}" if report.instance_type else "")
    st.markdown(f"**{plain(report.label())}** — {plain(where)}")
    if report.machine:
        st.info(f"Figures of {plain(report.machine)}.", icon="🖥️")
    if report.stopped:
        st.warning(f"The sweep ended early: {plain(report.stopped)}.")
    a, b, c = st.columns(3)
    best = d["max_concurrency_within_slo"]
    a.metric("Highest concurrency within the SLO", "—" if best is None else str(best),
             help=report.slo.label() if report.slo else "no SLO was set")
    cost = d["cost"]
    value = cost[COST_KEY[report.modality]]
    emulated = " (emulated)" if report.emulated else ""  # the dollars price an instance that did not run the load
    b.metric(f"Cost per {UNIT_WORD[report.modality]}{emulated}", usd(value, "unit"),
             help=None if value is None else f"at concurrency {cost['at_concurrency']}, {usd(report.usd_per_hour, 'rate')}/h")
    c.metric("Price per hour", usd(report.usd_per_hour, "rate"),
             help=report.price_source)
    if report.emulated_note():  # right under the dollars: they price an instance that did not run the load
        st.warning(f"Emulated: {plain(report.emulated_note())}.", icon="🧪")
    if value is None:
        st.caption(f"No cost per unit: {plain(cost['note'])}.")
    rows = []
    for lv in d["levels"]:
        row = {"concurrency": lv["concurrency"], "sent": lv["requests"], "ok": lv["ok"], "errors": lv["errors"],
               "throttled": lv["throttled"]}
        for key, (name, unit) in LEVEL_FIGURES.items():  # labels for people, not the report's keys
            if key in lv:
                f = lv[key]
                row[f"{name} p50 ({unit})"], row[f"{name} p95 ({unit})"] = f["p50"], f["p95"]
                row[f"{name} max ({unit})"], row[f"{name} n"] = f["max"], f["n"]
        row[THROUGHPUT_TITLE[report.modality]] = lv["throughput"][THROUGHPUT_KEY[report.modality]]
        row["within SLO"] = lv["within_slo"]
        rows.append(row)
    st.dataframe(rows, hide_index=True, width="stretch")
    st.caption("Percentiles are nearest-rank over the successful requests (n of them); the report's JSON has every "
               "sample, so anyone can recompute them.")
    for lv in d["levels"]:
        for err in lv["first_errors"]:
            st.caption(f"Level {lv['concurrency']}: {plain(err[:300])}")


def report_choices(records: list[Any]) -> dict[str, str]:
    """Saved reports for a select box: id -> label (with whose it is, when not this person's)."""
    out = {}
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at))
        where = r.instance_type or ("this machine" if r.report.get("machine") else r.target)
        where += " (emulated)" if r.report.get("emulated") else ""
        by = owner_of(r.user_id)
        out[r.id] = f"{(r.title + ' · ') if r.title else ''}{r.modality} · {where} · {when}" + \
            (f" · {by}" if by else "")  # as LoadReport.label()
    return out


def reports_section(history: Any, last: LoadReport | None, *,
                    empty: str = "No sweeps yet: run one above (or `python -m services load …`); every report is "
                                 "kept here.") -> None:
    """The saved reports this person sees (their own and the team's shared ones): one picked, another of the same
    kind overlaid, the charts and each one's summary; whose the picked one is, and Share with the team on one's
    own. `last`: the sweep in hand, shown when the history could not keep it."""
    state = st.session_state
    st.divider()
    st.subheader("Reports")
    records = history.load_reports.list(limit=50)
    choices = report_choices(records)
    if not choices and last is None:
        st.info(empty)
        return
    by_id = {r.id: r for r in records}
    if choices:
        if state.get("cap_pick") not in choices:
            state["cap_pick"] = next(iter(choices))
        shown_id = st.selectbox("Report", list(choices), format_func=choices.__getitem__, key="cap_pick")
        record = by_id[shown_id]
        report = LoadReport.from_dict(record.report)
        by_line(record.user_id)
        share_toggle(history, "load_report", record.id, record.user_id, record.shared)
    else:  # the history could not keep it: show the one in hand
        shown_id, report = None, last
    same_kind = {i: label for i, label in choices.items() if i != shown_id and by_id[i].modality == report.modality}
    if state.get("cap_overlay") not in same_kind:
        state["cap_overlay"] = None
    overlay = st.selectbox("Overlay another report", [None, *same_kind], key="cap_overlay",
                           format_func=lambda i: "—" if i is None else same_kind[i],
                           help="e.g. g6 against g6e, or before and after an upgrade")
    shown = [report] + ([LoadReport.from_dict(by_id[overlay].report)] if overlay else [])
    charts(shown)
    for r in shown:
        with st.container(border=True):
            summary(r)
