"""`python -m infra <command>` — a thin argparse face over the infra library.

Exit codes: 0 done; 1 an AWS or other error; 2 bad options, or the state file is in use by another
command (`--wait-lock SECONDS` waits for it); 3 credentials missing, expired or lacking a
permission; 4 quota shortfall (nothing created); 5 an endpoint (or the smoke test) failed; 6 state file
problem; 130 interrupted. `--json` prints one JSON document on stdout (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from infra.aws import checked_region
from infra.deploy import (
    DeployResult,
    Progress,
    WaitSettings,
    deploy,
    format_duration,
    resume,
)
from infra.errors import InfraError, UsageError
from infra.lock import hold
from infra.model import (
    DEFAULT_IMAGE_TAG,
    DEFAULT_TTL,
    DEFAULT_VOICE_MODEL,
    PROJECT,
    ROLES,
    DeployOptions,
    Role,
    check_voice_model,
    voice_model_label,
)
from infra.scaling import check_max_instances
from infra.state import DEFAULT_STATE_FILE, DeploymentState
from protocol.errors import StudioError

STATE_ENV = "OMNI_STUDIO_STATE_FILE"
HEARTBEAT_S = 30.0
MAX_WAIT_LOCK_S = 24 * 3600.0


def default_state_file() -> Path:
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE_FILE)


# ---------------------------------------------------------------------------------------------------------
class ProgressPrinter:
    """Live progress lines: one per change (status, instance type), and a heartbeat while waiting."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.t0 = time.monotonic()
        self._last: dict[Role | None, tuple[str, str | None, str | None]] = {}
        self._beat: dict[Role | None, float] = {}
        self._lock = threading.Lock()

    def __call__(self, p: Progress) -> None:
        with self._lock:
            key = (p.step, p.status, p.instance_type)
            now = time.monotonic()
            if p.step == "wait" and self._last.get(p.role) == key and now - self._beat.get(p.role, 0) < HEARTBEAT_S:
                return
            self._last[p.role] = key
            self._beat[p.role] = now
            who = (p.role or "").ljust(5)
            if p.step in ("wait", "done", "failed") and p.status:
                where = p.instance_type or ("(instance type not reported yet)" if p.status == "Creating" else "")
                line = f"{p.status:<10} {format_duration(p.elapsed_s):>8}  {where}".rstrip()
                if p.step == "failed":
                    line += f"  FailureReason: {p.message.split(': ', 1)[-1]}"
            else:
                line = p.message
            print(f"[{format_duration(now - self.t0):>7}] {who} {line}", file=self.stream or sys.stderr, flush=True)


def _role(value: str) -> str:
    role = value.strip().lower()
    if role not in ROLES:
        raise argparse.ArgumentTypeError(f"{value!r} is not an endpoint: choose from {', '.join(ROLES)}")
    return role


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*(str(c) for c in r)) for r in rows]
    return "\n".join(lines)


