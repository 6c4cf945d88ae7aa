"""The preview video standing in for a Wan2.1-VACE render: a reference image, or the prompt's preview picture
(offline/previews.py), animated into a real H.264 MP4 with PyAV, labelled "OFFLINE PREVIEW" on every frame.

- `render_video(prompt, seed, width, height, num_frames, fps, reference=None)` → MP4 bytes

It takes an optional `cancel` event, checked between frames: once it is set it raises offline.guards.Cancelled
(the engine sets it when the client leaves).
"""

from __future__ import annotations

import io
import math
import threading
import time
from fractions import Fraction
from functools import lru_cache

import av
import numpy as np
from PIL import Image, ImageDraw

from offline.previews import (
    PREVIEW_LABEL,
    bold_font,
    check_cancel,
    cover,
    digest,
    label_tile,
    preview_picture,
    settings_label,
    settle,
    wrap,
)

# H.264 encoders in order of preference; PyAV's wheels ship libx264 ("h264" resolves to the default one).
H264_ENCODERS = ("libx264", "libopenh264", "h264")
ZOOM = 1.15  # the video ends 15 % closer than it starts


@lru_cache(maxsize=1)
def h264_encoder() -> str:
    """The first H.264 encoder this PyAV build has (libx264 in PyAV's wheels)."""
    for name in H264_ENCODERS:
        try:
            codec = av.Codec(name, "w")
        except (ValueError, av.error.FFmpegError):
            continue
        if "264" in codec.name:
            return name
    raise RuntimeError(f"PyAV {av.__version__} has no H.264 encoder (tried {', '.join(H264_ENCODERS)})")


