"""Sound transports: one method, so the client logic is written once.

    answer = transport.generate(AudioGenerateRequest)   # SoundAnswer: the file's bytes, its media type, timings

`OmniSoundTransport` posts JSON to a vLLM-Omni server's `/v1/audio/generate` (the answer is the audio file itself);
`SageMakerSoundTransport` sends the same body through `invoke_endpoint` with `route=/v1/audio/generate` in
CustomAttributes on the realtime sound endpoint (docs/protocols.md, "Sound" and "SageMaker").
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import botocore.exceptions as bx
import httpx

from protocol.common import error_text
from protocol.errors import BackendUnreachable, InvalidInput, ServerError
from protocol.sagemaker import route_attribute
from protocol.sound import PREVIEW_HEADER, SEED_HEADER, SOUND_PATH, AudioGenerateRequest
from services.aws import AwsSession, aws_error, missing_endpoint


@dataclass(frozen=True)
class SoundAnswer:
    data: bytes
    content_type: str
    request_s: float  # the HTTP (or invoke_endpoint) round trip
    seed: int | None = None  # the seed the server says it used (the offline engine does; vLLM-Omni does not)
    preview: str | None = None  # the offline engine's note on what its preview is


class OmniSoundTransport:
    """vLLM-Omni's `POST /v1/audio/generate` over httpx (one pooled client)."""

    def __init__(self, url: str, *, timeout: float = 300.0, connect_timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.target = self.url + SOUND_PATH
        self._http = httpx.Client(timeout=httpx.Timeout(timeout, connect=connect_timeout))

    def generate(self, request: AudioGenerateRequest) -> SoundAnswer:
        t0 = time.perf_counter()
        try:
            resp = self._http.post(self.target, json=request.wire())
        except httpx.TimeoutException as exc:
            raise BackendUnreachable(f"the sound server at {self.url} did not answer in time ({type(exc).__name__}); "
                                     "it may be busy or still loading the model — try again") from None
        except httpx.HTTPError as exc:
            raise BackendUnreachable(f"cannot reach the sound server at {self.url} ({type(exc).__name__}: {exc}); "
                                     "is it running, and is the URL right?") from None
        request_s = time.perf_counter() - t0
        if resp.status_code >= 400:
            words = error_text(resp.text) or resp.reason_phrase
            if resp.status_code in (400, 422):
                raise InvalidInput(f"the sound server refused the request: {words}")
            if resp.status_code == 404:
                raise ServerError(f"the server at {self.url} has no such sound model or route (HTTP 404: {words}); "
                                  f"is it serving Stable Audio Open on {SOUND_PATH}?", status=404)
            raise ServerError(f"the sound server failed (HTTP {resp.status_code}): {words}", status=resp.status_code)
        seed = resp.headers.get(SEED_HEADER)
        return SoundAnswer(resp.content, resp.headers.get("content-type", ""), request_s,
                           seed=int(seed) if seed and seed.lstrip("-").isdigit() else None,
                           preview=resp.headers.get(PREVIEW_HEADER))

    def close(self) -> None:
        self._http.close()


class SageMakerSoundTransport:
    """`invoke_endpoint` on the realtime sound endpoint, routed to `/v1/audio/generate`."""

    def __init__(self, aws: AwsSession, endpoint: str | None) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self.target = f"SageMaker endpoint {endpoint} ({aws.region})" if endpoint else "SageMaker (no sound endpoint)"

    def generate(self, request: AudioGenerateRequest) -> SoundAnswer:
        if self.endpoint is None:
            raise missing_endpoint("sound")
        t0 = time.perf_counter()
        try:
            resp = self.aws.client("sagemaker-runtime").invoke_endpoint(
                EndpointName=self.endpoint, Body=json.dumps(request.wire()).encode(), ContentType="application/json",
                Accept="*/*", CustomAttributes=route_attribute(SOUND_PATH))
            data = resp["Body"].read()
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, f"generating on sound endpoint {self.endpoint}", profile=self.aws.profile) from None
        return SoundAnswer(data, str(resp.get("ContentType") or ""), time.perf_counter() - t0)

    def close(self) -> None:
        pass
