"""Images on SageMaker: `invoke_endpoint` on the realtime image endpoint, the container route in CustomAttributes
(docs/protocols.md, "SageMaker"): a generation's JSON body with `route=/v1/images/generations`, an edit's
multipart body as is with `route=/v1/images/edits`. An InvokeEndpoint body is limited to
REALTIME_PAYLOAD_MAX_BYTES, which `payload_limit` tells the client, so an edit's references are fitted under
it before sending (services/images/edits.py). Implements the image transport interface of
services/images/transports.py.
"""

from __future__ import annotations

import json
import time

import botocore.exceptions as bx
from pydantic import ValidationError

from protocol.errors import ServerError
from protocol.images import IMAGE_EDITS_PATH, IMAGES_PATH, ImageGenerationRequest, ImageGenerationResponse
from protocol.limits import REALTIME_PAYLOAD_MAX_BYTES
from protocol.sagemaker import route_attribute
from services.aws import AwsSession, aws_error, missing_endpoint
from services.images.transports import TransportTimings


class SageMakerImageTransport:
    """`invoke_endpoint` on the realtime image endpoint, routed to `/v1/images/generations` or `/v1/images/edits`."""

    payload_limit = REALTIME_PAYLOAD_MAX_BYTES
    payload_limit_name = f"SageMaker's {REALTIME_PAYLOAD_MAX_BYTES // (1024 * 1024)} MB limit"

    def __init__(self, aws: AwsSession, endpoint: str | None) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self.target = f"SageMaker endpoint {endpoint} ({aws.region})" if endpoint else "SageMaker (no image endpoint)"

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]:
        return self._invoke(json.dumps(request.wire()).encode(), "application/json", IMAGES_PATH, "generating")

    def edit(self, body: bytes, content_type: str) -> tuple[ImageGenerationResponse, TransportTimings]:
        return self._invoke(body, content_type, IMAGE_EDITS_PATH, "editing")

    def _invoke(self, body: bytes, content_type: str, route: str,
                doing: str) -> tuple[ImageGenerationResponse, TransportTimings]:
        if self.endpoint is None:
            raise missing_endpoint("image")
        t0 = time.perf_counter()
        try:
            resp = self.aws.client("sagemaker-runtime").invoke_endpoint(
                EndpointName=self.endpoint, Body=body, ContentType=content_type,
                Accept="application/json", CustomAttributes=route_attribute(route),
            )
            answer = resp["Body"].read()
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, f"{doing} on image endpoint {self.endpoint}", profile=self.aws.profile) from None
        request_s = time.perf_counter() - t0
        try:
            payload = ImageGenerationResponse.model_validate_json(answer)
        except ValidationError:
            raise ServerError(f"image endpoint {self.endpoint} answered something that is not an image result "
                              f"({route}): {answer[:200]!r}") from None
        return payload, TransportTimings(model_s=None, request_s=request_s)
