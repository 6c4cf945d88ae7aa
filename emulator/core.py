"""The emulator's shared state: config, resources, credential meter and the clients it forwards with."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import boto3
import httpx
from botocore.config import Config as BotoConfig

from emulator.auth import Caller, CredentialMeter, caller_from_headers
from emulator.config import EmulatorConfig
from emulator.errors import AwsError
from emulator.records import Deployment, EndpointRecord
from emulator.registry import Registry
from emulator.versions import container_url

log = logging.getLogger("emulator")


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key` (or `https://bucket.s3...amazonaws.com/key`) -> (bucket, key)."""
    if uri.startswith("s3://"):
        bucket, _, key = uri[5:].partition("/")
    elif uri.startswith("https://") and ".s3" in uri:
        host, _, key = uri[8:].partition("/")
        bucket = host.split(".s3")[0]
    else:
        raise ValueError(f"not an S3 URI: {uri!r} (expected s3://bucket/key)")
    if not bucket:
        raise ValueError(f"S3 URI without a bucket: {uri!r}")
    return bucket, key


class Emulator:
    def __init__(self, config: EmulatorConfig, *, engine_url: str, s3_endpoint: str | None) -> None:
        self.initial_config = config
        self.engine_url = engine_url.rstrip("/")
        self.s3_endpoint = s3_endpoint
        self.registry = Registry(config, probe=self._probe)
        self.registry.alarm_reader, self.registry.alarm_tripper = self.alarm_states, self.trip_alarms
        self.meter = CredentialMeter()
        self.http: httpx.AsyncClient | None = None
        self._s3: Any = None
        self._cloudwatch: Any = None
        self.jobs: set[asyncio.Task[None]] = set()
        self.queues: dict[tuple[str, int, int], asyncio.Semaphore] = {}
        from emulator.lifecycle import Lifecycle  # schedules that fire, endpoints that scale (own clock)

        self.lifecycle = Lifecycle(self)

    @property
    def config(self) -> EmulatorConfig:
        return self.registry.config

    @config.setter
    def config(self, value: EmulatorConfig) -> None:
        self.registry.config = value

    async def start(self) -> None:
        # No proxies from the environment: everything the emulator calls lives on loopback.
        self.http = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(self.config.invocation_timeout_s, connect=5.0))
        await self.lifecycle.start()

    async def close(self) -> None:
        await self.lifecycle.stop()
        self.reset()
        if self.http is not None:
            await self.http.aclose()

    def reset(self) -> None:
        """Forget every resource, counter and fault: back to the start-up config."""
        for job in list(self.jobs):
            job.cancel()
        self.registry.reset()
        self.meter.reset()
        self.queues.clear()
        self.config = self.initial_config
        self.lifecycle.reset()

    # -- calls -------------------------------------------------------------------------------------
    def authorize(self, headers: Mapping[str, str]) -> Caller:
        """A signed caller, in this region, whose credentials have not expired; AwsError otherwise."""
        caller = caller_from_headers(headers)
        if caller.region != self.config.region:
            raise AwsError(
                "InvalidSignatureException",
                f"Credential should be scoped to a valid region: this endpoint serves {self.config.region}, "
                f"the request was signed for {caller.region}",
                403,
            )
        self.meter.charge(caller, self.config.faults.expire_credentials_after_calls)
        return caller

    @property
    def s3(self) -> Any:
        """A boto3 S3 client for moto (used from worker threads; boto3 clients are thread-safe)."""
        if self.s3_endpoint is None:
            raise AwsError("ValidationError", "The emulator was started without S3 (--s3-endpoint), so async inference is unavailable")
        if self._s3 is None:
            self._s3 = boto3.session.Session().client(
                "s3",
                endpoint_url=self.s3_endpoint,
                region_name=self.config.region,
                aws_access_key_id="emulator",
                aws_secret_access_key="emulator",
                config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
            )
        return self._s3

    @property
    def cloudwatch(self) -> Any:
        """A boto3 CloudWatch client for moto, where the studio's alarms live (None without moto)."""
        if self.s3_endpoint is None:
            return None
        if self._cloudwatch is None:
            self._cloudwatch = boto3.session.Session().client(
                "cloudwatch", endpoint_url=self.s3_endpoint, region_name=self.config.region,
                aws_access_key_id="emulator", aws_secret_access_key="emulator",
                config=BotoConfig(retries={"max_attempts": 2}))
        return self._cloudwatch

    async def alarm_states(self, names: list[str]) -> dict[str, str]:
        """CloudWatch alarm name -> StateValue, for the alarms that exist (blue/green rollback alarms)."""
        if self.cloudwatch is None or not names:
            return {}
        try:
            out = await asyncio.to_thread(self.cloudwatch.describe_alarms, AlarmNames=names[:100])
        except Exception as exc:  # CloudWatch unreachable: no alarm can trip
            log.warning("cannot read alarms %s: %s", names, exc)
            return {}
        return {a["AlarmName"]: a["StateValue"] for a in out.get("MetricAlarms", []) + out.get("CompositeAlarms", [])}

    async def trip_alarms(self, names: list[str], reason: str) -> None:
        """Put the alarms that exist into ALARM, as CloudWatch does when their metric breaches."""
        for name in (await self.alarm_states(names)):
            try:
                await asyncio.to_thread(self.cloudwatch.set_alarm_state, AlarmName=name, StateValue="ALARM",
                                        StateReason=reason[:1023])
            except Exception as exc:
                log.warning("cannot set alarm %s: %s", name, exc)

    # -- provisioning probe: the container's health check and its model data -----------------------
    async def _probe(self, endpoint: EndpointRecord, deployments: list[Deployment]) -> str | None:
        for d in deployments:
            model = self.registry.models.get(d.model_name.lower())
            if model is not None and (reason := await self._check_model_data(model.spec)):
                return reason
            server = container_url(self.registry, d, self.engine_url)
            try:
                assert self.http is not None
                r = await self.http.get(f"{server}/health", timeout=self.config.health_check_timeout_s)
                healthy = r.status_code == 200
            except httpx.HTTPError as exc:
                log.warning("health check of %s failed: %s", server, exc)
                healthy = False
            if not healthy:
                return (
                    f"The primary container for production variant {d.name} did not pass the ping health check "
                    f"(the model server at {server} did not answer GET /health with 200). "
                    f"Please check CloudWatch logs for this endpoint."
                )
        return None

    async def _check_model_data(self, spec: dict[str, Any]) -> str | None:
        containers = [spec["PrimaryContainer"]] if spec.get("PrimaryContainer") else spec.get("Containers", [])
        for c in containers:
            uri = c.get("ModelDataUrl") or (c.get("ModelDataSource") or {}).get("S3DataSource", {}).get("S3Uri")
            if not uri or self.s3_endpoint is None:
                continue
            try:
                bucket, key = parse_s3_uri(uri)
                listing = await asyncio.to_thread(self.s3.list_objects_v2, Bucket=bucket, Prefix=key, MaxKeys=1)
                found = listing.get("KeyCount", 0) > 0
            except Exception as exc:  # botocore errors, bad URIs: all mean the data cannot be downloaded
                log.info("model data %s not readable: %s", uri, exc)
                found = False
            if not found:
                return (
                    f'Failed to download model data for container "{c.get("ContainerHostname", "primary")}" from URL: '
                    f'"{uri}". Please ensure that there is an object located at the URL and that the role passed to '
                    "CreateModel has permissions to download the model."
                )
        return None
