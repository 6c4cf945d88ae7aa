"""The offline engine's image and video routes, driven over real HTTP (`python -m offline`) with real bytes checked.

Images are decoded with Pillow, videos with PyAV; error bodies are checked against vLLM-Omni's shapes and texts.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import socket
import time
from http import HTTPStatus
from pathlib import Path

import av
import httpx
import numpy as np
import pytest
from PIL import Image
from urllib3 import encode_multipart_formdata

from protocol.limits import ENGINE_JSON_BODY_BYTES, PROMPT_MAX_CHARS

IMAGES = "/v1/images/generations"
EDITS = "/v1/images/edits"
VIDEOS = "/v1/videos/sync"


# ---------------------------------------------------------------------------------------------------------
def generate(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}{IMAGES}", json=body, timeout=60)


def decode(resp: httpx.Response, i: int = 0) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(resp.json()["data"][i]["b64_json"])))


def pixels(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("RGB"), dtype=float)


def post_video(url: str, fields: dict, files: dict | None = None) -> httpx.Response:
    parts: dict = {k: str(v) for k, v in fields.items()}
    parts.update(files or {})
    body, ctype = encode_multipart_formdata(parts)
    return httpx.post(f"{url}{VIDEOS}", content=body, headers={"Content-Type": ctype}, timeout=60)


def decode_mp4(mp4: bytes) -> tuple[str, float, list[np.ndarray]]:
    """(codec name, frame rate, RGB frames) of an MP4, decoded with PyAV."""
    with av.open(io.BytesIO(mp4)) as c:
        stream = c.streams.video[0]
        name, rate = stream.codec_context.name, float(stream.average_rate)
        assert stream.codec_context.pix_fmt == "yuv420p"
        return name, rate, [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def data_url(img: Image.Image, fmt: str = "JPEG") -> str:
    buf = io.BytesIO()
    img.save(buf, fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buf.getvalue()).decode()


def error_of(resp: httpx.Response, status: int = 400) -> dict:
    """The vLLM error object of a refused request (status, type phrase and code checked)."""
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert err["code"] == status and err["type"] == HTTPStatus(status).phrase  # "Bad Request", …
    return err


def two_tone(size: tuple[int, int] = (480, 320)) -> Image.Image:
    """Left half red, right half blue: a reference whose layout a first frame must keep."""
    img = Image.new("RGB", size, (210, 30, 30))
    img.paste((30, 40, 210), (size[0] // 2, 0, size[0], size[1]))
    return img


# ---------------------------------------------------------------------------------------------------------
# Images
def test_image_response_shape_and_size(engine_url):
    resp = generate(engine_url, prompt="a lighthouse at dusk", size="512x384", seed=7, num_inference_steps=4,
                    guidance_scale=3.5, negative_prompt="blurry")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["output_format"] == "png" and body["size"] == "512x384"
    assert body["preview"] is True and body["seed"] == 7 and body["inference_time_s"] > 0
    assert isinstance(body["created"], int) and len(body["data"]) == 1
    assert body["data"][0]["url"] is None and body["data"][0]["revised_prompt"] is None
    img = decode(resp)
    assert img.format == "PNG" and img.size == (512, 384)


def test_image_is_labelled_as_a_preview_in_its_corner(engine_url):
    img = pixels(decode(generate(engine_url, prompt="a quiet meadow", size="512x512", seed=2)))
    corner = img[-40:, -300:]  # bottom right: the black "OFFLINE PREVIEW · seed" box with white text
    black = (corner.max(axis=2) < 10).mean()
    white = (corner.min(axis=2) > 245).mean()
    assert black > 0.3 and white > 0.03, (black, white)


def test_image_is_deterministic_and_prompt_dependent(engine_url):
    def b64(prompt: str, seed: int) -> str:
        return generate(engine_url, prompt=prompt, size="256x256", seed=seed).json()["data"][0]["b64_json"]

    a, again = b64("a lighthouse at dusk", 1), b64("a lighthouse at dusk", 1)
    other_prompt, other_seed = b64("a bowl of ramen", 1), b64("a lighthouse at dusk", 2)
    assert a == again  # same prompt, seed and size: the same bytes
    assert other_seed != a
    pa = pixels(Image.open(io.BytesIO(base64.b64decode(a))))
    pc = pixels(Image.open(io.BytesIO(base64.b64decode(other_prompt))))
    assert np.abs(pa - pc).mean() > 20  # visibly different, not a pixel or two


def _edges(img: np.ndarray) -> float:
    """Detail: the mean absolute difference between neighbouring pixels (high when sharp)."""
    grey = img.mean(axis=2)
    return float(np.abs(np.diff(grey, axis=0)).mean() + np.abs(np.diff(grey, axis=1)).mean())


def _saturation(img: np.ndarray) -> float:
    return float((img.max(axis=2) - img.min(axis=2)).mean())


def test_a_preview_shows_its_steps_and_guidance(engine_url):
    """Comparing settings offline shows something: two previews differing only in steps (only in guidance)
    differ measurably, each in its own direction — fewer steps less converged, more guidance more saturated."""
    def img(**settings) -> np.ndarray:
        body = dict(prompt="a red lighthouse on a rocky coast", size="384x256", seed=11, **settings)
        return pixels(decode(generate(engine_url, **body)))[:-40]  # the picture, without the label's row

    four, twelve = img(num_inference_steps=4), img(num_inference_steps=12)
    assert np.abs(four - twelve).mean() > 4, np.abs(four - twelve).mean()
    sharper = _edges(twelve) - _edges(four)
    assert sharper > 0.5 * _edges(four) or _edges(four) > 1.5 * _edges(twelve), (_edges(four), _edges(twelve))
    low, high = img(num_inference_steps=12, guidance_scale=1.0), img(num_inference_steps=12, guidance_scale=8.0)
    assert np.abs(low - high).mean() > 8, np.abs(low - high).mean()
    assert _saturation(high) > 1.3 * _saturation(low), (_saturation(low), _saturation(high))
    again = generate(engine_url, prompt="a red lighthouse on a rocky coast", size="384x256", seed=11,
                     num_inference_steps=4).json()["data"][0]["b64_json"]
    first = generate(engine_url, prompt="a red lighthouse on a rocky coast", size="384x256", seed=11,
                     num_inference_steps=4).json()["data"][0]["b64_json"]
    assert again == first  # still deterministic


def test_a_video_preview_shows_its_steps_and_guidance(engine_url):
    """The video preview too: the same prompt and seed at 4 vs 30 steps, and at guidance 1 vs 8, differ in the
    direction the image preview does (its first frame, without the label's row)."""
    def first_frame(**settings) -> np.ndarray:
        resp = post_video(engine_url, {"prompt": "a red lighthouse on a rocky coast", "width": 320, "height": 192,
                                       "num_frames": 5, "fps": 8, "seed": 11, **settings})
        assert resp.status_code == 200, resp.text
        return decode_mp4(resp.content)[2][0].astype(float)[:-40]

    four, thirty = first_frame(num_inference_steps=4), first_frame(num_inference_steps=30)
    assert np.abs(four - thirty).mean() > 2, np.abs(four - thirty).mean()
    # fewer steps: blurrier and grainier — the grain dominates the neighbour differences at this size
    assert _edges(four) > 1.5 * _edges(thirty), (_edges(four), _edges(thirty))
    low, high = (first_frame(num_inference_steps=30, guidance_scale=g) for g in (1.0, 8.0))
    assert _saturation(high) > 1.3 * _saturation(low), (_saturation(low), _saturation(high))


def test_image_without_seed_reports_a_random_seed_that_reproduces_it(engine_url):
    first, second = (generate(engine_url, prompt="a red kite", size="128x128") for _ in range(2))
    seed = first.json()["seed"]
    assert 0 <= seed < 2**32 and seed != second.json()["seed"]
    again = generate(engine_url, prompt="a red kite", size="128x128", seed=seed)
    assert again.json()["data"][0]["b64_json"] == first.json()["data"][0]["b64_json"]


@pytest.mark.parametrize("fmt,pil", [("png", "PNG"), ("jpeg", "JPEG"), ("webp", "WEBP"), ("jpg", "JPEG")])
def test_image_output_formats(engine_url, fmt, pil):
    resp = generate(engine_url, prompt="x", size="128x96", output_format=fmt, seed=3)
    assert resp.status_code == 200 and resp.json()["output_format"] == fmt
    img = decode(resp)
    assert img.format == pil and img.size == (128, 96)


def test_image_n_gives_distinct_images(engine_url):
    resp = generate(engine_url, prompt="three cats", size="128x128", n=3, seed=5)
    data = resp.json()["data"]
    assert len(data) == 3 and len({d["b64_json"] for d in data}) == 3
    assert all(decode(resp, i).size == (128, 128) for i in range(3))


def test_image_default_size_is_the_models_and_not_echoed(engine_url):
    resp = generate(engine_url, prompt="x", seed=1)
    assert resp.status_code == 200 and resp.json()["size"] is None  # vLLM-Omni echoes only a requested size
    assert decode(resp).size == (1024, 1024)


@pytest.mark.parametrize(
    "size,needle",
    [
        ("abc", "size must be in format 'WIDTHxHEIGHT'"),
        ("10x10", "Invalid size: 10x10. Width and height must be between 64 and 2048"),
        ("4096x512", "between 64 and 2048"),
        ("axb", "Invalid size format: 'axb'. Width and height must be integers."),
        ("1x2x3", "Invalid size format: '1x2x3'"),
        ("0x512", "must be positive integers"),
    ],
)
def test_image_bad_size_is_400_with_vllm_omni_message(engine_url, size, needle):
    err = error_of(generate(engine_url, prompt="x", size=size))
    assert needle in err["message"]


@pytest.mark.parametrize(
    "body,param,needle",
    [
        ({"prompt": "x", "n": 11}, "body.n", "less than or equal to 10"),
        ({"prompt": "x", "num_inference_steps": 0}, "body.num_inference_steps", "greater than or equal to 1"),
        ({"prompt": "x", "guidance_scale": 25}, "body.guidance_scale", "less than or equal to 20"),
        ({"n": 1}, "body.prompt", "Field required"),
        ({"prompt": "x", "response_format": "url"}, "body.response_format", "Only 'b64_json' or 'file'"),
    ],
)
def test_image_validation_errors_are_400_naming_the_field(engine_url, body, param, needle):
    err = error_of(generate(engine_url, **body))
    assert err["param"] == param and err["message"].startswith("1 validation error:") and needle in err["message"]


def test_image_refuses_bodies_that_are_not_json_and_other_models(engine_url):
    bad_json = httpx.post(f"{engine_url}{IMAGES}", content=b"not json", headers={"Content-Type": "application/json"})
    assert "JSON decode error" in error_of(bad_json)["message"]
    form = httpx.post(f"{engine_url}{IMAGES}", data={"prompt": "x"})
    assert "Only 'application/json' is allowed" in error_of(form)["message"]
    other = error_of(generate(engine_url, prompt="x", model="stabilityai/sdxl"))
    assert other["message"] == ("Model mismatch: request specifies 'stabilityai/sdxl' but server is running "
                                "'black-forest-labs/FLUX.2-klein-4B'.")
    assert generate(engine_url, prompt="x", size="64x64", model="black-forest-labs/FLUX.2-klein-4B").status_code == 200


# ---------------------------------------------------------------------------------------------------------
# Videos
def test_video_rounds_frames_and_size_is_h264_and_has_the_headers(engine_url):
    resp = post_video(engine_url, {"prompt": "waves", "width": 250, "height": 170, "num_frames": 10, "fps": 8,
                                   "seed": 2, "num_inference_steps": 4, "guidance_scale": 5.0,
                                   "negative_prompt": "blur"})
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == "video/mp4"
    assert resp.headers["X-Request-Id"].startswith("video_sync-")
    assert resp.headers["X-Model"] == "Wan-AI/Wan2.1-VACE-1.3B-diffusers"
    assert float(resp.headers["X-Inference-Time-S"]) > 0
    stages = json.loads(resp.headers["X-Stage-Durations"])
    assert stages and all(isinstance(v, float) and v >= 0 for v in stages.values())
    codec, rate, frames = decode_mp4(resp.content)
    assert codec == "h264" and rate == 8
    assert len(frames) == 9  # 10 → 4k+1
    assert frames[0].shape == (160, 240, 3)  # 250×170 → multiples of 16
    assert np.abs(frames[0].astype(float) - frames[-1]).mean() > 3  # it moves


@pytest.mark.parametrize("asked,made", [(1, 1), (5, 5), (8, 9), (12, 13), (16, 17), (17, 17)])
def test_video_frame_count_follows_wans_4k_plus_1_rule(engine_url, asked, made):
    resp = post_video(engine_url, {"prompt": "p", "width": 64, "height": 48, "num_frames": asked, "fps": 8})
    assert resp.status_code == 200, resp.text
    assert len(decode_mp4(resp.content)[2]) == made


def test_video_defaults_are_vllm_omnis_wan_vace_defaults(engine_url):
    _, rate, frames = decode_mp4(post_video(engine_url, {"prompt": "a quiet street"}).content)
    assert len(frames) == 81 and frames[0].shape == (480, 832, 3) and rate == 24


def test_video_size_wins_and_seconds_times_fps_gives_frames(engine_url):
    resp = post_video(engine_url, {"prompt": "p", "size": "320x192", "width": 640, "height": 480, "seconds": 1,
                                   "fps": 8})
    assert resp.status_code == 200, resp.text
    _, rate, frames = decode_mp4(resp.content)
    assert frames[0].shape == (192, 320, 3) and len(frames) == 9 and rate == 8  # 1 s × 8 fps = 8 → 9


def test_video_animates_the_image_reference(engine_url):
    ref = two_tone()
    resp = post_video(engine_url, {"prompt": "zoom", "width": 480, "height": 320, "num_frames": 5,
                                   "image_reference": json.dumps({"image_url": data_url(ref)})})
    assert resp.status_code == 200, resp.text
    _, _, frames = decode_mp4(resp.content)
    first = frames[0].astype(float)
    # Colour statistics of the reference, in its layout: red on the left, blue on the right.
    left, right = first[60:260, 20:220].reshape(-1, 3).mean(axis=0), first[60:260, 260:460].reshape(-1, 3).mean(axis=0)
    assert left[0] > 160 and left[2] < 80, left
    assert right[2] > 160 and right[0] < 80, right
    assert np.abs(first[40:280] - np.asarray(ref, dtype=float)[40:280]).mean() < 20
    text_only = decode_mp4(post_video(engine_url, {"prompt": "zoom", "width": 480, "height": 320,
                                                    "num_frames": 5}).content)[2][0]
    assert np.abs(first - text_only).mean() > 20  # not the prompt's preview


def test_video_reference_without_size_keeps_its_aspect_ratio(engine_url):
    ref = two_tone((480, 320))  # 3:2 → VACE's 480·832-pixel area: 768×512
    resp = post_video(engine_url, {"prompt": "p", "num_frames": 1, "fps": 8,
                                   "image_reference": json.dumps({"image_url": data_url(ref)})})
    assert resp.status_code == 200, resp.text
    assert decode_mp4(resp.content)[2][0].shape == (512, 768, 3)


def test_video_input_reference_file(engine_url):
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (20, 20, 220)).save(buf, "PNG")
    resp = post_video(engine_url, {"prompt": "p", "width": 128, "height": 96, "num_frames": 5},
                      {"input_reference": ("ref.png", buf.getvalue(), "image/png")})
    assert resp.status_code == 200, resp.text
    frame = decode_mp4(resp.content)[2][0]
    assert frame.shape == (96, 128, 3) and frame[20:70].reshape(-1, 3).mean(axis=0)[2] > 150


