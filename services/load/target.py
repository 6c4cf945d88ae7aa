"""Where a sweep sends its load, asked before any load is sent: is it up, what runs it, what an hour of it costs.

    target = describe_target(backend, settings, "voice", instance_type=None, usd_per_hour=None)
    target.usd_per_hour, target.price_note, target.machine, target.estimate(plan)

- The offline engine and vLLM-Omni servers: `GET /health` must answer 200. The offline engine (its
  `/v1/models` says so) is labelled as this machine's figure, not a GPU's; it has no instance price unless one
  is given. A vLLM-Omni server is priced when its instance type is given (`--instance-type ml.g6.xlarge`).
- SageMaker: the modality's endpoint must be InService (DescribeEndpoint). A sweep never creates, starts or
  waits for an endpoint. The price is the shipped table's rate (services/pricing.py) for the instance type the
  endpoint runs on — the pool entry SageMaker provisioned — in its region.
- A price given by hand (`usd_per_hour`) wins; an instance type the table lacks leaves the report without a
  cost, and `price_note` says so.
- SageMaker reached on loopback is the local emulator (emulator/: `AWS_ENDPOINT_URL_*` points there, or a
  rehearsal's namespace resolves AWS's names there; a real region never is): `emulated` says so, and the report
  says its dollar figures price an instance that did not run the load.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import botocore.exceptions as bx
import httpx

from protocol.common import ModelList
from protocol.errors import BackendUnreachable, InvalidInput
from protocol.limits import Range
from services.aws import AwsSession, aws_error, missing_endpoint, on_loopback
from services.base import Backend
from services.endpoint_view import describe_endpoint
from services.kinds import kind
from services.load.plan import CONVERSE, LoadPlan, Modality, load_family, unit_family
from services.pricing import PriceTable, cost_of_seconds, load_prices, usd
from services.settings import Settings
from services.speech.client import OFFLINE_ENGINE_OWNER

PRICE_PER_HOUR = Range(0.0001, 1000.0)  # USD per hour a person may give by hand
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class LoadTarget:
    """What the report says about where it ran and what that costs."""

    backend: str  # offline | server | sagemaker
    target: str  # for display: the URL, or "SageMaker endpoint NAME (region)"
    kind: str  # "offline engine" | "vLLM-Omni server" | "SageMaker endpoint"
    endpoint: str | None = None
    region: str | None = None
    instance_type: str | None = None
    usd_per_hour: float | None = None
    price_source: str | None = None
    price_note: str | None = None  # why there is no price, when there is none
    machine: str | None = None  # the offline engine: whose figure this is
    emulated: bool = False  # SageMaker was the local emulator: the price is the named instance's, not what ran

    @property
    def needs_confirmation(self) -> bool:
        """A sweep against SageMaker uses paid endpoint time: it is shown first and confirmed (`--yes`)."""
        return kind(self.backend).capabilities.billed

    def estimate(self, plan: LoadPlan) -> str:
        """What the sweep will send and, at the instance's price, the most it can cost."""
        noun = unit_family(plan.modality).load_noun
        levels = ",".join(map(str, plan.levels))
        where = f"{self.kind} {self.endpoint or self.target}" + (f" on {self.instance_type}" if self.instance_type else "")
        cap_min = plan.max_wall_s / 60
        warm = f", after {plan.warmup} warm-up request{'s' if plan.warmup != 1 else ''}" if plan.warmup else ""
        head = (f"The sweep sends {plan.total_requests} {noun} ({plan.requests} at each concurrency level {levels}"
                f"{warm}) to {where}, and stops sending after {cap_min:g} min at the latest.")
        part = None if plan.modality == CONVERSE else load_family(plan.modality)
        if part is not None:
            head += part.requests_note(plan)  # listen: each a live stream at real time
        else:  # converse: whole conversations over recorded turns
            speech = sum(x.seconds for x in plan.inputs)
            head += (f" Each is a conversation of {len(plan.inputs)} recorded turn{'s' if len(plan.inputs) != 1 else ''}"
                     f" ({speech:.1f} s of speech, sent at real time) and the agent's spoken replies.")
        if self.usd_per_hour is None:
            return f"{head} Its cost cannot be shown: {self.price_note or 'no hourly price is known'}."
        most = cost_of_seconds(self.usd_per_hour, plan.max_wall_s) or 0.0
        extra = "" if part is None else part.extra_cost_note(self)  # video on SageMaker: its S3 requests
        if self.emulated:
            return (f"{head} At {usd(self.usd_per_hour, 'rate')}/h ({self.price_source}) that would be at most {usd(most)} of "
                    f"endpoint time on AWS;{extra} this is the local SageMaker emulator: nothing is billed, and the "
                    "report's dollar figures price that instance over this machine's throughput.")
        return (f"{head} At {usd(self.usd_per_hour, 'rate')}/h ({self.price_source}) that is at most {usd(most)} of endpoint "
                f"time (the endpoint bills per second while it exists, loaded or not).{extra}")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def check_price(usd_per_hour: float | None) -> float | None:
    if usd_per_hour is not None:
        PRICE_PER_HOUR.check("the price per hour (USD)", usd_per_hour, integer=False)
    return usd_per_hour


def _price(instance_type: str | None, region: str, usd_per_hour: float | None, prices: PriceTable | None,
           *, without_type: str) -> dict[str, Any]:
    if usd_per_hour is not None:
        return {"usd_per_hour": float(usd_per_hour), "price_source": "given by hand (--price-per-hour)"}
    if instance_type is None:
        return {"price_note": without_type}
    table = prices or load_prices()
    price = table.hourly(instance_type, region)
    if not price.known:
        return {"price_note": f"no price is known for {instance_type} in {region} ({table.describe()}), so the "
                              "report has no cost per unit; give --price-per-hour to price it"}
    basis = f", the {price.region} rate missing so us-east-1's" if price.basis == "reference region" else ""
    return {"usd_per_hour": price.usd_per_hour, "price_source": f"{table.describe()}{basis}"}


