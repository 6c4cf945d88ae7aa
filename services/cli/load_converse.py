"""`python -m services load converse`: many pipeline conversations at once over the same recorded turns (--input
TURN.wav, repeated), as `python -m services converse` holds one — its options, its plan checked before any engine
starts, and its run (services/load/converse.py). Its report is printed and written, not kept in the history.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from protocol.errors import InvalidInput
from services.cli.common import ArgumentError, check_out, settings_from_args
from services.cli.load_run import finish, go_ahead, recording, say, sweep
from services.load import LoadPlan, parse_levels
from services.load.plan import CONVERSE, MODALITIES, load_family, slo_v2v_ms


def converse_options(p: argparse.ArgumentParser) -> None:
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
WORK_FIX = "its work is the recorded turns: --input"  # any other family's work flag


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

    work_flags = {flag: WORK_FIX for m in MODALITIES for flag in load_family(m).flags()}
    for dest, fix in (NOT_FOR_CONVERSE | {k: v for k, v in work_flags.items() if k not in NOT_FOR_CONVERSE}).items():
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
    inputs = [recording(path, "--input") for path in args.input]
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
        if not go_ahead(target, plan, args.yes):
            return 1
        report, interrupted = asyncio.run(sweep(
            lambda stop, progress: run_conversations(setup, plan, target, on_progress=progress, stop=stop),
            quiet=args.json))
    finally:
        if backend is not None:
            backend.close()
    say("note: a converse report is printed (and written with --out), not kept in the history: the Capacity page "
        "does not draw conversations yet")
    return finish(args, report, settings, interrupted, keep=False)