def _wait_lock(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 <= seconds <= MAX_WAIT_LOCK_S:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{value!r}: give 0 to {MAX_WAIT_LOCK_S:g} seconds")
    return seconds


def _money(v: float | None) -> str:
    return "—" if v is None else f"${v:,.2f}" if v >= 1 else f"${v:.4f}"


def _wait_settings(args: argparse.Namespace) -> WaitSettings:
    d = WaitSettings()
    return WaitSettings(poll_s=args.poll_seconds if args.poll_seconds is not None else d.poll_s,
                        timeout_s=args.wait_timeout if args.wait_timeout is not None else d.timeout_s,
                        delete_timeout_s=args.wait_timeout if args.wait_timeout is not None else d.delete_timeout_s)


# ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Stand up, watch and tear down the studio's three SageMaker endpoints (voice, image, video).",
        epilog=__doc__.split("\n", 2)[2])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    aws = argparse.ArgumentParser(add_help=False)
    g = aws.add_argument_group("AWS")
    g.add_argument("--region", help="AWS region (default: the profile's, else us-east-1; resume/delete: the state's)")
    g.add_argument("--profile", help="AWS profile (default: boto3's chain: env, SSO, roles)")
    state = argparse.ArgumentParser(add_help=False)
    state.add_argument("--state-file", type=Path, default=None,
                       help=f"the deployment's state file (default: ${STATE_ENV} or {DEFAULT_STATE_FILE})")
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--json", action="store_true", help="print the result as one JSON document")
    waiting = argparse.ArgumentParser(add_help=False)
    w = waiting.add_argument_group("waiting")
    w.add_argument("--poll-seconds", type=float, default=None, help="describe every N seconds (default 15)")
    w.add_argument("--wait-timeout", type=float, default=None, help="give up waiting after N seconds (default 7200)")
    locking = argparse.ArgumentParser(add_help=False)
    locking.add_argument("--wait-lock", type=_wait_lock, default=0.0, metavar="SECONDS",
                         help="when another command is writing the same state file, wait up to SECONDS for it to "
                              f"end (default 0: refuse at once, exit 2, naming it; at most {MAX_WAIT_LOCK_S:g})")
    smoke = argparse.ArgumentParser(add_help=False)
    s = smoke.add_argument_group("smoke test")
    s.add_argument("--no-smoke", action="store_true", help="skip the smoke test after InService")
    s.add_argument("--smoke-dir", type=Path, default=Path("."), help="where the smoke outputs go (default .)")

    p = sub.add_parser("deploy", parents=[aws, state, out, waiting, smoke, locking], help="create the endpoints",
                       description="Create the voice, image and video endpoints (all, or the ones named) from one "
                                   "pinned image, after a quota pre-check of every pool entry.")
    p.add_argument("roles", nargs="*", type=_role, metavar="ENDPOINT",
                   help="voice, image and/or video (default: all three)")
    p.add_argument("--role-arn", help="SageMaker execution role (default: $SAGEMAKER_EXECUTION_ROLE_ARN)")
    p.add_argument("--image-tag", default=DEFAULT_IMAGE_TAG, help=f"vllm DLC image tag (default {DEFAULT_IMAGE_TAG})")
    p.add_argument("--instance-types", action="append", default=[], metavar="TYPES",
                   help="pool in priority order, 1-5 unique types, e.g. ml.g6.xlarge,ml.g5.xlarge (every endpoint) or "
                        "voice=ml.g6.xlarge (one endpoint); repeatable. Default: g6 → g6e → g5 (→ g4dn for voice)")
    p.add_argument("--bucket", help="S3 bucket for async video (default omni-studio-<account>-<region>; created "
                                    "if missing, public access blocked, default encryption)")
    p.add_argument("--prefix", default=PROJECT, help=f"S3 folder inside the bucket (default {PROJECT})")
    p.add_argument("--name-prefix", default=PROJECT, help=f"resource name prefix (default {PROJECT})")
    p.add_argument("--kms-key", help="KMS key for the async outputs and the bucket's default encryption")
    p.add_argument("--subnets", action="append", default=[], help="VPC subnet ids (comma-separated; with --security-groups)")
    p.add_argument("--security-groups", action="append", default=[], help="VPC security group ids (comma-separated)")
    p.add_argument("--model-s3-uri", action="append", default=[], metavar="URI",
                   help="model files from S3 for networks without internet: s3://bucket/models/ (holding "
                        "<model id>/ per endpoint) or voice=s3://.../; repeatable")
    p.add_argument("--tags", action="append", default=[], help="extra tags KEY=VALUE[,KEY=VALUE]; repeatable")
    p.add_argument("--voice-model", metavar="MODEL_ID",
                   help=f"the voice endpoint's Qwen3-TTS model (default {DEFAULT_VOICE_MODEL}): a -CustomVoice model "
                        "speaks with preset voices, -VoiceDesign designs a voice from a description, -Base clones a "
                        "voice from a recording (0.6B or 1.7B; VoiceDesign 1.7B only)")
    life = p.add_argument_group("lifecycle (the endpoints delete themselves; video scales to zero)")
    life.add_argument("--ttl", default=DEFAULT_TTL, metavar="DURATION",
                      help=f"delete the endpoints after this long (default {DEFAULT_TTL}; e.g. 90m, 1h30m, 2d, or a time "
                           "such as 2026-05-01T18:00Z), by EventBridge Scheduler in the account — nothing of ours "
                           "keeps running. Over 7 days asks for --yes")
    life.add_argument("--no-ttl", action="store_true", help="keep the endpoints until `delete` (they bill until then)")
    life.add_argument("--yes", action="store_true", help="confirm a --ttl over 7 days")
    life.add_argument("--scheduler-role-arn", metavar="ARN",
                      help="the role the schedules run as (needs sagemaker:DeleteEndpoint on these endpoints and trust "
                           "in scheduler.amazonaws.com; checked before anything is created). Default: deploy creates "
                           "one with exactly that, and delete removes it")
    life.add_argument("--max-instances", default="1", metavar="N",
                      help="at most N instances per endpoint, 1-10 (default 1); voice and image scale between 1 and N")
    life.add_argument("--no-scale-to-zero", action="store_true",
                      help="keep the video endpoint's instance while idle (default: it scales to 0 and a job "
                           "arriving starts one, which takes minutes)")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("resume", parents=[aws, state, out, waiting, smoke, locking], help="finish a deployment",
                       description="Continue the deployment in the state file after a crash or expired credentials: "
                                   "reuse what exists, create what is missing, never duplicate.")
    p.add_argument("--ttl", metavar="DURATION", help="a new TTL from now (needed when the recorded one has ended)")
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("extend", parents=[aws, state, out, locking], help="move the endpoints' deletion time",
                       description="Set the TTL of every endpoint still there to now + DURATION (or the time given): "
                                   "their EventBridge Scheduler schedules are updated. A --no-ttl deployment gets one.")
    p.add_argument("--ttl", required=True, metavar="DURATION", help="e.g. 4h, 90m, 2d, or 2026-05-01T18:00Z")
    p.add_argument("--yes", action="store_true", help="confirm a TTL over 7 days")
    p.add_argument("--scheduler-role-arn", metavar="ARN", help="a role for the schedules (checked first); default: "
                                                               "the one the deployment has, or one created")
    p.set_defaults(func=cmd_extend)

    p = sub.add_parser("status", parents=[aws, state, out], help="what runs and what it costs",
                       description="Per endpoint: status, instance type in use, uptime, $/hour, cost so far.")
    p.add_argument("--prices", type=Path, help="a price table (default: the shipped one)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("delete", parents=[aws, state, out, waiting, locking], help="delete the endpoints",
                       description="Delete endpoint (wait until gone), endpoint config and model for each endpoint of "
                                   "the deployment (or by --endpoint NAME); verify by describing. The state file is "
                                   "removed only when everything is gone.")
    p.add_argument("roles", nargs="*", type=_role, metavar="ENDPOINT",
                   help="only these endpoints of the deployment (default: all)")
    p.add_argument("--endpoint", action="append", default=[], metavar="NAME",
                   help="delete this endpoint (and its config and model) by name, without a state file; repeatable")
    p.add_argument("--purge-s3", action="store_true", help="also delete the S3 outputs under the prefix")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("sweep", parents=[aws, out, waiting], help="find forgotten studio resources",
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

    p = sub.add_parser("cost", parents=[aws, state, out], help="hourly prices and what the deployment costs",
                       description="Hourly on-demand price per instance type and the deployment's cost per hour and "
                                   "per day, from the shipped dated table (or a refreshed one).")
    p.add_argument("--instance-types", help="price these types instead (e.g. before deploying)")
    p.add_argument("--prices", type=Path, help="a price table (default: the shipped one)")
    p.add_argument("--refresh-prices", action="store_true",
                   help="ask the AWS Price List API (needs credentials and pricing:GetProducts)")
    p.add_argument("--save-prices", type=Path, help="with --refresh-prices: save the refreshed table here")
    p.set_defaults(func=cmd_cost)

    p = sub.add_parser("smoke", parents=[state, out, locking], help="run the smoke tests",
                       description="Voice saves validation-output.wav, image a PNG, video a 4-step (smoke-only) MP4, "
                                   "through the studio's services layer.")
    p.add_argument("roles", nargs="*", type=_role, metavar="ENDPOINT", help="default: all in the deployment")
    p.add_argument("--backend", choices=["sagemaker", "omni", "offline"], default="sagemaker",
                   help="sagemaker: the deployment in the state file (default); omni: a vLLM-Omni URL; offline: the "
                        "embedded engine")
    p.add_argument("--url", help="vLLM-Omni server URL for --backend omni")
    p.add_argument("--out-dir", type=Path, default=Path("."), help="where the outputs go (default .)")
    p.set_defaults(func=cmd_smoke)

    p = sub.add_parser("plan", parents=[out], help="where to deploy: quotas, prices, a recommendation",
                       description="Per region, endpoint and pool entry: the quota free now and the on-demand $/hour "
                                   "(AWS Price List API, else the bundled table); per endpoint the cheapest entry "
                                   "with quota, and the `deploy` line for it. Creates nothing.")
    p.add_argument("roles", nargs="*", type=_role, metavar="ENDPOINT", help="default: all three")
    p.add_argument("--regions", help="comma-separated regions (default: the profile's, else us-east-1)")
    p.add_argument("--profile", help="AWS profile (default: boto3's chain: env, SSO, roles)")
    p.add_argument("--prices", type=Path, help="the price table to fall back on (default: the shipped one)")
    p.add_argument("--no-price-list", action="store_true", help="do not ask the AWS Price List API; use the table")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("upgrade", parents=[aws, state, out, waiting, smoke, locking],
                       help="move endpoints to another image",
                       description="New model(s) and endpoint config(s) with the image tag (names end in -v<n>), then "
                                   "a blue/green UpdateEndpoint: all traffic at once, a bake watched by the endpoint's "
                                   "error alarm (SageMaker rolls back if it trips); then the smoke test on the new "
                                   "version, rolled back at once if it fails. The previous version is kept for "
                                   "`rollback` until the next successful upgrade.")
    p.add_argument("roles", nargs="*", type=_role, metavar="ENDPOINT", help="default: all in the deployment")
    p.add_argument("--image-tag", required=True, help="the vllm DLC image tag to move to, e.g. omni-sagemaker-cuda-v1.7")
    p.add_argument("--bake-seconds", type=float, default=600,
                   help="how long SageMaker watches the new fleet before removing the old one (0-3600, default 600)")
    p.set_defaults(func=cmd_upgrade)

    p = sub.add_parser("rollback", parents=[aws, state, out, waiting, smoke, locking],
                       help="back to the previous version",
                       description="Update each endpoint back to the version its current one superseded (kept since "
                                   "the upgrade), then run the smoke test on it.")
    p.add_argument("roles", nargs="*", type=_role, metavar="ENDPOINT", help="default: all in the deployment")
    p.set_defaults(func=cmd_rollback)
    return parser


# ---------------------------------------------------------------------------------------------------------
def _report_deploy(args: argparse.Namespace, result: DeployResult) -> int:
    if not args.json:
        from infra.lifecycle import ttl_line

        for o in result.outcomes.values():
            print(o.summary())
        print(f"state: {result.state.path}")
        print(ttl_line(result.state))
    if not result.ok:
        if args.json:
            _print_json({**result.to_dict(), "smoke": None})
        err = result.error()
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code if err is not None else 1
    smoke: dict[str, Any] | None = None
    code = 0
    if not args.no_smoke:
        from infra.smoke import smoke_deployment

        print("smoke test ...", file=sys.stderr)
        try:
            report = smoke_deployment(result.state, args.smoke_dir, progress=_print_smoke_check)
        except StudioError as exc:  # the endpoints are up; only the test could not start
            smoke, code = {"ok": False, "error": str(exc)}, 5
            print(f"error: the endpoints are InService but the smoke test did not run: {exc}", file=sys.stderr)
        else:
            smoke = report.to_dict()
            if not report.ok:
                code = 5
                print("error: the smoke test failed: " + "; ".join(
                    f"{c.role}: {c.detail}" for c in report.checks if not c.ok), file=sys.stderr)
    if args.json:
        _print_json({**result.to_dict(), "smoke": smoke})
    return code


def _print_smoke_check(check: Any) -> None:
    print(f"  {check.role:<5} {'ok  ' if check.ok else 'FAIL'} {check.detail} ({check.elapsed_s:.1f}s)", file=sys.stderr)


def cmd_deploy(args: argparse.Namespace) -> int:
    if args.voice_model is not None:
        args.voice_model = check_voice_model(args.voice_model)  # named before any state file or AWS call
    options = DeployOptions(
        roles=tuple(args.roles) or ROLES, region=args.region, profile=args.profile, role_arn=args.role_arn,
        image_tag=args.image_tag, instance_types=args.instance_types, bucket=args.bucket, prefix=args.prefix,
        name_prefix=args.name_prefix, kms_key=args.kms_key, subnets=args.subnets,
        security_groups=args.security_groups, model_s3_uri=args.model_s3_uri, tags=args.tags,
        voice_model=args.voice_model, ttl=None if args.no_ttl else args.ttl, yes=args.yes,
        scheduler_role_arn=args.scheduler_role_arn, max_instances=check_max_instances(args.max_instances),
        scale_to_zero=not args.no_scale_to_zero)
    if args.no_ttl and args.ttl != DEFAULT_TTL:
        raise UsageError("--ttl and --no-ttl contradict each other: give one of them")
    result = deploy(options, state_file=args.state_file or default_state_file(), wait=_wait_settings(args),
                    progress=ProgressPrinter())
    return _report_deploy(args, result)


def cmd_resume(args: argparse.Namespace) -> int:
    result = resume(args.state_file or default_state_file(), region=args.region, profile=args.profile,
                    wait=_wait_settings(args), progress=ProgressPrinter(), ttl=args.ttl)
    return _report_deploy(args, result)


def cmd_status(args: argparse.Namespace) -> int:
    from infra.pricing import load_prices
    from infra.status import deployment_status

    from infra.lifecycle import LifecycleStatus

    report = deployment_status(args.state_file or default_state_file(), region=args.region, profile=args.profile,
                               prices=load_prices(args.prices))
    life = LifecycleStatus.read(args.state_file or default_state_file(), report, profile=args.profile)
    if args.json:
        _print_json({**report.to_dict(), **life.to_dict()})
        return 0
    rows = [[e.role or "", e.endpoint_name, e.status, e.instance_type or "—", life.instances(e),
             format_duration(e.uptime_s),
             _money(e.usd_per_hour) + ("≈" if e.price is not None and e.price.basis == "reference region" else ""),
             _money(e.cost_so_far_usd), "—" if not e.smoke else ("ok" if e.smoke.get("ok") else "FAILED"),
             life.ttl_label(e.role)]
            for e in report.endpoints]
    print(f"deployment {report.deployment_id} in {report.region}")
    print(_table(rows, ["endpoint", "name", "status", "instance", "instances", "uptime", "$/hour", "cost so far",
                        "smoke", "TTL"]))
    print(life.line)
    for e in report.endpoints:
        if e.version:
            print(f"{e.role} version: {e.version['label']}")
    if report.voice_model:
        print(f"voice model: {voice_model_label(report.voice_model)}")
    print(f"total: {_money(report.usd_per_hour)}/hour ({_money(report.usd_per_day)}/day), {_money(report.cost_so_far_usd)} "
          f"so far; {report.prices.describe()}")
    for e in report.endpoints:
        if e.failure_reason:
            print(f"{e.role}: FailureReason: {e.failure_reason}")
    if report.unpriced:
        print(f"no price for {', '.join(report.unpriced)}: refresh with `python -m infra cost --refresh-prices`")
    return 0


def cmd_extend(args: argparse.Namespace) -> int:
    from infra.ttl import extend_deployment, format_left

    report = extend_deployment(args.state_file or default_state_file(), args.ttl, region=args.region,
                               profile=args.profile, yes=args.yes, scheduler_role_arn=args.scheduler_role_arn,
                               progress=lambda text: print(text, file=sys.stderr))
    if args.json:
        _print_json(report.to_dict())
        return 0
    from datetime import UTC, datetime

    left = format_left((report.expires_at - datetime.now(UTC)).total_seconds())
    print(f"deployment {report.deployment_id}: {', '.join(report.extended)} now delete themselves at "
          f"{report.expires_at:%Y-%m-%d %H:%M:%S} UTC (in {left})")
    for name in report.gone:
        print(f"{name}: already gone (deleted by its TTL or by hand); `python -m infra delete` tidies up")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from infra.delete import delete_by_name, delete_deployment

    if args.endpoint and args.roles:
        raise UsageError("name endpoints either by role (from the state file) or with --endpoint NAME, not both")
    if args.endpoint:
        report = delete_by_name(args.endpoint, region=args.region, profile=args.profile, wait=_wait_settings(args),
                                progress=ProgressPrinter())
    else:
        report = delete_deployment(args.state_file or default_state_file(), region=args.region, profile=args.profile,
                                   purge_s3=args.purge_s3, wait=_wait_settings(args), progress=ProgressPrinter(),
                                   roles=list(args.roles) or None)
    if args.json:
        _print_json(report.to_dict())
    else:
        for d in report.deletions:
            print(d.line())
        if report.s3_objects_deleted or report.bucket_deleted:
            print(f"S3: {report.s3_objects_deleted} objects removed" + (", bucket removed" if report.bucket_deleted else ""))
        if report.state_removed:
            print(f"verified: nothing left; removed the state file {report.state_file}")
    if not report.ok:
        for r in report.remaining:
            print(f"still exists: {r}", file=sys.stderr)
        for e in report.errors:
            print(f"error: {e}", file=sys.stderr)
        return max([e.exit_code for e in report.errors] or [1])
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from infra.aws import AwsContext
    from infra.pricing import load_prices
    from infra.sweep import delete_orphans, find_orphans

    ctx = AwsContext(args.region, args.profile)
    files = args.state_file or [default_state_file()]
    report = find_orphans(ctx, files, prices=load_prices(args.prices))
    if not args.json or not args.delete:
        if args.json:
            _print_json(report.to_dict())
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
        report.deleted = delete_orphans(ctx, report.orphans, wait=_wait_settings(args), progress=ProgressPrinter())
        if args.json:
            _print_json(report.to_dict())
        else:
            for d in report.deleted.deletions:
                print(d.line())
        if not report.deleted.ok:
            for r in report.deleted.remaining:
                print(f"still exists: {r}", file=sys.stderr)
            for e in report.deleted.errors:
                print(f"error: {e}", file=sys.stderr)
            return max([e.exit_code for e in report.deleted.errors] or [1])
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
             (o.status.instance_type or "—") if o.status else "—", _money(o.usd_per_hour), _money(o.cost_so_far_usd)]
            for o in report.orphans]
    print(_table(rows, ["kind", "name", "deployment", "status", "instance", "$/hour", "cost so far"]))
    print(f"orphans cost {_money(report.usd_per_hour)}/hour, {_money(report.cost_so_far_usd)} so far; "
          "`python -m infra sweep --delete` removes them")


