"""What every `python -m infra` command group shares: the parent parsers holding the common options
(`Parents`: AWS, state file, --json, waiting, locking, smoke test), the option types (`role_arg`,
`wait_lock_arg`), the default state file, live progress lines (`ProgressPrinter`) and the output helpers
(`print_json`, `table`, `money`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from infra.model import DEFAULT_ROLES, ROLES, Role
from infra.progress import Progress, WaitSettings, format_duration
from infra.state import DEFAULT_STATE_FILE
from services.pricing import usd

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


def print_smoke_check(check: Any) -> None:
    print(f"  {check.role:<5} {'ok  ' if check.ok else 'FAIL'} {check.detail} ({check.elapsed_s:.1f}s)", file=sys.stderr)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*(str(c) for c in r)) for r in rows]
    return "\n".join(lines)


def money(v: float | None) -> str:
    return usd(v)


# ---------------------------------------------------------------------------------------------------------
def role_arg(value: str) -> str:
    role = value.strip().lower()
    if role not in ROLES:
        raise argparse.ArgumentTypeError(f"{value!r} is not an endpoint: choose from {', '.join(ROLES)}")
    return role


def chosen_roles(args: argparse.Namespace) -> tuple[str, ...]:
    """The endpoints named (ENDPOINT...), else the default ones (not the opt-in families), plus any `--with`."""
    named = tuple(args.roles) or DEFAULT_ROLES
    return tuple(r for r in ROLES if r in named or r in (getattr(args, "with_roles", None) or ()))


def add_with(p: argparse.ArgumentParser) -> None:
    opt_in = [r for r in ROLES if r not in DEFAULT_ROLES]
    p.add_argument("--with", dest="with_roles", action="append", default=[], type=role_arg, metavar="ENDPOINT",
                   help="add an opt-in endpoint to the default ones" + (f" ({', '.join(opt_in)})" if opt_in else ""))


def wait_lock_arg(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 <= seconds <= MAX_WAIT_LOCK_S:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{value!r}: give 0 to {MAX_WAIT_LOCK_S:g} seconds")
    return seconds


def wait_settings(args: argparse.Namespace) -> WaitSettings:
    d = WaitSettings()
    return WaitSettings(poll_s=args.poll_seconds if args.poll_seconds is not None else d.poll_s,
                        timeout_s=args.wait_timeout if args.wait_timeout is not None else d.timeout_s,
                        delete_timeout_s=args.wait_timeout if args.wait_timeout is not None else d.delete_timeout_s)


@dataclass(frozen=True)
class Parents:
    """The parent parsers a command takes its shared options from (argparse `parents=`)."""

    aws: argparse.ArgumentParser  # --region, --profile
    state: argparse.ArgumentParser  # --state-file
    out: argparse.ArgumentParser  # --json
    waiting: argparse.ArgumentParser  # --poll-seconds, --wait-timeout
    locking: argparse.ArgumentParser  # --wait-lock
    smoke: argparse.ArgumentParser  # --no-smoke, --smoke-dir


def parents() -> Parents:
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
    locking.add_argument("--wait-lock", type=wait_lock_arg, default=0.0, metavar="SECONDS",
                         help="when another command is writing the same state file, wait up to SECONDS for it to "
                              f"end (default 0: refuse at once, exit 2, naming it; at most {MAX_WAIT_LOCK_S:g})")
    smoke = argparse.ArgumentParser(add_help=False)
    s = smoke.add_argument_group("smoke test")
    s.add_argument("--no-smoke", action="store_true", help="skip the smoke test after InService")
    s.add_argument("--smoke-dir", type=Path, default=Path("."), help="where the smoke outputs go (default .)")
    return Parents(aws, state, out, waiting, locking, smoke)
