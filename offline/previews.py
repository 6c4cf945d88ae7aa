"""Deterministic previews standing in for FLUX.2-klein images and Wan2.1-VACE videos.

No diffusion model runs on this machine, so the offline engine draws a picture from the prompt and seed
(same inputs → same bytes; different prompts → visibly different pictures, with the prompt written on
them) and animates a reference image, or that picture, into a real H.264 MP4. Every output carries an
"OFFLINE PREVIEW" label so nobody mistakes it for model output.
"""

from __future__ import annotations

import hashlib
import io
import math
import textwrap
from fractions import Fraction

import av
from PIL import Image, ImageDraw, ImageFont

PREVIEW_LABEL = "OFFLINE PREVIEW"
_FONT_CANDIDATES = ("DejaVuSans-Bold.ttf", "DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    for name in _FONT_CANDIDATES:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size)


def _palette(prompt: str, seed: int) -> list[tuple[int, int, int]]:
    digest = hashlib.sha256(f"{seed}\x00{prompt}".encode()).digest()
    return [(digest[i], digest[i + 1], digest[i + 2]) for i in range(0, 30, 3)]


def _label(draw: ImageDraw.ImageDraw, w: int, h: int, text: str = PREVIEW_LABEL) -> None:
    size = max(10, min(w, h) // 24)
    font = _font(size)
    box = draw.textbbox((0, 0), text, font=font)
    tw, th = box[2] - box[0], box[3] - box[1]
    pad = max(3, size // 3)
    x0, y0 = w - tw - 3 * pad, h - th - 3 * pad
    draw.rectangle((x0, y0, w - pad, h - pad), fill=(0, 0, 0))
    draw.text((x0 + pad, y0 + pad - box[1]), text, font=font, fill=(255, 255, 255))


def preview_picture(prompt: str, seed: int, width: int, height: int) -> Image.Image:
    """The RGB preview of a prompt: a seeded gradient, shapes, and the prompt text."""
    colors = _palette(prompt, seed)
    # A vertical gradient between two palette colours, drawn small and scaled (fast at 2048²).
    top, bottom = colors[0], colors[1]
    grad = Image.new("RGB", (1, 256))
    for y in range(256):
        t = y / 255
        grad.putpixel((0, y), tuple(int(a + (b - a) * t) for a, b in zip(top, bottom)))
    img = grad.resize((width, height), Image.Resampling.BILINEAR)
    draw = ImageDraw.Draw(img)
    for i, c in enumerate(colors[2:8]):
        d = hashlib.blake2b(f"{seed}:{i}:{prompt}".encode(), digest_size=8).digest()
        cx, cy = d[0] / 255 * width, d[1] / 255 * height
        r = (0.08 + d[2] / 255 * 0.25) * min(width, height)
        shape = (cx - r, cy - r, cx + r, cy + r)
        if d[3] % 2:
            draw.ellipse(shape, fill=c)
        else:
            draw.rectangle(shape, fill=c)
    size = max(10, min(width, height) // 16)
    font = _font(size)
    chars = max(8, int(width / (size * 0.6)))
    lines = textwrap.wrap(prompt, chars)[:4] or [prompt[:chars]]
    y = size // 2
    for line in lines:
        draw.text((size // 2 + 1, y + 1), line, font=font, fill=(0, 0, 0))
        draw.text((size // 2, y), line, font=font, fill=(255, 255, 255))
        y += int(size * 1.25)
    _label(draw, width, height)
    return img


def render_image(prompt: str, seed: int, width: int, height: int, fmt: str = "png") -> bytes:
    """Encoded preview image bytes (png, jpeg or webp); deterministic for the same inputs."""
    img = preview_picture(prompt, seed, width, height)
    buf = io.BytesIO()
    if fmt == "png":
        img.save(buf, "PNG", optimize=False)
    elif fmt == "jpeg":
        img.save(buf, "JPEG", quality=90)
    elif fmt == "webp":
        img.save(buf, "WEBP", quality=90, method=0)
    else:
        raise ValueError(f"unsupported output_format {fmt!r}; use png, jpeg or webp")
    return buf.getvalue()


def cover(img: Image.Image, width: int, height: int) -> Image.Image:
    """Scale and centre-crop `img` to exactly width×height (no distortion)."""
    img = img.convert("RGB")
    scale = max(width / img.width, height / img.height)
    w, h = max(width, round(img.width * scale)), max(height, round(img.height * scale))
    img = img.resize((w, h), Image.Resampling.BILINEAR)
    left, top = (w - width) // 2, (h - height) // 2
    return img.crop((left, top, left + width, top + height))


def render_video(
    prompt: str, seed: int, width: int, height: int, num_frames: int, fps: int, reference: Image.Image | None = None
) -> bytes:
    """An H.264 MP4 (yuv420p) of `num_frames` frames at `fps`: a slow zoom over the reference, or the preview."""
    base = cover(reference, width, height) if reference is not None else preview_picture(prompt, seed, width, height)
    # Work on a slightly larger canvas so the zoom never shows borders.
    big = base.resize((int(width * 1.2), int(height * 1.2)), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, fps)
        stream.options = {"preset": "ultrafast", "tune": "stillimage", "crf": "28"}
        font = _font(max(10, min(width, height) // 20))
        for i in range(num_frames):
            t = i / max(1, num_frames - 1)
            zoom = 1.2 - 0.2 * (0.5 - 0.5 * math.cos(math.pi * t))  # ease from 1.2× down to 1.0×
            cw, ch = width * zoom, height * zoom
            cx, cy = big.width / 2, big.height / 2
            frame_img = big.crop((int(cx - cw / 2), int(cy - ch / 2), int(cx + cw / 2), int(cy + ch / 2)))
            frame_img = frame_img.resize((width, height), Image.Resampling.BILINEAR)
            draw = ImageDraw.Draw(frame_img)
            draw.text((6, 4), f"{i + 1}/{num_frames}", font=font, fill=(255, 255, 255), stroke_width=2, stroke_fill=(0, 0, 0))
            _label(draw, width, height)
            frame = av.VideoFrame.from_image(frame_img)
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buf.getvalue()
