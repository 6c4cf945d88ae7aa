"""The commands that bring endpoints up and move them between versions: `deploy`, `resume`, `extend`,
`upgrade`, `rollback` (infra/deploy.py, infra/ttl.py, infra/upgrade.py do the work)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from infra.cli.common import (
    Parents,
    ProgressPrinter,
    default_state_file,
    print_json,
    print_smoke_check,
    add_with,
    chosen_roles,
    role_arg,
    wait_settings,
)
from infra.deploy import DeployResult, deploy, resume
from infra.errors import UsageError
from infra.model import DEFAULT_IMAGE_TAG, DEFAULT_TTL, DEFAULT_VOICE_MODEL, PROJECT, DeployOptions, check_voice_model
from infra.planning import pools_and_models
from infra.scaling import check_max_instances
from protocol.errors import StudioError


def _add_deploy(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("deploy", parents=[parents.aws, parents.state, parents.out, parents.waiting, parents.smoke,
                                          parents.locking], help="create the endpoints",
                       description="Create the voice, image and video endpoints (all, or the ones named) from one "
                                   "pinned image, after a quota pre-check of every pool entry.")
    p.add_argument("roles", nargs="*", type=role_arg, metavar="ENDPOINT",
                   help="voice, image, video and/or listen (default: voice, image and video)")
    add_with(p)
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
    p.add_argument("--model", action="append", default=[], metavar="ROLE=MODEL_ID", dest="models",
                   help="another model for one endpoint, e.g. image=black-forest-labs/FLUX.2-klein-4B; repeatable. "
                        "Every pool entry must hold it in GPU memory (docs/models.md); a model the studio's catalog "
                        "does not know is deployed with a warning")
    _add_lifecycle(p)
    p.set_defaults(func=cmd_deploy)


def _add_lifecycle(p: argparse.ArgumentParser) -> None:
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


def _add_resume(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("resume", parents=[parents.aws, parents.state, parents.out, parents.waiting, parents.smoke,
                                          parents.locking], help="finish a deployment",
                       description="Continue the deployment in the state file after a crash or expired credentials: "
                                   "reuse what exists, create what is missing, never duplicate.")
    p.add_argument("--ttl", metavar="DURATION", help="a new TTL from now (needed when the recorded one has ended)")
    p.set_defaults(func=cmd_resume)


def _add_extend(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("extend", parents=[parents.aws, parents.state, parents.out, parents.locking],
                       help="move the endpoints' deletion time",
                       description="Set the TTL of every endpoint still there to now + DURATION (or the time given): "
                                   "their EventBridge Scheduler schedules are updated. A --no-ttl deployment gets one.")
    p.add_argument("--ttl", required=True, metavar="DURATION", help="e.g. 4h, 90m, 2d, or 2026-05-01T18:00Z")
    p.add_argument("--yes", action="store_true", help="confirm a TTL over 7 days")
    p.add_argument("--scheduler-role-arn", metavar="ARN", help="a role for the schedules (checked first); default: "
                                                               "the one the deployment has, or one created")
    p.set_defaults(func=cmd_extend)


def _versions(parents: Parents) -> list[argparse.ArgumentParser]:
    """upgrade's and rollback's shared options."""
    return [parents.aws, parents.state, parents.out, parents.waiting, parents.smoke, parents.locking]


def _add_upgrade(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("upgrade", parents=_versions(parents), help="move endpoints to another image",
                       description="New model(s) and endpoint config(s) with the image tag (names end in -v<n>), then "
                                   "a blue/green UpdateEndpoint: all traffic at once, a bake watched by the endpoint's "
                                   "error alarm (SageMaker rolls back if it trips); then the smoke test on the new "
                                   "version, rolled back at once if it fails. The previous version is kept for "
                                   "`rollback` until the next successful upgrade.")
    p.add_argument("roles", nargs="*", type=role_arg, metavar="ENDPOINT", help="default: all in the deployment")
    p.add_argument("--image-tag", required=True, help="the vllm DLC image tag to move to, e.g. omni-sagemaker-cuda-v1.7")
    p.add_argument("--bake-seconds", type=float, default=600,
                   help="how long SageMaker watches the new fleet before removing the old one (0-3600, default 600)")
    p.set_defaults(func=cmd_upgrade)


def _add_rollback(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("rollback", parents=_versions(parents), help="back to the previous version",
                       description="Update each endpoint back to the version its current one superseded (kept since "
                                   "the upgrade), then run the smoke test on it.")
    p.add_argument("roles", nargs="*", type=role_arg, metavar="ENDPOINT", help="default: all in the deployment")
    p.set_defaults(func=cmd_rollback)


# Each command's subparser, by name (infra/cli/__init__.py adds them in the order `--help` lists them).
COMMANDS: dict[str, Callable[[Any, Parents], None]] = {
    "deploy": _add_deploy, "resume": _add_resume, "extend": _add_extend, "upgrade": _add_upgrade,
    "rollback": _add_rollback,
}


# ---------------------------------------------------------------------------------------------------------
def report_deploy(args: argparse.Namespace, result: DeployResult, roles: tuple[str, ...] | None = None) -> int:
    """The outcome of deploy, resume or add, then the smoke test of `roles` (default: every endpoint); the exit code."""
    if not args.json:
        from infra.lifecycle import ttl_line

        for o in result.outcomes.values():
            print(o.summary())
        print(f"state: {result.state.path}")
        print(ttl_line(result.state))
    if not result.ok:
        if args.json:
            print_json({**result.to_dict(), "smoke": None})
        err = result.error()
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code if err is not None else 1
    smoke: dict[str, Any] | None = None
    code = 0
    if not args.no_smoke:
        from infra.smoke import smoke_deployment

        print("smoke test ...", file=sys.stderr)
        try:
            report = smoke_deployment(result.state, args.smoke_dir, roles, progress=print_smoke_check)
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
        print_json({**result.to_dict(), "smoke": smoke})
    return code


def cmd_deploy(args: argparse.Namespace) -> int:
    if args.voice_model is not None:
        args.voice_model = check_voice_model(args.voice_model)  # named before any state file or AWS call
    options = DeployOptions(
        roles=chosen_roles(args), region=args.region, profile=args.profile, role_arn=args.role_arn,
        image_tag=args.image_tag, instance_types=args.instance_types, bucket=args.bucket, prefix=args.prefix,
        name_prefix=args.name_prefix, kms_key=args.kms_key, subnets=args.subnets,
        security_groups=args.security_groups, model_s3_uri=args.model_s3_uri, tags=args.tags,
        voice_model=args.voice_model, models=args.models, ttl=None if args.no_ttl else args.ttl, yes=args.yes,
        scheduler_role_arn=args.scheduler_role_arn, max_instances=check_max_instances(args.max_instances),
        scale_to_zero=not args.no_scale_to_zero)
    if args.no_ttl and args.ttl != DEFAULT_TTL:
        raise UsageError("--ttl and --no-ttl contradict each other: give one of them")
    pools_and_models(options)  # models and GPU fit named before any state file or AWS call
    result = deploy(options, state_file=args.state_file or default_state_file(), wait=wait_settings(args),
                    progress=ProgressPrinter())
    return report_deploy(args, result)


def cmd_resume(args: argparse.Namespace) -> int:
    result = resume(args.state_file or default_state_file(), region=args.region, profile=args.profile,
                    wait=wait_settings(args), progress=ProgressPrinter(), ttl=args.ttl)
    return report_deploy(args, result)


def cmd_extend(args: argparse.Namespace) -> int:
    from infra.extend import extend_deployment
    from infra.ttl_choice import format_left

    report = extend_deployment(args.state_file or default_state_file(), args.ttl, region=args.region,
                               profile=args.profile, yes=args.yes, scheduler_role_arn=args.scheduler_role_arn,
                               progress=lambda text: print(text, file=sys.stderr))
    if args.json:
        print_json(report.to_dict())
        return 0
    from datetime import UTC, datetime

    left = format_left((report.expires_at - datetime.now(UTC)).total_seconds())
    print(f"deployment {report.deployment_id}: {', '.join(report.extended)} now delete themselves at "
          f"{report.expires_at:%Y-%m-%d %H:%M:%S} UTC (in {left})")
    for name in report.gone:
        print(f"{name}: already gone (deleted by its TTL or by hand); `python -m infra delete` tidies up")
    return 0


def _report_versions(args: argparse.Namespace, report: Any) -> int:
    if args.json:
        print_json(report.to_dict())
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
                     smoke_dir=args.smoke_dir, wait=wait_settings(args), progress=ProgressPrinter(),
                     smoke_progress=print_smoke_check)
    return _report_versions(args, report)


def cmd_rollback(args: argparse.Namespace) -> int:
    from infra.upgrade import rollback

    report = rollback(args.state_file or default_state_file(), tuple(args.roles) or None, region=args.region,
                      profile=args.profile, smoke=not args.no_smoke, smoke_dir=args.smoke_dir,
                      wait=wait_settings(args), progress=ProgressPrinter(), smoke_progress=print_smoke_check)
    return _report_versions(args, report)
