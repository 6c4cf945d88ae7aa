"""Start the local SageMaker emulator (+ moto for S3/STS) for tests, and talk to it with real clients.

Fixtures — register the module once, so every test file shares one emulator and one moto per session:
`pytest_plugins = ["tests.emulator_support"]` in a test module (or import the fixtures into tests/conftest.py).
Importing the fixture functions into each test module also works, but starts one emulator per module.
- `moto_server` (session): URL of a moto ThreadedMotoServer on 127.0.0.1 (S3, STS).
- `sagemaker_emulator` (session): an `EmulatorHandle` for `python -m offline.sagemaker` run as a
  subprocess, forwarding to the real offline engine (`engine_url` from tests/conftest.py) and to moto.
  Its delays are short (create 0.3 s, update 0.3 s, delete 0.2 s).
- `emulator` (function): the same handle, reset before and after the test (no resources, no faults,
  start-up config, credential counters cleared).
- `bucket` (function): a fresh S3 bucket in moto.
- `emulator_env` (function): `emulator`'s environment variables set with monkeypatch (fake credentials,
  AWS_ENDPOINT_URL_*, AWS_CA_BUNDLE, region, no shared config files); yields the handle.

Helpers: `EmulatorHandle.client(service)`, `.env()`, `.configure(...)`, `.set_faults(...)`, `.reset()`,
`.state()`, `.crt_transport()`, `await .http2_config()`, and `deploy_endpoint(...)` to stand up a model,
config and endpoint in one call. `start_emulator(...)` / `start_moto()` are the context managers behind
the fixtures, for benches and scripts.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.config import Config as BotoConfig

from offline.sagemaker import launch
from offline.sagemaker.launch import client_env, start_moto
from services._aws import boto3_session

REGION = "us-east-1"
FAST_DELAYS = {"create_s": 0.3, "update_s": 0.3, "delete_s": 0.2}
IMAGE_URI = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"
BIDI_AMI = "al2023-ami-sagemaker-inference-gpu-4-1"
DEFAULT_POOL = ["ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge", "ml.g4dn.xlarge"]
# Service name (boto3) -> which listener serves it.
_EMULATED = ("sagemaker", "sagemaker-runtime", "service-quotas", "sts")
_SESSION = boto3_session(REGION, None)


@dataclass(frozen=True)
class EmulatorHandle:
    http_url: str  # control plane, runtime, Service Quotas, STS (plain HTTP/1.1)
    https_url: str  # the same app over TLS (h2 + http/1.1): the HTTP/2 bidi endpoint URI
    ca_file: Path  # the test CA that signed the TLS certificate
    s3_url: str  # moto (S3 and STS)
    engine_url: str  # the offline engine the endpoints forward to
    region: str = REGION
    account_id: str = "123456789012"
    access_key_id: str = launch.FAKE_ACCESS_KEY_ID
    secret_access_key: str = launch.FAKE_SECRET_ACCESS_KEY
    session_token: str = launch.FAKE_SESSION_TOKEN

    # -- environment for clients -------------------------------------------------------------------
    def env(self, *, tls: bool = False) -> dict[str, str]:
        """AWS_* variables that point boto3 (and the services layer) at the emulator with fake credentials.

        `tls=True` sends boto3's SageMaker calls through the TLS listener too (trusting AWS_CA_BUNDLE)."""
        ready = {"http": self.http_url, "https": self.https_url, "ca_file": self.ca_file, "s3": self.s3_url,
                 "region": self.region}
        return client_env(ready, tls=tls, access_key_id=self.access_key_id)

    def client(self, service: str, *, access_key_id: str | None = None, **config: Any) -> Any:
        """A real boto3 client for `service`, at the emulator (or moto for S3), with fake credentials."""
        endpoint = self.http_url if service in _EMULATED else self.s3_url  # anything else: moto
        cfg = {"retries": {"max_attempts": 1, "mode": "standard"}, **config}
        if service == "s3":
            cfg.setdefault("s3", {"addressing_style": "path"})
        return _SESSION.client(  # one session: its parsed service models are reused by every client
            service,
            endpoint_url=endpoint,
            region_name=self.region,
            aws_access_key_id=access_key_id or self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            aws_session_token=self.session_token,
            config=BotoConfig(**cfg),
        )

    # -- admin -------------------------------------------------------------------------------------
    def _admin(self, method: str, path: str, body: Any = None) -> Any:
        r = httpx.request(method, f"{self.http_url}/_emulator/{path}", json=body, timeout=10.0, trust_env=False)
        if r.status_code != 200:
            raise AssertionError(f"emulator admin {method} {path} -> {r.status_code}: {r.text}")
        return r.json()

    def configure(self, **patch: Any) -> dict[str, Any]:
        """Merge into the running config, e.g. `configure(quotas={"ml.g5.xlarge": 0}, delays={"create_s": 1})`."""
        return self._admin("PUT", "config", patch)

    def set_faults(self, **faults: Any) -> dict[str, Any]:
        """Replace the injected faults, e.g. `set_faults(capacity_unavailable=["ml.g6.xlarge"])`."""
        return self._admin("POST", "faults", faults)

    def reset(self) -> None:
        self._admin("POST", "reset")

    def state(self) -> dict[str, Any]:
        return self._admin("GET", "state")

    # -- the HTTP/2 SDK ----------------------------------------------------------------------------
    def crt_transport(self) -> Any:
        """A CRT HTTP/2 transport that trusts the emulator's CA (the SDK's own trusts only the system store)."""
        from services._sagemaker_speech import crt_transport

        return crt_transport(self.ca_file)

    async def http2_config(self, *, from_env: bool = False, **overrides: Any) -> Any:
        """The HTTP/2 SDK's config for the emulator. `from_env=True` leaves endpoint and credentials to the
        SDK's own resolution (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2, AWS_ACCESS_KEY_ID, ...; see `env()`)."""
        from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config

        settings: dict[str, Any] = {"region": self.region, "transport": self.crt_transport(), "max_attempts": 1}
        if not from_env:
            settings |= {
                "endpoint_uri": self.https_url,
                "aws_access_key_id": self.access_key_id,
                "aws_secret_access_key": self.secret_access_key,
                "aws_session_token": self.session_token,
            }
        settings.update(overrides)
        return await AsyncSageMakerRuntimeHTTP2Config.resolve(**settings)


