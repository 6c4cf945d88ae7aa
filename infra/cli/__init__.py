"""`python -m infra <command>` — a thin argparse face over the infra library.

Exit codes: 0 done; 1 an AWS or other error; 2 bad options, or the state file is in use by another
command (`--wait-lock SECONDS` waits for it); 3 credentials missing, expired or lacking a
permission; 4 quota shortfall (nothing created); 5 an endpoint (or the smoke test) failed; 6 state file
problem; 130 interrupted. `--json` prints one JSON document on stdout (progress goes to stderr).
"""

# One module per command group, each with COMMANDS (name -> the function adding its subparser) and the
# cmd_* functions the subparsers run: infra/cli/deploy.py (deploy, resume, extend, upgrade, rollback),
# infra/cli/add.py (add), infra/cli/inspect.py (status, cost, plan, smoke), infra/cli/cleanup.py (delete,
# sweep); the shared options and output helpers are in infra/cli/common.py.

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from infra.aws import checked_region
from infra.cli import add, cleanup, deploy, inspect, shared
from infra.cli.common import (  # noqa: F401  (re-exported: callers import them from infra.cli)
    STATE_ENV,
    ProgressPrinter,
    default_state_file,
    parents,
)
from infra.cli.inspect import say_scale_up as _say_scale_up  # noqa: F401  (the Endpoints page tests use it)
from infra.errors import InfraError
from infra.lock import hold
from protocol.errors import StudioError

# The order `python -m infra --help` lists the commands in.
ORDER = ("deploy", "add", "resume", "extend", "status", "delete", "sweep", "cost", "smoke", "plan", "upgrade", "rollback", "state")
COMMANDS = {**deploy.COMMANDS, **add.COMMANDS, **inspect.COMMANDS, **cleanup.COMMANDS, **shared.COMMANDS}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m infra", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Stand up, watch and tear down the studio's three SageMaker endpoints (voice, image, video).",
        epilog=__doc__.split("\n", 2)[2])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    shared = parents()
    for name in ORDER:
        COMMANDS[name](sub, shared)
    return parser


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
    if args.command == "state":
        return None  # it takes the lock itself, the team's database's too (infra/cli/shared.py)
    return args.state_file or default_state_file()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with _InterruptNoted() as interrupt:
        try:
            return _run(args)
        except StudioError as exc:
            if not interrupt.seen:
                print(f"error: {exc}", file=sys.stderr)
                return exc.exit_code if isinstance(exc, InfraError) else 1
        except KeyboardInterrupt:
            pass
    print("interrupted: the state file records what exists; endpoints already created keep billing — "
          "`python -m infra resume` to finish, `python -m infra delete` to remove", file=sys.stderr)
    return 130


def _run(args: argparse.Namespace) -> int:
    _check_region(args)
    state_file = _written_state_file(args)
    if state_file is None:
        return int(args.func(args) or 0)
    # The whole command holds the state file's lock (the smoke test after a deploy too): infra/lock.py.
    with hold(state_file, f"python -m infra {args.command}", wait_s=args.wait_lock,
              on_wait=lambda holder: print(f"waiting up to {args.wait_lock:g} s for the state file {state_file}: "
                                           f"held by {holder}", file=sys.stderr, flush=True)):
        return int(args.func(args) or 0)


class _InterruptNoted:
    """Ctrl-C as KeyboardInterrupt, and remembered: one that lands while botocore's CRT signer waits comes out
    as an AWS error instead (AwsCrtError), which must still end as an interruption (130), not as exit 1."""

    seen = False

    def __enter__(self) -> _InterruptNoted:
        self._armed = threading.current_thread() is threading.main_thread()
        if self._armed:
            self._previous = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, signum: int, frame: object) -> None:
        self.seen = True
        raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._armed:
            signal.signal(signal.SIGINT, self._previous)
