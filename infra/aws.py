"""boto3 session and clients for one region/profile, and AWS errors turned into messages a person can act on.

Nothing here overrides endpoints or CA bundles: boto3 honours `AWS_ENDPOINT_URL_<SERVICE>` and
`AWS_CA_BUNDLE` natively, which is how the local emulator and corporate TLS proxies are reached.
Credentials come from boto3's normal chain and never leave boto3 (not in the state file, not in logs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import botocore.exceptions as bx
from botocore.config import Config

from infra.errors import (
    RESUME_HINT,
    AccessDenied,
    AwsCallFailed,
    CredentialsError,
    InfraError,
    UsageError,
)
from protocol.errors import ConfigError
from services.aws import DENIED_CODES, EXPIRED_CODES, INVALID_CODES, boto3_session, validate_region
from services.endpoint_view import is_not_found  # noqa: F401  (re-exported: infra's modules import it from here)

DEFAULT_REGION = "us-east-1"
USER_AGENT = "omni-studio-infra"


@dataclass(frozen=True)
class Identity:
    account: str
    arn: str  # who creates the resources (the `creator` tag)


def checked_region(name: str, what: str = "--region") -> str:
    """`name` normalised (`US-EAST-1` -> `us-east-1`) if botocore knows it in any partition; else UsageError
    (exit 2) with the closest match and every known region. No client is made, nothing reaches AWS."""
    try:
        return validate_region(name, what=what)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


class AwsContext:
    """One boto3 session for a region and profile; clients are made once and shared across threads.
    The region (given, else the profile's, else us-east-1) is checked against botocore's regions first."""

    def __init__(self, region: str | None = None, profile: str | None = None) -> None:
        if region:
            region = checked_region(region, "region")
        try:
            self.session = boto3_session(region, profile)
        except bx.ProfileNotFound:
            raise UsageError(f"AWS profile {profile!r} is not configured: pick one from `aws configure list-profiles` "
                             "or leave --profile out to use the default credentials") from None
        if not region and self.session.region_name:
            region = checked_region(self.session.region_name, "the profile's region (AWS_REGION, AWS_DEFAULT_REGION "
                                                              "or region in ~/.aws/config)")
        self.region = region or DEFAULT_REGION
        self.profile = profile
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()  # boto3 sessions are not thread-safe; clients are

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                config = Config(user_agent_extra=USER_AGENT, connect_timeout=10, read_timeout=70)
                self._clients[service] = self.session.client(service, region_name=self.region, config=config)
            return self._clients[service]

    @property
    def sagemaker(self) -> Any:
        return self.client("sagemaker")

    @property
    def s3(self) -> Any:
        return self.client("s3")

    @property
    def quotas(self) -> Any:
        return self.client("service-quotas")

    def identity(self) -> Identity:
        """STS GetCallerIdentity: proves the credentials work before anything is planned or created."""
        try:
            out = self.client("sts").get_caller_identity()
        except AWS_ERRORS as exc:
            raise translate(exc, "check the credentials (sts:GetCallerIdentity)") from None
        return Identity(account=out["Account"], arn=out["Arn"])


# What AWS calls raise; everything else is a bug and propagates as such.
AWS_ERRORS = (bx.ClientError, bx.BotoCoreError)


def error_code(exc: BaseException) -> str:
    if isinstance(exc, bx.ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def error_message(exc: BaseException) -> str:
    if isinstance(exc, bx.ClientError):
        return str(exc.response.get("Error", {}).get("Message", "")) or str(exc)
    return str(exc)


def is_credentials_problem(exc: BaseException) -> bool:
    return isinstance(exc, CredentialsError) or error_code(exc) in EXPIRED_CODES | INVALID_CODES or isinstance(
        exc, bx.NoCredentialsError | bx.PartialCredentialsError | bx.TokenRetrievalError | bx.SSOTokenLoadError
        | bx.UnauthorizedSSOTokenError | bx.CredentialRetrievalError)


def translate(exc: BaseException, action: str, *, resumable: bool = False, retry: str | None = None) -> InfraError:
    """An AWS exception as an InfraError naming what to fix. `resumable`: resources may exist already,
    so the way on is `infra resume` rather than running the command again; `retry` names another way on."""
    if isinstance(exc, InfraError):
        return exc
    again = retry or (RESUME_HINT if resumable else "run the command again")
    code = error_code(exc)
    if code in EXPIRED_CODES or isinstance(exc, bx.TokenRetrievalError | bx.UnauthorizedSSOTokenError | bx.SSOTokenLoadError):
        return CredentialsError(f"credentials expired; refresh them and {again} (they ran out while trying to "
                                f"{action}; e.g. `aws sso login` or new keys)")
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError):
        return CredentialsError(f"no usable AWS credentials: set AWS_PROFILE (or pass --profile), run `aws sso login`, "
                                f"or export AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then {again} ({exc})")
    if code in INVALID_CODES:
        return CredentialsError(f"AWS rejected the credentials ({code}: {error_message(exc)}); check the profile, "
                                f"the region and the clock, then {again}")
    if code in DENIED_CODES:
        return AccessDenied(f"access denied while trying to {action}: {error_message(exc)}; grant that permission "
                            f"to the caller (or use a profile that has it), then {again}")
    if code == "ResourceLimitExceeded":
        return AwsCallFailed(f"SageMaker refused for quota while trying to {action}: {error_message(exc)} Request an "
                             "increase in Service Quotas or narrow --instance-types (`python -m infra cost` shows "
                             f"the prices), then {again}")
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError):
        return AwsCallFailed(f"cannot reach AWS to {action} ({exc}); check the network, proxy and AWS_ENDPOINT_URL_* "
                             f"settings, then {again}")
    if isinstance(exc, bx.SSLError):
        return AwsCallFailed(f"TLS failed while trying to {action} ({exc}); behind a TLS-inspecting proxy set "
                             f"AWS_CA_BUNDLE to its CA file, then {again}")
    if isinstance(exc, bx.ClientError):
        return AwsCallFailed(f"could not {action}: {code}: {error_message(exc)}")
    return AwsCallFailed(f"could not {action}: {type(exc).__name__}: {exc}")


def tagged(pages: Iterable[dict[str, Any]], items_key: str, tag: str,
           tags_of: Callable[[dict[str, Any]], dict[str, str] | None]) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    """Each listed item (`items_key` of every page) whose tags carry `tag`, with those tags. `tags_of` reads an
    item's tags (one call per item, as AWS's List*Tags are), None to pass an item over without reading them."""
    for page in pages:
        for item in page.get(items_key, []):
            tags = tags_of(item)
            if tags is not None and tag in tags:
                yield item, tags


def tag_dict(tags: Iterable[dict[str, str]]) -> dict[str, str]:
    """AWS's `[{"Key": k, "Value": v}, …]` as `{k: v}`."""
    return {t["Key"]: t["Value"] for t in tags}
