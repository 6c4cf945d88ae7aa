"""`python -m services <command>` — the services layer's command-line face.

Commands: `speak` (services/cli/speech.py), `voices` (services/cli/voices.py: list/add/delete saved voices),
`listen` (services/cli/listen.py: transcribe a recording), `converse` (services/cli/converse.py: talk to a voice
agent),
`image` and `video` (services/cli/media.py), `load` (services/cli/load.py: load sweeps), `eval` (services/cli/eval.py: blind evaluations),
`history` (services/cli/history.py: migrate, list or copy the history). Each command
module exposes `register(subparsers, common)`, where `common` is the parent parser holding the shared
backend options, and sets `func(args) -> int` (the exit code) on its subparser.
"""

from __future__ import annotations

import argparse
import sys

from protocol.errors import StudioError
from services.cli import eval as evaluation
from services.cli import converse, history, listen, load, media, speech, voices
from services.cli.common import check_utf8_args, common_options

COMMAND_MODULES = (speech, voices, listen, converse, media, load, evaluation, history)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m services", description="Omni Studio services from the shell")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_options()
    for module in COMMAND_MODULES:
        module.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. Every failure is one `error: ...` line on stderr and a non-zero exit code: 2 for an
    argument that cannot be used (argparse's usage errors, text that is not UTF-8), 1 otherwise, 130 on Ctrl-C."""
    args = build_parser().parse_args(argv)
    try:
        check_utf8_args(args)
        return int(args.func(args) or 0)
    except StudioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug or an unforeseen failure: still a message, not a traceback
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
