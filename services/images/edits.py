"""Image edits: what the user asks (`ImageEditRequest`: a prompt and 1–4 reference images) and the exact
multipart body every transport sends (`prepare_edit`) — docs/protocols.md, "Image edits".

    refs = [EditReference.from_job(job), EditReference(upload_bytes, name="cat.png")]
    request, body = prepare_edit(ImageEditRequest("make them friends", refs), limit=None)

Each reference is checked like every image the studio reads (services/imaging.py: the upload size limit
and the decompression-bomb checks, before decoding) and sent as it is when the server can read it so:
PNG, JPEG or WebP, upright, at most REFERENCE_MAX_SIDE pixels on its longer side. Otherwise it is turned
upright (EXIF), scaled down to REFERENCE_MAX_SIDE and re-encoded (PNG, or JPEG for a JPEG). The body is
built part by part with urllib3's encoder: the text fields of protocol.images.ImageEditForm, then one
`image` file part per reference, in order.

A transport with a request size limit (SageMaker's realtime InvokeEndpoint: REALTIME_PAYLOAD_MAX_BYTES)
gets a body fitted under it: the references are re-encoded as JPEG at decreasing quality, then scaled down
step by step, until the whole body fits; `EditBody.fitting` says what was done in words a person reads,
and a request that cannot fit is InvalidInput naming the limit.

Without a size, an edit comes out in the first reference's proportions at about one megapixel (sides in
multiples of 16, as FLUX.2-klein wants them): vLLM-Omni's own default ("auto") would be the first
reference's exact size, which for a photo is far too many pixels.
"""

from __future__ import annotations

import io
import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image

from protocol.errors import InvalidInput, StudioError
from protocol.images import EDIT_IMAGE_FIELD, ImageEditForm, ImageOutputFormat, parse_size
from protocol.limits import (
    IMAGE_EDIT_REFERENCES,
    IMAGE_SIZE,
    REFERENCE_PART_LIMIT,
    MAX_UPLOAD_BYTES,
    SEED,
    check_length,
)
from services import imaging
from services.files import read_user_file
from services.images.request import DEFAULT_STEPS, check_settings

if TYPE_CHECKING:
    from services.history import Job

REFERENCE_MAX_SIDE = 2048  # the longest side sent: FLUX.2-klein works at about 1 MP, more only costs bytes
EDIT_PIXELS = 1024 * 1024  # an edit without a size: the first reference's proportions at about this many pixels
FIT_SIDES = (REFERENCE_MAX_SIDE, 1536, 1024, 768, 512)  # the longest side tried when fitting under a limit
FIT_QUALITIES = (90, 82, 74, 66, 58, 50)  # the JPEG qualities tried at each side
SENT_AS_IS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
_EXIF_ORIENTATION = 0x0112


@dataclass(frozen=True)
class EditReference:
    """One reference image: its bytes (any format services/imaging.py reads), a name for messages and the
    record, and the gallery job it came from, if any."""

    data: bytes = field(repr=False)
    name: str = "reference"
    job_id: str | None = None

    @classmethod
    def from_file(cls, path: Path | str) -> EditReference:
        path = Path(path)
        return cls(read_user_file(path, what="the reference image", limit=MAX_UPLOAD_BYTES), name=path.name)

    @classmethod
    def from_job(cls, job: Job, index: int = 0) -> EditReference:
        """Output `index` of a gallery job (an image job of the history), named after the job."""
        names = job.outputs
        if not 0 <= index < len(names):
            raise InvalidInput(f"job {job.id} has no image {index + 1} (it has {len(names)}); pick another image")
        try:
            data = job.read(names[index])
        except StudioError as exc:  # the history's: the file is gone
            raise InvalidInput(f"the image of job {job.id} cannot be read ({exc}); it may have been removed from "
                               "the studio's media") from None
        return cls(data, name=f"{job.id}/{names[index]}", job_id=job.id)


