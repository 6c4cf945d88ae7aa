"""`load converse`: many conversations at once, each a pipeline conversation over the same recorded turns, and how
many of them hold a voice-to-voice SLO.

    plan = LoadPlan.build(CONVERSE, levels="3", requests=3, slo="v2v 1500ms", inputs=turns, work={...})
    target = describe_conversations(settings, where, engine_url=url)      # checked and priced before any load
    report = asyncio.run(run_conversations(setup, plan, target))          # a LoadReport, as every load kind's

Each request of the sweep is one whole conversation: a fresh runner from the `Setup` (services/converse/setup.py
— the listen, reply and speech targets, the voice, the silence window) plays the plan's turns in order, as
`python -m services converse` does. The levels, the warm-up, the closed loop, the wall-clock cap and the report are
services/load's (`run_levels`, services/load/report.py): its sample has the conversation's `turns`,
`failed_turns` and each answered turn's voice-to-voice (`turn_v2v_ms`); a conversation with a failed turn (or with
no turn heard) is a failed request whose error names the turn. A conversation is capped at its speech plus
CONVERSATION_S_PER_TURN per turn, so a stuck one ends.

The target is the pipeline's: the offline engine (this machine's figures), servers at URLs, or SageMaker listen and
voice endpoints (`sagemaker_target` each: InService, their instance types priced from the table and summed, which
makes the sweep one that needs a confirmation).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from protocol.common import ModelList
from protocol.errors import InvalidInput, StreamError
from services.converse.setup import Setup
from services.converse.timeline import Conversation
from services.load.plan import CONVERSE, LoadPlan
from services.load.report import LoadReport
from services.load.family import Failed
from services.load.runner import OnProgress, new_report, run_levels
from services.load.target import LoadTarget, check_price, sagemaker_target, this_machine
from services.pricing import PriceTable
from services.settings import Settings
from services.speech.client import OFFLINE_ENGINE_OWNER

CONVERSATION_S_PER_TURN = 60.0  # beyond its speech: a turn's reply (capped at 20 s) and its spoken audio


def conversation_figures(conv: Conversation) -> dict[str, Any]:
    """A conversation as a sample's figures: its turns, the failed ones, each answered turn's voice-to-voice (0.1 ms,
    as its JSON timeline has them)."""
    return {"turns": len(conv.turns), "failed_turns": sum(1 for t in conv.turns if t.error),
            "turn_v2v_ms": tuple(round(t.voice_to_voice_ms, 1) for t in conv.turns if t.voice_to_voice_ms is not None)}


def conversation(setup: Setup, plan: LoadPlan) -> Callable[[], Any]:
    """One request of the sweep: a whole conversation over the plan's turns; its figures, or Failed with them."""
    inputs = list(plan.inputs)
    cap_s = sum(x.seconds for x in inputs) + CONVERSATION_S_PER_TURN * len(inputs)

    async def one() -> dict[str, Any]:
        try:
            conv = await asyncio.wait_for(setup.runner().run(inputs), cap_s)
        except TimeoutError:
            raise StreamError(f"the conversation did not end within {cap_s:.0f} s") from None
        figures = conversation_figures(conv)
        failed = [(i, t.error) for i, t in enumerate(conv.turns, start=1) if t.error]
        if failed:
            i, error = failed[0]
            raise Failed(StreamError(f"turn {i}: {error}"), figures)
        if not conv.turns:
            raise Failed(InvalidInput("no words were heard in any input, so there was no turn"), figures)
        return figures
    return one


async def run_conversations(setup: Setup, plan: LoadPlan, target: LoadTarget, *,
                            on_progress: OnProgress | None = None, stop: Any = None,
                            clock: Callable[[], float] = time.perf_counter) -> LoadReport:
    """Every level of a converse `plan` (see the module's doc); the report with every conversation's sample."""
    if plan.modality != CONVERSE:
        raise ValueError(f"run_conversations runs a converse plan, not a {plan.modality} one")
    setup.check()
    return await run_levels(new_report(plan, target), plan, conversation(setup, plan), on_progress=on_progress,
                            stop=stop, clock=clock)


def _offline_engine(urls: list[str], timeout: float) -> str | None:
    """The first of `urls` that is an offline engine (its /v1/models says so), else None."""
    for url in urls:
        try:
            models = ModelList.model_validate(httpx.get(f"{url.rstrip('/')}/v1/models", timeout=timeout,
                                                        trust_env=False).json())
        except (httpx.HTTPError, ValueError):
            continue
        if any(m.owned_by == OFFLINE_ENGINE_OWNER for m in models.data):
            return url
    return None


def describe_conversations(settings: Settings, where: str, *, engine_url: str | None = None, urls: tuple[str, ...] = (),
                           endpoints: dict[str, str] | None = None, usd_per_hour: float | None = None,
                           prices: PriceTable | None = None) -> LoadTarget:
    """The pipeline's target, checked and priced before any load: `where` its targets in words, `engine_url` the
    offline engine the studio started for a stage, `urls` the servers given for the others (an offline engine among
    them is this machine's figure too), `endpoints` the SageMaker endpoints by role ("listen", "voice"), each
    InService (BackendUnreachable otherwise). The hourly price is the one given, else the endpoints' summed."""
    check_price(usd_per_hour)
    engine_url = engine_url or _offline_engine(list(urls), settings.connect_timeout_s)
    machine = None if engine_url is None else this_machine(engine_url)
    parts = [sagemaker_target(settings, role, None, None, prices) for role, name in (endpoints or {}).items() if name]
    if not parts:
        backend = "offline" if engine_url is not None else "server"
        note = ("the offline engine runs on this machine, which has no instance price; give --price-per-hour to "
                "price its time") if engine_url is not None else (
            "the hourly price of the servers at these URLs is not known: give --price-per-hour for a cost per turn")
        priced = {"usd_per_hour": usd_per_hour, "price_source": "given by hand (--price-per-hour)"} \
            if usd_per_hour is not None else {"price_note": note}
        return LoadTarget(backend, where, "conversation pipeline", region=settings.region, machine=machine, **priced)
    names = ", ".join(f"{t.endpoint} ({role})" for role, t in zip((r for r, n in endpoints.items() if n), parts))
    types = [t.instance_type for t in parts]
    hourly = [t.usd_per_hour for t in parts]
    if usd_per_hour is not None:
        priced = {"usd_per_hour": usd_per_hour, "price_source": "given by hand (--price-per-hour)"}
    elif all(h is not None for h in hourly):
        priced = {"usd_per_hour": round(sum(h for h in hourly if h is not None), 6),
                  "price_source": "the sum of " + "; ".join(f"{t.endpoint}: {t.price_source}" for t in parts)}
    else:
        priced = {"price_note": "; ".join(t.price_note for t in parts if t.price_note)}
    return LoadTarget("sagemaker", where, "SageMaker endpoints", endpoint=names, region=parts[0].region,
                      instance_type=" + ".join(t or "?" for t in types), machine=machine,
                      emulated=any(t.emulated for t in parts), **priced)
