"""The commands that remove what bills: `delete` (a deployment's endpoints, or endpoints by name) and `sweep`
(studio resources no state file knows) — infra/delete.py and infra/sweep.py do the work."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.cli.common import (
    STATE_ENV,
    Parents,
    ProgressPrinter,
    default_state_file,
    money,
    print_json,
    role_arg,
    table,
    wait_settings,
)
from infra.errors import UsageError
from infra.state import DEFAULT_STATE_FILE


def _add_delete(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("delete", parents=[parents.aws, parents.state, parents.out, parents.waiting, parents.locking],
                       help="delete the endpoints",
                       description="Delete endpoint (wait until gone), endpoint config and model for each endpoint of "
                                   "the deployment (or by --endpoint NAME); verify by describing. The state file is "
                                   "removed only when everything is gone.")
    p.add_argument("roles", nargs="*", type=role_arg, metavar="ENDPOINT",
                   help="only these endpoints of the deployment (default: all)")
    p.add_argument("--endpoint", action="append", default=[], metavar="NAME",
                   help="delete this endpoint (and its config and model) by name, without a state file; repeatable")
    p.add_argument("--purge-s3", action="store_true", help="also delete the S3 outputs under the prefix")
    p.set_defaults(func=cmd_delete)


def _add_sweep(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("sweep", parents=[parents.aws, parents.out, parents.waiting],
                       help="find forgotten studio resources",
                       description="List studio-tagged endpoints, configs and models, TTL schedule groups and "
                                   "roles, and CloudWatch alarms and autoscaling targets and policies in the region "
                                   "that no known state file holds (alarms and targets also when their endpoint is "
                                   "gone), with their running cost.")
    p.add_argument("--state-file", type=Path, action="append", default=None,
                   help=f"a state file whose resources are known (repeatable; default: ${STATE_ENV} or {DEFAULT_STATE_FILE})")
    p.add_argument("--delete", action="store_true", help="delete the orphans (asks first unless --yes)")
    p.add_argument("--yes", action="store_true", help="do not ask before deleting")
    p.add_argument("--prices", type=Path, help="a price table (default: the shipped one)")
    p.set_defaults(func=cmd_sweep)


# Each command's subparser, by name (infra/cli/__init__.py adds them in the order `--help` lists them).
COMMANDS: dict[str, Callable[[Any, Parents], None]] = {"delete": _add_delete, "sweep": _add_sweep}


# ---------------------------------------------------------------------------------------------------------
def _report_failures(report: Any) -> int:
    """What is left and why, on stderr; the exit code (the errors' highest, else 1)."""
    for r in report.remaining:
        print(f"still exists: {r}", file=sys.stderr)
    for e in report.errors:
        print(f"error: {e}", file=sys.stderr)
    return max([e.exit_code for e in report.errors] or [1])


def cmd_delete(args: argparse.Namespace) -> int:
    from infra.delete import delete_by_name, delete_deployment

    if args.endpoint and args.roles:
        raise UsageError("name endpoints either by role (from the state file) or with --endpoint NAME, not both")
    if args.endpoint:
        report = delete_by_name(args.endpoint, region=args.region, profile=args.profile, wait=wait_settings(args),
                                progress=ProgressPrinter())
    else:
        report = delete_deployment(args.state_file or default_state_file(), region=args.region, profile=args.profile,
                                   purge_s3=args.purge_s3, wait=wait_settings(args), progress=ProgressPrinter(),
                                   roles=list(args.roles) or None)
    if args.json:
        print_json(report.to_dict())
    else:
        for d in report.deletions:
            print(d.line())
        if report.s3_objects_deleted or report.bucket_deleted:
            print(f"S3: {report.s3_objects_deleted} objects removed" + (", bucket removed" if report.bucket_deleted else ""))
        if report.state_removed:
            print(f"verified: nothing left; removed the state file {report.state_file}")
    return 0 if report.ok else _report_failures(report)


def cmd_sweep(args: argparse.Namespace) -> int:
    from infra.aws import AwsContext
    from infra.pricing import load_prices
    from infra.sweep import delete_orphans, find_orphans

    ctx = AwsContext(args.region, args.profile)
    files = args.state_file or [default_state_file()]
    report = find_orphans(ctx, files, prices=load_prices(args.prices))
    if not args.json or not args.delete:
        if args.json:
            print_json(report.to_dict())
        else:
            _print_sweep(report)
    if args.delete and report.orphans:
        if not args.yes:
            if not sys.stdin.isatty():
                raise UsageError("sweep --delete asks before deleting; pass --yes to delete without asking")
            answer = input(f"delete these {len(report.orphans)} resources in {report.region}? type 'delete' to confirm: ")
            if answer.strip().lower() != "delete":
                print("nothing deleted")
                return 1
        report.deleted = delete_orphans(ctx, report.orphans, wait=wait_settings(args), progress=ProgressPrinter())
        if args.json:
            print_json(report.to_dict())
        else:
            for d in report.deleted.deletions:
                print(d.line())
        if not report.deleted.ok:
            return _report_failures(report.deleted)
    return 0


def _print_sweep(report: Any) -> None:
    known = ", ".join(str(p) for p in report.known_state_files) or "none"
    print(f"region {report.region}: {report.studio_resources} studio-tagged resources; known state files: {known}")
    for s in report.skipped_state_files:
        print(f"  (not used: {s})")
    if not report.orphans:
        print("no orphans")
        return
    rows = [[o.kind, o.name, o.deployment_id, o.status.status if o.status else (o.detail or "—"),
             (o.status.instance_type or "—") if o.status else "—", money(o.usd_per_hour), money(o.cost_so_far_usd)]
            for o in report.orphans]
    print(table(rows, ["kind", "name", "deployment", "status", "instance", "$/hour", "cost so far"]))
    print(f"orphans cost {money(report.usd_per_hour)}/hour, {money(report.cost_so_far_usd)} so far; "
          "`python -m infra sweep --delete` removes them")
