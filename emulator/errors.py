"""AWS-shaped errors and the three wire renderings boto3 and the HTTP/2 SDK parse.

- JSON 1.1 protocol (SageMaker control plane, Service Quotas): `{"__type": Code, "message": ...}`
- REST-JSON (SageMaker Runtime, the HTTP/2 stream's pre-stream errors): header `x-amzn-ErrorType`
  plus a JSON body holding the modelled members (`Message`, `OriginalStatusCode`, ...)
- Query/XML (STS): `<ErrorResponse><Error><Code>...`
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from xml.sax.saxutils import escape

from starlette.responses import Response


class AwsError(Exception):
    """One service error: its code (botocore's `Error.Code`), HTTP status and message."""

    def __init__(self, code: str, message: str, status: int = 400, **members: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.members = {k: v for k, v in members.items() if v is not None}


def validation(message: str) -> AwsError:
    """The control plane's ValidationException (also what boto3's waiters match on)."""
    return AwsError("ValidationException", message)


def runtime_validation(message: str) -> AwsError:
    """SageMaker Runtime's validation error is spelled ValidationError."""
    return AwsError("ValidationError", message)


def expired_token() -> AwsError:
    return AwsError("ExpiredTokenException", "The security token included in the request is expired", 400)


def missing_auth() -> AwsError:
    return AwsError(
        "MissingAuthenticationTokenException",
        "Missing Authentication Token: the request is not signed with AWS Signature Version 4 "
        "(configure credentials: environment, profile, SSO or role)",
        403,
    )


def request_id() -> str:
    return str(uuid.uuid4())


def json_protocol_response(error: AwsError) -> Response:
    body = {"__type": error.code, "message": error.message, **error.members}
    return Response(
        json.dumps(body),
        status_code=error.status,
        media_type="application/x-amz-json-1.1",
        headers={"x-amzn-RequestId": request_id()},
    )


def rest_json_response(error: AwsError) -> Response:
    members = dict(error.members)
    body = {"ErrorCode": members.pop("ErrorCode", error.code), "Message": error.message, **members}
    return Response(
        json.dumps(body),
        status_code=error.status,
        media_type="application/json",
        headers={"x-amzn-ErrorType": error.code, "x-amzn-RequestId": request_id()},
    )


def query_xml_response(error: AwsError, *, sender_fault: bool = True) -> Response:
    code = "ExpiredToken" if error.code == "ExpiredTokenException" else error.code
    rid = request_id()
    xml = (
        '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
        f"<Type>{'Sender' if sender_fault else 'Receiver'}</Type><Code>{escape(code)}</Code>"
        f"<Message>{escape(error.message)}</Message></Error><RequestId>{rid}</RequestId></ErrorResponse>"
    )
    return Response(xml, status_code=error.status, media_type="text/xml", headers={"x-amzn-RequestId": rid})
