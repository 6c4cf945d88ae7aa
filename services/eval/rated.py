"""The report of a family whose outputs are rated blind in pairs (voice, image, video — and any family that makes
media from a prompt): how two variants separate, the verdicts, the Markdown, the short table for people. The
defaults of services/eval/family.py's `EvalFamily`; a measured family (listen) has its own."""

from __future__ import annotations

from typing import Any

from services.eval import stats
from services.pricing import usd

METHOD_TEXT = "Win rate = (wins + ties/2) / ratings, 95 % Wilson interval; percentiles nearest-rank."


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def interval(ci: list[float] | tuple[float, float] | None, pattern: str = "{:.3f}") -> str | None:
    """An interval as one short cell: "0.231–0.882" (None when there is none)."""
    return None if ci is None else f"{pattern.format(ci[0])}–{pattern.format(ci[1])}"


def separate(a: str, b: str, ta: dict[str, Any], tb: dict[str, Any]) -> dict[str, Any]:
    """Whether the win-rate intervals of a and b overlap, and about how many more ratings would separate them."""
    overlap = stats.intervals_overlap(ta["ci95"], tb["ci95"])
    more = None
    if overlap and ta["ratings"] and tb["ratings"]:
        more = stats.more_ratings_to_separate(ta["win_rate"], ta["ratings"], tb["win_rate"], tb["ratings"])
    return {"a": a, "b": b, "overlap": overlap, "more_ratings": None if more is None else more["more"],
            "n_each": None if more is None else more["n_each"]}


def _why_not(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Why no number of ratings is given for two overlapping variants: which of the three reasons it is."""
    unrated = [v["label"] for v in (a, b) if not v["ratings"]]
    if len(unrated) == 2:
        return "neither has been rated yet: rate some pairs"
    if unrated:
        return f"{unrated[0]} has not been rated yet: rate some pairs"
    if a["win_rate"] == b["win_rate"]:
        return (f"the win rates are equal ({a['win_rate']:.3f} after {a['ratings']} and {b['ratings']} ratings): "
                "more ratings separate them only if the rates move apart")
    return (f"the win rates ({a['win_rate']:.3f} and {b['win_rate']:.3f}) are so close that more than "
            f"{stats.SEPARATION_CAP:,} ratings each would be needed to separate them")


def verdicts(res: dict[str, Any]) -> list[str]:
    """Plain sentences on whether the win-rate intervals separate the variants."""
    rows = {v["label"]: v for v in res["variants"]}
    out = []
    for s in res["separation"]:
        pair = f"{s['a']} vs {s['b']}"
        if not s["overlap"]:
            out.append(f"{pair}: the 95 % intervals do not overlap — a significant difference.")
        elif s["more_ratings"] is not None:
            out.append(f"{pair}: no significant difference yet — about {s['more_ratings']} more "
                       f"ratings would separate them (if the win rates hold).")
        else:
            out.append(f"{pair}: no significant difference — {_why_not(rows[s['a']], rows[s['b']])}.")
    return out


def markdown(res: dict[str, Any], verdict_lines: list[str], measured_lines: list[str]) -> str:
    lines = [f"# {res['name']} ({res['modality']}, {res['id']})", "",
             f"{res['succeeded']} of {res['items']} items made, {res['failed']} failed; {res['ratings']} ratings by "
             f"{len(res['raters'])} rater(s).", "",
             "| variant | items | ratings | W / L / T | win rate | 95 % CI | latency p50 / p95 (s) | cost / item |",
             "|---|---|---|---|---|---|---|---|"]
    for v in res["variants"]:
        ci = "—" if v["ci95"] is None else f"[{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]"
        cost = "unknown" if v["cost_per_item_usd"] is None else usd(v["cost_per_item_usd"], "unit")
        lines.append(f"| {v['label']} | {v['items']} | {v['ratings']} | {v['wins']} / {v['losses']} / {v['ties']} | "
                     f"{fmt(v['win_rate'])} | {ci} | {fmt(v['latency_p50_s'])} / {fmt(v['latency_p95_s'])} "
                     f"(n={v['latency_n']}) | {cost} |")
    lines += ["", *[f"- {s}" for s in verdict_lines], *[f"- {line}" for line in measured_lines]]
    for a in res["agreement"]:
        lines.append(f"- raters {a['raters'][0]} and {a['raters'][1]}: {a['percent_agreement']:.0%} agreement, "
                     f"Cohen's κ {fmt(a['kappa'])} on {a['n']} shared pairs")
    return "\n".join(lines) + "\n"


def summary(v: dict[str, Any]) -> dict[str, Any]:
    """A variant's rating cells in the short table: ratings, wins–losses–ties, win rate and its interval."""
    return {"ratings": v["ratings"], "W–L–T": f"{v['wins']}–{v['losses']}–{v['ties']}",
            "win rate": None if v["win_rate"] is None else round(v["win_rate"], 3),
            "95 % interval": interval(v["ci95"])}