def _luma_tile(text: str, size: int) -> np.ndarray:
    """A label tile as BT.601 limited-range luma with even width and height (so it maps onto 4:2:0 chroma)."""
    tile = np.asarray(label_tile(text, size).convert("L"), dtype=np.uint16)
    h, w = tile.shape
    tile = np.pad(tile, ((0, h % 2), (0, w % 2)))
    return (16 + tile * 219 // 255).astype(np.uint8)


def _caption_luma(prompt: str, width: int, size: int) -> np.ndarray:
    """The prompt as white text on a full-width black band (luma), for videos made without a reference."""
    font = bold_font(size)
    lines = wrap(prompt, width, size, 2)
    line_h = int(size * 1.25)
    band = Image.new("L", (width, size // 2 + line_h * len(lines) + size // 3), 0)
    draw = ImageDraw.Draw(band)
    for n, line in enumerate(lines):
        draw.text((size // 2, size // 3 + n * line_h), line, font=font, fill=255)
    tile = np.asarray(band, dtype=np.uint16)
    tile = np.pad(tile, ((0, tile.shape[0] % 2), (0, 0)))
    return (16 + tile * 219 // 255).astype(np.uint8)


def _stamp(yuv: np.ndarray, tile: np.ndarray, x: int, y: int, width: int, height: int) -> None:
    """Write a grey-scale tile into a yuv420p frame array at (x, y) (even), neutral chroma under it."""
    th, tw = min(tile.shape[0], height - y), min(tile.shape[1], width - x)
    if th <= 0 or tw <= 0:
        return
    yuv[y:y + th, x:x + tw] = tile[:th, :tw]
    chroma = yuv[height:].reshape(-1)  # U plane then V plane, each (height/2)×(width/2)
    quarter = (height // 2) * (width // 2)
    for plane in (chroma[:quarter], chroma[quarter:2 * quarter]):
        plane.reshape(height // 2, width // 2)[y // 2:(y + th + 1) // 2, x // 2:(x + tw + 1) // 2] = 128


class _Clip:
    """What every frame of a preview video shares, and how frame `i` is drawn: the source picture (drawn at the
    zoomed-in size, so the last frame is as sharp as the first), the seeded pan, the caption, label and counter."""

    def __init__(self, prompt: str, seed: int, width: int, height: int, num_frames: int,
                 reference: Image.Image | None, steps: int | None, guidance: float | None) -> None:
        self.width, self.height, self.num_frames = width, height, num_frames
        self.sw, self.sh = math.ceil(width * ZOOM), math.ceil(height * ZOOM)
        self.caption = None
        if reference is not None:
            source = cover(reference, self.sw, self.sh)
        else:  # the prompt's picture moves; its text stays put in a band at the top, where zoom cannot crop it
            source = preview_picture(prompt, seed, self.sw, self.sh, captioned=False)
            self.caption = _caption_luma(prompt, width, max(9, min(width, height) // 18))
        self.pixels = np.asarray(settle(source, seed, steps, guidance))
        d = digest(prompt, seed)
        self.pan = ((d[60] / 255) * 2 - 1, (d[61] / 255) * 2 - 1)  # direction of the drift, −1…1 on each axis
        self.label = _luma_tile(PREVIEW_LABEL + settings_label(steps, guidance), max(9, min(width, height) // 22))
        self.margin = max(2, min(width, height) // 64) // 2 * 2
        self.label_xy = (max(0, width - self.label.shape[1] - self.margin) // 2 * 2,
                         max(0, height - self.label.shape[0] - self.margin) // 2 * 2)
        self.counter_size = max(9, min(width, height) // 26)

    def frame(self, i: int) -> av.VideoFrame:
        """Frame `i` (yuv420p): eased zoom and pan over the source, then caption, counter and label."""
        width, height = self.width, self.height
        ease = 0.5 - 0.5 * math.cos(math.pi * i / max(1, self.num_frames - 1))
        scale = 1 + (ZOOM - 1) * ease  # 1.0 (the whole source) → ZOOM
        cw, ch = round(self.sw / scale), round(self.sh / scale)
        x0 = round((self.sw - cw) / 2 * (1 + self.pan[0] * ease))
        y0 = round((self.sh - ch) / 2 * (1 + self.pan[1] * ease))
        window = np.ascontiguousarray(self.pixels[y0:y0 + ch, x0:x0 + cw])
        # swscale does the zoom and the RGB → YUV conversion in one pass.
        yuv = av.VideoFrame.from_ndarray(window, format="rgb24").reformat(
            width=width, height=height, format="yuv420p", interpolation="FAST_BILINEAR"
        ).to_ndarray()
        if self.caption is not None:
            _stamp(yuv, self.caption, 0, 0, width, height)
        counter = _luma_tile(f"{i + 1}/{self.num_frames}", self.counter_size)
        _stamp(yuv, counter, self.margin, max(0, height - counter.shape[0] - self.margin) // 2 * 2, width, height)
        _stamp(yuv, self.label, *self.label_xy, width, height)
        frame = av.VideoFrame.from_ndarray(yuv, format="yuv420p")
        frame.pts = i
        return frame


def render_video(
    prompt: str,
    seed: int,
    width: int,
    height: int,
    num_frames: int,
    fps: int,
    reference: Image.Image | None = None,
    timings: dict[str, float] | None = None,
    cancel: threading.Event | None = None,
    *,
    steps: int | None = None,
    guidance: float | None = None,
) -> bytes:
    """An H.264 (yuv420p) MP4 of exactly `num_frames` frames at `fps`.

    The first frame is the reference fitted to width×height (or the prompt's preview picture); the clip
    then eases into a slow zoom and a seeded pan, with a frame counter (bottom left) and the preview label
    (bottom right) on every frame, and the prompt in a band at the top when there is no reference.
    Width and height must be even (4:2:0); the engine passes multiples of 16. `timings`, when given,
    receives the seconds spent drawing frames and encoding them. `steps` and `guidance` settle the source as
    they do an image preview (fewer steps blurrier and grainier, more guidance more saturated), named in the label.
    """
    if width < 2 or height < 2 or width % 2 or height % 2:
        raise ValueError(f"width and height must be even (yuv420p), got {width}x{height}")
    if num_frames < 1 or fps < 1:
        raise ValueError(f"num_frames and fps must be positive, got {num_frames} and {fps}")
    t_start = time.perf_counter()
    clip = _Clip(prompt, seed, width, height, num_frames, reference, steps, guidance)
    draw_s = encode_s = 0.0

    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        stream = container.add_stream(h264_encoder(), rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, fps)
        stream.options = {"preset": "ultrafast", "crf": "26"}
        draw_s += time.perf_counter() - t_start
        for i in range(num_frames):
            check_cancel(cancel, f"{i} of {num_frames} frames")
            t0 = time.perf_counter()
            frame = clip.frame(i)
            t1 = time.perf_counter()
            for packet in stream.encode(frame):
                container.mux(packet)
            t2 = time.perf_counter()
            draw_s += t1 - t0
            encode_s += t2 - t1
        t1 = time.perf_counter()
        for packet in stream.encode():
            container.mux(packet)
    encode_s += time.perf_counter() - t1
    if timings is not None:
        timings.update(draw_s=draw_s, encode_s=encode_s)
    return buf.getvalue()