def test_video_rejects_json_body(engine_url):
    err = error_of(httpx.post(f"{engine_url}{VIDEOS}", json={"prompt": "x"}, timeout=10))
    assert "multipart/form-data only" in err["message"]


@pytest.mark.parametrize(
    "value,needle",
    [
        ("not json", "Invalid JSON in form field."),
        (json.dumps({"image_url": "http://example.invalid/a.png"}), "does not download URLs"),
        (json.dumps({"image_url": "ftp://example.invalid/a.png"}), "must be an http(s) URL or data URL"),
        (json.dumps({"image_url": "data:image/png;base64,!!!"}), "image data is not valid base64"),
        (json.dumps({"image_url": "data:image/png;base64," + base64.b64encode(b"hello").decode()}),
         "Invalid image_reference.image_url: provided content is not a valid image."),
        (json.dumps({"file_id": "file-123"}), "file_id is not supported yet"),
        (json.dumps(["data:image/png;base64,AAAA"]), 'expected a JSON object {"image_url": ...}'),
    ],
)
def test_video_bad_image_reference_is_400(engine_url, value, needle):
    err = error_of(post_video(engine_url, {"prompt": "x", "num_frames": 1, "image_reference": value}))
    assert needle in err["message"]


def test_video_bad_input_reference_file_is_400(engine_url):
    resp = post_video(engine_url, {"prompt": "x"}, {"input_reference": ("notes.txt", b"not an image", "text/plain")})
    assert error_of(resp)["message"] == "Invalid input_reference: provided content is not a valid image."


