"""Clients that know nothing of the emulator talk to it unchanged (issue 24): what the published sample scripts
ran into, each checked with the real client against the real emulator.

- TLS: the certificate names the AWS hosts the emulator stands in for (the HTTP/2 SDK connects to
  `runtime.sagemaker.<region>.amazonaws.com:8443` and checks that name), for us-east-1 and the region it serves.
- Voices: the voice endpoint accepts every speaker and language of its model (Qwen3-TTS CustomVoice), each
  speaker a distinct rendering of the engine's Piper voice.
- S3: a PutObject whose ContentType is a form type keeps every byte (moto form-parsed it to 0 bytes), so a
  sample's multipart video request runs; an empty async input is refused at submission.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import urllib3
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.models import (
    InvokeEndpointWithBidirectionalStreamInput,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
)
from botocore.exceptions import ClientError

from emulator.tls import aws_host_names
from offline.styles import SPEAKERS, median_f0
from protocol.common import dumps
from protocol.speech import QWEN3_TTS_SPEAKERS, InputDone, InputText, SessionConfig
from protocol.videos import VideoSyncForm

pytest.register_assert_rewrite("tests.emulator_support")  # its helpers assert; rewrite them too
from tests.emulator_support import EmulatorHandle, deploy_endpoint, http2_config, running_emulator

pytest_plugins = ["tests.emulator_support"]  # the emulator fixtures, registered once per session

STEP_S = 30.0  # the longest any single await may take
RATE = 24_000


# --------------------------------------------------------------------------------------------------
# TLS: the AWS host names
def _handshake(https_url: str, ca_file: Path, server_name: str) -> dict[str, Any]:
    """A TLS handshake with the emulator's listener, as a client that asked for `server_name` makes it."""
    port = int(https_url.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(ca_file))  # host-name check on, as every AWS client has it
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=server_name) as tls:
            return tls.getpeercert()


def test_the_certificate_names_the_aws_hosts_clients_connect_to(emulator: EmulatorHandle) -> None:
    for name in ("runtime.sagemaker.us-east-1.amazonaws.com", "api.sagemaker.us-east-1.amazonaws.com",
                 "s3.amazonaws.com", "my-bucket.s3.amazonaws.com", "my-bucket.s3.us-east-1.amazonaws.com",
                 "sts.amazonaws.com", "iam.amazonaws.com", "monitoring.us-east-1.amazonaws.com",
                 "api.pricing.us-east-1.amazonaws.com", "localhost"):
        assert _handshake(emulator.https_url, emulator.ca_file, name)["subjectAltName"]
    # Still a real check: a host the emulator does not stand in for fails it.
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(emulator.https_url, emulator.ca_file, "runtime.sagemaker.amazonaws.com.example.org")


def test_the_certificate_names_the_region_the_emulator_was_started_for(
    engine_url: str, moto_server: str, tmp_path: Path
) -> None:
    with running_emulator(engine_url, moto_server, tmp_path, config={"region": "eu-west-2"}) as handle:
        assert handle.region == "eu-west-2"
        for name in ("runtime.sagemaker.eu-west-2.amazonaws.com", "scheduler.eu-west-2.amazonaws.com",
                     "runtime.sagemaker.us-east-1.amazonaws.com"):  # us-east-1 always: global services live there
            assert _handshake(handle.https_url, handle.ca_file, name)
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(handle.https_url, handle.ca_file, "runtime.sagemaker.ap-south-2.amazonaws.com")


def test_aws_host_names_lists_each_service_once_per_region() -> None:
    names = aws_host_names("eu-central-1")
    assert len(names) == len(set(names))
    for service in ("runtime.sagemaker", "api.sagemaker", "sagemaker", "s3", "sts", "servicequotas", "scheduler",
                    "application-autoscaling", "monitoring"):
        assert f"{service}.eu-central-1.amazonaws.com" in names
    assert {"s3.amazonaws.com", "*.s3.amazonaws.com", "*.s3.eu-central-1.amazonaws.com", "iam.amazonaws.com",
            "sts.amazonaws.com", "api.pricing.us-east-1.amazonaws.com"} <= set(names)


