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

`load converse` holds whole conversations instead: every request is one pipeline conversation over the same
recorded turns, as `python -m services converse` holds it (--input TURN.wav, repeated, played in order; the
offline engine by default, or --listen-url/--listen-endpoint, --reply-url or --script, --speak-url/--voice-endpoint,
--voice, --silence-ms). Each level runs --requests conversations (default: as many as the level, so --concurrency 3
holds 3 conversations at once) and reports voice-to-voice p50/p95/max over every answered turn with n, the turns
and failed turns, and how many conversations hold the SLO: **a conversation holds it when none of its turns failed
and the p95 (nearest-rank) of its own turns' voice-to-voice is ≤ --slo-v2v-ms** (default 1500). A level is within
the SLO when all of its conversations hold it. Its cost is per conversation turn answered; SageMaker endpoints
are priced (summed) and confirmed as for every sweep. Its report is printed and written, not kept in the history
(the Capacity page does not draw conversations yet).

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
from collections.abc import Awaitable, Callable
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
    THROUGHPUT_KEY,
    UNIT_WORD,
    LoadPlan,
    LoadReport,
    LoadTarget,
    Progress,
    Slo,
    describe_target,
    parse_levels,
    read_spec,
    run_sweep,
    slo_latency_s,
    slo_ttfa_ms,
)
from services.files import read_user_file
from services.listen import ListenAudio, load_audio
from services.load.plan import CONVERSE, LOAD_KINDS, SLO_FIGURES, WALL_CLOCK_S, load_figures, slo_final_ms, slo_v2v_ms
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
    p.add_argument("modality", choices=LOAD_KINDS,
                   help="what to load: voice sessions, image generations, video jobs, listen streams or whole "
                   "conversations (converse)")
    p.add_argument("--endpoint", metavar="NAME", help="--backend sagemaker: this endpoint instead of the deployment's")
    p.add_argument("--concurrency", default=",".join(map(str, DEFAULT_LEVELS)), metavar="LEVELS",
                   help="increasing requests-in-flight levels, e.g. 1,2,4,8 (each ≤ 64)")
    p.add_argument("--requests", type=int, metavar="N",
                   help="requests per level (≥ the highest level, ≤ 2000; default 16; converse: the highest level, "
                   "so each level holds that many conversations at once)")
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
    slo.add_argument("--slo-v2v-ms", type=_number("the voice-to-voice SLO", "milliseconds"), metavar="MS",
                     help="converse: a conversation holds it when none of its turns failed and the p95 (nearest-rank) "
                     "of its turns' voice-to-voice is ≤ MS (default 1500)")
    slo.add_argument("--slo", metavar="TEXT", help='the SLO with its unit: "ttfa 300ms", "latency 2s", "v2v 1500ms"')
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
    _converse_options(p)
    p.set_defaults(func=run)


def _converse_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("load converse: the recorded turns and the pipeline's targets (as `converse` takes them)")
    g.add_argument("--input", type=Path, action="append", metavar="TURN.wav",
                   help="a recorded turn every conversation plays; repeat for more turns, played in order")
    listen = g.add_mutually_exclusive_group()
    listen.add_argument("--listen-url", help="a server with /v1/realtime transcription (default: the offline engine)")
    listen.add_argument("--listen-endpoint", metavar="E", help="a SageMaker listen endpoint")
    reply = g.add_mutually_exclusive_group()
    reply.add_argument("--reply-url", help="an OpenAI-compatible server with streaming /v1/chat/completions")
    reply.add_argument("--script", type=Path, metavar="FILE", help="the scripted reply's rules (PATTERN => REPLY; "
                       "default: the studio's default script)")
    g.add_argument("--reply-model", help="--reply-url: the model to name")
    g.add_argument("--system-prompt", help="--reply-url: the system prompt")
    speak = g.add_mutually_exclusive_group()
    speak.add_argument("--speak-url", help="a server with /v1/audio/speech/stream (default: the offline engine)")
    speak.add_argument("--voice-endpoint", metavar="E", help="a SageMaker voice endpoint")
    g.add_argument("--voice", help="the agent's voice (default: the server's)")
    g.add_argument("--silence-ms", type=int, help="the silence window that ends a turn (200–2000; default 500)")