def test_video_decompression_bomb_is_refused(engine_url):
    buf = io.BytesIO()
    Image.new("1", (10000, 10000)).save(buf, "PNG")  # a few kB of file, 100 M pixels
    assert len(buf.getvalue()) < 100_000
    bomb = {"input_reference": ("bomb.png", buf.getvalue(), "image/png")}
    err = error_of(post_video(engine_url, {"prompt": "x"}, bomb))
    assert "10000x10000" in err["message"] and "pixels" in err["message"]


def test_video_both_references_are_refused(engine_url):
    buf = io.BytesIO()
    Image.new("RGB", (32, 32)).save(buf, "PNG")
    resp = post_video(engine_url, {"prompt": "x", "image_reference": json.dumps({"image_url": data_url(two_tone())})},
                      {"input_reference": ("ref.png", buf.getvalue(), "image/png")})
    assert error_of(resp)["message"] == "Provide either input_reference or image_reference, not both."


def test_video_form_fields_over_1_mb_are_refused_like_the_server_does(engine_url):
    noise = Image.fromarray(np.random.default_rng(0).integers(0, 256, (700, 700, 3), dtype=np.uint8))
    url = data_url(noise, "PNG")
    assert len(url) > 1024 * 1024
    err = error_of(post_video(engine_url, {"prompt": "x", "image_reference": json.dumps({"image_url": url})}))
    assert err["message"].startswith("Part exceeded maximum size of 1024KB.") and "input_reference" in err["message"]


