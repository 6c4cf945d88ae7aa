"""Deterministic previews standing in for FLUX.2-klein images (and the pictures Wan2.1-VACE videos start from).

No diffusion model runs on this machine, so the offline engine draws a picture from the prompt and seed
(same inputs → same bytes; different prompts → visibly different pictures, with the prompt written on
them) and composes an edit's reference images into a collage under that picture; offline/video_preview.py
animates a reference image, or that picture, into a real H.264 MP4 with PyAV. Every output carries an
"OFFLINE PREVIEW" label so nobody mistakes it for model output.

The settings a diffusion model takes show in the preview as well, so comparing settings offline shows
something about the flow (a stand-in, not what the model would do): the seed sets the composition, fewer
steps leave the picture blurrier and grainier (less converged), and a higher guidance scale makes it more
saturated and contrasted; the label names the steps and guidance it was drawn with.

Plain functions, reusable outside the engine:
- `render_image(prompt, seed, width, height, fmt, steps=None, guidance=None)` → encoded PNG/JPEG/WebP bytes
- `render_edit(prompt, seed, width, height, references, fmt)` → the references (1–4 PIL images) fitted into
  a collage, the prompt's picture blended over them, captioned and labelled; encoded bytes

`render_images` and `render_edits` take an optional `cancel` event, checked between images: once it is set they
raise offline.guards.Cancelled (the engine sets it when the client leaves).
"""

from __future__ import annotations

import hashlib
import io
import textwrap
import threading

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter, ImageFont

from offline.guards import Cancelled

PREVIEW_LABEL = "OFFLINE PREVIEW"
IMAGE_FORMATS = {"png": "PNG", "jpeg": "JPEG", "jpg": "JPEG", "webp": "WEBP"}
EDIT_BLEND = 0.2  # how much of the prompt's preview shows through an edit's references
# How settings show (previews.settle): blur radius and grain fall as 1/steps; colour and contrast rise with
# guidance around GUIDANCE_NEUTRAL (FLUX.2-klein's usual scale), where the picture is drawn as it is.
BLUR_AT_ONE_STEP = 0.1  # of the shorter side, falling as steps^-1.5 (4 steps: 1.25 %, 12: 0.24 %)
GRAIN_AT_ONE_STEP = 64.0  # grey levels (standard deviation), falling as 1/steps
GUIDANCE_NEUTRAL = 4.0
_FONTS = ("DejaVuSans-Bold.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
          "LiberationSans-Bold.ttf", "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf")


_fonts = threading.local()  # a FreeType face must not be shared between threads; renders run in a pool


def bold_font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    cache: dict[int, ImageFont.FreeTypeFont | ImageFont.ImageFont] = _fonts.__dict__.setdefault("by_size", {})
    if size not in cache:
        cache[size] = _load_font(size)
    return cache[size]


def _load_font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for name in _FONTS:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size)  # Pillow's built-in scalable font: always there


def digest(prompt: str, seed: int) -> bytes:
    # Two chained hashes give 64 bytes of stable "randomness" for colours, shapes and motion.
    first = hashlib.sha256(f"{seed}\x00{prompt}".encode()).digest()
    return first + hashlib.sha256(first).digest()