CONVERSE_FLAGS = ("input", "listen_url", "listen_endpoint", "reply_url", "script", "reply_model", "system_prompt",
                  "speak_url", "voice_endpoint", "voice", "silence_ms", "slo_v2v_ms")


def plan_from_args(args: argparse.Namespace) -> LoadPlan:
    """The sweep the arguments ask for, checked (ArgumentError, exit 2, naming what to fix)."""
    m = args.modality
    if m == CONVERSE:
        return converse_plan(args)[0]
    given = [f for f in CONVERSE_FLAGS if getattr(args, f, None) is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ArgumentError(f"{flag} is for load converse; a {m} sweep does not hold conversations")
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
    return LoadPlan.build(m, levels=args.concurrency, requests=16 if args.requests is None else args.requests, slo=slo,
                          max_wall_s=args.max_minutes * 60, work=work, warmup=args.warmup,
                          recording=None if args.audio is None else _recording(args.audio))


def _recording(path: Path, what: str = "--audio") -> ListenAudio:
    data = read_user_file(path, what=what, limit=TRANSCRIPTION_FILE_MAX_BYTES, hint="; give a recording")
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
    from services.targets import target_overrides

    if args.modality == CONVERSE:
        return run_converse(args)
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
        if not _go_ahead(target, plan, args.yes):
            return 1
        report, interrupted = asyncio.run(_sweep(
            lambda stop, progress: run_sweep(backend, plan, target, on_progress=progress, stop=stop), quiet=args.json))
    finally:
        backend.close()
    return _finish(args, report, settings, interrupted)


def _go_ahead(target: LoadTarget, plan: LoadPlan, yes: bool) -> bool:
    """Whose figures these are; a billed target's estimate, confirmed (else the error, and False)."""
    if target.machine:
        say(f"measuring the offline engine: {target.machine}")
    if target.needs_confirmation and not confirmed(target, plan, yes):
        print("error: not confirmed; no load was sent", file=sys.stderr)
        return False
    if target.price_note and not target.needs_confirmation:
        say(f"note: {target.price_note}")
    return True


def _finish(args: argparse.Namespace, report: LoadReport, settings: Any, interrupted: bool, *,
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


# ---- load converse --------------------------------------------------------------------------------------------
NOT_FOR_CONVERSE = {
    "text": "its work is the recorded turns: --input TURN.wav", "prompt": "its work is the recorded turns: --input",
    "spec": "its work is the recorded turns: --input", "audio": "its recordings are --input TURN.wav (repeated)",
    "url": "its targets are --listen-url, --reply-url, --speak-url (or endpoints)",
    "backend": "its targets are --listen-url/--listen-endpoint, --speak-url/--voice-endpoint",
    "endpoint": "its endpoints are --listen-endpoint and --voice-endpoint",
    "instance_type": "SageMaker endpoints are priced from the table; give --price-per-hour for servers at URLs",
    "slo_ttfa_ms": "its SLO is voice-to-voice: --slo-v2v-ms", "slo_final_ms": "its SLO is voice-to-voice: --slo-v2v-ms",
    "slo_latency_s": "its SLO is voice-to-voice: --slo-v2v-ms"}


def converse_plan(args: argparse.Namespace) -> tuple[LoadPlan, Any]:
    """A converse sweep's plan and its Setup (the targets filled in later), checked before any engine starts."""
    from services.cli.converse import script_text
    from services.converse.setup import Setup
    from services.converse.script import DEFAULT_SCRIPT

    for dest, fix in NOT_FOR_CONVERSE.items():
        if getattr(args, dest, None) is not None:
            raise ArgumentError(f"--{dest.replace('_', '-')} is not for load converse: {fix}")
    if not args.input:
        raise ArgumentError("load converse needs the recorded turns every conversation plays: --input TURN.wav "
                            "(repeat it for more turns)")
    script = None if args.reply_url else DEFAULT_SCRIPT if args.script is None else script_text(args.script)
    setup = Setup(listen="", speak="", script=script,
                  script_name="the default script" if args.script is None else str(args.script),
                  reply_url=args.reply_url, reply_model=args.reply_model, system_prompt=args.system_prompt,
                  voice=args.voice, silence_ms=500 if args.silence_ms is None else args.silence_ms).check()
    inputs = [_recording(path, "--input") for path in args.input]
    levels = parse_levels(args.concurrency)
    slo = args.slo if args.slo_v2v_ms is None else slo_v2v_ms(args.slo_v2v_ms, CONVERSE)
    work = {"reply": setup.reply().label, "voice": args.voice, "silence_ms": setup.silence_ms}
    plan = LoadPlan.build(CONVERSE, levels=levels, requests=levels[-1] if args.requests is None else args.requests,
                          slo=slo, max_wall_s=args.max_minutes * 60, work=work, warmup=args.warmup, inputs=inputs)
    return plan, setup


def run_converse(args: argparse.Namespace) -> int:
    """`load converse`: the conversations' setup on the offline engine, URLs or SageMaker endpoints, the sweep."""
    from dataclasses import replace

    from services.backend import create_backend
    from services.load.converse import describe_conversations, run_conversations

    try:
        plan, setup = converse_plan(args)
    except InvalidInput as exc:
        raise ArgumentError(str(exc)) from None
    if args.out is not None:
        check_out(args.out)
    settings = settings_from_args(args)
    engine = None
    if (args.listen_url is None and not args.listen_endpoint) or (args.speak_url is None and not args.voice_endpoint):
        from offline.launch import shared_engine

        engine = shared_engine().url
    endpoints = {role: name for role, name in (("listen", args.listen_endpoint), ("voice", args.voice_endpoint)) if name}
    backend = None
    if endpoints:
        settings = settings.with_overrides(backend="sagemaker", **{f"{r}_endpoint": n for r, n in endpoints.items()})
        backend = create_backend(settings)
    try:
        setup = replace(setup, listen=backend.client("listen") if args.listen_endpoint else args.listen_url or engine,
                        speak=backend.client("voice") if args.voice_endpoint else args.speak_url or engine).check()
        names = setup.settings()
        where = f"listen {names['listen']} · reply {names['reply']} · speak {names['speak']}"
        urls = tuple(u for u in (args.listen_url, args.speak_url) if u)
        target = describe_conversations(settings, where, engine_url=engine, urls=urls, endpoints=endpoints,
                                        usd_per_hour=args.price_per_hour)
        if not _go_ahead(target, plan, args.yes):
            return 1
        report, interrupted = asyncio.run(_sweep(
            lambda stop, progress: run_conversations(setup, plan, target, on_progress=progress, stop=stop),
            quiet=args.json))
    finally:
        if backend is not None:
            backend.close()
    say("note: a converse report is printed (and written with --out), not kept in the history: the Capacity page "
        "does not draw conversations yet")
    return _finish(args, report, settings, interrupted, keep=False)


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


async def _sweep(start: Callable[[Any, Callable[[Progress], None]], Awaitable[LoadReport]], *,
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
    if m == "voice":
        cols += ["RTF p50"]
    if m == CONVERSE:
        cols += ["turns", "failed turns", "conversations within SLO"]
    cols += ["latency s p50/p95/max", key.replace("_", " "), "SLO"]
    rows = []
    for lv in d["levels"]:
        row = [str(lv["concurrency"]), str(lv["requests"]), str(lv["ok"]), str(lv["errors"]), str(lv["throttled"])]
        row += [_fig(lv[f]) for f in figures]
        if m == "voice":
            row += ["—" if lv["rtf_p50"] is None else f"{lv['rtf_p50']:.3f}"]
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
        lines.append(f"cost: {usd(value, 'unit')} per {UNIT_WORD[m]} at concurrency {cost['at_concurrency']} "
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
