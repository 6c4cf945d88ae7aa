"""What every sweep run from the shell shares (`python -m services load`, services/cli/load.py, and `load converse`,
services/cli/load_converse.py): whose figures they are and, on a billed target, the estimate confirmed; Ctrl-C
(the first stops sending and keeps the report, the second abandons); the report kept in the history, written
(--out) and printed (`render`, the report as a person reads it in a terminal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from services.cli.common import save_output
from services.files import read_user_file
from services.listen import ListenAudio, load_audio
from services.load import COST_KEY, THROUGHPUT_KEY, UNIT_WORD, LoadPlan, LoadReport, LoadTarget, Progress
from services.load.plan import CONVERSE, SLO_FIGURES, load_family, load_figures
from services.pricing import usd


def recording(path: Path, what: str = "--audio") -> ListenAudio:
    """A recording named on the command line (--audio, --input), read and checked."""
    data = read_user_file(path, what=what, limit=TRANSCRIPTION_FILE_MAX_BYTES, hint="; give a recording")
    return load_audio(data, name=str(path))


def go_ahead(target: LoadTarget, plan: LoadPlan, yes: bool) -> bool:
    """Whose figures these are; a billed target's estimate, confirmed (else the error, and False)."""
    if target.machine:
        say(f"measuring the offline engine: {target.machine}")
    if target.needs_confirmation and not confirmed(target, plan, yes):
        print("error: not confirmed; no load was sent", file=sys.stderr)
        return False
    if target.price_note and not target.needs_confirmation:
        say(f"note: {target.price_note}")
    return True


