"""The emulator's runtime routes through boto3 `sagemaker-runtime`, forwarding to the real offline engine.

Realtime images (`CustomAttributes="route=/v1/images/generations"` -> a real PNG), asynchronous video
through moto S3 (a multipart body from urllib3's encoder -> an MP4 PyAV decodes), inline async bodies,
and SageMaker's error shapes (unknown endpoint, not InService, ModelError 424, size limits, exclusivity).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import time
import uuid
from collections.abc import Iterator
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


# ---------------------------------------------------------------------------------------------------------
# Multipart uploads on any route: /v1/audio/voices (a voice sample) and /v1/images/edits (reference images)
VOICES_ROUTE = "route=/v1/audio/voices"
EDITS_ROUTE = "route=/v1/images/edits"


def voiced_wav(seconds: float = 4.0, rate: int = 24_000) -> bytes:
    """A voiced, speech-like mono 16-bit WAV (a gliding pitch with harmonics, four syllables a second)."""
    import wave

    import numpy as np

    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(130 + 20 * np.sin(2 * np.pi * 0.4 * t)) / rate
    signal = sum(np.sin(k * phase) / k for k in range(1, 12)) * np.clip(np.sin(2 * np.pi * 2 * t), 0, None)
    signal = 0.5 * signal / np.max(np.abs(signal))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((signal * 32767).astype("<i2").tobytes())
    return buf.getvalue()


def png(width: int, height: int, color: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, format="PNG")
    return buf.getvalue()


def voice_upload(name: str) -> tuple[bytes, str]:
    from protocol.voices import VoiceUploadForm

    form = VoiceUploadForm(name=name, consent=f"consent-{name}", ref_text="Hello, this is my voice.")
    return urllib3.encode_multipart_formdata({**form.form_fields(), "audio_sample": ("sample.wav", voiced_wav(), "audio/wav")})


def image_edit(prompt: str = "make it a watercolour") -> tuple[bytes, str]:
    fields: list[tuple[str, Any]] = [("prompt", prompt), ("size", "128x96"), ("num_inference_steps", "4"), ("seed", "7"),
                                     ("image", ("red.png", png(64, 48, "red"), "image/png")),
                                     ("image", ("blue.png", png(64, 48, "blue"), "image/png"))]
    return urllib3.encode_multipart_formdata(fields)


def padded_multipart(total: int) -> tuple[bytes, str]:
    """A multipart body of exactly `total` bytes (one file part padded with binary filler)."""
    boundary = "omni-studio-boundary"

    def build(n: int) -> bytes:
        return urllib3.encode_multipart_formdata(
            [("prompt", "p"), ("image", ("big.png", bytes(range(256)) * (n // 256) + b"\x00" * (n % 256), "image/png"))],
            boundary=boundary)[0]

    overhead = len(build(0))
    body = build(total - overhead)
    assert len(body) == total
    return body, f"multipart/form-data; boundary={boundary}"


def through_sagemaker(rt: Any, endpoint: str, attributes: str, body: bytes, content_type: str) -> tuple[int, str]:
    """(status, text) of an InvokeEndpoint: 200 and the body, or the container's status and message out of the
    ModelError SageMaker wraps them in."""
    try:
        response = rt.invoke_endpoint(EndpointName=endpoint, Body=body, ContentType=content_type,
                                      Accept="application/json", CustomAttributes=attributes)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "ModelError", exc.response
        assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 424
        return exc.response["OriginalStatusCode"], exc.response["OriginalMessage"]
    return 200, response["Body"].read().decode()


def direct(emulator: EmulatorHandle, attributes: str, body: bytes, content_type: str) -> httpx.Response:
    """The same request straight to the container (the offline engine)."""
    return httpx.post(f"{emulator.engine_url}{route_from_attributes(attributes)}", content=body,
                      headers={"Content-Type": content_type}, trust_env=False, timeout=120)


@contextlib.contextmanager
def echo_container() -> Iterator[str]:
    """A container that answers every POST with what it received (path, content type, length, SHA-256,
    custom attributes) and counts the requests; GET /health for the endpoint's health check."""
    import hashlib
    import threading

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    from offline.launch import free_port, wait_http_ok

    seen: list[str] = []

    async def health(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def echo(request: Request) -> JSONResponse:
        body = await request.body()
        seen.append(request.url.path)
        return JSONResponse({
            "path": request.url.path, "content_type": request.headers.get("content-type"), "bytes": len(body),
            "sha256": hashlib.sha256(body).hexdigest(), "accept": request.headers.get("accept"),
            "custom_attributes": request.headers.get("x-amzn-sagemaker-custom-attributes"), "requests": len(seen),
        }, headers={"X-Amzn-SageMaker-Custom-Attributes": f"echoed={len(seen)}"})

    app = Starlette(routes=[Route("/health", health), Route("/{path:path}", echo, methods=["POST"])])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/health", what="the echo container")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def echo_emulator(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorHandle]:
    """A second emulator whose endpoints forward to the echo container instead of the offline engine."""
    from emulator.handle import running_emulator

    with echo_container() as url, running_emulator(url, moto_server, tmp_path_factory.mktemp("echo-emulator")) as handle:
        yield handle


def test_any_route_gets_the_body_and_its_content_type_byte_for_byte(echo_emulator: EmulatorHandle) -> None:
    import hashlib

    from protocol.limits import REALTIME_PAYLOAD_MAX_BYTES

    deploy_endpoint(echo_emulator, "echo")
    rt = echo_emulator.client("sagemaker-runtime")
    cases = [(VOICES_ROUTE, *voice_upload("anna")), (EDITS_ROUTE, *image_edit()),
             ("trace=1,route=/v1/a/route/nobody/has/yet", bytes(range(256)) * 4, "application/octet-stream"),
             (EDITS_ROUTE, *padded_multipart(REALTIME_PAYLOAD_MAX_BYTES))]  # the largest body SageMaker takes
    for attributes, body, content_type in cases:
        assert content_type.startswith("multipart/form-data; boundary=") or "a/route" in attributes
        response = rt.invoke_endpoint(EndpointName="echo", Body=body, ContentType=content_type, Accept="application/json",
                                      CustomAttributes=attributes)
        seen = json.loads(response["Body"].read())
        assert seen == {"path": route_from_attributes(attributes), "content_type": content_type, "bytes": len(body),
                        "sha256": hashlib.sha256(body).hexdigest(), "accept": "application/json",
                        "custom_attributes": attributes, "requests": seen["requests"]}
        assert response["ContentType"] == "application/json"  # the container's answer, as it answered
        assert response["CustomAttributes"] == f"echoed={seen['requests']}"
    count = seen["requests"]

    # One byte more and SageMaker refuses it before the container sees it: a bare 413 (boto3's code "413")
    body, content_type = padded_multipart(REALTIME_PAYLOAD_MAX_BYTES + 1)
    with pytest.raises(ClientError) as info:
        rt.invoke_endpoint(EndpointName="echo", Body=body, ContentType=content_type, CustomAttributes=EDITS_ROUTE)
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413
    assert error_of(info) == ("413", f"HTTP content length exceeded {REALTIME_PAYLOAD_MAX_BYTES} bytes.")
    after = rt.invoke_endpoint(EndpointName="echo", Body=b"{}", ContentType="application/json")
    assert json.loads(after["Body"].read())["requests"] == count + 1  # the refused one never arrived


def test_a_route_the_container_lacks_is_its_own_404_as_a_model_error(emulator: EmulatorHandle) -> None:
    deploy_endpoint(emulator, "voice-rt")
    rt = emulator.client("sagemaker-runtime")
    body, content_type = voice_upload("nobody")
    attributes = "route=/v1/audio/no-such-route"
    container = direct(emulator, attributes, body, content_type)
    assert container.status_code == 404
    with pytest.raises(ClientError) as info:
        rt.invoke_endpoint(EndpointName="voice-rt", Body=body, ContentType=content_type, CustomAttributes=attributes)
    code, message = error_of(info)
    assert code == "ModelError" and info.value.response["OriginalStatusCode"] == 404
    assert info.value.response["OriginalMessage"] == container.text
    assert message.startswith(f'Received client error (404) from primary with message "{container.text}"')


def test_a_voice_sample_uploaded_through_invoke_endpoint_lands_in_the_container(emulator: EmulatorHandle) -> None:
    """SageMaker forwards only POSTs: the upload goes through InvokeEndpoint with route=/v1/audio/voices. Whatever
    the container answers comes back as it would straight; once the engine stores voices, the voice is there."""
    from protocol.voices import VoiceUploadResponse, voice_path

    deploy_endpoint(emulator, "voice-clone", environment={"SM_VLLM_MODEL": "Qwen/Qwen3-TTS-12Hz-0.6B-Base"})
    rt = emulator.client("sagemaker-runtime")
    tag = uuid.uuid4().hex[:8]
    straight = direct(emulator, VOICES_ROUTE, *voice_upload(f"direct-{tag}"))
    status, text = through_sagemaker(rt, "voice-clone", VOICES_ROUTE, *voice_upload(f"sm-{tag}"))
    assert status == straight.status_code, text
    if straight.status_code == 404:  # an engine without voice uploads: SageMaker carries its own answer
        assert text == straight.text
        return
    try:
        answer = VoiceUploadResponse.model_validate_json(text)
        assert answer.success and answer.voice is not None and answer.voice.name == f"sm-{tag}", text
        assert answer.voice.consent == f"consent-sm-{tag}"
        listed = httpx.get(f"{emulator.engine_url}/v1/audio/voices", trust_env=False, timeout=30).json()
        stored = next(v for v in listed["uploaded_voices"] if v["name"] == f"sm-{tag}")
        assert stored["consent"] == f"consent-sm-{tag}" and stored["file_size"] == len(voiced_wav())  # the whole sample
    finally:
        for name in (f"direct-{tag}", f"sm-{tag}"):
            httpx.delete(f"{emulator.engine_url}{voice_path(name)}", trust_env=False, timeout=30)


def test_an_image_edit_through_invoke_endpoint_answers_like_the_container(emulator: EmulatorHandle) -> None:
    deploy_endpoint(emulator, "image-edit")
    rt = emulator.client("sagemaker-runtime")
    body, content_type = image_edit()
    straight = direct(emulator, EDITS_ROUTE, body, content_type)
    status, text = through_sagemaker(rt, "image-edit", EDITS_ROUTE, body, content_type)
    assert status == straight.status_code, text
    if status != 200:  # an engine without edits (404), or one refusing the request: its own words come back
        assert text == straight.text
        return
    payload = json.loads(text)
    edited = base64.b64decode(payload["data"][0]["b64_json"])
    with Image.open(io.BytesIO(edited)) as image:
        assert image.size == (128, 96)
    assert payload["data"][0]["b64_json"] == straight.json()["data"][0]["b64_json"]  # same seed, same image