# --------------------------------------------------------------------------------------------------
# Voices: the model's speakers and languages, over the real HTTP/2 SDK
def _part(message: Any) -> RequestStreamEventPayloadPart:
    return RequestStreamEventPayloadPart(
        value=RequestPayloadPart(bytes_=dumps(message).encode(), data_type="UTF8", completion_state="COMPLETE"))


async def _speak(handle: EmulatorHandle, endpoint: str, voice: str, language: str) -> tuple[list[dict[str, Any]], bytes]:
    """One utterance over the bidirectional stream (as the published Part 1 validation does); its events and PCM."""
    client = AsyncSageMakerRuntimeHTTP2Client(config=await http2_config(handle))
    stream = await asyncio.wait_for(client.invoke_endpoint_with_bidirectional_stream(
        InvokeEndpointWithBidirectionalStreamInput(endpoint_name=endpoint, model_invocation_path="v1/audio/speech/stream")
    ), STEP_S)
    config = SessionConfig(voice=voice, language=language, response_format="pcm", stream_audio=True,
                           split_granularity="none")
    text = "The lighthouse keeper counted the waves until morning came over the quiet harbour."
    for message in (config, InputText(text=text), InputDone()):
        await asyncio.wait_for(stream.input_stream.send(_part(message)), STEP_S)
    _, output = await asyncio.wait_for(stream.await_output(), STEP_S)
    events: list[dict[str, Any]] = []
    pcm = bytearray()
    for _ in range(10_000):  # bounded: a stream that never ends fails the test
        event = await asyncio.wait_for(output.receive(), STEP_S)
        if event is None:
            return events, bytes(pcm)
        if event.value.data_type == "UTF8":
            events.append(json.loads(event.value.bytes_))
            if events[-1]["type"] == "session.done":
                await asyncio.wait_for(stream.input_stream.close(), STEP_S)
        else:
            pcm.extend(event.value.bytes_)
    raise AssertionError("the stream did not end")


def _pitch(pcm: bytes) -> float:
    f0 = median_f0(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0, RATE)
    assert f0 is not None, "no voiced audio"
    return f0


