"""`python -m services load` — a load sweep: how many requests at once a target holds, and what a unit costs.

    python -m services load voice|image|video|listen [--backend offline|omni|sagemaker] [--url URL | --endpoint NAME]
                            [--concurrency 1,2,4,8] [--requests N]
                            [--text T | --prompt P | --spec FILE | --audio FILE]
                            [--slo-ttfa-ms MS | --slo-final-ms MS | --slo-latency-s S | --slo "ttfa 300ms"]
                            [--instance-type T | --price-per-hour USD] [--max-minutes M] [--warmup N] [--yes]
                            [--json] [--out REPORT.json] [--title T] [--no-history]

For each concurrency level, N requests run with that many in flight (closed loop): voice as full streaming
sessions (first audio, audio seconds, RTF), images as generations, videos as whole jobs (S3 on SageMaker),
listen as live streams: a recording (--audio FILE, or a sentence the offline voice speaks, made once) sent over
/v1/realtime at real time, timed to the first partial and to the final text after the last audio; its SLO is the
final text's p95, 1000 ms unless --slo-final-ms (or --slo) says otherwise.
The report gives per level ok/errors (throttling counted, never fatal), p50/p95/max (nearest-rank, with the
sample size), throughput, every raw sample; then the highest level within the SLO and the cost per audio
minute, image, video second or audio hour transcribed at the best throughput within it (from the price table for the instance type
the endpoint runs on, or --price-per-hour). It is saved in the studio's history (the Capacity page lists it).

Guard rails: at most 64 in flight and 2000 requests per level; --max-minutes (default 30) stops sending new
requests. Against SageMaker the sweep says what it will send and what that costs at the instance's price, and
asks (or needs --yes); it never starts an endpoint. The offline engine's figures are this machine's, not a
GPU's, and the report says so.

Exit code 0 when the sweep ran (failed requests are in the report); 2 for arguments that cannot be used
(levels not increasing, fewer requests than the highest level, an SLO without a unit, a flag's number out of its
range such as --max-minutes 0 or --price-per-hour -3, …); 1 when the target is
down or not confirmed (nothing was sent); 130 on Ctrl-C (the first stops sending and keeps the report).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocol.catalog import family
from protocol.errors import InvalidInput
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from protocol.limits import Range
from services.cli.common import (
    ArgumentError,
    check_out,
    read_text,
    save_output,
    settings_from_args,
)
from services.load import (
    COST_KEY,
    DEFAULT_LEVELS,
    DEFAULT_WALL_CLOCK_S,
    MODALITIES,
    THROUGHPUT_KEY,
    UNIT_WORD,
    LoadPlan,
    LoadReport,
    LoadTarget,
    Progress,
    Slo,
    describe_target,
    read_spec,
    run_sweep,
    slo_latency_s,
    slo_ttfa_ms,
)
from services.files import read_user_file
from services.listen import ListenAudio, load_audio
from services.load.plan import SLO_FIGURES, WALL_CLOCK_S, slo_final_ms
from services.load.target import PRICE_PER_HOUR
from services.pricing import usd


def _number(what: str, unit: str, rng: Range | None = None, *, scale: float = 1.0) -> Callable[[str], float]:
    """An argparse type: a finite number above zero (and within `rng`, given in the unit the plan checks, shown in
    the flag's own unit: `scale` is plan units per flag unit). A bad value exits 2 naming the flag, as argparse's
    own type errors do, before anything starts."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        lo, hi = (rng.lo / scale, rng.hi / scale) if rng else (0.0, math.inf)
        if not math.isfinite(value) or value <= 0 or not lo <= value <= hi:
            where = f"from {lo:.4g} to {hi:.4g}" if rng else "above zero"
            raise argparse.ArgumentTypeError(f"{what} must be a number of {unit} {where}; got {text!r}")
        return value
    return parse


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("load", parents=[common], help="a load sweep: capacity and cost per unit of a target",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("modality", choices=MODALITIES,
                   help="what to load: voice sessions, image generations, video jobs or listen streams")
    p.add_argument("--endpoint", metavar="NAME", help="--backend sagemaker: this endpoint instead of the deployment's")
    p.add_argument("--concurrency", default=",".join(map(str, DEFAULT_LEVELS)), metavar="LEVELS",
                   help="increasing requests-in-flight levels, e.g. 1,2,4,8 (each ≤ 64)")
    p.add_argument("--requests", type=int, default=16, metavar="N",
                   help="requests per level (≥ the highest level, ≤ 2000; default 16)")
    work = p.add_mutually_exclusive_group()
    work.add_argument("--text", help='voice: the text each session speaks; listen: the sentence the offline voice '
                                     'speaks for every stream ("-" reads stdin)')
    work.add_argument("--prompt", help='image and video: the prompt of every request ("-" reads stdin)')
    work.add_argument("--spec", type=Path, metavar="FILE",
                      help='a JSON object of request fields, e.g. {"prompt": "…", "size": "512x512"} or {"text": "…", '
                           '"voice": "…"}')
    work.add_argument("--audio", type=Path, metavar="FILE",
                      help="listen: the recording every stream sends at real time (WAV, MP3, FLAC, OGG, …)")
    slo = p.add_mutually_exclusive_group()
    slo.add_argument("--slo-ttfa-ms", type=_number("the first-audio SLO", "milliseconds"), metavar="MS",
                     help="voice: the p95 first audio to stay within")
    slo.add_argument("--slo-final-ms", type=_number("the final-text SLO", "milliseconds"), metavar="MS",
                     help="listen: the p95 final text (after the last audio sent) to stay within (default 1000)")
    slo.add_argument("--slo-latency-s", type=_number("the latency SLO", "seconds"), metavar="S",
                     help="the p95 request latency to stay within")
    slo.add_argument("--slo", metavar="TEXT", help='the SLO with its unit: "ttfa 300ms", "latency 2s"')
    price = p.add_mutually_exclusive_group()
    price.add_argument("--instance-type", metavar="TYPE",
                       help="what the target runs on, for its price (SageMaker: read from the endpoint)")
    price.add_argument("--price-per-hour", type=_number("the price per hour", "USD", PRICE_PER_HOUR),
                       metavar="USD", help="the target's hourly price, by hand")
    p.add_argument("--max-minutes", type=_number("the wall-clock cap", "minutes", WALL_CLOCK_S, scale=60),
                   default=DEFAULT_WALL_CLOCK_S / 60, help="stop sending new requests after this long (default 30)")
    p.add_argument("--warmup", type=int, default=1, metavar="N",
                   help="requests sent one at a time before the first level and kept out of the figures (0-5; default 1)")
    p.add_argument("--yes", action="store_true", help="SageMaker: run without asking (the cost is still printed)")
    p.add_argument("--out", type=Path, help="write the report (JSON, every sample) here")
    p.add_argument("--title", help="a name for the report in the history (e.g. 'g6 before the upgrade')")
    p.add_argument("--no-history", action="store_true", help="do not keep the report in the studio's history")
    p.set_defaults(func=run)


def plan_from_args(args: argparse.Namespace) -> LoadPlan:
    """The sweep the arguments ask for, checked (ArgumentError, exit 2, naming what to fix)."""
    m = args.modality
    if args.text is not None and family(m).unit != "audio second":
        raise ArgumentError(f"--text is for voice and listen; a {m} sweep takes --prompt (or --spec)")
    if args.prompt is not None and family(m).unit == "audio second":
        raise ArgumentError(f"--prompt is for image and video; a {m} sweep takes --text (or --spec)")
    if args.audio is not None and m != "listen":
        raise ArgumentError(f"--audio is for listen; a {m} sweep does not send a recording")
    work: dict[str, Any] = read_spec(args.spec) if args.spec is not None else {}
    if args.text is not None:
        work["text"] = read_text(args.text, "--text")
    if args.prompt is not None:
        work["prompt"] = read_text(args.prompt, "--prompt")
    slo: Slo | str | None = args.slo
    if args.slo_ttfa_ms is not None:
        slo = slo_ttfa_ms(args.slo_ttfa_ms, m)
    elif args.slo_final_ms is not None:
        slo = slo_final_ms(args.slo_final_ms, m)
    elif args.slo_latency_s is not None:
        slo = slo_latency_s(args.slo_latency_s)
    return LoadPlan.build(m, levels=args.concurrency, requests=args.requests, slo=slo,
                          max_wall_s=args.max_minutes * 60, work=work, warmup=args.warmup,
                          recording=None if args.audio is None else _recording(args.audio))


def _recording(path: Path) -> ListenAudio:
    data = read_user_file(path, what="--audio", limit=TRANSCRIPTION_FILE_MAX_BYTES, hint="; give a recording")
    return load_audio(data, name=str(path))


def _checked(args: argparse.Namespace) -> LoadPlan:
    try:
        plan = plan_from_args(args)
    except ArgumentError:
        raise
    except InvalidInput as exc:
        raise ArgumentError(str(exc)) from None
    if args.endpoint and (args.backend or "sagemaker") != "sagemaker":
        raise ArgumentError("--endpoint names a SageMaker endpoint: use it with --backend sagemaker (or --url for a "
                            "vLLM-Omni server)")
    if args.endpoint and args.url:
        raise ArgumentError("give --url (a vLLM-Omni server) or --endpoint (a SageMaker endpoint), not both")
    return plan


def run(args: argparse.Namespace) -> int:
    from services.backend import create_backend
    from services.history import History
    from services.targets import target_overrides

    plan = _checked(args)  # bad input fails before any backend starts
    if args.out is not None:
        check_out(args.out)
    settings = settings_from_args(args)
    if args.endpoint:
        settings = settings.with_overrides(**target_overrides(plan.modality, endpoint=args.endpoint))
    backend = create_backend(settings)
    try:
        target = describe_target(backend, settings, plan.modality, instance_type=args.instance_type,
                                 usd_per_hour=args.price_per_hour)
        if target.machine:
            say(f"measuring the offline engine: {target.machine}")
        if target.needs_confirmation and not confirmed(target, plan, args.yes):
            print("error: not confirmed; no load was sent", file=sys.stderr)
            return 1
        if target.price_note and not target.needs_confirmation:
            say(f"note: {target.price_note}")
        report, interrupted = asyncio.run(_sweep(backend, plan, target, quiet=args.json))
    finally:
        backend.close()
    report.title = args.title
    d = report.to_dict()
    saved_id = None
    if not args.no_history:
        saved_id = History(settings.data_dir).load_reports.save(d)
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


async def _sweep(backend: Any, plan: LoadPlan, target: LoadTarget, *, quiet: bool) -> tuple[LoadReport, bool]:
    """The sweep with Ctrl-C handled: the first stops sending (the report keeps what ran), the second abandons."""
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
        report = await run_sweep(backend, plan, target, on_progress=progress, stop=stop)
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
    figures = family(m).load_figures
    cols += [f"{SLO_FIGURES[f][0]} ms p50/p95/max" for f in figures]
    if m == "voice":
        cols += ["RTF p50"]
    cols += ["latency s p50/p95/max", key.replace("_", " "), "SLO"]
    rows = []
    for lv in d["levels"]:
        row = [str(lv["concurrency"]), str(lv["requests"]), str(lv["ok"]), str(lv["errors"]), str(lv["throttled"])]
        row += [_fig(lv[f]) for f in figures]
        if m == "voice":
            row += ["—" if lv["rtf_p50"] is None else f"{lv['rtf_p50']:.3f}"]
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
        lines.append(f"cost: {usd(value, 'unit')} per {UNIT_WORD[m]} at concurrency {cost['at_concurrency']} "
                     f"({tp:g} {key.replace('_', ' ')} at {usd(report.usd_per_hour, 'rate')}/h, {report.price_source})")
        if report.emulated_note():
            lines.append(f"  {report.emulated_note()}")
    else:
        lines.append(f"cost: none — {cost['note']}")
    if report.stopped:
        lines.append(f"ended early: {report.stopped}; " + ("the levels above were not (fully) run" if report.levels
                                                            else "no level ran"))
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
