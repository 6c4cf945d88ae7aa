"""`python -m services <command>` — the services layer's command-line face.

Commands: `speak` (services/speech_cli.py), `image` and `video` (services/media_cli.py). Each command
module exposes `register(subparsers, common)`, where `common` is the parent parser holding the shared
backend options, and sets `func(args) -> int` (the exit code) on its subparser.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from services.backend import Backend, create_backend
from services.errors import StudioError
from services.settings import Settings, load_settings

COMMAND_MODULES = ("services.speech_cli", "services.media_cli")


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("backend")
    g.add_argument("--backend", choices=["offline", "omni", "sagemaker"], help="default: from settings (offline)")
    g.add_argument("--url", help="vLLM-Omni server URL for --backend omni, e.g. http://gpu-box:8091")
    g.add_argument("--region", help="AWS region for --backend sagemaker")
    g.add_argument("--profile", help="AWS profile for --backend sagemaker")
    g.add_argument("--state-file", type=Path,
                   help="infra state file naming the SageMaker endpoints (default: .vllm_omni_media_state.json)")
    common.add_argument("--json", action="store_true", help="print one JSON object with the figures")
    return common


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides = {"backend": args.backend, "omni_url": args.url, "region": args.region, "profile": args.profile,
                 "state_file": args.state_file}
    if args.url and not args.backend:
        overrides["backend"] = "omni"
    return load_settings().with_overrides(**overrides)


def backend_from_args(args: argparse.Namespace) -> Backend:
    return create_backend(settings_from_args(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m services", description="Omni Studio services from the shell")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_options()
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except StudioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
