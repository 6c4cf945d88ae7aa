"""The commands that look without changing anything (the smoke test only calls the endpoints): `status`,
`cost`, `plan`, `smoke` (infra/status.py, infra/cost.py, infra/plan.py, infra/smoke.py do the work)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.aws import checked_region
from infra.cli.common import (
    Parents,
    add_with,
    chosen_roles,
    default_state_file,
    money,
    print_json,
    print_smoke_check,
    role_arg,
    table,
)
from infra.errors import UsageError
from infra.model import ROLES, DeployOptions, voice_model_label
from infra.planning import pools_and_models
from infra.progress import format_duration
from infra.state import DeploymentState
from protocol.errors import StudioError
from services.kinds import backend_name

PRICES_HELP = "a price table (default: the shipped one)"


def _add_status(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("status", parents=[parents.aws, parents.state, parents.out], help="what runs and what it costs",
                       description="Per endpoint: status, instance type in use, uptime, $/hour, cost so far.")
    p.add_argument("--prices", type=Path, help=PRICES_HELP)
    p.set_defaults(func=cmd_status)


def _add_cost(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("cost", parents=[parents.aws, parents.state, parents.out],
                       help="hourly prices and what the deployment costs",
                       description="Hourly on-demand price per instance type and the deployment's cost per hour and "
                                   "per day, from the shipped dated table (or a refreshed one).")
    p.add_argument("--instance-types", help="price these types instead (e.g. before deploying)")
    p.add_argument("--prices", type=Path, help=PRICES_HELP)
    p.add_argument("--refresh-prices", action="store_true",
                   help="ask the AWS Price List API (needs credentials and pricing:GetProducts)")
    p.add_argument("--save-prices", type=Path, help="with --refresh-prices: save the refreshed table here")
    p.set_defaults(func=cmd_cost)


def _add_smoke(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("smoke", parents=[parents.state, parents.out, parents.locking], help="run the smoke tests",
                       description="Voice saves validation-output.wav, image a PNG, video a 4-step (smoke-only) MP4, "
                                   "listen a transcript, omni a one-turn spoken conversation (its stereo WAV), "
                                   "through the studio's services layer.")
    p.add_argument("roles", nargs="*", type=role_arg, metavar="ENDPOINT", help="default: all in the deployment")
    p.add_argument("--backend", type=backend_name, choices=["sagemaker", "server", "offline"], default="sagemaker",
                   help="sagemaker: the deployment in the state file (default); server: a vLLM-Omni URL (omni, its "
                        "former name, is taken too); offline: the embedded engine")
    p.add_argument("--url", help="vLLM-Omni server URL for --backend server")
    p.add_argument("--out-dir", type=Path, default=Path("."), help="where the outputs go (default .)")
    p.set_defaults(func=cmd_smoke)


def _add_plan(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("plan", parents=[parents.out], help="where to deploy: quotas, prices, a recommendation",
                       description="Per region, endpoint and pool entry: the quota free now and the on-demand $/hour "
                                   "(AWS Price List API, else the bundled table); per endpoint the cheapest entry "
                                   "with quota, and the `deploy` line for it. Creates nothing.")
    p.add_argument("roles", nargs="*", type=role_arg, metavar="ENDPOINT",
                   help="default: voice, image and video (listen is opt-in: name it, or --with listen)")
    add_with(p)
    p.add_argument("--regions", help="comma-separated regions (default: the profile's, else us-east-1)")
    p.add_argument("--profile", help="AWS profile (default: boto3's chain: env, SSO, roles)")
    p.add_argument("--prices", type=Path, help="the price table to fall back on (default: the shipped one)")
    p.add_argument("--no-price-list", action="store_true", help="do not ask the AWS Price List API; use the table")
    p.add_argument("--instance-types", action="append", default=[], metavar="TYPES",
                   help="plan these pools instead of the defaults, as deploy takes them: a,b (every endpoint) or "
                        "voice=a,b (one endpoint); repeatable")
    p.add_argument("--model", action="append", default=[], metavar="ROLE=MODEL_ID", dest="models",
                   help="plan another model for one endpoint (its GPU memory is checked against every entry)")
    p.set_defaults(func=cmd_plan)


# Each command's subparser, by name (infra/cli/__init__.py adds them in the order `--help` lists them).
COMMANDS: dict[str, Callable[[Any, Parents], None]] = {
    "status": _add_status, "cost": _add_cost, "smoke": _add_smoke, "plan": _add_plan,
}


# ---------------------------------------------------------------------------------------------------------
def cmd_status(args: argparse.Namespace) -> int:
    from infra.lifecycle import LifecycleStatus
    from infra.pricing import load_prices
    from infra.status import deployment_status, without_unpriced

    report = deployment_status(args.state_file or default_state_file(), region=args.region, profile=args.profile,
                               prices=load_prices(args.prices))
    life = LifecycleStatus.read(args.state_file or default_state_file(), report, profile=args.profile)
    if args.json:
        print_json({**report.to_dict(), **life.to_dict()})
        return 0
    rows = [[e.role or "", e.endpoint_name, e.status, e.instance_type or "—", life.instances(e),
             format_duration(e.uptime_s),
             money(e.usd_per_hour) + ("≈" if e.price is not None and e.price.basis == "reference region" else ""),
             money(e.cost_so_far_usd), "—" if not e.smoke else ("ok" if e.smoke.get("ok") else "FAILED"),
             life.ttl_label(e.role)]
            for e in report.endpoints]
    print(f"deployment {report.deployment_id} in {report.region}")
    print(table(rows, ["endpoint", "name", "status", "instance", "instances", "uptime", "$/hour", "cost so far",
                       "smoke", "TTL"]))
    print(life.line)
    for e in report.endpoints:
        if e.version:
            print(f"{e.role} version: {e.version['label']}")
    if report.voice_model:
        print(f"voice model: {voice_model_label(report.voice_model)}")
    print(f"total{without_unpriced(report.unpriced)}: {money(report.usd_per_hour)}/hour "
          f"({money(report.usd_per_day)}/day), {money(report.cost_so_far_usd)} so far; {report.prices.describe()}")
    for e in report.endpoints:
        if e.failure_reason:
            print(f"{e.role}: FailureReason: {e.failure_reason}")
    if report.unpriced:
        print(f"no price for {', '.join(report.unpriced)}: refresh with `python -m infra cost --refresh-prices`")
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    from infra.cost import deployment_cost
    from infra.pricing import load_prices
    from infra.status import without_unpriced

    report = deployment_cost(args.state_file or default_state_file(), instance_types=args.instance_types,
                             prices=load_prices(args.prices), region=args.region, profile=args.profile,
                             refresh=args.refresh_prices, save_prices=args.save_prices)
    if args.json:
        print_json(report.to_dict())
        return 0
    if report.idle:
        print(f"{', '.join(report.idle)}: 0 instances now (scaled to zero): costs nothing until a job arrives")
    rows = [[line.instance_type, line.price.label(), ", ".join(line.endpoints) or "—"] for line in report.lines]
    print(table(rows, ["instance type", "on-demand", "endpoints on it"]))
    print("price range of each endpoint's pool (SageMaker takes the first entry with capacity):")
    print(table([[p.role, p.endpoint or "(planned)", p.range_label(), p.label().split(": ", 1)[1]] for p in report.pools],
                ["endpoint", "name", "min–max", "every entry (priority order)"]))
    prices = report.prices
    print(f"{report.basis} in {report.region}{without_unpriced(report.unpriced)}: {money(report.usd_per_hour)}/hour, "
          f"{money(report.usd_per_day)}/day"
          + (f", {money(report.cost_so_far_usd)} so far" if report.cost_so_far_usd is not None else ""))
    print(prices.describe() + ".")
    if report.unpriced:
        print(f"no price for {', '.join(report.unpriced)}: refresh with `python -m infra cost --refresh-prices`")
    if prices.stale():
        print(f"note: the table is {prices.age_days()} days old; `python -m infra cost --refresh-prices` asks the "
              "AWS Price List API for today's rates")
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    from infra.smoke import run_smoke, smoke_deployment
    from services.backend import create_backend
    from services.settings import load_settings

    progress = None if args.json else print_smoke_check
    if args.backend == "sagemaker":
        state_file = args.state_file or default_state_file()
        state = DeploymentState.load(state_file)
        say_scale_up(state_file, args.roles)
        report = smoke_deployment(state, args.out_dir, args.roles, progress=progress)
    else:
        if args.backend == "server" and not args.url:
            raise UsageError("--backend server needs --url, e.g. --url http://gpu-box:8091")
        backend = create_backend(load_settings().with_overrides(backend=args.backend, server_url=args.url))
        try:
            report = run_smoke(backend, args.out_dir, tuple(args.roles) or ROLES, progress=progress)
        finally:
            backend.close()
    if args.json:
        print_json(report.to_dict())
    else:
        print(("smoke test passed" if report.ok else "smoke test FAILED") + f" against {report.target}")
    return 0 if report.ok else 5


def say_scale_up(state_file: Path, roles: list[str]) -> None:
    """Before a smoke test: what it starts that costs (an endpoint at 0 instances scales up), as the page asks."""
    from infra.smoke import scale_up_note
    from infra.status import deployment_status

    try:
        note = scale_up_note(deployment_status(state_file), roles or None)
    except StudioError:  # the smoke test itself says what is wrong
        return
    if note:
        print(f"note: {note}", file=sys.stderr)


def cmd_plan(args: argparse.Namespace) -> int:
    from infra.aws import AwsContext
    from infra.plan import plan_regions, render
    from infra.pricing import load_prices

    names = [r for r in (args.regions or "").split(",") if r.strip()]
    regions = [checked_region(r, "--regions") for r in names] or [AwsContext(None, args.profile).region]
    roles = chosen_roles(args)
    pools, model_ids = pools_and_models(DeployOptions(roles=roles, instance_types=args.instance_types,
                                                      models=args.models))  # exit 2 when an entry cannot fit
    report = plan_regions(regions, roles, profile=args.profile, table=load_prices(args.prices),
                          use_price_list=not args.no_price_list, pools=pools, model_ids=model_ids)
    if args.json:
        print_json(report.to_dict())
    else:
        print(render(report), end="")
    if not report.ok:  # no region could be read: the first region's reason
        print(f"error: {report.regions[0].error}", file=sys.stderr)
        return 1
    return 0
