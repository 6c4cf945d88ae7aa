"""`python -m infra add FAMILY…`: new endpoints for the running deployment in the state file, planned with its own
settings, created as resume creates, smoke-tested (infra/add.py does the work)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from infra.cli.common import Parents, ProgressPrinter, default_state_file, wait_settings
from infra.cli.deploy import report_deploy
from infra.model import ROLES


def _add_add(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("add", parents=[parents.aws, parents.state, parents.out, parents.waiting, parents.smoke,
                                       parents.locking], help="add an endpoint to the deployment",
                       description="Add endpoints of families the running deployment does not have (an opt-in one "
                                   "such as listen, omni or sound): planned with the deployment's region, image, role, "
                                   "S3 prefix, names, KMS key, network, tags, TTL and scaling; quota and GPU fit "
                                   "checked first; recorded in the state file before anything is created (a crash is "
                                   "finished by `resume`); then the smoke test of the new endpoints. The endpoints "
                                   "already there are not touched.")
    p.add_argument("families", nargs="*", metavar="FAMILY", help=f"one or more of {', '.join(ROLES)} not yet deployed")
    p.add_argument("--model", action="append", default=[], metavar="FAMILY=MODEL_ID", dest="models",
                   help="another model for a new endpoint (GPU fit checked; a model the catalog does not know deploys "
                        "with a warning); repeatable")
    p.add_argument("--instance-types", action="append", default=[], metavar="TYPES",
                   help="the new endpoints' pool in priority order (ml.g6.xlarge,ml.g5.xlarge), or FAMILY=TYPES for "
                        "one; repeatable. Default: the family's own pool")
    p.add_argument("--model-s3-uri", action="append", default=[], metavar="URI",
                   help="model files from S3 for a network without internet: s3://bucket/models/ or FAMILY=s3://…")
    p.set_defaults(func=cmd_add)


COMMANDS: dict[str, Callable[[Any, Parents], None]] = {"add": _add_add}


def cmd_add(args: argparse.Namespace) -> int:
    from infra.add import add_endpoints

    result = add_endpoints(args.state_file or default_state_file(), args.families, models=args.models,
                           instance_types=args.instance_types, model_s3_uri=args.model_s3_uri, region=args.region,
                           profile=args.profile, wait=wait_settings(args), progress=ProgressPrinter())
    return report_deploy(args, result, tuple(result.outcomes))
