"""Images on SageMaker: `invoke_endpoint` with the JSON body and `CustomAttributes="route=/v1/images/generations"`
(docs/protocols.md, "SageMaker"). Implements the image transport interface of services/images/transports.py.
"""

from __future__ import annotations

import json
import time

import botocore.exceptions as bx
from pydantic import ValidationError

from protocol.errors import ServerError
from protocol.images import IMAGES_PATH, ImageGenerationRequest, ImageGenerationResponse
from protocol.sagemaker import route_attribute
from services.aws import AwsSession, aws_error, missing_endpoint
from services.images.transports import TransportTimings


class SageMakerImageTransport:
    """`invoke_endpoint` on the realtime image endpoint, routed to `/v1/images/generations`."""

    def __init__(self, aws: AwsSession, endpoint: str | None) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self.target = f"SageMaker endpoint {endpoint} ({aws.region}, {IMAGES_PATH})" if endpoint else "SageMaker (no image endpoint)"

    def generate(self, request: ImageGenerationRequest) -> tuple[ImageGenerationResponse, TransportTimings]:
        if self.endpoint is None:
            raise missing_endpoint("image")
        t0 = time.perf_counter()
        try:
            resp = self.aws.client("sagemaker-runtime").invoke_endpoint(
                EndpointName=self.endpoint, Body=json.dumps(request.wire()).encode(), ContentType="application/json",
                Accept="application/json", CustomAttributes=route_attribute(IMAGES_PATH),
            )
            body = resp["Body"].read()
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, f"generating on image endpoint {self.endpoint}", profile=self.aws.profile) from None
        request_s = time.perf_counter() - t0
        try:
            payload = ImageGenerationResponse.model_validate_json(body)
        except ValidationError:
            raise ServerError(f"image endpoint {self.endpoint} answered something that is not an image generation "
                              f"result: {body[:200]!r}") from None
        return payload, TransportTimings(model_s=None, request_s=request_s)
