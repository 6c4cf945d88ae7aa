"""ImageClient: request checks, response checks, errors, the history record — and the real offline engine.

Unit tests use MockImageTransport (the client logic) and httpx.MockTransport under OmniImageTransport
(the server's error bodies as vLLM-Omni/FastAPI shape them); everything else talks to the real engine
(`engine_url`) and checks real PNG bytes with Pillow.
"""

from __future__ import annotations

import base64
import io
import json
import time

import httpx
import pytest
from PIL import Image

from protocol.errors import BackendUnreachable, InvalidInput, ServerError
from protocol.images import ImageData, ImageGenerationRequest, ImageGenerationResponse
from services.history import History
from services.images import (
    ImageClient,
    ImageRequest,
    MockImageTransport,
    OmniImageTransport,
    record_image,
)
from services.settings import Settings
from tests.conftest import free_port


def _png(w: int, h: int, color=(10, 120, 200), fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (w, h), color).save(out, fmt)
    return out.getvalue()


def _answer(req: ImageGenerationRequest, fmt: str = "png") -> ImageGenerationResponse:
    w, h = (int(v) for v in req.size.split("x"))
    data = [ImageData(b64_json=base64.b64encode(_png(w, h, fmt={"png": "PNG", "jpeg": "JPEG", "webp": "WEBP"}[fmt])).decode())
            for _ in range(req.n)]
    return ImageGenerationResponse(created=int(time.time()), data=data, output_format=fmt, size=req.size)


# ---------------------------------------------------------------------------------------------------------
# request checks: each names what to fix, before anything is sent
@pytest.mark.parametrize("change, words", [
    ({"prompt": "   "}, "prompt is empty"),
    ({"size": "large"}, "WIDTHxHEIGHT"),
    ({"size": "1024*1024"}, "WIDTHxHEIGHT"),
    ({"size": "32x32"}, "between 64 and 2048"),
    ({"size": "4096x1024"}, "between 64 and 2048"),
    ({"steps": 0}, "steps must be a whole number from 1 to 200"),
    ({"steps": 500}, "about 4"),
    ({"n": 11}, "n (images per request)"),
    ({"guidance": 25.0}, "guidance must be a number from 0 to 20"),
    ({"seed": -1}, "seed"),
    ({"output_format": "gif"}, "output format"),
])
def test_bad_requests_are_refused_before_sending(change: dict, words: str) -> None:
    transport = MockImageTransport(_answer)
    with pytest.raises(InvalidInput, match=None) as err:
        ImageClient(transport).generate(ImageRequest(**{"prompt": "a cat", **change}))
    assert words in str(err.value)
    assert transport.requests == []


def test_steps_and_seed_are_always_sent_and_the_result_records_them() -> None:
    transport = MockImageTransport(_answer, model_s=0.5)
    result = ImageClient(transport).generate(ImageRequest("  a lighthouse at dawn ", size="640x384"))
    sent = transport.requests[0]
    assert sent.num_inference_steps == 4  # FLUX.2-klein: ~4, never the server's default of 50
    assert sent.seed is not None and result.seed == sent.seed
    assert sent.prompt == "a lighthouse at dawn" and sent.size == "640x384" and sent.response_format == "b64_json"
    assert result.request.params()["seed"] == sent.seed
    assert (result.width, result.height, result.format) == (640, 384, "png")
    assert Image.open(io.BytesIO(result.image)).size == (640, 384)
    assert result.model_s == 0.5 and result.total_s >= result.request_s > 0
    again = ImageClient(transport).generate(ImageRequest("x", seed=7, steps=8, guidance=3.5, negative_prompt=" "))
    assert transport.requests[1].seed == 7 and again.seed == 7
    assert transport.requests[1].num_inference_steps == 8 and transport.requests[1].guidance_scale == 3.5
    assert transport.requests[1].negative_prompt is None  # blank means none


@pytest.mark.parametrize("bad, words", [
    (lambda r: ImageGenerationResponse(created=1, data=[], output_format="png"), "returned 0 images for n=1"),
    (lambda r: ImageGenerationResponse(created=1, data=[ImageData(b64_json="%%%notbase64")]), "invalid base64"),
    (lambda r: ImageGenerationResponse(created=1, data=[ImageData(b64_json=base64.b64encode(b"not an image").decode())]),
     "not a readable image"),
    (lambda r: ImageGenerationResponse(created=1, data=[ImageData(b64_json=base64.b64encode(_png(64, 64)).decode())]),
     "of 64x64, not the requested 256x256"),
    (lambda r: ImageGenerationResponse(created=1, data=[ImageData(url="http://x/y.png")]), "without b64_json"),
    (lambda r: ImageGenerationResponse(created=1, data=[ImageData(b64_json=base64.b64encode(_png(256, 256, fmt="JPEG")).decode())]),
     "as JPEG, but said png"),
])
def test_what_the_server_returns_is_checked(bad, words: str) -> None:
    with pytest.raises(ServerError) as err:
        ImageClient(MockImageTransport(bad)).generate(ImageRequest("a cat", size="256x256"))
    assert words in str(err.value)


