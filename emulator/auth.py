"""Who is calling: the SigV4 `Authorization` header, and the credential-expiry fault.

The emulator does not know anyone's secret key, so it checks that requests are signed (header shape,
credential scope) rather than recomputing signatures. The access key id in the scope is what the
"credentials expire after N calls" fault counts against.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from emulator.errors import AwsError, expired_token, missing_auth

_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<akid>[^/\s,]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/"
    r"(?P<service>[a-z0-9-]+)/aws4_request,\s*SignedHeaders=(?P<signed>[a-z0-9;-]+),\s*Signature=(?P<sig>[0-9a-f]{64})$"
)


@dataclass(frozen=True)
class Caller:
    access_key_id: str
    region: str
    service: str  # the signing name in the credential scope: sagemaker, servicequotas, sts
    signature: str  # the request's seed signature (event-stream frames chain from it)


def caller_from_headers(headers: Mapping[str, str]) -> Caller:
    """The caller a SigV4-signed request names; MissingAuthenticationToken when it is not signed."""
    value = headers.get("authorization")
    if not value:
        raise missing_auth()
    match = _AUTH.match(value.strip())
    if match is None:
        raise AwsError(
            "IncompleteSignatureException",
            "Authorization header is not a valid AWS Signature Version 4 header "
            "(expected 'AWS4-HMAC-SHA256 Credential=AKID/date/region/service/aws4_request, SignedHeaders=..., Signature=...')",
            403,
        )
    if "x-amz-date" not in headers and "date" not in headers:
        raise AwsError("IncompleteSignatureException", "Signed requests need an X-Amz-Date header", 403)
    return Caller(match["akid"], match["region"], match["service"], match["sig"])


class CredentialMeter:
    """Counts AWS API calls per access key id and expires a key after the configured number of calls."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def charge(self, caller: Caller, allowed_calls: int | None) -> None:
        self.calls[caller.access_key_id] += 1
        if allowed_calls is not None and self.calls[caller.access_key_id] > allowed_calls:
            raise expired_token()

    def reset(self) -> None:
        self.calls.clear()
