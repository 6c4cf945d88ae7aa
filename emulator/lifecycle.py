"""The account's own lifecycle in the emulator: schedules that fire and endpoints that scale, on a clock the
tests can move, with the four services behind them (EventBridge Scheduler, Application Auto Scaling,
CloudWatch, IAM) passed on to moto (emulator/forward.py).

Admin routes (not AWS APIs):
- `GET /_emulator/clock` — `{"now": ISO, "offset_s": s}`
- `POST /_emulator/clock` with `{"advance_s": s}` (or `{"offset_s": s}`) — moves the clock, then runs what
  became due (until nothing more does) and answers with it: `{"now", "offset_s", "events": [...]}` — a
  schedule that deleted its endpoint, a scaling activity started or done.
- `GET /_emulator/lifecycle` — the schedules the emulator will fire, the scalable targets, each async
  endpoint's backlog and scaling activity, and every invocation and activity so far.
Besides the admin moves, a ticker runs every `TICK_S` on real time.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from emulator import forward, iam
from emulator.autoscaling import AAS_PREFIX, CLOUDWATCH_PREFIX, Autoscaler
from emulator.clock import Clock
from emulator.errors import AwsError, query_xml_response
from emulator.scheduler import PATHS, Schedules

# The Emulator (emulator/core.py) is typed loosely: core creates the lifecycle, so importing it back would
# close an import cycle (tests/test_layers.py).
Emulator = Any

log = logging.getLogger("emulator")
TICK_S = 0.25
MAX_ROUNDS = 8  # after a clock move: run what became due, then what that made due, ...


class Lifecycle:
    def __init__(self, emu: Emulator) -> None:
        self.emu = emu
        self.clock = Clock()
        self.moto = forward.MotoClients(emu)
        self.schedules = Schedules(emu, self.clock, self.moto)
        self.autoscaling = Autoscaler(emu, self.clock, self.moto)
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    def reset(self) -> None:
        self.clock.offset_s = 0.0
        self.schedules.reset()
        self.autoscaling.reset()

    async def reset_services(self) -> None:
        """With `reset`: what moto holds for these services goes too."""
        await self.moto.forget_everything()

    async def tick(self) -> list[dict[str, Any]]:
        async with self._lock:
            now = self.clock.now()
            return [*await self.schedules.tick(now), *await self.autoscaling.tick(now)]

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad tick must not stop the clock
                log.exception("lifecycle tick failed")

    async def move(self, seconds: float) -> list[dict[str, Any]]:
        self.clock.offset_s += seconds
        events: list[dict[str, Any]] = []
        for _ in range(MAX_ROUNDS):
            more = await self.tick()
            events += more
            if not more:
                break
        return events

    def state(self) -> dict[str, Any]:
        a = self.autoscaling
        return {
            "now": self.clock.iso(), "offset_s": self.clock.offset_s,
            "schedules": {f"{g}/{n}": {"expression": e.expression, "target": e.target.get("Arn"),
                                       "action_after_completion": e.after_completion, "attempts": e.attempts,
                                       "last_error": e.last_error}
                          for (g, n), e in self.schedules.index.items()},
            "invocations": list(self.schedules.invocations),
            "scalable_targets": {rid: {"min": t.min, "max": t.max} for rid, t in a.targets.items()},
            "policies": sorted(f"{rid}:{name}" for rid, name in a.policies),
            "load": {name: {"backlog": ld.backlog, "activity": None if ld.activity is None else vars(ld.activity)}
                     for name, ld in a.load.items()},
            "activities": list(a.activities),
        }


# --------------------------------------------------------------------------------------------------
# Routing (emulator/app.py calls these)
def mount(api: FastAPI, emu: Emulator) -> None:
    life: Lifecycle = emu.lifecycle

    @api.get("/_emulator/clock")
    async def get_clock() -> dict[str, Any]:
        return {"now": life.clock.iso(), "offset_s": life.clock.offset_s}

    @api.post("/_emulator/clock")
    async def move_clock(request: Request) -> Response:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            if "advance_s" in body:
                seconds = float(body["advance_s"])
            elif "offset_s" in body:
                seconds = float(body["offset_s"]) - life.clock.offset_s
            else:
                raise ValueError('give {"advance_s": seconds} or {"offset_s": seconds}')
            if seconds < 0:
                raise ValueError("the clock only moves forward")
        except (ValueError, TypeError) as exc:
            return JSONResponse({"error": f"invalid clock move: {exc}"}, status_code=400)
        events = await life.move(seconds)
        return JSONResponse({"now": life.clock.iso(), "offset_s": life.clock.offset_s, "events": events})

    @api.get("/_emulator/lifecycle")
    async def lifecycle_state() -> dict[str, Any]:
        return life.state()

    async def scheduler_route(request: Request) -> Response:
        return await life.schedules.handle(request)

    for prefix in PATHS:
        api.add_api_route(prefix.rstrip("/") + "{rest:path}", scheduler_route,
                          methods=["GET", "POST", "PUT", "DELETE"], include_in_schema=False)


def json_target(emu: Emulator, target: str) -> str | None:
    """The service of a JSON-protocol X-Amz-Target this module serves, else None."""
    prefix = target.partition(".")[0]
    return {AAS_PREFIX: "application-autoscaling", CLOUDWATCH_PREFIX: "cloudwatch"}.get(prefix)


async def json_call(emu: Emulator, request: Request, target: str) -> Response:
    prefix, _, op = target.partition(".")
    if prefix == AAS_PREFIX:
        return await emu.lifecycle.autoscaling.handle_aas(request, op)
    return await emu.lifecycle.autoscaling.handle_cloudwatch(request)


def query_service(request: Request) -> str | None:
    """`iam` or `monitoring` (CloudWatch's query protocol) from the SigV4 credential scope, else None."""
    auth = request.headers.get("authorization", "")
    for service in ("iam", "monitoring"):
        if f"/{service}/aws4_request" in auth:
            return service
    return None


async def query_call(emu: Emulator, request: Request, service: str) -> Response:
    try:
        emu.authorize(request.headers)
        raw = await request.body()
        form = urllib.parse.parse_qs(raw.decode("utf-8", errors="replace"))
        if service == "iam" and (form.get("Action") or [""])[0] == "SimulatePrincipalPolicy":
            return await asyncio.to_thread(iam.simulate_principal_policy, emu.lifecycle.moto, form)
        return forward.relay(await forward.forward(emu, request, raw, service))
    except AwsError as err:
        return query_xml_response(err)
