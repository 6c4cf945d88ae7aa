"""`python -m services load` — a load sweep: how many requests at once a target holds, and what a unit costs.

    python -m services load voice|image|video|listen [--backend offline|server|sagemaker] [--url URL | --endpoint NAME]
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

The work flags (--text, --prompt, --audio) are the families' inputs that name one (services/load/<family>.py);
what every sweep shares — the confirmation, Ctrl-C, the report kept, written and printed — is
services/cli/load_run.py, and `load converse` services/cli/load_converse.py.
"""

from __future__ import annotations

import argparse
import asyncio
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocol.errors import InvalidInput
from protocol.limits import Range
from services.cli.common import ArgumentError, check_out, read_text, settings_from_args
from services.cli.load_converse import CONVERSE_FLAGS, converse_options, converse_plan, run_converse
from services.cli.load_run import finish, go_ahead, recording, render, sweep
from services.load import (
    DEFAULT_LEVELS,
    DEFAULT_WALL_CLOCK_S,
    LoadPlan,
    Slo,
    describe_target,
    read_spec,
    run_sweep,
    slo_latency_s,
    slo_ttfa_ms,
)
from services.load.family import WorkInput, joined
from services.load.plan import CONVERSE, LOAD_KINDS, MODALITIES, WALL_CLOCK_S, load_family, slo_final_ms, unit_family
from services.load.target import PRICE_PER_HOUR

__all__ = ["plan_from_args", "register", "render", "run"]


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
    kinds = ", ".join(f"{m} ({unit_family(m).load_noun})" for m in MODALITIES)
    p.add_argument("modality", choices=LOAD_KINDS, metavar="FAMILY",
                   help=f"the family to load: {kinds}, or whole conversations (converse)")
    p.add_argument("--endpoint", metavar="NAME", help="--backend sagemaker: this endpoint instead of the deployment's")
    p.add_argument("--concurrency", default=",".join(map(str, DEFAULT_LEVELS)), metavar="LEVELS",
                   help="increasing requests-in-flight levels, e.g. 1,2,4,8 (each ≤ 64)")
    p.add_argument("--requests", type=int, metavar="N",
                   help="requests per level (≥ the highest level, ≤ 2000; default 16; converse: the highest level, "
                   "so each level holds that many conversations at once)")
    _work_options(p.add_mutually_exclusive_group())
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
    converse_options(p)
    p.set_defaults(func=run)


def work_flags() -> dict[str, dict[str, WorkInput]]:
    """Each work flag the sweeps' families take (their inputs with a `flag`), and which family takes it how."""
    out: dict[str, dict[str, WorkInput]] = {}
    for m in MODALITIES:
        for flag, item in load_family(m).flags().items():
            out.setdefault(flag, {})[m] = item
    return out


def _work_options(work: argparse._MutuallyExclusiveGroup) -> None:
    """--text, --prompt (each family's text fields), --spec and --audio (a recording): one of them."""
    flags = work_flags()
    texts = {f: users for f, users in flags.items() if all(i.kind != "recording" for i in users.values())}
    for flag, users in texts.items():
        work.add_argument(f"--{flag}", help="; ".join(f"{m}: {i.flag_help}" for m, i in users.items()) +
                          ' ("-" reads stdin)')
    work.add_argument("--spec", type=Path, metavar="FILE",
                      help='a JSON object of request fields, e.g. {"prompt": "…", "size": "512x512"} or {"text": "…", '
                           '"voice": "…"}')
    for flag, users in flags.items():
        if flag not in texts:
            work.add_argument(f"--{flag}", type=Path, metavar="FILE",
                              help="; ".join(f"{m}: {i.flag_help}" for m, i in users.items()))


def _refuse_other_work(args: argparse.Namespace, m: str) -> None:
    """A work flag the sweep's family does not take, refused naming those that do and what it takes instead."""
    own = load_family(m).flags()
    for flag, users in work_flags().items():
        if getattr(args, flag, None) is None or m in users:
            continue
        if any(i.kind == "recording" for i in users.values()):
            raise ArgumentError(f"--{flag} is for {joined(users)}; a {m} sweep does not send a recording")
        instead = " or ".join(f"--{f}" for f, i in own.items() if i.kind != "recording")
        raise ArgumentError(f"--{flag} is for {joined(users)}; a {m} sweep takes " +
                            (f"{instead} (or --spec)" if instead else "--spec"))


def plan_from_args(args: argparse.Namespace) -> LoadPlan:
    """The sweep the arguments ask for, checked (ArgumentError, exit 2, naming what to fix)."""
    m = args.modality
    if m == CONVERSE:
        return converse_plan(args)[0]
    given = [f for f in CONVERSE_FLAGS if getattr(args, f, None) is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ArgumentError(f"{flag} is for load converse; a {m} sweep does not hold conversations")
    _refuse_other_work(args, m)
    work: dict[str, Any] = read_spec(args.spec) if args.spec is not None else {}
    own = load_family(m).flags()
    for flag, item in own.items():
        if item.kind != "recording" and getattr(args, flag, None) is not None:
            work[item.field] = read_text(getattr(args, flag), f"--{flag}")
    slo: Slo | str | None = args.slo
    if args.slo_ttfa_ms is not None:
        slo = slo_ttfa_ms(args.slo_ttfa_ms, m)
    elif args.slo_final_ms is not None:
        slo = slo_final_ms(args.slo_final_ms, m)
    elif args.slo_latency_s is not None:
        slo = slo_latency_s(args.slo_latency_s)
    files = [(flag, getattr(args, flag)) for flag, i in own.items() if i.kind == "recording" and getattr(args, flag)]
    return LoadPlan.build(m, levels=args.concurrency, requests=16 if args.requests is None else args.requests, slo=slo,
                          max_wall_s=args.max_minutes * 60, work=work, warmup=args.warmup,
                          recording=next((recording(path, f"--{flag}") for flag, path in files), None))


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
        if not go_ahead(target, plan, args.yes):
            return 1
        report, interrupted = asyncio.run(sweep(
            lambda stop, progress: run_sweep(backend, plan, target, on_progress=progress, stop=stop), quiet=args.json))
    finally:
        backend.close()
    return finish(args, report, settings, interrupted)