@pytest.mark.parametrize(
    "fields,param,needle",
    [
        ({"num_frames": 5}, "body.prompt", "Field required"),
        ({"prompt": "x", "width": "wide"}, "body.width", "valid integer"),
        ({"prompt": "x", "size": "big"}, "body.size", "should match pattern"),
        ({"prompt": "x", "fps": 0}, "body.fps", "greater than or equal to 1"),
    ],
)
def test_video_form_validation_errors_are_400_naming_the_field(engine_url, fields, param, needle):
    err = error_of(post_video(engine_url, fields))
    assert err["param"] == param and err["message"].startswith("1 validation error:") and needle in err["message"]


def test_video_other_model_and_oversized_requests_are_refused(engine_url):
    err = error_of(post_video(engine_url, {"prompt": "x", "model": "Wan-AI/Wan2.2-T2V-A14B"}))
    assert err["message"].startswith("Model mismatch: request specifies 'Wan-AI/Wan2.2-T2V-A14B'")
    assert "too large" in error_of(post_video(engine_url, {"prompt": "x", "size": "2048x2048"}))["message"]
    assert "too small" in error_of(post_video(engine_url, {"prompt": "x", "size": "8x8"}))["message"]
    assert "too many" in error_of(post_video(engine_url, {"prompt": "x", "seconds": 20, "fps": 30}))["message"]