@dataclass(frozen=True)
class ImageEditRequest:
    """What the user asks of an edit. `validated()` checks every field and names what to fix."""

    prompt: str
    references: tuple[EditReference, ...] = ()
    negative_prompt: str | None = None
    size: str | None = None  # "WxH"; None: the first reference's proportions at about 1 MP
    steps: int = DEFAULT_STEPS
    guidance: float | None = None
    seed: int | None = None
    n: int = 1
    output_format: ImageOutputFormat = "png"
    model: str | None = None

    def validated(self, *, check_references: bool = True) -> ImageEditRequest:
        """Every field checked (InvalidInput naming what to fix). With `check_references` each reference is
        decoded and checked too, and a missing size is worked out from the first one; prepare_edit leaves
        that to its own single decode of each reference."""
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInput("the prompt is empty: describe the edit you want")
        check_length("the prompt", self.prompt)
        check_length("the negative prompt", self.negative_prompt)
        refs = tuple(self.references or ())
        if not all(isinstance(r, EditReference) for r in refs):
            raise InvalidInput("references must be EditReference values (image bytes with a name)")
        if len(refs) not in IMAGE_EDIT_REFERENCES:
            raise InvalidInput(f"an edit takes {IMAGE_EDIT_REFERENCES.lo:g} to {IMAGE_EDIT_REFERENCES.hi:g} reference "
                               f"images; got {len(refs)}" + (" — pick at least one" if not refs else " — remove some"))
        size = check_settings(self.size, self.steps, self.n, self.guidance, self.seed, self.output_format)
        if check_references:
            infos = [imaging.check_image(r.data, _label(r, i)) for i, r in enumerate(refs, 1)]
            if size is None:
                w, h = _upright_size(refs[0].data, infos[0].width, infos[0].height)
                size = auto_size(w, h)
        neg = self.negative_prompt.strip() if isinstance(self.negative_prompt, str) else None
        return replace(self, prompt=self.prompt.strip(), references=refs, size=size, negative_prompt=neg or None)

    @property
    def width(self) -> int:
        return parse_size(self.size or "")[0]

    @property
    def height(self) -> int:
        return parse_size(self.size or "")[1]

    def with_seed(self) -> ImageEditRequest:
        return self if self.seed is not None else replace(self, seed=random.randint(0, int(SEED.hi)))

    def form(self) -> ImageEditForm:
        return ImageEditForm(
            prompt=self.prompt, model=self.model, n=self.n, size=self.size, response_format="b64_json",
            output_format=self.output_format, negative_prompt=self.negative_prompt,
            num_inference_steps=self.steps, guidance_scale=self.guidance, seed=self.seed,
        )

    def params(self) -> dict[str, Any]:
        """Plain values for the history and --json: the references by name and source, not bytes."""
        return {
            "prompt": self.prompt, "negative_prompt": self.negative_prompt, "size": self.size, "steps": self.steps,
            "guidance": self.guidance, "seed": self.seed, "n": self.n, "output_format": self.output_format,
            "model": self.model, "references": [{"name": r.name, "job_id": r.job_id} for r in self.references],
        }


def auto_size(width: int, height: int) -> str:
    """The first reference's proportions at about EDIT_PIXELS, sides multiples of 16 within IMAGE_SIZE."""
    scale = math.sqrt(EDIT_PIXELS / (width * height))

    def side(v: int) -> int:
        return int(min(IMAGE_SIZE.hi, max(IMAGE_SIZE.lo, round(v * scale / 16) * 16)))

    return f"{side(width)}x{side(height)}"


def _label(ref: EditReference, i: int) -> str:
    return f"reference {i} ({ref.name})"


