"""The emulator's runtime routes through boto3 `sagemaker-runtime`, forwarding to the real offline engine.

Realtime images (`CustomAttributes="route=/v1/images/generations"` -> a real PNG), asynchronous video
through moto S3 (a multipart body from urllib3's encoder -> an MP4 PyAV decodes), inline async bodies,
and SageMaker's error shapes (unknown endpoint, not InService, ModelError 424, size limits, exclusivity).
"""

from __future__ import annotations

import base64
import io
import json
import time
from typing import Any

import av
import httpx
import pytest
import urllib3
from botocore.exceptions import ClientError
from PIL import Image

from emulator.runtime import route_from_attributes
from protocol.images import ImageGenerationRequest
from protocol.videos import VideoSyncForm

pytest.register_assert_rewrite("tests.emulator_support")  # its helpers assert; rewrite them too
from tests.emulator_support import EmulatorHandle, deploy_endpoint

pytest_plugins = ["tests.emulator_support"]  # the emulator fixtures, registered once per session

IMAGE_ROUTE = "route=/v1/images/generations"
VIDEO_ROUTE = "route=/v1/videos/sync"


def error_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    return exc.value.response["Error"]["Code"], exc.value.response["Error"]["Message"]


def image_body(**overrides: Any) -> bytes:
    request = ImageGenerationRequest(prompt="a lighthouse at dusk", size="128x96", num_inference_steps=4, seed=7, **overrides)
    return json.dumps(request.wire()).encode()


def video_multipart(prompt: str = "waves rolling onto a beach") -> tuple[bytes, str]:
    form = VideoSyncForm(prompt=prompt, width=96, height=64, num_frames=5, fps=8, num_inference_steps=4, seed=3)
    return urllib3.encode_multipart_formdata(form.form_fields())


def wait_for_object(s3: Any, uri: str, *, timeout_s: float = 30.0) -> bytes:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while time.monotonic() < deadline:
        try:
            return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    raise AssertionError(f"{uri} did not appear within {timeout_s:.0f} s")


def object_exists(s3: Any, uri: str) -> bool:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError:
        return False


def decoded_frames(mp4: bytes) -> tuple[int, int, int]:
    with av.open(io.BytesIO(mp4)) as container:
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
        return len(frames), frames[0].width, frames[0].height


@pytest.fixture
def video_endpoint(emulator: EmulatorHandle, bucket: str) -> str:
    deploy_endpoint(
        emulator, "video-async", async_output=f"s3://{bucket}/outputs", async_failure=f"s3://{bucket}/failures",
        environment={"SM_VLLM_MODEL": "Wan-AI/Wan2.1-VACE-1.3B-diffusers", "SM_VLLM_VAE_USE_TILING": "true"},
    )
    return "video-async"


def test_routes_come_from_custom_attributes() -> None:
    assert route_from_attributes(IMAGE_ROUTE) == "/v1/images/generations"
    assert route_from_attributes("trace=abc, route=/v1/videos/sync") == "/v1/videos/sync"
    assert route_from_attributes(None) == route_from_attributes("trace=abc") == "/invocations"