# ---------------------------------------------------------------------------------------------------------
# Image edits
RED, BLUE, GREEN, YELLOW = (230, 20, 20), (20, 30, 230), (20, 200, 40), (240, 220, 20)


def image_file(color, size=(300, 200), fmt: str = "PNG", name: str | None = None) -> tuple[str, bytes, str]:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    return (name or f"ref.{fmt.lower()}", buf.getvalue(), f"image/{fmt.lower()}")


def edit(url: str, fields: dict, images: list, field: str = "image") -> httpx.Response:
    """A multipart edit built with urllib3's encoder: text fields, then one `field` file part per image."""
    parts = [(k, str(v)) for k, v in fields.items()] + [(field, img) for img in images]
    body, ctype = encode_multipart_formdata(parts)
    return httpx.post(f"{url}{EDITS}", content=body, headers={"Content-Type": ctype}, timeout=60)


def share(img: np.ndarray, color) -> float:
    """The share of pixels within 60 of `color` on every channel."""
    return float((np.abs(img - np.array(color, dtype=float)).max(axis=2) < 60).mean())


def test_edit_composes_the_references_visibly(engine_url):
    resp = edit(engine_url, {"prompt": "make them friends", "size": "512x256", "seed": 5, "num_inference_steps": 4},
                [image_file(RED, name="red.png"), image_file(BLUE, fmt="JPEG", name="blue.jpg")])
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["size"] == "512x256" and body["output_format"] == "png" and len(body["data"]) == 1
    assert body["preview"] is True and body["seed"] == 5 and body["inference_time_s"] > 0
    img = decode(resp)
    assert img.format == "PNG" and img.size == (512, 256)
    px = pixels(img)
    # side by side along the longer side: the red reference on the left, the blue one on the right
    assert share(px[:, :256], RED) > 0.5 and share(px[:, 256:], BLUE) > 0.5
    assert share(px[:, :256], BLUE) < 0.05 and share(px[:, 256:], RED) < 0.05
    corner = px[-18:, -220:]  # the label: black box, white text
    assert (corner.max(axis=2) < 10).mean() > 0.3 and (corner.min(axis=2) > 245).mean() > 0.03