def _http(status: int, body) -> OmniImageTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        return httpx.Response(status, json=body)

    return OmniImageTransport("http://images.test", http_transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("status, body, words", [
    (400, {"error": {"message": "Invalid size format: 'x'", "type": "BadRequestError", "code": 400}}, "Invalid size format"),
    (422, {"detail": [{"loc": ["body", "n"], "msg": "Input should be less than or equal to 10"}]}, "n: Input should be"),
    (500, {"detail": "CUDA out of memory"}, "CUDA out of memory"),
    (503, "<html>upstream busy: internal host 10.0.0.5</html>", "Service Unavailable"),  # not JSON: the status only
])
def test_server_errors_carry_the_servers_message_and_status(status: int, body, words: str) -> None:
    with pytest.raises(ServerError) as err:
        ImageClient(_http(status, body)).generate(ImageRequest("a cat", size="256x256"))
    assert words in str(err.value) and f"HTTP {status}" in str(err.value)
    assert err.value.status == status
    assert "upstream busy" not in str(err.value) and "10.0.0.5" not in str(err.value)  # never the raw body


def test_an_unreachable_server_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = ImageClient(OmniImageTransport(url, connect_timeout=2))
    with pytest.raises(BackendUnreachable) as err:
        client.generate(ImageRequest("a cat", size="256x256"))
    assert url in str(err.value) and "is it running" in str(err.value)


def test_record_image_keeps_failures_with_their_settings(tmp_path) -> None:
    history = History(tmp_path)
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BackendUnreachable):
        record_image(ImageClient(OmniImageTransport(url, connect_timeout=2)), history, ImageRequest("a cat", seed=3))
    with pytest.raises(InvalidInput):  # bad input is refused, not recorded
        record_image(ImageClient(MockImageTransport(_answer)), history, ImageRequest(""))
    ok = record_image(ImageClient(MockImageTransport(_answer)), history, ImageRequest("a dog", size="128x128"))
    jobs = History(tmp_path).jobs.list("image")
    assert [j.status for j in jobs] == ["succeeded", "failed"]
    failed = jobs[1]
    assert failed.params["seed"] == 3 and failed.prompt == "a cat" and url in failed.error
    assert jobs[0].id == ok.id and ok.output_files()[0][1][:8] == b"\x89PNG\r\n\x1a\n"
    assert ok.meta["seed"] == ok.params["seed"] and set(ok.timings) >= {"request_s", "total_s"}


# ---------------------------------------------------------------------------------------------------------
# against the real offline engine
@pytest.fixture(scope="module")
def client(engine_url: str) -> ImageClient:
    from services.images import omni_client

    return omni_client(engine_url, Settings())


def test_real_engine_1024_png_is_a_labelled_deterministic_preview(client: ImageClient) -> None:
    a = client.generate(ImageRequest("a red fox in the snow", size="1024x1024", steps=4, seed=42))
    image = Image.open(io.BytesIO(a.image))
    image.load()
    assert image.format == "PNG" and image.size == (1024, 1024)
    assert a.preview  # the offline engine says its images are previews
    assert a.request.steps == 4 and a.seed == 42
    assert a.model_s is not None and 0 < a.model_s <= a.request_s <= a.total_s
    b = client.generate(ImageRequest("a red fox in the snow", size="1024x1024", steps=4, seed=42))
    assert a.image == b.image  # same prompt, seed and size: same bytes
    c = client.generate(ImageRequest("a blue whale in the deep sea", size="1024x1024", steps=4, seed=42))
    assert c.image != a.image
    diff = sum(abs(p - q) for p, q in zip(Image.open(io.BytesIO(c.image)).convert("L").resize((32, 32)).getdata(),
                                          image.convert("L").resize((32, 32)).getdata()))
    assert diff > 32 * 32 * 5  # visibly different, not a changed pixel


def test_real_engine_sizes_formats_and_n(client: ImageClient) -> None:
    r = client.generate(ImageRequest("tall", size="320x640", output_format="jpeg", n=2, seed=1))
    assert len(r.images) == 2 and r.format == "jpeg"
    for data in r.images:
        im = Image.open(io.BytesIO(data))
        assert im.format == "JPEG" and im.size == (320, 640)


def test_real_engine_rejection_comes_back_as_its_message(client: ImageClient) -> None:
    with pytest.raises(ServerError) as err:  # bypass the client's own checks to see the server's
        client.transport.generate(ImageGenerationRequest(prompt="x", size="10x10"))
    assert err.value.status in (400, 422)
    assert "10x10" in str(err.value) or "size" in str(err.value).lower()


def test_real_engine_result_is_recorded_and_survives_a_new_history(client: ImageClient, tmp_path) -> None:
    job = record_image(client, History(tmp_path), ImageRequest("kept forever", size="256x256", seed=5))
    again = History(tmp_path).jobs.get(job.id)
    assert again.status == "succeeded" and again.meta["preview"] is True
    png = again.output_files()[0][1]
    assert Image.open(io.BytesIO(png)).size == (256, 256)
    assert json.loads(json.dumps(again.params))["size"] == "256x256"