def _orientation(data: bytes) -> int:
    """The EXIF orientation tag (1 = upright), read from the header only."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            return int(im.getexif().get(_EXIF_ORIENTATION, 1) or 1)
    except Exception:  # noqa: BLE001 - a broken EXIF block just means "as stored"
        return 1


def _upright_size(data: bytes, width: int, height: int) -> tuple[int, int]:
    return (height, width) if _orientation(data) in (5, 6, 7, 8) else (width, height)


@dataclass(frozen=True)
class SentReference:
    """One reference as it goes in the body: the bytes, the file name and type of its part, its size, and
    where it came from (name, gallery job, the format and size it had)."""

    data: bytes = field(repr=False)
    filename: str
    content_type: str
    width: int
    height: int
    name: str
    job_id: str | None
    source_format: str
    source_width: int
    source_height: int

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "job_id": self.job_id, "input": self.filename, "format": self.source_format,
                "width": self.source_width, "height": self.source_height,
                "sent": {"type": self.content_type, "width": self.width, "height": self.height, "bytes": len(self.data)}}


@dataclass(frozen=True)
class EditBody:
    """The request body every transport sends as is."""

    body: bytes = field(repr=False)
    content_type: str  # multipart/form-data; boundary=…
    fields: dict[str, str]  # the text value of each part, in order (checkable)
    references: tuple[SentReference, ...]  # the image parts, in order, exactly as sent
    prepared: tuple[SentReference, ...]  # the references before any fitting under a limit (kept with the job)
    fitting: str | None = None  # what was done to the references to fit, in words; None: sent as prepared

    def __len__(self) -> int:
        return len(self.body)

    def describe(self) -> list[dict[str, Any]]:
        return [r.describe() for r in self.references]


def _encode_image(image: Image.Image, fmt: str, quality: int = 92) -> bytes:
    out = io.BytesIO()
    if fmt == "JPEG":
        image.save(out, "JPEG", quality=quality, optimize=True)
    else:
        image.save(out, "PNG", compress_level=6)
    return out.getvalue()


def _shrunk(image: Image.Image, side: int) -> Image.Image:
    """`image` scaled so its longer side is at most `side` (proportions kept, nothing cropped)."""
    w, h = image.size
    if max(w, h) <= side:
        return image
    scale = side / max(w, h)
    return image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.LANCZOS,
                        reducing_gap=2.0)


def _prepare(ref: EditReference, i: int) -> tuple[SentReference, str | None]:
    """The reference checked (one full decode) and made ready to send; a note when it was scaled down."""
    label = _label(ref, i)
    image = imaging.open_image(ref.data, label)  # every size/bomb check; upright; RGB
    fmt = image.info.get("_studio_format", "")
    orientation = _orientation(ref.data)
    stored_w, stored_h = ((image.height, image.width) if orientation in (5, 6, 7, 8) else image.size)
    note = None
    if fmt in SENT_AS_IS and orientation == 1 and max(image.size) <= REFERENCE_MAX_SIDE:
        data, ctype = ref.data, SENT_AS_IS[fmt]
    else:
        if max(image.size) > REFERENCE_MAX_SIDE:
            note = f"{label} scaled down from {image.width}x{image.height}"
            image = _shrunk(image, REFERENCE_MAX_SIDE)
        out_fmt = "JPEG" if fmt == "JPEG" else "PNG"
        data, ctype = _encode_image(image, out_fmt), f"image/{out_fmt.lower()}"
    sent = SentReference(data=data, filename=f"reference-{i}.{_EXT[ctype]}", content_type=ctype,
                         width=image.width, height=image.height, name=ref.name, job_id=ref.job_id,
                         source_format=fmt, source_width=stored_w, source_height=stored_h)
    return sent, note


def _multipart(fields: dict[str, str], refs: tuple[SentReference, ...], boundary: str | None) -> tuple[bytes, str]:
    from urllib3.fields import RequestField
    from urllib3.filepost import encode_multipart_formdata

    parts = []
    for name, value in fields.items():
        part = RequestField(name=name, data=value)
        part.make_multipart()  # Content-Disposition: form-data; name="…"
        parts.append(part)
    for ref in refs:
        part = RequestField(name=EDIT_IMAGE_FIELD, data=ref.data, filename=ref.filename)
        part.make_multipart(content_type=ref.content_type)
        parts.append(part)
    return encode_multipart_formdata(parts, boundary=boundary)


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def prepare_edit(request: ImageEditRequest, *, limit: int | None = None, limit_name: str = "the request limit",
                 boundary: str | None = None) -> tuple[ImageEditRequest, EditBody]:
    """The request as it will be sent (checked, size worked out, seed drawn when none was given) and its
    multipart body, fitted under `limit` bytes when there is one (named `limit_name` in messages)."""
    request = request.validated(check_references=False)
    prepared_notes = [_prepare(ref, i) for i, ref in enumerate(request.references, 1)]
    prepared = tuple(p for p, _ in prepared_notes)
    notes = [n for _, n in prepared_notes if n]
    if request.size is None:
        request = replace(request, size=auto_size(prepared[0].width, prepared[0].height))
    request = request.with_seed()
    fields = request.form().form_fields()
    for name, value in fields.items():
        if len(value.encode()) > REFERENCE_PART_LIMIT:
            raise InvalidInput(f"the {name} field is {len(value.encode()):,} bytes; the server accepts text fields of "
                               f"at most about {REFERENCE_PART_LIMIT:,} bytes — shorten it")
    body, ctype = _multipart(fields, prepared, boundary)
    fitting = None
    refs = prepared
    if limit is not None and len(body) > limit:
        body, ctype, refs, fitting = _fit(fields, prepared, limit, limit_name, boundary, len(body))
    if notes:
        scaled = f"{len(notes)} reference{'s' if len(notes) > 1 else ''} scaled down to {REFERENCE_MAX_SIDE} px (the " \
                 "largest the studio sends)"
        fitting = f"{scaled}; {fitting}" if fitting else scaled
    return request, EditBody(body=body, content_type=ctype, fields=fields, references=refs, prepared=prepared,
                             fitting=fitting)


def _fit(fields: dict[str, str], prepared: tuple[SentReference, ...], limit: int, limit_name: str,
         boundary: str | None, first_size: int) -> tuple[bytes, str, tuple[SentReference, ...], str]:
    """JPEG at decreasing quality, then smaller sides, until the body fits in `limit` bytes."""
    images = [imaging.open_image(p.data, p.name) for p in prepared]  # at most REFERENCE_MAX_SIDE already
    text_bytes = len(_multipart(fields, (), boundary)[0])
    smallest = None
    for side in FIT_SIDES:
        scaled = [_shrunk(im, side) for im in images]
        for quality in FIT_QUALITIES:
            jpegs = [_encode_image(im, "JPEG", quality) for im in scaled]
            if text_bytes + sum(len(j) for j in jpegs) + 300 * len(jpegs) > limit:  # quick test before building it
                smallest = text_bytes + sum(len(j) for j in jpegs)
                continue
            refs = tuple(replace(p, data=j, filename=f"reference-{i}.jpg", content_type="image/jpeg",
                                 width=im.width, height=im.height)
                         for i, (p, j, im) in enumerate(zip(prepared, jpegs, scaled), 1))
            body, ctype = _multipart(fields, refs, boundary)
            if len(body) > limit:
                smallest = len(body)
                continue
            resized = sum(1 for a, b in zip(images, scaled) if a.size != b.size)
            count = len(prepared)
            what = f"{count} reference{'s' if count > 1 else ''}"
            if resized == count:
                done = f"{what} resized to {side} px and sent as JPEG q{quality}"
            elif resized:
                done = f"{resized} of {what} resized to {side} px; all sent as JPEG q{quality}"
            else:
                done = f"{what} sent as JPEG q{quality}"
            return body, ctype, refs, f"{done} to fit {limit_name} (the request was {_mb(first_size)})"
    raise InvalidInput(f"the edit request does not fit {limit_name} of {limit:,} bytes even with its references at "
                       f"{FIT_SIDES[-1]} px as JPEG q{FIT_QUALITIES[-1]} (still {smallest or first_size:,} bytes); "
                       "use fewer references or a shorter prompt")