def test_edit_is_deterministic_and_prompt_dependent(engine_url):
    refs = [image_file(RED), image_file(BLUE)]

    def b64(prompt: str, seed: int) -> str:
        return edit(engine_url, {"prompt": prompt, "size": "256x256", "seed": seed}, refs).json()["data"][0]["b64_json"]

    a = b64("a picnic", 1)
    assert a == b64("a picnic", 1) and a != b64("a picnic", 2) and a != b64("a storm at sea", 1)


def test_edit_four_references_make_a_grid_and_five_are_refused(engine_url):
    colors = [RED, BLUE, GREEN, YELLOW]
    resp = edit(engine_url, {"prompt": "four seasons", "size": "400x400", "seed": 1}, [image_file(c) for c in colors])
    px = pixels(decode(resp))
    quads = [px[:200, :200], px[200:, :200], px[:200, 200:], px[200:, 200:]]
    assert all(share(q, c) > 0.4 for q, c in zip(quads, colors))
    err = error_of(edit(engine_url, {"prompt": "x"}, [image_file(c) for c in colors + [RED]]))
    assert err["message"] == "Received 5 input images. At most 4 images are supported by this model."


def test_edit_default_size_is_the_first_images_and_image_array_works(engine_url):
    resp = edit(engine_url, {"prompt": "x", "output_format": "jpeg", "seed": 2},
                [image_file(GREEN, (320, 240)), image_file(RED, (100, 100))], field="image[]")
    assert resp.status_code == 200, resp.text
    assert resp.json()["size"] == "320x240" and resp.json()["output_format"] == "jpeg"
    img = decode(resp)
    assert img.format == "JPEG" and img.size == (320, 240)
    assert share(pixels(img)[:, :160], GREEN) > 0.5 and share(pixels(img)[:, 160:], RED) > 0.5