def test_the_models_speakers_and_languages_are_accepted_and_sound_distinct(emulator: EmulatorHandle) -> None:
    deploy_endpoint(emulator, "voice-speakers", environment={"SM_VLLM_MODEL": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"})

    async def both() -> list[tuple[list[dict[str, Any]], bytes]]:
        return [await asyncio.wait_for(_speak(emulator, "voice-speakers", voice, "Chinese"), 120)
                for voice in ("vivian", "uncle_fu")]

    (vivian_events, vivian), (uncle_events, uncle) = asyncio.run(both())
    for events in (vivian_events, uncle_events):
        assert not [e for e in events if e["type"] == "error"], events
        assert events[-1]["type"] == "session.done"
    assert len(vivian) > RATE and len(uncle) > RATE  # over a second of speech each
    # Distinct renderings: vivian +5 semitones, uncle_fu -4 (offline.styles.SPEAKERS) — about 1.68x apart.
    assert _pitch(vivian) / _pitch(uncle) > 1.35
    assert set(SPEAKERS) == set(QWEN3_TTS_SPEAKERS)  # every speaker of the model has its rendering


def test_a_speakers_rendering_is_labelled(engine_url: str) -> None:
    response = httpx.post(f"{engine_url}/v1/audio/speech", json={"input": "Good morning.", "voice": "Vivian",
                                                                 "language": "Japanese", "response_format": "wav"},
                          timeout=60, trust_env=False)
    assert response.status_code == 200, response.text
    assert response.headers["X-Offline-Preview"] == (
        "offline preview from speaker 'vivian' on the Piper voice: rate x1.05, pitch +5.0 semitones")
    card = next(m for m in httpx.get(f"{engine_url}/v1/models", timeout=10, trust_env=False).json()["data"]
                if "CustomVoice" in m["id"])
    assert "every language is accepted and spoken with its English voice" in json.dumps(card)


# --------------------------------------------------------------------------------------------------
# S3 bodies, byte for byte; an empty async input is refused
@pytest.mark.parametrize("content_type", ["multipart/form-data; boundary=sample-boundary",
                                          "application/x-www-form-urlencoded"])
def test_put_object_keeps_a_form_typed_body_byte_for_byte(emulator: EmulatorHandle, bucket: str, content_type: str) -> None:
    s3 = emulator.client("s3")
    if content_type.startswith("multipart"):
        body = (b"--sample-boundary\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nwaves at dusk\r\n"
                b"--sample-boundary\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n"
                b"Content-Type: image/png\r\n\r\n" + bytes(range(256)) + b"\r\n--sample-boundary--\r\n")
    else:
        body = b"prompt=waves+at+dusk&num_frames=17&seed=%FF"
    s3.put_object(Bucket=bucket, Key="requests/form-typed", Body=body, ContentType=content_type)
    got = s3.get_object(Bucket=bucket, Key="requests/form-typed")
    assert got["Body"].read() == body
    assert got["ContentType"] == content_type and got["ContentLength"] == len(body)


def test_a_multipart_video_request_put_as_form_data_runs_on_the_async_endpoint(emulator: EmulatorHandle, bucket: str) -> None:
    """Part 2's video request: the multipart body PUT with ContentType multipart/form-data, then InvokeEndpointAsync."""
    deploy_endpoint(emulator, "video-form", async_output=f"s3://{bucket}/outputs", async_failure=f"s3://{bucket}/failures",
                    environment={"SM_VLLM_MODEL": "Wan-AI/Wan2.1-VACE-1.3B-diffusers"})
    form = VideoSyncForm(prompt="a paper boat", width=96, height=64, num_frames=5, fps=8, num_inference_steps=4, seed=3)
    body, content_type = urllib3.encode_multipart_formdata(form.form_fields())
    s3, rt = emulator.client("s3"), emulator.client("sagemaker-runtime")
    s3.put_object(Bucket=bucket, Key="requests/video.multipart", Body=body, ContentType=content_type)
    response = rt.invoke_endpoint_async(EndpointName="video-form", InputLocation=f"s3://{bucket}/requests/video.multipart",
                                        ContentType=content_type, Accept="video/mp4",
                                        CustomAttributes="route=/v1/videos/sync", InferenceId="form-1")
    out_key = response["OutputLocation"].removeprefix(f"s3://{bucket}/")
    waiter = s3.get_waiter("object_exists")
    waiter.wait(Bucket=bucket, Key=out_key, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    mp4 = s3.get_object(Bucket=bucket, Key=out_key)["Body"].read()
    assert mp4[4:8] == b"ftyp"  # an MP4, not the failure object


def test_an_empty_async_input_is_refused_at_submission(emulator: EmulatorHandle, bucket: str) -> None:
    deploy_endpoint(emulator, "video-empty", async_output=f"s3://{bucket}/outputs", async_failure=f"s3://{bucket}/failures",
                    environment={"SM_VLLM_MODEL": "Wan-AI/Wan2.1-VACE-1.3B-diffusers"})
    s3, rt = emulator.client("s3"), emulator.client("sagemaker-runtime")
    key = f"requests/empty-{uuid.uuid4().hex[:6]}.multipart"
    s3.put_object(Bucket=bucket, Key=key, Body=b"")
    with pytest.raises(ClientError) as info:
        rt.invoke_endpoint_async(EndpointName="video-empty", InputLocation=f"s3://{bucket}/{key}",
                                 ContentType="multipart/form-data; boundary=x", CustomAttributes="route=/v1/videos/sync")
    error = info.value.response["Error"]
    assert error["Code"] == "ValidationError"
    assert f"s3://{bucket}/{key}" in error["Message"] and "empty object (0 bytes)" in error["Message"]
    assert s3.list_objects_v2(Bucket=bucket, Prefix="outputs/").get("KeyCount", 0) == 0  # nothing was queued
