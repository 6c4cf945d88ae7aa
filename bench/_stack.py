"""A local SageMaker stack for benchmarks: the offline engine, moto (S3) and the SageMaker emulator on
loopback, with the voice, image and video endpoints deployed and `AWS_*` pointing at them.

    with sagemaker_stack() as stack:
        backend = create_backend(load_settings().with_overrides(**stack.settings))
        stack.engine_url   # the same engine, for the direct (vLLM-Omni) path side by side
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUCKET = "omni-studio-bench"


@dataclass(frozen=True)
class Stack:
    engine_url: str
    settings: dict[str, Any]  # Settings overrides for the SageMaker backend
    emulator: Any  # tests.emulator_support.EmulatorHandle


@contextlib.contextmanager
def sagemaker_stack(roles: tuple[str, ...] = ("voice", "image", "video"), *,
                    config: dict[str, Any] | None = None) -> Iterator[Stack]:
    """The stack with an endpoint per role (none: the emulator alone); `config` for the emulator (delays, ...)."""
    from infra.model import ROLE_PROFILES
    from services.engine import start_engine
    from tests.emulator_support import deploy_endpoint, start_emulator, start_moto

    work = Path(tempfile.mkdtemp(prefix="omni-bench-sagemaker-"))
    saved = dict(os.environ)
    engine = start_engine()
    try:
        with start_moto() as s3_url, start_emulator(engine.url, s3_url, work / "emulator", config=config) as emu:
            os.environ.update(emu.env())
            emu.client("s3").create_bucket(Bucket=BUCKET)
            settings: dict[str, Any] = {"backend": "sagemaker", "region": emu.region, "bucket": BUCKET,
                                        "state_file": work / "no-state.json"}
            for role in roles:
                extra = ({"async_output": f"s3://{BUCKET}/outputs", "async_failure": f"s3://{BUCKET}/failures"}
                         if role == "video" else {})
                deploy_endpoint(emu, f"bench-{role}", environment={"SM_VLLM_MODEL": ROLE_PROFILES[role].model_id}, **extra)
                settings[f"{role}_endpoint"] = f"bench-{role}"
            yield Stack(engine_url=engine.url, settings=settings, emulator=emu)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)