def cmd_cost(args: argparse.Namespace) -> int:
    from infra.cost import deployment_cost
    from infra.pricing import load_prices

    report = deployment_cost(args.state_file or default_state_file(), instance_types=args.instance_types,
                             prices=load_prices(args.prices), region=args.region, profile=args.profile,
                             refresh=args.refresh_prices, save_prices=args.save_prices)
    if args.json:
        _print_json(report.to_dict())
        return 0
    if report.idle:
        print(f"{', '.join(report.idle)}: 0 instances now (scaled to zero): costs nothing until a job arrives")
    rows = [[line.instance_type, line.price.label(), ", ".join(line.endpoints) or "—"] for line in report.lines]
    print(_table(rows, ["instance type", "on-demand", "endpoints on it"]))
    print("price range of each endpoint's pool (SageMaker takes the first entry with capacity):")
    print(_table([[p.role, p.endpoint or "(planned)", p.range_label(), p.label().split(": ", 1)[1]] for p in report.pools],
                 ["endpoint", "name", "min–max", "every entry (priority order)"]))
    prices = report.prices
    print(f"{report.basis} in {report.region}: {_money(report.usd_per_hour)}/hour, {_money(report.usd_per_day)}/day"
          + (f", {_money(report.cost_so_far_usd)} so far" if report.cost_so_far_usd is not None else ""))
    print(prices.describe() + ".")
    if prices.stale():
        print(f"note: the table is {prices.age_days()} days old; `python -m infra cost --refresh-prices` asks the "
              "AWS Price List API for today's rates")
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    from infra.smoke import run_smoke, smoke_deployment
    from services.backend import create_backend
    from services.settings import load_settings

    progress = None if args.json else _print_smoke_check
    if args.backend == "sagemaker":
        state_file = args.state_file or default_state_file()
        state = DeploymentState.load(state_file)
        _say_scale_up(state_file, args.roles)
        report = smoke_deployment(state, args.out_dir, args.roles, progress=progress)
    else:
        if args.backend == "omni" and not args.url:
            raise UsageError("--backend omni needs --url, e.g. --url http://gpu-box:8091")
        backend = create_backend(load_settings().with_overrides(backend=args.backend, omni_url=args.url))
        try:
            report = run_smoke(backend, args.out_dir, tuple(args.roles) or ROLES, progress=progress)
        finally:
            backend.close()
    if args.json:
        _print_json(report.to_dict())
    else:
        print(("smoke test passed" if report.ok else "smoke test FAILED") + f" against {report.target}")
    return 0 if report.ok else 5


