"""Reference images sent to the image and video routes (an edit's `image`/`url`, a video's `input_reference`
and `image_reference`), decoded and checked as vLLM-Omni checks them.

Deliberate differences (an offline engine cannot use the network and must stay bounded): data URLs only
(http(s) URLs are refused, not downloaded) and at most MAX_REFERENCE_PIXELS pixels (decompression bombs).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import warnings
from typing import Any

from PIL import Image

MAX_REFERENCE_PIXELS = 4096 * 4096  # larger references are refused as decompression bombs
DATA_URL_HINT = 'a data URL such as "data:image/jpeg;base64,..."'


class BadReference(ValueError):
    """A reference image that cannot be used; the message says what to send instead."""


def decode_image(data: bytes, source: str) -> Image.Image:
    if not data:
        raise BadReference(f"Invalid {source}: image data is empty.")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the pixel check below refuses it
            probe = Image.open(io.BytesIO(data))
            pixels = probe.width * probe.height
            if pixels > MAX_REFERENCE_PIXELS:
                raise BadReference(
                    f"Invalid {source}: the image is {probe.width}x{probe.height} ({pixels:,} pixels); the offline "
                    f"engine accepts at most {MAX_REFERENCE_PIXELS:,} pixels (decompression-bomb guard). "
                    "Send a smaller image, e.g. fitted to the size you ask for."
                )
            return probe.convert("RGB")
    except BadReference:
        raise
    except Image.DecompressionBombError as exc:  # so large that Pillow refuses to even open it
        raise BadReference(f"Invalid {source}: the image is too large to decode safely ({exc}) The offline engine "
                           f"accepts at most {MAX_REFERENCE_PIXELS:,} pixels.") from None
    except (Image.UnidentifiedImageError, OSError, ValueError, SyntaxError):
        raise BadReference(f"Invalid {source}: provided content is not a valid image.") from None


def reference_from_field(value: Any) -> Image.Image:
    """The `image_reference` form field, already JSON-decoded: {"image_url": "data:image/...;base64,..."}."""
    if isinstance(value, dict) and set(value) == {"file_id"}:
        raise BadReference("Invalid image_reference: file_id is not supported yet.")
    if not isinstance(value, dict) or set(value) != {"image_url"} or not isinstance(value["image_url"], str):
        raise BadReference(f'Invalid image_reference: expected a JSON object {{"image_url": ...}} holding '
                           f"{DATA_URL_HINT}; got {json.dumps(value)[:80]}")
    return image_from_url(value["image_url"], "image_reference.image_url")


def image_from_url(url: str, source: str) -> Image.Image:
    """A data URL's image (http(s) URLs are refused: the offline engine does not download)."""
    if url.startswith(("http://", "https://")):
        raise BadReference(f"Invalid {source}: the offline engine does not download URLs; send {DATA_URL_HINT}.")
    if not url.startswith("data:image"):
        raise BadReference(f"Invalid {source}: must be an http(s) URL or data URL ({DATA_URL_HINT}).")
    b64 = url.split(",", 1)[1] if "," in url else ""
    try:
        data = base64.b64decode("".join(b64.split()), validate=True)
    except (binascii.Error, ValueError):
        raise BadReference(f"Invalid {source}: image data is not valid base64.") from None
    return decode_image(data, source)

