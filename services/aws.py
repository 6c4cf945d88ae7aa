"""One boto3 session for the SageMaker backend, and AWS errors turned into messages a person can act on.

Nothing here overrides endpoints or CA bundles: boto3 honours `AWS_ENDPOINT_URL_<SERVICE>` and
`AWS_CA_BUNDLE` by itself (that is how the local emulator and corporate TLS proxies are reached).
Credentials come from boto3's normal chain (environment, profiles, SSO, roles) and are handed to
clients only: never written to the environment, a file or a log line.
"""

from __future__ import annotations

import difflib
import functools
import ipaddress
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import boto3
import botocore
import botocore.exceptions as bx
import botocore.loaders
import botocore.session
from botocore.config import Config

from protocol.common import error_text, plain_excerpt
from protocol.errors import BackendUnreachable, ConfigError, ServerError, StudioError
from protocol.sagemaker import model_id_of_container

USER_AGENT_EXTRA = "omni-studio"
# AWS error codes by what a person must do about them (infra/aws.py uses the same sets).
EXPIRED_CODES = {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
INVALID_CODES = {
    "InvalidClientTokenId", "UnrecognizedClientException", "InvalidSignatureException", "SignatureDoesNotMatch",
    "IncompleteSignature", "IncompleteSignatureException", "MissingAuthenticationTokenException", "AuthFailure",
}
DENIED_CODES = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Forbidden", "403"}  # 403: S3 HEAD

# One loader for the process: it caches the parsed service models (SageMaker's is several MB of JSON),
# so a new session — every CLI command, every backend or endpoints-page context — does not parse them again.
_LOADER = botocore.loaders.create_loader()


def botocore_session() -> botocore.session.Session:
    """A botocore session sharing the process's model loader."""
    core = botocore.session.Session()
    core.register_component("data_loader", _LOADER)
    return core


def boto3_session(region: str | None, profile: str | None) -> boto3.Session:
    """A boto3 session sharing the process's model loader. Raises botocore's ProfileNotFound (here, not at the first
    client: boto3 takes any profile name for a session it is handed, and only a client looks the profile up)."""
    session = boto3.Session(botocore_session=botocore_session(), profile_name=profile or None,
                            region_name=region or None)
    if profile and profile not in session.available_profiles:
        raise bx.ProfileNotFound(profile=profile)
    return session


@functools.cache
def known_regions() -> dict[str, tuple[str, ...]]:
    """Partition -> the regions botocore knows in it: its endpoints.json and partitions.json together (read
    through the shared loader, as botocore's own clients read them), without the `*-global` pseudo-regions."""
    found: dict[str, set[str]] = {}
    for p in _LOADER.load_data("endpoints").get("partitions", []):
        found.setdefault(p["partition"], set()).update(p.get("regions", {}))
    for p in _LOADER.load_data("partitions").get("partitions", []):
        found.setdefault(p["id"], set()).update(p.get("regions", {}))
    return {part: tuple(sorted(r for r in regions if not r.endswith("-global"))) for part, regions in found.items()}


def validate_region(name: str, *, what: str = "region") -> str:
    """`name` as a region botocore knows in any partition (aws, aws-cn, aws-us-gov, ...), with case and
    surrounding spaces normalised (`" US-EAST-1 "` -> `us-east-1`). Raises ConfigError naming `what`, the
    closest known region and every region there is. Makes no client and no network call."""
    region = str(name).strip().lower()
    partitions = known_regions()
    every = [r for regions in partitions.values() for r in regions]
    if region in every:
        return region
    close = difflib.get_close_matches(region, every, n=1, cutoff=0.6)
    problem = "is empty" if not region else "is not an AWS region" + (f" (did you mean {close[0]}?)" if close else "")
    listing = "; ".join(f"{part}: {', '.join(regions)}" for part, regions in partitions.items() if regions)
    raise ConfigError(f"{what} {name!r} {problem}. Regions botocore {botocore.__version__} knows, by partition — "
                      f"{listing} (a region opened since then needs a newer botocore)")
HTTP2_SERVICE_ENV = "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2"


@dataclass(frozen=True)
class FrozenCredentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None

    def __repr__(self) -> str:  # never print a secret, not even in a traceback
        return f"FrozenCredentials(access_key_id={self.access_key_id[:4]}…)"


class AwsSession:
    """boto3 clients for one region and profile, made once and shared across threads."""

    def __init__(self, region: str, profile: str | None = None, *, connect_timeout: float = 10.0,
                 read_timeout: float = 120.0) -> None:
        self.region = region
        self.profile = profile
        try:
            self.session = boto3_session(region, profile)
        except bx.ProfileNotFound:
            raise ConfigError(f"AWS profile {profile!r} is not configured: pick one from `aws configure "
                              "list-profiles`, or leave the profile setting empty for the default credentials") from None
        self._config = Config(
            region_name=region, connect_timeout=connect_timeout, read_timeout=read_timeout,
            retries={"max_attempts": 3, "mode": "standard"}, user_agent_extra=USER_AGENT_EXTRA,
        )
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self.session.client(service, config=self._config)
            return self._clients[service]

    def credentials(self) -> FrozenCredentials:
        """The current credentials from boto3's chain (refreshed by boto3 when they are temporary)."""
        try:
            creds = self.session.get_credentials()
            frozen = creds.get_frozen_credentials() if creds is not None else None
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, "resolving AWS credentials") from None
        if frozen is None or not frozen.access_key:
            raise ConfigError(no_credentials_text(self.profile))
        return FrozenCredentials(frozen.access_key, frozen.secret_key, frozen.token)