# --------------------------------------------------------------------------------------------------
# Starting the servers
@contextlib.contextmanager
def start_emulator(
    engine_url: str, s3_url: str, work_dir: Path, *, config: dict[str, Any] | None = None, timeout_s: float = 60.0
) -> Iterator[EmulatorHandle]:
    """`python -m offline.sagemaker` as a subprocess on free loopback ports (fast delays); yields once it is ready."""
    with launch.start_emulator(work_dir, engine_url=engine_url, s3_url=s3_url, timeout_s=timeout_s,
                               config={"delays": FAST_DELAYS, **(config or {})}) as ready:
        yield EmulatorHandle(
            http_url=ready["http"], https_url=ready["https"], ca_file=Path(ready["ca_file"]), s3_url=s3_url,
            engine_url=engine_url, region=ready["region"], account_id=ready["account_id"],
        )


# --------------------------------------------------------------------------------------------------
# Standing up endpoints
def deploy_endpoint(
    handle: EmulatorHandle,
    name: str,
    *,
    instance_types: list[str] | None = None,
    instance_type: str | None = None,
    async_output: str | None = None,
    async_failure: str | None = None,
    ami: str | None = BIDI_AMI,
    environment: dict[str, str] | None = None,
    tags: list[dict[str, str]] | None = None,
    wait: bool = True,
) -> dict[str, Any]:
    """Model `<name>-model`, config `<name>-config` and endpoint `<name>`; waits for InService by default.

    Returns DescribeEndpoint's answer (or CreateEndpoint's when `wait=False`)."""
    sm = handle.client("sagemaker")
    sm.create_model(
        ModelName=f"{name}-model",
        ExecutionRoleArn=ROLE_ARN,
        PrimaryContainer={"Image": IMAGE_URI, "Environment": environment or {"SM_VLLM_MODEL": "offline"}},
        Tags=tags or [],
    )
    variant: dict[str, Any] = {"VariantName": "AllTraffic", "ModelName": f"{name}-model", "InitialInstanceCount": 1}
    if instance_type:
        variant["InstanceType"] = instance_type
    else:
        types = instance_types or DEFAULT_POOL
        variant["InstancePools"] = [{"InstanceType": t, "Priority": i} for i, t in enumerate(types, start=1)]
    if ami:
        variant["InferenceAmiVersion"] = ami
    config: dict[str, Any] = {"EndpointConfigName": f"{name}-config", "ProductionVariants": [variant], "Tags": tags or []}
    if async_output:
        output: dict[str, Any] = {"S3OutputPath": async_output}
        if async_failure:
            output["S3FailurePath"] = async_failure
        config["AsyncInferenceConfig"] = {"OutputConfig": output, "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1}}
    sm.create_endpoint_config(**config)
    created = sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config", Tags=tags or [])
    if not wait:
        return created
    sm.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 100})
    return sm.describe_endpoint(EndpointName=name)


# --------------------------------------------------------------------------------------------------
# Fixtures
@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    with start_moto() as url:
        yield url


@pytest.fixture(scope="session")
def sagemaker_emulator(engine_url: str, moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    with start_emulator(engine_url, moto_server, tmp_path_factory.mktemp("sagemaker-emulator")) as handle:
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
