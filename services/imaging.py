"""Image checks and fitting for the studio: uploads, generated images and video references.

    info = check_image(data, name="cat.png")          # InvalidInput naming what is wrong
    image = open_image(data, name="cat.png")          # a loaded RGB PIL image, EXIF orientation applied
    fitted = fit_to(image, 480, 320)                  # cover-fit: scaled, centre-cropped to exactly W×H
    url = jpeg_data_url(fitted)                       # "data:image/jpeg;base64,…", sized under the part limit

Everything here refuses input before it can hurt: the byte size is checked before decoding, the pixel
count is read from the header (no decoding) and checked against our own limit, and Pillow's own
decompression-bomb guard is turned into an error instead of a warning.
"""

from __future__ import annotations

import base64
import io
import warnings
from dataclasses import dataclass

from PIL import Image, ImageOps

from protocol.errors import InvalidInput
from protocol.limits import MAX_PIXELS, MAX_UPLOAD_BYTES, REFERENCE_PART_LIMIT

ACCEPTED_FORMATS = ("PNG", "JPEG", "WEBP", "BMP", "GIF")
ACCEPTED_SUFFIXES = ("png", "jpg", "jpeg", "webp", "bmp", "gif")
JPEG_QUALITIES = (90, 82, 74, 66, 58, 50)


@dataclass(frozen=True, slots=True)
class ImageInfo:
    format: str  # Pillow's name: PNG, JPEG, …
    width: int
    height: int
    bytes: int

    @property
    def size(self) -> str:
        return f"{self.width}x{self.height}"


def _header(data: bytes, name: str) -> Image.Image:
    """Open lazily (header only), with every size check that needs no decoding."""
    if not isinstance(data, bytes | bytearray | memoryview) or len(data) == 0:
        raise InvalidInput(f"{name} is empty: pick an image file (PNG, JPEG or WebP)")
    if len(data) > MAX_UPLOAD_BYTES:
        raise InvalidInput(
            f"{name} is {len(data) / 1e6:.1f} MB; images up to {MAX_UPLOAD_BYTES // (1024 * 1024)} MB are accepted — "
            "export a smaller file"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=list(ACCEPTED_FORMATS))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InvalidInput(f"{name} declares too many pixels to decode safely (a decompression bomb?); "
                           f"images up to {MAX_PIXELS // 1_000_000} megapixels are accepted") from None
    except (Image.UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise InvalidInput(f"{name} is not an image this studio reads; use PNG, JPEG, WebP, BMP or GIF") from None
    w, h = image.size
    if w < 1 or h < 1 or w * h > MAX_PIXELS:
        raise InvalidInput(f"{name} is {w}×{h} pixels ({w * h / 1e6:.0f} MP): too many to decode safely (a "
                           f"decompression bomb?); images up to {MAX_PIXELS // 1_000_000} megapixels are accepted")
    return image


def check_image(data: bytes, name: str = "the image") -> ImageInfo:
    """Check `data` is a whole, readable image of a sane size (decodes it once); its format and size."""
    image = open_image(data, name, keep_orientation=True)
    fmt = image.info.get("_studio_format", "")
    return ImageInfo(format=fmt, width=image.width, height=image.height, bytes=len(data))


def open_image(data: bytes, name: str = "the image", *, keep_orientation: bool = False) -> Image.Image:
    """Decode `data` fully into an RGB image (transparency flattened onto white, EXIF rotation applied)."""
    image = _header(data, name)
    fmt = image.format or ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InvalidInput(f"{name} has too many pixels to decode safely (a decompression bomb?)") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise InvalidInput(f"{name} is damaged or cut short and cannot be decoded ({exc}); export it again") from None
    if not keep_orientation:
        image = ImageOps.exif_transpose(image)
    rgb = _flatten(image)
    rgb.info["_studio_format"] = fmt
    return rgb


def _flatten(image: Image.Image) -> Image.Image:
    if image.mode == "RGB":
        return image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGB", rgba.size, (255, 255, 255))
        white.paste(rgba, mask=rgba.getchannel("A"))
        return white
    return image.convert("RGB")


def fit_to(image: Image.Image, width: int, height: int) -> Image.Image:
    """Scale and centre-crop to exactly width×height (cover), so the video keeps the image's proportions."""
    if image.size == (width, height):
        return image
    # The centred crop box with the target's aspect ratio, then one resize of just that box. reducing_gap
    # first shrinks by a whole factor with a cheap box filter: ~3× faster, indistinguishable from pure Lanczos.
    w, h = image.size
    target = width / height
    if w / h > target:
        crop_w, crop_h = h * target, float(h)
    else:
        crop_w, crop_h = float(w), w / target
    left, top = (w - crop_w) / 2, (h - crop_h) / 2
    return image.resize((width, height), Image.Resampling.LANCZOS, box=(left, top, left + crop_w, top + crop_h),
                        reducing_gap=2.0)


def jpeg_bytes(image: Image.Image, quality: int = 90) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality, optimize=True)
    return out.getvalue()


def jpeg_data_url(image: Image.Image, *, limit: int = REFERENCE_PART_LIMIT, overhead: int = 0) -> str:
    """`data:image/jpeg;base64,…` of `image`, with the best quality whose URL (+ `overhead` bytes of the
    field around it) fits in `limit`; a very detailed large image is scaled down as a last resort."""
    prefix = "data:image/jpeg;base64,"
    budget = limit - overhead - len(prefix)
    current = image
    for _ in range(8):
        for quality in JPEG_QUALITIES:
            encoded = base64.b64encode(jpeg_bytes(current, quality))
            if len(encoded) <= budget:
                return prefix + encoded.decode("ascii")
        w, h = current.size
        current = current.resize((max(16, int(w * 0.8)), max(16, int(h * 0.8))), Image.Resampling.LANCZOS)
    raise InvalidInput(f"the reference image cannot be made to fit in {limit} bytes; use a simpler image")
