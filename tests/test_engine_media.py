"""The offline engine's image and video routes, driven over real HTTP with real bytes checked."""

from __future__ import annotations

import base64
import io
import json

import av
import httpx
import numpy as np
import pytest
from PIL import Image
from urllib3 import encode_multipart_formdata


def generate(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/images/generations", json=body, timeout=60)


def decode(resp: httpx.Response, i: int = 0) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(resp.json()["data"][i]["b64_json"])))


def post_video(url: str, fields: dict, files: dict | None = None) -> httpx.Response:
    parts: dict = {k: str(v) for k, v in fields.items()}
    parts.update(files or {})
    body, ctype = encode_multipart_formdata(parts)
    return httpx.post(f"{url}/v1/videos/sync", content=body, headers={"Content-Type": ctype}, timeout=60)


def frames_of(mp4: bytes) -> tuple[str, list[np.ndarray]]:
    with av.open(io.BytesIO(mp4)) as c:
        name = c.streams.video[0].codec_context.name
        return name, [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def png_data_url(img: Image.Image, fmt: str = "JPEG") -> str:
    buf = io.BytesIO()
    img.save(buf, fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buf.getvalue()).decode()


def test_image_response_shape_and_size(engine_url):
    resp = generate(engine_url, prompt="a lighthouse at dusk", size="512x384", seed=7, num_inference_steps=4)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["output_format"] == "png" and body["size"] == "512x384" and body["preview"] is True
    assert body["data"][0]["url"] is None and body["seed"] == 7
    img = decode(resp)
    assert img.format == "PNG" and img.size == (512, 384)


def test_image_is_deterministic_and_prompt_dependent(engine_url):
    a = generate(engine_url, prompt="a lighthouse at dusk", size="256x256", seed=1).json()["data"][0]["b64_json"]
    b = generate(engine_url, prompt="a lighthouse at dusk", size="256x256", seed=1).json()["data"][0]["b64_json"]
    c = generate(engine_url, prompt="a bowl of ramen", size="256x256", seed=1).json()["data"][0]["b64_json"]
    assert a == b
    pa = np.asarray(Image.open(io.BytesIO(base64.b64decode(a))).convert("RGB"), dtype=float)
    pc = np.asarray(Image.open(io.BytesIO(base64.b64decode(c))).convert("RGB"), dtype=float)
    assert np.abs(pa - pc).mean() > 20  # visibly different, not a pixel or two


@pytest.mark.parametrize("fmt,pil", [("jpeg", "JPEG"), ("webp", "WEBP")])
def test_image_output_formats(engine_url, fmt, pil):
    resp = generate(engine_url, prompt="x", size="128x96", output_format=fmt, seed=3)
    assert resp.status_code == 200 and resp.json()["output_format"] == fmt
    assert decode(resp).format == pil


def test_image_n_gives_distinct_images(engine_url):
    resp = generate(engine_url, prompt="three cats", size="128x128", n=3, seed=5)
    data = resp.json()["data"]
    assert len(data) == 3 and len({d["b64_json"] for d in data}) == 3


@pytest.mark.parametrize("size", ["abc", "10x10", "4096x512", "512"])
def test_image_bad_size_is_400_naming_the_size(engine_url, size):
    resp = generate(engine_url, prompt="x", size=size)
    assert resp.status_code == 400
    assert "size" in resp.json()["error"]["message"].lower()


def test_image_validation_errors(engine_url):
    assert generate(engine_url, prompt="").status_code == 422
    assert generate(engine_url, prompt="x", n=11).status_code == 422
    assert generate(engine_url, prompt="x", num_inference_steps=0).status_code == 422
    resp = httpx.post(f"{engine_url}/v1/images/generations", content=b"not json", timeout=10)
    assert resp.status_code == 400 and "JSON" in resp.json()["error"]["message"]


def test_video_rounds_frames_and_size_and_is_h264(engine_url):
    resp = post_video(engine_url, {"prompt": "waves", "width": 250, "height": 170, "num_frames": 10, "fps": 8, "seed": 2})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == "video/mp4"
    assert resp.headers["X-Request-Id"] and float(resp.headers["X-Inference-Time-S"]) > 0
    assert json.loads(resp.headers["X-Stage-Durations"])
    codec, frames = frames_of(resp.content)
    assert codec == "h264"
    assert len(frames) == 9  # 10 → 4k+1
    assert frames[0].shape == (160, 240, 3)  # multiples of 16


def test_video_defaults(engine_url):
    codec, frames = frames_of(post_video(engine_url, {"prompt": "a quiet street"}).content)
    assert len(frames) == 17 and frames[0].shape == (320, 480, 3)


def test_video_animates_the_reference_image(engine_url):
    ref = Image.new("RGB", (480, 320), (200, 30, 30))
    resp = post_video(
        engine_url,
        {"prompt": "zoom", "num_frames": 5, "image_reference": json.dumps({"image_url": png_data_url(ref)})},
    )
    assert resp.status_code == 200, resp.text
    _, frames = frames_of(resp.content)
    mean = frames[0].reshape(-1, 3).mean(axis=0)
    assert mean[0] > 150 and mean[1] < 90 and mean[2] < 90  # the reference's red, not the prompt preview


def test_video_input_reference_file(engine_url):
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (20, 20, 220)).save(buf, "PNG")
    resp = post_video(engine_url, {"prompt": "p", "num_frames": 5}, {"input_reference": ("ref.png", buf.getvalue(), "image/png")})
    assert resp.status_code == 200, resp.text
    _, frames = frames_of(resp.content)
    assert frames[0].reshape(-1, 3).mean(axis=0)[2] > 150


def test_video_rejects_json_body(engine_url):
    resp = httpx.post(f"{engine_url}/v1/videos/sync", json={"prompt": "x"}, timeout=10)
    assert resp.status_code == 400 and "multipart" in resp.json()["error"]["message"]


@pytest.mark.parametrize(
    "value,needle",
    [
        ("not json", "JSON object"),
        (json.dumps({"image_url": "http://example.invalid/a.png"}), "data URL"),
        (json.dumps({"image_url": "data:image/png;base64,!!!"}), "base64"),
        (json.dumps({"image_url": "data:image/png;base64," + base64.b64encode(b"hello").decode()}), "not a readable image"),
    ],
)
def test_video_bad_reference_is_400(engine_url, value, needle):
    resp = post_video(engine_url, {"prompt": "x", "image_reference": value})
    assert resp.status_code == 400
    assert needle in resp.json()["error"]["message"]


def test_video_decompression_bomb_is_refused(engine_url):
    buf = io.BytesIO()
    Image.new("1", (10000, 10000)).save(buf, "PNG")  # tiny file, 100 M pixels
    resp = post_video(engine_url, {"prompt": "x"}, {"input_reference": ("bomb.png", buf.getvalue(), "image/png")})
    assert resp.status_code == 400 and "pixels" in resp.json()["error"]["message"]


def test_video_missing_prompt_is_422(engine_url):
    assert post_video(engine_url, {"num_frames": 5}).status_code == 422
