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

import socket
import ssl
import uuid
from pathlib import Path
from typing import Any

import pytest
import urllib3
from botocore.exceptions import ClientError

from emulator.tls import aws_host_names
from protocol.videos import VideoSyncForm

pytest.register_assert_rewrite("tests.emulator_support")  # its helpers assert; rewrite them too
from tests.emulator_support import EmulatorHandle, deploy_endpoint, running_emulator

pytest_plugins = ["tests.emulator_support"]  # the emulator fixtures, registered once per session


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
