"""A running emulator seen from outside: its URLs, real boto3 clients at it, its admin API, and a helper that
stands up a model, config and endpoint in one call. The tests, the benchmarks and the rehearsal use it.

    with start_moto() as s3, running_emulator(engine_url, s3, work_dir) as emu:
        deploy_endpoint(emu, "my-voice")
        emu.client("sagemaker-runtime").invoke_endpoint(...)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config as BotoConfig

from emulator import launch
from emulator.launch import client_env, start_emulator
from protocol.catalog import PUBLISHED_POOL
from protocol.sagemaker import DEFAULT_REGION

REGION = DEFAULT_REGION
FAST_DELAYS = {"create_s": 0.3, "update_s": 0.3, "delete_s": 0.2}
IMAGE_URI = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"
BIDI_AMI = "al2023-ami-sagemaker-inference-gpu-4-1"
DEFAULT_POOL = list(PUBLISHED_POOL)
# Service name (boto3) -> which listener serves it.
_EMULATED = ("sagemaker", "sagemaker-runtime", "service-quotas", "sts", "pricing", "scheduler",
             "application-autoscaling", "iam")
_SESSION = boto3.session.Session(region_name=REGION)  # one session: its parsed service models are shared


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

    def advance_clock(self, seconds: float) -> dict[str, Any]:
        """Move the emulator's clock (schedules, autoscaling) forward; returns what ran because of it."""
        return self._admin("POST", "clock", {"advance_s": seconds})

    def lifecycle(self) -> dict[str, Any]:
        """The schedules it will fire, scalable targets, backlog and activities (emulator/lifecycle.py)."""
        return self._admin("GET", "lifecycle")


# --------------------------------------------------------------------------------------------------
# Starting the servers
@contextlib.contextmanager
def running_emulator(
    engine_url: str, s3_url: str, work_dir: Path, *, config: dict[str, Any] | None = None, timeout_s: float = 60.0
) -> Iterator[EmulatorHandle]:
    """`python -m emulator` as a subprocess on free loopback ports (fast delays); yields once it is ready."""
    with start_emulator(work_dir, engine_url=engine_url, s3_url=s3_url, timeout_s=timeout_s,
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
    image: str = IMAGE_URI,
) -> dict[str, Any]:
    """Model `<name>-model`, config `<name>-config` and endpoint `<name>`; waits for InService by default.
    `image`: the container's image (the emulator's `containers` config says which server plays it).

    Returns DescribeEndpoint's answer (or CreateEndpoint's when `wait=False`)."""
    sm = handle.client("sagemaker")
    sm.create_model(
        ModelName=f"{name}-model",
        ExecutionRoleArn=ROLE_ARN,
        PrimaryContainer={"Image": image, "Environment": environment or {"SM_VLLM_MODEL": "offline"}},
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
