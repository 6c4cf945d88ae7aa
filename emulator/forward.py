"""Services the emulator passes on to moto: EventBridge Scheduler, Application Auto Scaling, CloudWatch and IAM.

moto keeps what these services store and checks most of what they accept; the emulator stands in front of it
(one endpoint URL for every AWS service, as before), fills the gaps where moto refuses or ignores what the real
API does (emulator/scheduler.py, emulator/autoscaling.py, emulator/iam.py say which), and acts on what
they hold: schedules fire, alarms and policies scale endpoints. `relay` passes moto's answer back unchanged.

Every request is authorized like the others (a signed caller in this region, the credential-expiry fault).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import boto3
import httpx
from botocore.config import Config as BotoConfig
from starlette.requests import Request
from starlette.responses import Response

from emulator.errors import AwsError

# The Emulator (emulator/core.py) is typed loosely: core creates the lifecycle, so importing it back would
# close an import cycle (tests/test_layers.py).
Emulator = Any

log = logging.getLogger("emulator")

_HOP_HEADERS = ("host", "content-length", "connection", "accept-encoding", "transfer-encoding")
_RELAYED = ("content-type", "x-amzn-requestid", "x-amzn-errortype", "x-amz-request-id")


def needs_moto(emu: Emulator, service: str) -> str:
    if emu.s3_endpoint is None:
        raise AwsError("ServiceUnavailable", f"{service} needs moto: start the emulator with --s3-endpoint (or let it "
                                             "start moto itself)", 503)
    return emu.s3_endpoint


async def forward(emu: Emulator, request: Request, body: bytes, service: str) -> httpx.Response:
    """The request as it came (method, path, query, signed headers, body), sent to moto."""
    base = needs_moto(emu, service)
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
    url = base + request.url.path + (f"?{request.url.query}" if request.url.query else "")
    assert emu.http is not None
    try:
        return await emu.http.request(request.method, url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise AwsError("ServiceUnavailable", f"moto did not answer {service}: {exc}", 503) from exc


def relay(upstream: httpx.Response) -> Response:
    headers = {k: v for k, v in upstream.headers.items() if k.lower() in _RELAYED}
    return Response(upstream.content, status_code=upstream.status_code, headers=headers)


class MotoClients:
    """boto3 clients at moto for the emulator's own reads and writes (firing a schedule deletes it, a
    simulation reads a role's policies). Blocking: call them through `call`."""

    def __init__(self, emu: Emulator) -> None:
        self.emu = emu
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = boto3.session.Session().client(
                service, endpoint_url=needs_moto(self.emu, service), region_name=self.emu.config.region,
                aws_access_key_id="emulator", aws_secret_access_key="emulator",
                config=BotoConfig(retries={"max_attempts": 2}))
        return self._clients[service]

    async def call(self, service: str, operation: str, **params: Any) -> Any:
        method = getattr(self.client(service), operation)
        return await asyncio.to_thread(method, **params)

    async def forget_everything(self) -> None:
        """What a reset of the emulator means for these services in moto: no schedule groups (but default),
        schedules, scalable targets, policies, alarms or IAM roles left."""
        if self.emu.s3_endpoint is None:
            return
        try:
            await asyncio.to_thread(self._forget)
        except Exception as exc:  # moto gone (shutting down): nothing to forget
            log.warning("could not reset scheduler/autoscaling/cloudwatch/iam in moto: %s", exc)

    def _forget(self) -> None:
        sch = self.client("scheduler")
        for s in sch.list_schedules().get("Schedules", []):
            sch.delete_schedule(Name=s["Name"], GroupName=s["GroupName"])
        for g in sch.list_schedule_groups().get("ScheduleGroups", []):
            if g["Name"] != "default":
                sch.delete_schedule_group(Name=g["Name"])
        aas = self.client("application-autoscaling")
        for ns in ("sagemaker",):
            for p in aas.describe_scaling_policies(ServiceNamespace=ns).get("ScalingPolicies", []):
                aas.delete_scaling_policy(PolicyName=p["PolicyName"], ServiceNamespace=ns, ResourceId=p["ResourceId"],
                                          ScalableDimension=p["ScalableDimension"])
            for t in aas.describe_scalable_targets(ServiceNamespace=ns).get("ScalableTargets", []):
                aas.deregister_scalable_target(ServiceNamespace=ns, ResourceId=t["ResourceId"],
                                               ScalableDimension=t["ScalableDimension"])
        cw = self.client("cloudwatch")
        names = [a["AlarmName"] for a in cw.describe_alarms().get("MetricAlarms", [])]
        for i in range(0, len(names), 100):
            cw.delete_alarms(AlarmNames=names[i:i + 100])
        iam = self.client("iam")
        for r in iam.list_roles().get("Roles", []):
            for p in iam.list_role_policies(RoleName=r["RoleName"]).get("PolicyNames", []):
                iam.delete_role_policy(RoleName=r["RoleName"], PolicyName=p)
            for a in iam.list_attached_role_policies(RoleName=r["RoleName"]).get("AttachedPolicies", []):
                iam.detach_role_policy(RoleName=r["RoleName"], PolicyArn=a["PolicyArn"])
            iam.delete_role(RoleName=r["RoleName"])
