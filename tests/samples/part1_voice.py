"""Part 1 of AWS's published voice sample, its calls only, in this project's words (not its files).

Deploys a Qwen3-TTS voice endpoint with bidirectional streaming on the vLLM-Omni DLC, validates it over the
HTTP/2 runtime (`aws-sdk-sagemaker-runtime-http2`, CRT) at AWS's own host name and port 8443, writes
validation-output.wav, says one more utterance with the voice `vivian`, and deletes everything. It knows
nothing about the emulator: run it under `python -m emulator exec`, where AWS's names lead to the emulator.

    python -m emulator exec -- python tests/samples/part1_voice.py --out DIR

Prints one JSON line at the end: the event types seen and the files written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import boto3

REGION = os.environ.get("AWS_REGION", "us-east-1")
IMAGE = f"763104351884.dkr.ecr.{REGION}.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"  # first DLC tag with bidi
MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
AMI = "al2023-ami-sagemaker-inference-gpu-4-1"  # the AMI whose runtime offers the bidirectional stream
ROLE = "arn:aws:iam::123456789012:role/sample-sagemaker-execution-role"
NAME = "sample-voice-bidi"
SPEECH_PATH = "v1/audio/speech/stream"


def deploy(sm) -> None:  # noqa: ANN001
    sm.create_model(ModelName=NAME, ExecutionRoleArn=ROLE,
                    PrimaryContainer={"Image": IMAGE, "Environment": {"SM_VLLM_MODEL": MODEL}})
    sm.create_endpoint_config(EndpointConfigName=NAME, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": NAME, "InstanceType": "ml.g6.xlarge", "InitialInstanceCount": 1,
        "ContainerStartupHealthCheckTimeoutInSeconds": 1800, "InferenceAmiVersion": AMI}])
    sm.create_endpoint(EndpointName=NAME, EndpointConfigName=NAME)
    print("waiting for InService ...", flush=True)
    sm.get_waiter("endpoint_in_service").wait(EndpointName=NAME, WaiterConfig={"Delay": 1, "MaxAttempts": 300})


async def speak(text: str, voice: str | None, out: Path) -> list[str]:
    """One session over the HTTP/2 stream: session.config, input.text, input.done; the audio into `out`."""
    from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
    from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
    from aws_sdk_sagemaker_runtime_http2.models import (
        InvokeEndpointWithBidirectionalStreamInput,
        RequestPayloadPart,
        RequestStreamEventPayloadPart,
        ResponseStreamEventPayloadPart,
    )
    from smithy_aws_core.identity.environment import EnvironmentCredentialsResolver
    from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig

    # The SDK's defaults: AWS's endpoint on 8443 and the system trust store (no CA of our own anywhere).
    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
        endpoint_uri=f"https://runtime.sagemaker.{REGION}.amazonaws.com:8443", region=REGION,
        aws_credentials_identity_resolver=EnvironmentCredentialsResolver(),
        transport=AWSCRTHTTPClient(client_config=AWSCRTHTTPClientConfig(force_http_2=True)))
    client = AsyncSageMakerRuntimeHTTP2Client(config=config)
    stream = await client.invoke_endpoint_with_bidirectional_stream(InvokeEndpointWithBidirectionalStreamInput(
        endpoint_name=NAME, model_invocation_path=SPEECH_PATH))

    async def send(message: dict) -> None:
        await stream.input_stream.send(RequestStreamEventPayloadPart(value=RequestPayloadPart(
            bytes_=json.dumps(message).encode(), data_type="UTF8", completion_state="COMPLETE")))

    voice_field = {"voice": voice} if voice else {}  # none: the model's default speaker
    await send({"type": "session.config", **voice_field, "language": "English", "response_format": "wav"})
    await send({"type": "input.text", "text": text})
    await send({"type": "input.done"})
    _, output = await stream.await_output()
    seen, audio = [], bytearray()
    while (event := await asyncio.wait_for(output.receive(), 120)) is not None:
        if not isinstance(event, ResponseStreamEventPayloadPart):
            continue
        part = event.value
        if part.data_type == "UTF8":
            message = json.loads(part.bytes_)
            seen.append(message["type"])
            if message["type"] == "error":
                raise SystemExit(f"the endpoint said: {message}")
            if message["type"] == "session.done":
                break
        else:
            audio += part.bytes_ or b""
    await stream.input_stream.close()
    out.write_bytes(bytes(audio))
    print(f"{out.name}: {len(audio)} bytes, events {seen}", flush=True)
    return seen


def delete(sm) -> None:  # noqa: ANN001
    sm.delete_endpoint(EndpointName=NAME)
    sm.get_waiter("endpoint_deleted").wait(EndpointName=NAME, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    sm.delete_endpoint_config(EndpointConfigName=NAME)
    sm.delete_model(ModelName=NAME)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    sm = boto3.client("sagemaker")
    started = time.monotonic()
    deploy(sm)
    try:
        validation = asyncio.run(speak("Hello from the validation of a bidirectional stream.", None,
                                       args.out / "validation-output.wav"))
        vivian = asyncio.run(speak("And one more sentence, said by Vivian.", "vivian", args.out / "vivian.wav"))
    finally:
        delete(sm)
    print(json.dumps({"validation_events": validation, "vivian_events": vivian,
                      "seconds": round(time.monotonic() - started, 1)}), flush=True)


if __name__ == "__main__":
    main()
