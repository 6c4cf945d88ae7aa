"""A whole local SageMaker stack for benchmarks and rehearsals: the offline engine, moto (S3) and the emulator
on loopback, with endpoints deployed and `AWS_*` pointing at them for the duration.

    with sagemaker_stack({"voice": "Qwen/Qwen3-TTS-...", "image": "...", "video": "..."}) as stack:
        backend = create_backend(load_settings().with_overrides(**stack.settings))
        stack.engine_url   # the same engine, for the direct (vLLM-Omni) path side by side

Every server here is a child that never outlives this process (offline.launch.spawn); moto runs in a
thread of this process and says nothing on the console.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.handle import EmulatorHandle, deploy_endpoint, running_emulator
from emulator.launch import start_moto
from offline.launch import start_engine
from protocol.catalog import family

BUCKET = "omni-studio-bench"


@dataclass(frozen=True)
class Stack:
    engine_url: str
    settings: dict[str, Any]  # Settings overrides for the SageMaker backend
    emulator: EmulatorHandle


@contextlib.contextmanager
def sagemaker_stack(models: Mapping[str, str], *, config: dict[str, Any] | None = None) -> Iterator[Stack]:
    """The stack with an endpoint per role in `models` (role -> SM_VLLM_MODEL; empty: the emulator alone);
    `config` for the emulator (delays, ...)."""
    work = Path(tempfile.mkdtemp(prefix="omni-sagemaker-stack-"))
    saved = dict(os.environ)
    engine = start_engine()
    try:
        with start_moto() as s3_url, running_emulator(engine.url, s3_url, work / "emulator", config=config) as emu:
            os.environ.update(emu.env())
            emu.client("s3").create_bucket(Bucket=BUCKET)
            settings: dict[str, Any] = {"backend": "sagemaker", "region": emu.region, "bucket": BUCKET,
                                        "state_file": work / "no-state.json"}
            for role, model_id in models.items():
                extra = ({"async_output": f"s3://{BUCKET}/outputs", "async_failure": f"s3://{BUCKET}/failures"}
                         if family(role).serving == "async" else {})
                deploy_endpoint(emu, f"bench-{role}", environment={"SM_VLLM_MODEL": model_id}, **extra)
                settings[f"{role}_endpoint"] = f"bench-{role}"
            yield Stack(engine_url=engine.url, settings=settings, emulator=emu)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)
