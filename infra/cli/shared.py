"""`python -m infra state import|export`: a deployment's state between this machine's file and a team studio's
database (infra/shared_state.py), so a deployment made with the CLI can be run by the team's studio, and the
team's deployment handed to the CLI on one machine (to delete it, say). Both hold the state's lock in the
database and the file's, so nothing deploys meanwhile; neither replaces another deployment without --replace."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from infra.cli.common import Parents, default_state_file
from infra.errors import StateError, UsageError

DATABASE_ENV = "OMNI_STUDIO_DATABASE_URL"


def _add_state(sub: Any, parents: Parents) -> None:
    p = sub.add_parser("state", parents=[parents.state, parents.locking],
                       help="move the state between this file and a team studio's database",
                       description="import: the state file becomes the deployment every replica of the team studio "
                                   "runs (its database's copy). export: the team's deployment is written to the state "
                                   "file, for the other commands on this machine. The state's name in the database "
                                   "is the file's name.")
    p.add_argument("direction", choices=("import", "export"))
    p.add_argument("--database-url", default=None, metavar="URL",
                   help=f"the team studio's PostgreSQL database (default: ${DATABASE_ENV}, the studio's setting)")
    p.add_argument("--replace", action="store_true",
                   help="replace a different deployment at the other end (its endpoints are then in no state: "
                        "delete them first)")
    p.set_defaults(func=cmd_state)


COMMANDS: dict[str, Callable[[Any, Parents], None]] = {"state": _add_state}


def _deployment_id(body: str | None) -> str | None:
    try:
        return str(json.loads(body or "null")["deployment_id"]) if body else None
    except (ValueError, KeyError, TypeError):
        return "(unreadable)"


def cmd_state(args: argparse.Namespace) -> int:
    from infra.lock import adopt, StateLock
    from infra.shared_state import SharedState, write_copy
    from services.history.db import engine, shown

    url = args.database_url or os.environ.get(DATABASE_ENV, "")
    if not url.startswith("postgresql"):
        raise UsageError(f"name the team studio's PostgreSQL database with --database-url or ${DATABASE_ENV} "
                         f"(got {url or 'nothing'!r}); a studio on SQLite keeps its state in the file itself")
    path = args.state_file or default_state_file()
    made = engine(url, path.parent)
    shared = SharedState(made, shown(made))
    try:
        lock = StateLock(path, f"python -m infra state {args.direction}", shared=shared)
        with adopt(lock.acquire(args.wait_lock, sync=False)):
            theirs = shared.read(path.name)
            body = theirs[1] if theirs else None
            if args.direction == "import":
                if not path.exists():
                    raise StateError(f"no state file at {path}: nothing to import")
                mine = path.read_text(encoding="utf-8")
                if body and _deployment_id(body) != _deployment_id(mine) and not args.replace:
                    raise UsageError(f"{shared.where} already holds deployment {_deployment_id(body)} as {path.name}; "
                                     f"importing {_deployment_id(mine)} would leave its endpoints in no state "
                                     "(delete them first, or pass --replace)")
                version = shared.push(path, by=f"python -m infra state import (pid {os.getpid()})")
                print(f"imported deployment {_deployment_id(mine)} from {path} into {shared.where} as {path.name} "
                      f"(version {version}): the team studio's replicas run it now")
                return 0
            if body is None:
                raise StateError(f"{shared.where} holds no deployment named {path.name}: nothing to export")
            here = _deployment_id(path.read_text(encoding="utf-8")) if path.exists() else None
            if here is not None and here != _deployment_id(body) and not args.replace:
                raise UsageError(f"{path} holds another deployment ({here}); "
                                 "exporting over it would leave its endpoints in no state (pass --replace, or "
                                 "--state-file another path)")
            write_copy(path, body)
            print(f"exported deployment {_deployment_id(body)} ({path.name}, version {theirs[0]}) from "
                  f"{shared.where} to {path}", file=sys.stdout)
            return 0
    finally:
        made.dispose()