def test_edit_n_gives_distinct_images_and_a_data_url_is_an_image(engine_url):
    resp = edit(engine_url, {"prompt": "x", "size": "128x128", "n": 2, "seed": 3,
                             "url": data_url(Image.new("RGB", (64, 64), BLUE))}, [])
    data = resp.json()["data"]
    assert len(data) == 2 and data[0]["b64_json"] != data[1]["b64_json"]
    assert share(pixels(decode(resp, 1)), BLUE) > 0.5
    err = error_of(edit(engine_url, {"prompt": "x", "url": "https://example.com/a.png"}, []))
    assert "does not download URLs" in err["message"]


def test_edit_without_an_image_is_422_like_vllm_omni(engine_url):
    err = error_of(edit(engine_url, {"prompt": "x"}, []), 422)
    assert err["message"] == "Field 'image' or 'url' is required"


@pytest.mark.parametrize("fields, images, needle", [
    ({"prompt": "x"}, [("notes.txt", b"not an image", "text/plain")],
     "Invalid image 1 ('notes.txt'): provided content is not a valid image."),
    ({"prompt": "x", "size": "12"}, None, "Invalid size format: '12'. Expected format: 'WIDTHxHEIGHT'"),
    ({"prompt": "x", "size": "10x10"}, None, "Invalid size: 10x10. Width and height must be between 64 and 2048"),
    ({"size": "64x64"}, None, "Field required"),
    ({"prompt": "x", "n": 0}, None, "greater than or equal to 1"),
    ({"prompt": "x", "response_format": "url"}, None, "Only response_format 'b64_json' is supported now."),
    ({"prompt": "x", "model": "stabilityai/sdxl"}, None, "Model mismatch: request specifies 'stabilityai/sdxl'"),
])
def test_edit_bad_requests_are_400_with_vllm_omnis_words(engine_url, fields, images, needle):
    err = error_of(edit(engine_url, fields, images or [image_file(RED)]))
    assert needle in err["message"]


def test_edit_decompression_bomb_and_json_bodies_are_refused(engine_url):
    buf = io.BytesIO()
    Image.new("1", (10000, 10000)).save(buf, "PNG")  # a few kB of file, 100 M pixels
    err = error_of(edit(engine_url, {"prompt": "x"}, [image_file(RED), ("bomb.png", buf.getvalue(), "image/png")]))
    assert "image 2 ('bomb.png')" in err["message"] and "10000x10000" in err["message"]
    as_json = httpx.post(f"{engine_url}{EDITS}", json={"prompt": "x"}, timeout=30)
    assert "multipart/form-data only" in error_of(as_json)["message"]