def _say_scale_up(state_file: Path, roles: list[str]) -> None:
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
    report = plan_regions(regions, tuple(args.roles) or ROLES, profile=args.profile, table=load_prices(args.prices),
                          use_price_list=not args.no_price_list)
    if args.json:
        _print_json(report.to_dict())
    else:
        print(render(report), end="")
    if not report.ok:  # no region could be read: the first region's reason
        print(f"error: {report.regions[0].error}", file=sys.stderr)
        return 1
    return 0


def _report_versions(args: argparse.Namespace, report: Any) -> int:
    if args.json:
        _print_json(report.to_dict())
    else:
        from infra.versions import label

        for o in report.outcomes.values():
            print(o.summary())
            for note in o.notes:
                print(f"  {note}")
            print(f"  {o.role} now: {label(report.state, o.role)}")
        print(f"state: {report.state.path}")
    err = report.error()
    if err is not None:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    from infra.upgrade import upgrade

    report = upgrade(args.state_file or default_state_file(), args.image_tag, tuple(args.roles) or None,
                     region=args.region, profile=args.profile, bake_s=args.bake_seconds, smoke=not args.no_smoke,
                     smoke_dir=args.smoke_dir, wait=_wait_settings(args), progress=ProgressPrinter(),
                     smoke_progress=_print_smoke_check)
    return _report_versions(args, report)


