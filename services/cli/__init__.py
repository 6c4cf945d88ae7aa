"""`python -m services <command>` — the services layer's command-line face.

Commands (`COMMANDS`): the families' own — `speak` and `voices` (services/cli/speech.py, voices.py), `listen`
(services/cli/listen.py), `image` and `video` (services/cli/media.py), `sound` (services/cli/sound.py) — and the studio's tools: `clip` (a video with a narration and a soundtrack), `converse` (talk to
a voice agent), `load` (load sweeps), `eval` (blind evaluations), `history` (migrate, list or copy the history),
`code` (the code that makes a kept item again), `converse-report` (a kept conversation as one shareable HTML
file).
Each command
module exposes `register(subparsers, common)`, where `common` is the parent parser holding the shared
backend options, and sets `func(args) -> int` (the exit code) on its subparser.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from protocol.errors import StudioError

def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: with a known command first, only that command's module is imported and registered
    (a command pays for its own imports — boto3, SQLAlchemy, numpy… — not for every command's); else every
    command's, for `--help` and for the usage error that names them."""
    from services.cli.common import common_options

    parser = argparse.ArgumentParser(prog="python -m services", description="Omni Studio services from the shell")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_options()
    one = _command_module(next(iter(sys.argv[1:] if argv is None else argv), ""))
    for module in (one,) if one else _every_command_module():
        module.register(sub, common)
    return parser


def _command_module(command: str) -> ModuleType | None:
    """The module registering `command`, or None for a word that is no command."""
    load = COMMANDS.get(command)
    return load() if load is not None else None


def _speech() -> ModuleType:
    from services.cli import speech
    return speech


def _voices() -> ModuleType:
    from services.cli import voices
    return voices


def _media() -> ModuleType:
    from services.cli import media
    return media


def _listen() -> ModuleType:
    from services.cli import listen
    return listen


def _sound() -> ModuleType:
    from services.cli import sound
    return sound


def _clip() -> ModuleType:
    from services.cli import clip
    return clip


def _converse() -> ModuleType:
    from services.cli import converse
    return converse


def _load() -> ModuleType:
    from services.cli import load
    return load


def _eval() -> ModuleType:
    from services.cli import eval as evaluation
    return evaluation


def _history() -> ModuleType:
    from services.cli import history
    return history


def _code() -> ModuleType:
    from services.cli import code
    return code


def _report() -> ModuleType:
    from services.cli import report
    return report


# Each command's word and the module that registers it, in the order `--help` lists them: the families' own
# commands, then the studio's tools. (Each module is imported only when its command runs.)
COMMANDS = {"speak": _speech, "voices": _voices, "listen": _listen, "converse": _converse, "image": _media,
            "video": _media, "sound": _sound, "clip": _clip, "load": _load, "eval": _eval, "history": _history,
            "code": _code, "converse-report": _report}


def _every_command_module() -> tuple[ModuleType, ...]:
    """Every command's module, once each, in the order `--help` lists the commands."""
    return tuple(dict.fromkeys(load() for load in COMMANDS.values()))


def main(argv: list[str] | None = None) -> int:
    """Run one command. Every failure is one `error: ...` line on stderr and a non-zero exit code: 2 for an
    argument that cannot be used (argparse's usage errors, text that is not UTF-8), 1 otherwise, 130 on Ctrl-C."""
    from services.cli.common import check_utf8_args

    args = build_parser(argv).parse_args(argv)
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