def finish(args: argparse.Namespace, report: LoadReport, settings: Any, interrupted: bool, *,
           keep: bool = True) -> int:
    """The report kept (unless --no-history, or `keep` is False), written to --out and printed."""
    from services.history import History

    report.title = args.title
    d = report.to_dict()
    saved_id = None
    if keep and not args.no_history:
        saved_id = History.of(settings).load_reports.save(d)
    problem = None
    if args.out is not None:
        saved = save_output(args.out, (json.dumps(d, indent=1) + "\n").encode(), suffix=".json")
        problem = saved.problem
    if args.json:
        print(json.dumps(d))
    else:
        print(render(report))
        if saved_id:
            print(f"saved as load report {saved_id} in {settings.data_dir} (the Capacity page lists it)")
        if args.out is not None and not problem:
            print(f"wrote {args.out}")
    if problem:
        print(f"error: {problem}", file=sys.stderr)
    return 130 if interrupted else (1 if problem else 0)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def confirmed(target: LoadTarget, plan: LoadPlan, yes: bool) -> bool:
    """The estimate is always printed; then --yes, or a "y" typed at a terminal."""
    say(target.estimate(plan))
    if yes:
        return True
    if sys.stdin is None or not sys.stdin.isatty():
        say("add --yes to run it (there is no terminal to ask)")
        return False
    try:
        answer = input("Run the sweep? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


async def sweep(start: Callable[[Any, Callable[[Progress], None]], Awaitable[LoadReport]], *,
                 quiet: bool) -> tuple[LoadReport, bool]:
    """The sweep `start(stop, on_progress)` runs, with Ctrl-C handled: the first stops sending (the report keeps
    what ran), the second abandons."""
    import threading

    stop = threading.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def on_sigint() -> None:
        if stop.is_set():
            if task is not None:
                task.cancel()
            return
        stop.set()
        say("stopping: no new requests; those in flight finish (Ctrl-C again abandons the sweep)")

    handling = _sigint(lambda: loop.add_signal_handler(signal.SIGINT, on_sigint))
    def progress(p: Progress) -> None:
        step = max(1, p.level_planned // 4)  # a few lines per level, not one per request
        if not quiet and (p.level_done % step == 0 or p.level_done == p.level_planned):
            say(p.text())

    try:
        report = await start(stop, progress)
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        if handling:
            _sigint(lambda: loop.remove_signal_handler(signal.SIGINT))
    if stop.is_set():
        report.stopped = "stopped by Ctrl-C"
    return report, stop.is_set()


def _fig(d: dict[str, Any] | None, scale: float = 1.0, fmt: str = "{:.0f}") -> str:
    if not d or d.get("n", 0) == 0:
        return "—"
    parts = [fmt.format(d[k] * scale) for k in ("p50", "p95", "max")]
    return f"{'/'.join(parts)} (n={d['n']})"


def render(report: LoadReport) -> str:
    """The report as a person reads it in a terminal."""
    d = report.to_dict()
    m = report.modality
    key = THROUGHPUT_KEY[m]
    head = f"{m} sweep on {report.target}"
    if report.instance_type:
        head += f" ({report.instance_type})"
    lines = [head]
    if report.machine:
        lines.append(f"  figures of {report.machine}")
    cols = ["level", "sent", "ok", "errors", "throttled"]
    figures = load_figures(m)
    cols += [f"{SLO_FIGURES[f][0]} ms p50/p95/max" for f in figures]
    own = {} if m == CONVERSE else load_family(m).level_columns  # the family's own figures (voice: RTF p50)
    cols += [title for title, _ in own.values()]
    if m == CONVERSE:
        cols += ["turns", "failed turns", "conversations within SLO"]
    cols += ["latency s p50/p95/max", key.replace("_", " "), "SLO"]
    rows = []
    for lv in d["levels"]:
        row = [str(lv["concurrency"]), str(lv["requests"]), str(lv["ok"]), str(lv["errors"]), str(lv["throttled"])]
        row += [_fig(lv[f]) for f in figures]
        row += ["—" if lv.get(k) is None else fmt.format(lv[k]) for k, (_, fmt) in own.items()]
        if m == CONVERSE:
            row += [str(lv["turns"]), str(lv["failed_turns"]), f"{lv['conversations_within_slo']} of {lv['requests']}"]
        tp = lv["throughput"][key]
        row += [_fig(lv["latency_s"], fmt="{:.2f}"), "—" if tp is None else f"{tp:g}",
                ("ok" if lv["within_slo"] else "no") if report.slo else ("—" if not lv["errors"] else "errors")]
        rows.append(row)
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    for lv in d["levels"]:
        for err in lv["first_errors"]:
            lines.append(f"  level {lv['concurrency']} error: {err[:300]}")
    if report.slo:
        best = d["max_concurrency_within_slo"]
        lines.append(f"SLO {report.slo.label()}: " + (f"held up to concurrency {best}" if best is not None else
                                                      "not held even at the lowest level" if report.levels else
                                                      "not measured: no level ran"))
    cost = d["cost"]
    value = cost[COST_KEY[m]]
    if value is not None:
        tp = cost["throughput"][key]
        lines.append(f"cost: {usd(value, 'unit')} per {UNIT_WORD[m]}{' (emulated)' if report.emulated else ''} "
                     f"at concurrency {cost['at_concurrency']} "
                     f"({tp:g} {key.replace('_', ' ')} at {usd(report.usd_per_hour, 'rate')}/h, {report.price_source})")
        if report.emulated_note():
            lines.append(f"  {report.emulated_note()}")
    else:
        lines.append(f"cost: none — {cost['note']}")
    if report.stopped:
        lines.append(f"ended early: {report.stopped}; " + ("the levels above were not (fully) run" if report.levels
                                                            else "no level ran"))
    if m == CONVERSE:
        lines.append("voice-to-voice percentiles are nearest-rank over every answered turn (n = how many); a "
                     "conversation holds the SLO when none of its turns failed and its own turns' p95 is within it; "
                     "every conversation is a sample in --json and --out")
    else:
        lines.append("percentiles are nearest-rank over the successful requests (n = how many); every sample is in "
                     "--json and --out")
    return "\n".join(lines)


def _sigint(change: Callable[[], object]) -> bool:
    """Add or remove the loop's Ctrl-C handler where the platform has one: asyncio says it has none by raising
    NotImplementedError (Windows' loops), RuntimeError or ValueError (not the main thread); Ctrl-C then simply
    interrupts the sweep."""
    try:
        change()
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True