# ---------------------------------------------------------------------------------------------------------
# Limits: oversized prompts and bodies, deep JSON, abandoned renders
def peak_rss_bytes(pid: int) -> int:
    """The process's peak resident memory (VmHWM), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.timeout(120)
def test_oversized_prompts_are_400_naming_the_field_and_the_limit(engine_url):
    long = "a lighthouse " * (PROMPT_MAX_CHARS // 13 + 1)
    assert len(long) > PROMPT_MAX_CHARS
    for field in ("prompt", "negative_prompt"):
        body = {"prompt": "x", "size": "64x64"} | {field: long}
        err = error_of(generate(engine_url, **body))
        assert err["param"] == f"body.{field}" and f"at most {PROMPT_MAX_CHARS} characters" in err["message"]
        assert len(err["message"]) < 1000  # the prompt is not echoed back whole
    err = error_of(post_video(engine_url, {"prompt": long, "width": 64, "height": 64, "num_frames": 1}))
    assert err["param"] == "body.prompt" and f"at most {PROMPT_MAX_CHARS} characters" in err["message"]
    err = error_of(edit(engine_url, {"prompt": long}, [image_file(RED)]))
    assert err["param"] == "body.prompt" and f"at most {PROMPT_MAX_CHARS} characters" in err["message"]
    # at the limit it is drawn
    assert generate(engine_url, prompt=long[:PROMPT_MAX_CHARS], size="64x64").status_code == 200


@pytest.mark.timeout(120)
def test_a_300_mb_body_is_refused_before_the_engine_reads_it(offline_engine):
    url, pid = offline_engine.url, offline_engine.process.pid
    assert generate(url, prompt="warm up", size="64x64").status_code == 200
    peak_before = peak_rss_bytes(pid)
    total = 300 * 1024 * 1024
    chunk = b"[" * (1024 * 1024)

    def declared() -> dict[str, str]:
        return {"content-type": "application/json", "content-length": str(total)}

    for headers in (declared(), {"content-type": "application/json"}):  # with Content-Length, then chunked
        sent = 0

        def body():
            nonlocal sent
            for _ in range(total // len(chunk)):
                sent += len(chunk)
                yield chunk

        try:
            resp = httpx.post(f"{url}{IMAGES}", content=body(), headers=headers, timeout=60)
        except httpx.TransportError:
            pass  # the engine closed the connection: also a refusal
        else:
            err = error_of(resp, 413)
            assert f"at most {ENGINE_JSON_BODY_BYTES:,} bytes" in err["message"], err
        assert sent < total // 4, f"the client sent {sent:,} bytes before the engine refused"
    assert peak_rss_bytes(pid) - peak_before < 100 * 1024 * 1024
    assert generate(url, prompt="still serving", size="64x64").status_code == 200


@pytest.mark.timeout(120)
def test_deeply_nested_json_is_invalid_json(engine_url):
    deep = "[" * 100_000 + "]" * 100_000
    resp = httpx.post(f"{engine_url}{IMAGES}", content=deep, headers={"content-type": "application/json"}, timeout=30)
    err = error_of(resp)
    assert "JSON decode error" in err["message"] and "nesting deeper than" in err["message"]
    nested = '{"image_url": ' + "[" * 100_000 + "]" * 100_000 + "}"
    err = error_of(post_video(engine_url, {"prompt": "x", "image_reference": nested}))
    assert err["message"] == "Invalid JSON in form field." and err["param"] == "image_reference"


@pytest.mark.timeout(180)
def test_an_abandoned_render_is_cancelled_and_the_engine_keeps_serving(offline_engine):
    url = offline_engine.url
    fields = {"prompt": "a long pan over the sea", "width": "1280", "height": "720", "num_frames": "257", "fps": "24"}
    body, ctype = encode_multipart_formdata(fields)
    host, port = url.removeprefix("http://").split(":")
    pid = offline_engine.process.pid
    # The whole request; once the engine is busy rendering it (its CPU time grows: the body has been read,
    # since a client gone before that is never rendered at all), the client goes away without the answer.
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        cpu_before = cpu_seconds(pid)
        sock.sendall(f"POST {VIDEOS} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {ctype}\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        for _ in range(300):
            if cpu_seconds(pid) - cpu_before >= 0.3:
                break
            time.sleep(0.05)
    pattern = re.compile(r"video render \(1280x720, 257 frames\) cancelled after (\d+) of 257 frames")
    found = None
    for _ in range(1200):  # a bound on the wait, not a timing check: the line comes when the thread stops
        if found := pattern.search(offline_engine.log_tail(200)):
            break
        time.sleep(0.1)
    assert found, f"no cancelled render in the engine log:\n{offline_engine.log_tail(20)}"
    assert int(found.group(1)) < 257
    assert generate(url, prompt="after the abandoned one", size="64x64").status_code == 200