def no_credentials_text(profile: str | None) -> str:
    where = f"profile {profile!r}" if profile else "the default chain (environment, ~/.aws, SSO, instance role)"
    return (f"no AWS credentials found in {where}: run `aws configure` or `aws sso login`, set AWS_PROFILE, "
            "or pick the offline backend to work without AWS")


def http2_endpoint(region: str) -> str:
    """The HTTP/2 runtime endpoint: `AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2`, `AWS_ENDPOINT_URL`, or AWS's :8443."""
    return (os.environ.get(HTTP2_SERVICE_ENV) or os.environ.get("AWS_ENDPOINT_URL")
            or f"https://runtime.sagemaker.{region}.amazonaws.com:8443")


def aws_error(exc: Exception, doing: str, *, profile: str | None = None) -> StudioError:
    """A StudioError for a boto3/botocore failure while `doing` something ("invoking endpoint x")."""
    if isinstance(exc, StudioError):
        return exc
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return ConfigError(f"{doing}: {no_credentials_text(profile)}")
    if isinstance(exc, bx.ProfileNotFound):
        return ConfigError(f"{doing}: {exc}")
    if isinstance(exc, bx.SSLError):
        return BackendUnreachable(f"{doing}: TLS failed ({exc}); if a proxy re-signs traffic, point AWS_CA_BUNDLE "
                                  "at its CA file")
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError | bx.ReadTimeoutError
                  | bx.ConnectionClosedError):
        return BackendUnreachable(f"{doing}: cannot reach AWS ({exc}); check the network, the region and any "
                                  "AWS_ENDPOINT_URL_* settings")
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        code, message = str(err.get("Code", "")), str(err.get("Message", "") or exc)
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in EXPIRED_CODES:
            return ConfigError(f"{doing}: the AWS credentials have expired ({message}); refresh them "
                               "(e.g. `aws sso login`) and try again")
        if code in INVALID_CODES:
            return ConfigError(f"{doing}: AWS did not accept the credentials ({code}: {message}); check the "
                               "profile or keys in use")
        if code in DENIED_CODES:
            return ServerError(f"{doing}: access denied ({message}); the credentials in use need that permission",
                               status=status)
        if code == "ModelError":
            original = exc.response.get("OriginalStatusCode", err.get("OriginalStatusCode"))
            if original is None:  # no answer from the container (a timeout): SageMaker's own words
                return ServerError(f"{doing}: {plain_excerpt(message)}", status=status)
            # The container's JSON error field only, never its raw body (docs/team.md, Targets).
            text = error_text(str(exc.response.get("OriginalMessage", err.get("OriginalMessage")) or ""))
            return ServerError(f"{doing}: the model answered HTTP {original}: "
                               + (text or "its answer is not a JSON error; the endpoint's CloudWatch logs say more"),
                               status=int(original) if str(original).isdigit() else status)
        return ServerError(f"{doing}: {message} ({code})" if code else f"{doing}: {message}", status=status)
    if isinstance(exc, bx.BotoCoreError):
        return BackendUnreachable(f"{doing}: {exc}")
    return StudioError(f"{doing}: unexpected {type(exc).__name__}: {exc}")


def missing_endpoint(role: str) -> ConfigError:
    from protocol.catalog import BY_NAME

    family = BY_NAME.get(role)
    command = "python -m infra deploy" + (f" --with {role}" if family is not None and family.opt_in else "")
    return ConfigError(
        f"no {role} endpoint is configured for the SageMaker backend: set OMNI_STUDIO_{role.upper()}_ENDPOINT "
        f"(or {role}_endpoint in studio.toml), or deploy it with `{command}` (`python -m infra add {role}` adds it "
        "to a running deployment), which writes the state file the studio reads"
    )


def endpoint_model(aws: AwsSession, endpoint: str) -> str:
    """The model id behind `endpoint` (describe endpoint → config → model): the container's served model name
    or SM_VLLM_MODEL (protocol.sagemaker.model_id_of_container)."""
    sm = aws.client("sagemaker")
    doing = f"looking up the model behind endpoint {endpoint}"
    try:
        config_name = sm.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
        variants = sm.describe_endpoint_config(EndpointConfigName=config_name)["ProductionVariants"]
        model = sm.describe_model(ModelName=variants[0]["ModelName"])
    except (bx.BotoCoreError, bx.ClientError) as exc:
        raise aws_error(exc, doing, profile=aws.profile) from None
    container = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
    return model_id_of_container(container.get("Environment")) or "unknown"


def on_loopback(url: str | None) -> bool:
    """Does `url`'s host resolve to loopback only? SageMaker reached so is the local emulator (emulator/: the
    `AWS_ENDPOINT_URL_*` variables point there, or a rehearsal's namespace resolves AWS's names there), never a
    real region: its dollar figures price instances that did not run."""
    host = urlparse(url or "").hostname
    if not host:
        return False
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:  # unresolvable here: not the emulator, whatever it is
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)