def this_machine(url: str) -> str:
    host = urlparse(url).hostname or url
    if host in LOOPBACK:
        cpu = platform.processor() or platform.machine()
        return (f"this machine ({os.cpu_count()} CPU cores, {cpu}, no GPU): the offline engine's figure on this "
                "computer, not a GPU endpoint's")
    return f"the machine at {host} (the offline engine on CPU): not a GPU endpoint's figure"


def _server_target(backend: Backend, settings: Settings, modality: Modality, instance_type: str | None,
                 usd_per_hour: float | None, prices: PriceTable | None) -> LoadTarget:
    url = backend.target
    health = backend.health()
    if not health.ok:
        raise BackendUnreachable(f"the target {url} is down ({health.detail}); no load was sent — start it or pick "
                                 "another target, then run the sweep again")
    try:
        models = ModelList.model_validate(httpx.get(f"{url}/v1/models", timeout=settings.connect_timeout_s).json())
        offline = any(m.owned_by == OFFLINE_ENGINE_OWNER for m in models.data)
    except (httpx.HTTPError, ValueError):
        offline = backend.capabilities.previews
    if offline:
        if instance_type is not None and usd_per_hour is None:
            raise InvalidInput(f"the offline engine runs on this machine's CPU, not on {instance_type}: its figures at "
                               "a GPU instance's price would mislead; leave --instance-type out (or give "
                               "--price-per-hour to price this machine's time)")
        note = ("the offline engine runs on this machine, which has no instance price; give --price-per-hour to "
                "price its time")
        return LoadTarget(backend.name, url, "offline engine", region=settings.region, instance_type=instance_type,
                          machine=this_machine(url),
                          **_price(instance_type, settings.region, usd_per_hour, prices, without_type=note))
    note = (f"the instance type behind {url} is not known: give --instance-type (e.g. ml.g6.xlarge) or "
            "--price-per-hour for a cost per unit")
    return LoadTarget(backend.name, url, "vLLM-Omni server", region=settings.region, instance_type=instance_type,
                      **_price(instance_type, settings.region, usd_per_hour, prices, without_type=note))


def _configured_type(aws: AwsSession, config_name: str | None) -> str | None:
    """A variant of one instance type: DescribeEndpoint does not repeat it, its endpoint config says it."""
    if not config_name:
        return None
    try:
        variants = aws.client("sagemaker").describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"]
    except (bx.BotoCoreError, bx.ClientError, KeyError):
        return None
    for v in variants:
        if v.get("InstanceType"):
            return v["InstanceType"]
        pools = v.get("InstancePools") or []
        if len(pools) == 1:
            return pools[0]["InstanceType"]
    return None


def sagemaker_target(settings: Settings, modality: Modality, instance_type: str | None, usd_per_hour: float | None,
                      prices: PriceTable | None) -> LoadTarget:
    from services.sagemaker import resolve_targets

    targets = resolve_targets(settings)
    name = targets.endpoints[modality]
    if not name:
        raise missing_endpoint(modality)
    aws = AwsSession(targets.region, targets.profile, connect_timeout=settings.connect_timeout_s)
    try:
        view = describe_endpoint(aws.client("sagemaker"), name)
    except (bx.BotoCoreError, bx.ClientError) as exc:
        raise aws_error(exc, f"describing the {modality} endpoint {name}", profile=targets.profile) from None
    if view.gone:
        raise BackendUnreachable(f"the {modality} endpoint {name} does not exist in {targets.region}; no load was "
                                 "sent — a sweep never creates endpoints: deploy it (`python -m infra deploy`) "
                                 "or name another with --endpoint")
    status = view.status
    if status != "InService":
        raise BackendUnreachable(f"the {modality} endpoint {name} is {status}, not InService; no load was sent — a "
                                 "sweep never starts or waits for endpoints: bring it up (`python -m infra resume` "
                                 "or `python -m infra status`) and run the sweep again")
    emulated = on_loopback(aws.client("sagemaker").meta.endpoint_url)
    in_use = view.instance_type or _configured_type(aws, view.config_name)
    itype = in_use or instance_type
    note = (f"SageMaker did not say which instance type runs {name}: give --instance-type or --price-per-hour for a "
            "cost per unit")
    return LoadTarget("sagemaker", f"SageMaker endpoint {name} ({targets.region})", "SageMaker endpoint",
                      endpoint=name, region=targets.region, instance_type=itype, emulated=emulated,
                      **_price(itype, targets.region, usd_per_hour, prices, without_type=note))


def describe_target(backend: Backend, settings: Settings, modality: Modality, *, instance_type: str | None = None,
                    usd_per_hour: float | None = None, prices: PriceTable | None = None) -> LoadTarget:
    """The target the sweep will load, checked up and priced, before anything is sent. BackendUnreachable with a
    message saying what to do when it is down; ConfigError when no endpoint is configured for the modality."""
    check_price(usd_per_hour)
    if instance_type is not None and not instance_type.strip():
        raise InvalidInput("the instance type is empty: give one such as ml.g6.xlarge, or leave it out")
    instance_type = instance_type.strip() if instance_type else None
    if backend.name == "sagemaker":
        return sagemaker_target(settings, modality, instance_type, usd_per_hour, prices)
    return _server_target(backend, settings, modality, instance_type, usd_per_hour, prices)