def cmd_rollback(args: argparse.Namespace) -> int:
    from infra.upgrade import rollback

    report = rollback(args.state_file or default_state_file(), tuple(args.roles) or None, region=args.region,
                      profile=args.profile, smoke=not args.no_smoke, smoke_dir=args.smoke_dir,
                      wait=_wait_settings(args), progress=ProgressPrinter(), smoke_progress=_print_smoke_check)
    return _report_versions(args, report)


# ---------------------------------------------------------------------------------------------------------
def _check_region(args: argparse.Namespace) -> None:
    """--region against botocore's regions, before anything else runs (no client, no AWS call): a typo is
    named with the closest region instead of failing later as a network error or a bad bucket name."""
    given = getattr(args, "region", None)
    if given is None:
        return
    args.region = checked_region(given)
    if args.region != given:
        print(f"note: --region {given!r} read as {args.region}", file=sys.stderr)


def _written_state_file(args: argparse.Namespace) -> Path | None:
    """The state file this command writes (None: it only reads, or works without one)."""
    if not hasattr(args, "wait_lock"):
        return None  # status, cost, sweep, plan: readers
    if args.command == "delete" and args.endpoint or args.command == "smoke" and args.backend != "sagemaker":
        return None
    return args.state_file or default_state_file()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _check_region(args)
        state_file = _written_state_file(args)
        if state_file is None:
            return int(args.func(args) or 0)
        # The whole command holds the state file's lock (the smoke test after a deploy too): infra/lock.py.
        with hold(state_file, f"python -m infra {args.command}", wait_s=args.wait_lock,
                  on_wait=lambda holder: print(f"waiting up to {args.wait_lock:g} s for the state file {state_file}: "
                                               f"held by {holder}", file=sys.stderr, flush=True)):
            return int(args.func(args) or 0)
    except InfraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except StudioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: the state file records what exists; endpoints already created keep billing — "
              "`python -m infra resume` to finish, `python -m infra delete` to remove", file=sys.stderr)
        return 130