def test_invoke_endpoint_returns_the_engines_png(emulator: EmulatorHandle) -> None:
    deploy_endpoint(emulator, "image-rt")
    rt = emulator.client("sagemaker-runtime")
    response = rt.invoke_endpoint(
        EndpointName="image-rt", Body=image_body(), ContentType="application/json", Accept="application/json",
        CustomAttributes=IMAGE_ROUTE,
    )
    assert response["InvokedProductionVariant"] == "AllTraffic"
    assert response["ContentType"].startswith("application/json")
    payload = json.loads(response["Body"].read())
    png = base64.b64decode(payload["data"][0]["b64_json"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (128, 96)


def test_model_errors_carry_the_original_status_and_message(emulator: EmulatorHandle) -> None:
    deploy_endpoint(emulator, "image-err")
    bad = b'{"size": "64x64"}'  # no prompt
    direct = httpx.post(f"{emulator.engine_url}/v1/images/generations", content=bad,
                        headers={"Content-Type": "application/json"}, trust_env=False, timeout=30)
    assert 400 <= direct.status_code < 500  # what the container itself answers
    rt = emulator.client("sagemaker-runtime")
    with pytest.raises(ClientError) as info:
        rt.invoke_endpoint(EndpointName="image-err", Body=bad, ContentType="application/json", CustomAttributes=IMAGE_ROUTE)
    code, message = error_of(info)
    assert code == "ModelError" and info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert info.value.response["OriginalStatusCode"] == direct.status_code
    assert info.value.response["OriginalMessage"] == direct.text and "prompt" in direct.text
    assert message.startswith(f"Received client error ({direct.status_code}) from primary with message")


def test_unknown_and_not_in_service_endpoints_are_refused(emulator: EmulatorHandle) -> None:
    rt = emulator.client("sagemaker-runtime")
    with pytest.raises(ClientError) as missing:
        rt.invoke_endpoint(EndpointName="ghost", Body=image_body(), ContentType="application/json", CustomAttributes=IMAGE_ROUTE)
    assert error_of(missing) == ("ValidationError", f"Endpoint ghost of account {emulator.account_id} not found.")
    emulator.configure(delays={"create_s": 3600})  # held in Creating for the whole test
    deploy_endpoint(emulator, "still-creating", wait=False)
    with pytest.raises(ClientError) as creating:
        rt.invoke_endpoint(EndpointName="still-creating", Body=image_body(), ContentType="application/json", CustomAttributes=IMAGE_ROUTE)
    code, message = error_of(creating)
    assert code == "ValidationError" and "Creating, not InService" in message


def test_async_video_from_s3_input_lands_as_mp4_at_the_output_location(emulator: EmulatorHandle, bucket: str, video_endpoint: str) -> None:
    s3, rt = emulator.client("s3"), emulator.client("sagemaker-runtime")
    body, content_type = video_multipart()
    s3.put_object(Bucket=bucket, Key="requests/job-1.multipart", Body=body)
    response = rt.invoke_endpoint_async(
        EndpointName=video_endpoint, InputLocation=f"s3://{bucket}/requests/job-1.multipart",
        ContentType=content_type, Accept="video/mp4", CustomAttributes=VIDEO_ROUTE, InferenceId="job-1",
    )
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 202
    assert response["InferenceId"] == "job-1"
    assert response["OutputLocation"] == f"s3://{bucket}/outputs/job-1.out"
    assert response["FailureLocation"] == f"s3://{bucket}/failures/job-1-error.out"
    mp4 = wait_for_object(s3, response["OutputLocation"])
    frames, width, height = decoded_frames(mp4)
    assert (frames, width, height) == (5, 96, 64)
    head = s3.head_object(Bucket=bucket, Key="outputs/job-1.out")
    assert head["ContentType"] == "video/mp4"
    assert not object_exists(s3, response["FailureLocation"])


def test_async_inline_body_and_failure_object(emulator: EmulatorHandle, bucket: str, video_endpoint: str) -> None:
    s3, rt = emulator.client("s3"), emulator.client("sagemaker-runtime")
    body, content_type = video_multipart("a paper boat")
    assert len(body) <= 128_000
    ok = rt.invoke_endpoint_async(EndpointName=video_endpoint, Body=body, ContentType=content_type, Accept="video/mp4", CustomAttributes=VIDEO_ROUTE)
    assert ok["OutputLocation"] == f"s3://{bucket}/outputs/{ok['InferenceId']}.out"
    # JSON is refused by /v1/videos/sync: the error text goes to the failure location
    bad = rt.invoke_endpoint_async(EndpointName=video_endpoint, Body=b'{"prompt": "x"}', ContentType="application/json", CustomAttributes=VIDEO_ROUTE)
    failure = wait_for_object(s3, bad["FailureLocation"]).decode()
    direct = httpx.post(f"{emulator.engine_url}/v1/videos/sync", content=b'{"prompt": "x"}',
                        headers={"Content-Type": "application/json"}, trust_env=False, timeout=30)
    assert f"Received client error ({direct.status_code}) from primary" in failure and direct.text in failure
    assert "multipart" in direct.text
    assert decoded_frames(wait_for_object(s3, ok["OutputLocation"]))[0] == 5
    assert not object_exists(s3, bad["OutputLocation"])


def test_async_request_limits(emulator: EmulatorHandle, bucket: str, video_endpoint: str) -> None:
    rt = emulator.client("sagemaker-runtime")
    body, content_type = video_multipart()
    emulator.client("s3").put_object(Bucket=bucket, Key="requests/big.multipart", Body=body)
    cases = [
        ({"Body": b"x" * 128_001}, "less than or equal to 128000"),
        ({"Body": body, "InputLocation": f"s3://{bucket}/requests/big.multipart"}, "mutually exclusive"),
        ({"InputLocation": f"s3://{bucket}/requests/missing.multipart"}, "Could not read InputLocation"),
    ]
    for kwargs, text in cases:
        with pytest.raises(ClientError) as info:
            rt.invoke_endpoint_async(EndpointName=video_endpoint, ContentType=content_type, CustomAttributes=VIDEO_ROUTE, **kwargs)
        code, message = error_of(info)
        assert code == "ValidationError" and text in message


def test_realtime_and_async_endpoints_only_take_their_own_call(emulator: EmulatorHandle, video_endpoint: str) -> None:
    deploy_endpoint(emulator, "image-only")
    rt = emulator.client("sagemaker-runtime")
    with pytest.raises(ClientError) as sync_on_async:
        rt.invoke_endpoint(EndpointName=video_endpoint, Body=b"{}", ContentType="application/json")
    assert "call InvokeEndpointAsync instead" in error_of(sync_on_async)[1]
    with pytest.raises(ClientError) as async_on_sync:
        rt.invoke_endpoint_async(EndpointName="image-only", Body=image_body(), ContentType="application/json", CustomAttributes=IMAGE_ROUTE)
    assert "not an asynchronous endpoint" in error_of(async_on_sync)[1]
