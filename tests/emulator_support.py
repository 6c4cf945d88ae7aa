"""Start the local SageMaker emulator (+ moto for S3/STS) for tests, and talk to it with real clients.

Fixtures — register the module once, so every test file shares one emulator and one moto per session:
`pytest_plugins = ["tests.emulator_support"]` in a test module (or import the fixtures into tests/conftest.py).
Importing the fixture functions into each test module also works, but starts one emulator per module.
- `moto_server` (session): URL of a moto ThreadedMotoServer on 127.0.0.1 (S3, STS).
- `sagemaker_emulator` (session): an `EmulatorHandle` for `python -m emulator` run as a
  subprocess, forwarding to the real offline engine (`engine_url` from tests/conftest.py) and to moto.
  Its delays are short (create 0.3 s, update 0.3 s, delete 0.2 s).
- `emulator` (function): the same handle, reset before and after the test (no resources, no faults,
  start-up config, credential counters cleared).
- `bucket` (function): a fresh S3 bucket in moto.
- `emulator_env` (function): `emulator`'s environment variables set with monkeypatch (fake credentials,
  AWS_ENDPOINT_URL_*, AWS_CA_BUNDLE, region, no shared config files); yields the handle.

Helpers: `EmulatorHandle.client(service)`, `.env()`, `.configure(...)`, `.set_faults(...)`, `.reset()`,
`.state()` and `deploy_endpoint(...)` (emulator/handle.py, shared with the benchmarks), and here
`crt_transport(handle)` / `await http2_config(handle)` for the HTTP/2 SDK.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from emulator.handle import (  # noqa: F401  (re-exported for the tests)
    BIDI_AMI,
    DEFAULT_POOL,
    FAST_DELAYS,
    IMAGE_URI,
    REGION,
    ROLE_ARN,
    EmulatorHandle,
    deploy_endpoint,
    running_emulator,
)
from emulator.launch import start_moto

# --------------------------------------------------------------------------------------------------
# The HTTP/2 SDK against the emulator
def crt_transport(handle: EmulatorHandle) -> Any:
    """A CRT HTTP/2 transport that trusts the emulator's CA (the SDK's own trusts only the system store)."""
    from services.speech.http2_clients import crt_transport as make

    return make(handle.ca_file)


async def http2_config(handle: EmulatorHandle, *, from_env: bool = False, **overrides: Any) -> Any:
    """The HTTP/2 SDK's config for the emulator. `from_env=True` leaves endpoint and credentials to the
    SDK's own resolution (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2, AWS_ACCESS_KEY_ID, ...; see `env()`)."""
    from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config

    settings: dict[str, Any] = {"region": handle.region, "transport": crt_transport(handle), "max_attempts": 1}
    if not from_env:
        settings |= {
            "endpoint_uri": handle.https_url,
            "aws_access_key_id": handle.access_key_id,
            "aws_secret_access_key": handle.secret_access_key,
            "aws_session_token": handle.session_token,
        }
    settings.update(overrides)
    return await AsyncSageMakerRuntimeHTTP2Config.resolve(**settings)


# --------------------------------------------------------------------------------------------------
# Fixtures
@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    with start_moto() as url:
        yield url


@pytest.fixture(scope="session")
def sagemaker_emulator(engine_url: str, moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    with running_emulator(engine_url, moto_server, tmp_path_factory.mktemp("sagemaker-emulator")) as handle:
        yield handle


@pytest.fixture
def emulator(sagemaker_emulator: EmulatorHandle) -> Iterator[EmulatorHandle]:
    sagemaker_emulator.reset()
    yield sagemaker_emulator
    sagemaker_emulator.reset()


@pytest.fixture
def bucket(emulator: EmulatorHandle) -> str:
    """A fresh S3 bucket in the emulator's moto."""
    name = f"omni-studio-test-{uuid.uuid4().hex[:12]}"
    emulator.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def emulator_env(emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorHandle]:
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in emulator.env().items():
        monkeypatch.setenv(key, value)
    yield emulator