def label_tile(text: str, size: int) -> Image.Image:
    """White bold text on an opaque black box: readable on any background, cheap to paste per frame."""
    font = bold_font(size)
    box = font.getbbox(text)
    pad = max(3, size // 3)
    tile = Image.new("RGB", (box[2] - box[0] + 2 * pad, box[3] - box[1] + 2 * pad), (0, 0, 0))
    ImageDraw.Draw(tile).text((pad - box[0], pad - box[1]), text, font=font, fill=(255, 255, 255))
    return tile


def _paste_corner(img: Image.Image, tile: Image.Image, corner: str) -> None:
    margin = max(2, min(img.size) // 64)
    x = img.width - tile.width - margin if "right" in corner else margin
    y = img.height - tile.height - margin if "bottom" in corner else margin
    img.paste(tile, (max(0, x), max(0, y)))


def wrap(prompt: str, width: int, size: int, max_lines: int) -> list[str]:
    """The prompt wrapped to the width of the picture, at most `max_lines` lines (an ellipsis says "more")."""
    chars = max(8, int(width / (size * 0.62)))
    # Only what can show is wrapped: textwrap is slow on long text, and the rest is cut anyway.
    lines = textwrap.wrap(prompt[: chars * (max_lines + 1)], chars) or [prompt[:chars] or " "]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: max(1, chars - 1)] + "…"
    return lines


def settings_label(steps: int | None, guidance: float | None) -> str:
    """" · 4 steps · guidance 3.5" for the label (only the settings the request gave)."""
    return (f" · {steps} step{'s' if steps != 1 else ''}" if steps is not None else "") + \
        (f" · guidance {guidance:g}" if guidance is not None else "")


def settle(img: Image.Image, seed: int, steps: int | None, guidance: float | None) -> Image.Image:
    """`img` as the settings would leave it: fewer `steps` blur it and add seeded grain (a less converged
    picture), a higher `guidance` raises its saturation and contrast (a lower one flattens it). None: unchanged."""
    if steps is not None:
        img = img.filter(ImageFilter.GaussianBlur(min(img.size) * BLUR_AT_ONE_STEP / steps ** 1.5))
        grain = np.random.default_rng(seed).normal(0.0, GRAIN_AT_ONE_STEP / steps, (img.height, img.width, 1))
        img = Image.fromarray(np.clip(np.asarray(img, dtype=np.float32) + grain, 0, 255).astype(np.uint8))
    if guidance is not None:
        factor = max(0.2, 1.0 + (guidance - GUIDANCE_NEUTRAL) * 0.15)
        img = ImageEnhance.Contrast(ImageEnhance.Color(img).enhance(factor)).enhance(factor)
    return img


def preview_picture(prompt: str, seed: int, width: int, height: int, *, captioned: bool = True,
                    steps: int | None = None, guidance: float | None = None) -> Image.Image:
    """The RGB preview of a prompt: a seeded gradient and translucent shapes, as `steps` and `guidance` would
    leave it (settle); `captioned` adds the prompt text (so a person can tell which prompt made which picture)
    and the "OFFLINE PREVIEW · seed · steps · guidance" label."""
    d = digest(prompt, seed)
    colors = [(d[i], d[i + 1], d[i + 2]) for i in range(0, 30, 3)]
    # Diagonal gradient between two palette colours, computed at 64×64 and scaled (fast even at 2048²).
    small = Image.new("RGB", (64, 64))
    top, bottom = colors[0], colors[1]
    small.putdata([
        tuple(int(a + (b - a) * ((x + y) / 126)) for a, b in zip(top, bottom)) for y in range(64) for x in range(64)
    ])
    img = small.resize((width, height), Image.Resampling.BILINEAR)
    shapes = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(shapes)
    unit = min(width, height)
    for i, c in enumerate(colors[2:9]):
        s = d[30 + 4 * i: 34 + 4 * i]
        cx, cy = s[0] / 255 * width, s[1] / 255 * height
        r = (0.08 + s[2] / 255 * 0.27) * unit
        shape, fill = (cx - r, cy - r, cx + r, cy + r), (*c, 150 + s[3] % 100)
        kind = s[3] % 3
        if kind == 0:
            draw.ellipse(shape, fill=fill)
        elif kind == 1:
            draw.rectangle(shape, fill=fill)
        else:
            draw.regular_polygon((cx, cy, r), n_sides=3 + s[2] % 4, rotation=s[1] % 120, fill=fill)
    img.paste(shapes, (0, 0), shapes)
    img = settle(img, seed, steps, guidance)
    if captioned:
        _caption(img, prompt, f"{PREVIEW_LABEL} · seed {seed}{settings_label(steps, guidance)}")
    return img


def _caption(img: Image.Image, prompt: str, label: str) -> None:
    """The prompt in a translucent band at the top (so a person can tell which prompt made which picture)
    and `label` in a black box at the bottom right."""
    width, unit = img.width, min(img.size)
    size = max(10, unit // 16)
    font = bold_font(size)
    lines = wrap(prompt, width, size, 4)
    line_h = int(size * 1.25)
    band = Image.new("RGBA", (width, size + line_h * len(lines)), (0, 0, 0, 110))
    img.paste(band, (0, 0), band)
    text = ImageDraw.Draw(img)
    for n, line in enumerate(lines):
        text.text((size // 2, size // 2 + n * line_h), line, font=font, fill=(255, 255, 255))
    _paste_corner(img, label_tile(label, max(9, unit // 28)), "bottom-right")


def render_image(prompt: str, seed: int, width: int, height: int, fmt: str = "png", *, steps: int | None = None,
                 guidance: float | None = None) -> bytes:
    """Encoded preview image bytes (png, jpeg/jpg or webp); the same inputs give the same bytes."""
    return encode(preview_picture(prompt, seed, width, height, steps=steps, guidance=guidance), fmt)


def render_images(prompt: str, seed: int, width: int, height: int, fmt: str, n: int,
                  cancel: threading.Event | None = None, *, steps: int | None = None,
                  guidance: float | None = None) -> list[bytes]:
    """`n` previews for seeds seed, seed+1, … (as one diffusion call with num_outputs_per_prompt=n gives)."""
    images = []
    for i in range(n):
        check_cancel(cancel, f"{i} of {n} images")
        images.append(render_image(prompt, seed + i, width, height, fmt, steps=steps, guidance=guidance))
    return images


def check_cancel(cancel: threading.Event | None, done: str) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled(done)


def encode(img: Image.Image, fmt: str, quality: int = 90) -> bytes:
    """`img` as png, jpeg/jpg or webp bytes (`quality` for the lossy two)."""
    pil_format = IMAGE_FORMATS.get(fmt.lower())
    if pil_format is None:
        raise ValueError(f"unsupported image format {fmt!r}; use png, jpeg or webp")
    buf = io.BytesIO()
    if pil_format == "PNG":
        img.save(buf, "PNG", compress_level=6)
    elif pil_format == "JPEG":
        img.save(buf, "JPEG", quality=quality)
    else:
        img.save(buf, "WEBP", quality=quality, method=0)
    return buf.getvalue()


def edit_layout(count: int, width: int, height: int) -> list[tuple[int, int, int, int]]:
    """The cells (left, top, right, bottom) of a collage of 1–4 references on width×height: one fills it; two
    split it along its longer side; three give the first half of that side and stack the others in the
    other half; four make a 2×2 grid."""
    if not 1 <= count <= 4:
        raise ValueError(f"an edit composes 1 to 4 references, got {count}")
    wide = width >= height

    def halves(box: tuple[int, int, int, int], along_x: bool) -> list[tuple[int, int, int, int]]:
        left, top, right, bottom = box
        if along_x:
            mid = (left + right) // 2
            return [(left, top, mid, bottom), (mid, top, right, bottom)]
        mid = (top + bottom) // 2
        return [(left, top, right, mid), (left, mid, right, bottom)]

    whole = (0, 0, width, height)
    if count == 1:
        return [whole]
    first, second = halves(whole, wide)
    if count == 2:
        return [first, second]
    if count == 3:
        return [first, *halves(second, not wide)]
    return [*halves(first, not wide), *halves(second, not wide)]


def edit_picture(prompt: str, seed: int, width: int, height: int, references: list[Image.Image], *,
                 steps: int | None = None, guidance: float | None = None) -> Image.Image:
    """The RGB preview of an edit: the references cover-fitted into a collage (edit_layout), the prompt's
    seeded preview blended over it at EDIT_BLEND (so prompt and seed change the result while the references
    stay plainly visible), thin gutters between the cells, the prompt as a caption and the label
    "OFFLINE PREVIEW · edit of N references · seed S"."""
    cells = edit_layout(len(references), width, height)
    collage = Image.new("RGB", (width, height))
    for ref, (left, top, right, bottom) in zip(references, cells):
        collage.paste(cover(ref, max(1, right - left), max(1, bottom - top)), (left, top))
    img = Image.blend(collage, preview_picture(prompt, seed, width, height, captioned=False), EDIT_BLEND)
    img = settle(img, seed, steps, guidance)
    gutter = max(1, min(width, height) // 200)
    draw = ImageDraw.Draw(img)
    for left, top, right, bottom in cells:
        if right < width:
            draw.rectangle((right - gutter, top, right + gutter - 1, bottom), fill=(16, 16, 16))
        if bottom < height:
            draw.rectangle((left, bottom - gutter, right, bottom + gutter - 1), fill=(16, 16, 16))
    many = "reference" if len(references) == 1 else "references"
    _caption(img, prompt, f"{PREVIEW_LABEL} · edit of {len(references)} {many} · seed {seed}"
                          f"{settings_label(steps, guidance)}")
    return img


def render_edit(prompt: str, seed: int, width: int, height: int, references: list[Image.Image], fmt: str = "png",
                quality: int = 90, *, steps: int | None = None, guidance: float | None = None) -> bytes:
    """Encoded edit preview bytes (edit_picture); the same inputs give the same bytes."""
    return encode(edit_picture(prompt, seed, width, height, references, steps=steps, guidance=guidance), fmt, quality)


def render_edits(prompt: str, seed: int, width: int, height: int, references: list[Image.Image], fmt: str,
                 quality: int, n: int, cancel: threading.Event | None = None, *, steps: int | None = None,
                 guidance: float | None = None) -> list[bytes]:
    """`n` edit previews for seeds seed, seed+1, …"""
    images = []
    for i in range(n):
        check_cancel(cancel, f"{i} of {n} edits")
        images.append(render_edit(prompt, seed + i, width, height, references, fmt, quality, steps=steps,
                                  guidance=guidance))
    return images


def cover(img: Image.Image, width: int, height: int) -> Image.Image:
    """Scale and centre-crop `img` to exactly width×height, keeping its aspect ratio (no distortion)."""
    img = img.convert("RGB")
    scale = max(width / img.width, height / img.height)
    # The source region that fills the target; clamped, because float rounding can make it a hair larger
    # than the image when the aspect ratios match (e.g. 480x320 into 528x352), which Pillow refuses.
    cw, ch = min(width / scale, img.width), min(height / scale, img.height)
    left, top = max(0.0, (img.width - cw) / 2), max(0.0, (img.height - ch) / 2)
    return img.resize((width, height), Image.Resampling.BILINEAR, box=(left, top, left + cw, top + ch))

