"""What every `python -m services` command shares: the backend options and how they become settings.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from services.backend import Backend, create_backend
from services.settings import Settings, load_settings


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
