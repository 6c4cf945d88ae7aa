"""Image edits in the services layer: ImageEditRequest checks, the multipart body (parsed back part by part),
fitting under a payload limit, the real offline engine end to end, and the history record (references kept
as the job's inputs, the edited image in the gallery like any other).
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import io
import time

import numpy as np
import pytest
from PIL import Image

from protocol.errors import BackendUnreachable, InvalidInput, ServerError
from protocol.images import ImageData, ImageGenerationResponse
from protocol.limits import MAX_UPLOAD_BYTES, REALTIME_PAYLOAD_MAX_BYTES
from services.history import History
from services.images import (
    EditReference,
    ImageClient,
    ImageEditRequest,
    ImageRequest,
    MockImageTransport,
    OmniImageTransport,
    omni_client,
    prepare_edit,
    record_edit,
    record_image,
)
from services.images.edits import REFERENCE_MAX_SIDE, auto_size
from services.settings import Settings
from services.videos import VideoRequest
from tests.conftest import free_port

RED, BLUE = (230, 20, 20), (20, 30, 230)


def encoded(color=RED, size=(300, 200), fmt: str = "PNG", **save) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, fmt, **save)
    return out.getvalue()


def noisy(w: int, h: int, seed: int = 0) -> bytes:
    """An incompressible PNG: w×h×3 bytes and more."""
    out = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)).save(out, "PNG")
    return out.getvalue()


def bomb() -> bytes:
    out = io.BytesIO()
    Image.new("1", (10000, 10000)).save(out, "PNG")  # a few kB of file, 100 M pixels
    return out.getvalue()


def parts(body: bytes, content_type: str) -> list[tuple[str, str | None, str, bytes]]:
    """(name, filename, content type, bytes) of each part, read back with the standard library's MIME parser."""
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    assert msg.is_multipart()
    return [(p.get_param("name", header="content-disposition"), p.get_filename(), p.get_content_type(),
             p.get_payload(decode=True)) for p in msg.iter_parts()]


def answer(body: bytes, content_type: str) -> ImageGenerationResponse:
    """What a server would answer to the edit: a PNG of the requested size (read from the body's size part)."""
    size = next(data.decode() for name, _, _, data in parts(body, content_type) if name == "size")
    w, h = (int(v) for v in size.split("x"))
    return ImageGenerationResponse(created=int(time.time()), data=[ImageData(
        b64_json=base64.b64encode(encoded(size=(w, h))).decode())], output_format="png", size=size)


def mock(limit: int | None = None) -> MockImageTransport:
    return MockImageTransport(lambda r: None, edit_handler=answer, payload_limit=limit)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------
# bad input: a clear message naming what to fix, nothing sent, nothing recorded
@pytest.mark.parametrize("refs, words", [
    ((), "an edit takes 1 to 4 reference images; got 0 — pick at least one"),
    (tuple(EditReference(encoded(), f"r{i}.png") for i in range(5)), "1 to 4 reference images; got 5 — remove some"),
    ((EditReference(encoded(), "ok.png"), EditReference(b"hello, not a picture", "notes.txt")),
     "reference 2 (notes.txt) is not an image this studio reads"),
    ((EditReference(bomb(), "bomb.png"),), "reference 1 (bomb.png) declares too many pixels"),
    ((EditReference(b"\x89PNG" + bytes(MAX_UPLOAD_BYTES), "huge.png"),), "reference 1 (huge.png) is 26.2 MB"),
    ((EditReference(encoded()[:60], "cut.png"),), "reference 1 (cut.png)"),
])
def test_bad_references_are_refused_before_sending_or_recording(refs, words, tmp_path) -> None:
    transport = mock()
    history = History(tmp_path)
    for attempt in (lambda: ImageClient(transport).edit(ImageEditRequest("make it blue", refs)),
                    lambda: record_edit(ImageClient(transport), history, ImageEditRequest("make it blue", refs)),
                    lambda: ImageEditRequest("make it blue", refs).validated()):
        with pytest.raises(InvalidInput) as err:
            attempt()
        assert words in str(err.value)
    assert transport.edits == [] and history.jobs.list() == []


@pytest.mark.parametrize("change, words", [
    ({"prompt": "  "}, "the prompt is empty"),
    ({"size": "12x12"}, "between 64 and 2048"),
    ({"size": "big"}, "WIDTHxHEIGHT"),
    ({"steps": 0}, "steps must be a whole number from 1 to 200"),
    ({"n": 11}, "n (images per request)"),
    ({"seed": -1}, "seed"),
    ({"output_format": "gif"}, "output format"),
])
def test_bad_fields_are_refused_before_sending(change, words) -> None:
    transport = mock()
    request = ImageEditRequest(**{"prompt": "x", "references": (EditReference(encoded()),), **change})
    with pytest.raises(InvalidInput) as err:
        ImageClient(transport).edit(request)
    assert words in str(err.value) and transport.edits == []


# ---------------------------------------------------------------------------------------------------------
# the body
def test_the_body_has_the_form_fields_and_the_references_as_sent() -> None:
    refs = (EditReference(encoded(RED), "red.png", job_id="20250101-000000-abcdef12"),
            EditReference(encoded(BLUE, fmt="JPEG"), "blue.jpg"))
    request, body = prepare_edit(ImageEditRequest(" make them friends ", refs, steps=6, guidance=2.5, seed=9,
                                                  negative_prompt=" "))
    got = parts(body.body, body.content_type)
    text = {name: data.decode() for name, filename, _, data in got if filename is None}
    assert text == {"prompt": "make them friends", "n": "1", "size": "1248x832", "response_format": "b64_json",
                    "output_format": "png", "num_inference_steps": "6", "guidance_scale": "2.5", "seed": "9"}
    files = [(name, filename, ctype, data) for name, filename, ctype, data in got if filename is not None]
    assert files == [("image", "reference-1.png", "image/png", refs[0].data),  # sent as they are
                     ("image", "reference-2.jpg", "image/jpeg", refs[1].data)]
    assert body.fitting is None and request.size == "1248x832" and request.seed == 9
    first = body.describe()[0]
    assert first["job_id"] == "20250101-000000-abcdef12" and (first["format"], first["width"]) == ("PNG", 300)
    assert request.params()["references"] == [{"name": "red.png", "job_id": "20250101-000000-abcdef12"},
                                              {"name": "blue.jpg", "job_id": None}]


def test_without_a_size_the_edit_keeps_the_first_references_proportions() -> None:
    assert auto_size(300, 200) == "1248x832" and auto_size(1024, 1024) == "1024x1024"
    assert auto_size(1080, 1920) == "768x1360" and auto_size(100, 4000) == "160x2048"  # within 64–2048
    request, _ = prepare_edit(ImageEditRequest("x", (EditReference(encoded(size=(200, 400))),), size=None))
    assert request.size == "720x1456"
    assert ImageEditRequest("x", (EditReference(encoded(size=(200, 400))),)).validated().size == "720x1456"


def test_rotated_bmp_and_oversized_references_are_sent_upright_and_readable() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # stored landscape, shown rotated 90°: a phone photo
    rotated = encoded(size=(400, 200), fmt="JPEG", exif=exif.tobytes())
    refs = (EditReference(rotated, "phone.jpg"), EditReference(encoded(BLUE, fmt="BMP"), "old.bmp"),
            EditReference(noisy(3000, 1000), "wide.png"))
    request, body = prepare_edit(ImageEditRequest("x", refs))
    sent = [(r.content_type, r.width, r.height) for r in body.references]
    assert sent == [("image/jpeg", 200, 400), ("image/png", 300, 200), ("image/png", REFERENCE_MAX_SIDE, 683)]
    assert request.size == "720x1456"  # the upright first reference's proportions
    for ref in body.references:
        with Image.open(io.BytesIO(ref.data)) as im:
            assert im.size == (ref.width, ref.height) and im.getexif().get(0x0112, 1) == 1
    assert body.fitting == "1 reference scaled down to 2048 px (the largest the studio sends)"


def test_over_a_payload_limit_the_references_are_fitted_and_the_result_says_how() -> None:
    refs = tuple(EditReference(noisy(2000, 1500, seed), f"photo-{seed}.png") for seed in range(3))
    assert sum(len(r.data) for r in refs) > 3 * REALTIME_PAYLOAD_MAX_BYTES
    transport = mock(REALTIME_PAYLOAD_MAX_BYTES)
    result = ImageClient(transport).edit(ImageEditRequest("one photo from three", refs, seed=1))
    body, ctype = transport.edits[0]
    assert len(body) <= REALTIME_PAYLOAD_MAX_BYTES
    assert result.fitting is not None and "3 references" in result.fitting and "sent as JPEG q" in result.fitting
    assert "the mock's request limit" in result.fitting
    files = [(ctype, data) for _, filename, ctype, data in parts(body, ctype) if filename]
    assert len(files) == 3 and all(ctype == "image/jpeg" for ctype, _ in files)
    for (_, data), sent in zip(files, result.references):
        with Image.open(io.BytesIO(data)) as im:
            assert im.format == "JPEG" and im.size == (sent["sent"]["width"], sent["sent"]["height"])
    # small enough already: sent as is, no note
    small = ImageClient(mock(REALTIME_PAYLOAD_MAX_BYTES)).edit(ImageEditRequest("x", (EditReference(encoded()),)))
    assert small.fitting is None


def test_fitting_scales_down_when_quality_alone_is_not_enough() -> None:
    refs = tuple(EditReference(noisy(1600, 1200, seed), f"n{seed}.png") for seed in range(4))
    _, body = prepare_edit(ImageEditRequest("x", refs), limit=1_500_000, limit_name="a 1.5 MB test limit")
    assert len(body) <= 1_500_000
    assert body.fitting is not None and body.fitting.startswith("4 references resized to ")
    side = int(body.fitting.split("resized to ")[1].split(" px")[0])
    assert side < 1600 and all(max(r.width, r.height) == side for r in body.references)


def test_a_request_that_cannot_fit_names_the_limit() -> None:
    refs = tuple(EditReference(noisy(1024, 1024, seed), f"n{seed}.png") for seed in range(4))
    transport = mock(60_000)
    with pytest.raises(InvalidInput) as err:
        ImageClient(transport).edit(ImageEditRequest("x", refs))
    assert "does not fit the mock's request limit of 60,000 bytes" in str(err.value)
    assert "fewer references" in str(err.value) and transport.edits == []


def test_a_gallery_job_is_a_reference_with_its_job_id(tmp_path) -> None:
    history = History(tmp_path)
    made = record_image(ImageClient(MockImageTransport(lambda r: ImageGenerationResponse(
        created=1, data=[ImageData(b64_json=base64.b64encode(encoded(size=(128, 128))).decode())]))),
        history, ImageRequest("a red square", size="128x128"))
    ref = EditReference.from_job(made)
    assert ref.job_id == made.id and ref.data == made.output_files()[0][1] and made.id in ref.name
    with pytest.raises(InvalidInput, match="has no image 2"):
        EditReference.from_job(made, 1)
    with pytest.raises(InvalidInput, match="cannot read the reference image"):
        EditReference.from_file(tmp_path / "missing.png")


# ---------------------------------------------------------------------------------------------------------
# against the real offline engine
@pytest.fixture(scope="module")
def client(engine_url: str) -> ImageClient:
    return omni_client(engine_url, Settings())


def share(data: bytes, color, box=None) -> float:
    img = Image.open(io.BytesIO(data)).convert("RGB")
    px = np.asarray(img.crop(box) if box else img, dtype=float)
    return float((np.abs(px - np.array(color, dtype=float)).max(axis=2) < 60).mean())


def test_real_engine_edit_uses_both_references(client: ImageClient) -> None:
    refs = (EditReference(encoded(RED), "red.png"), EditReference(encoded(BLUE, fmt="JPEG"), "blue.jpg"))
    result = client.edit(ImageEditRequest("make them friends", refs, seed=4))
    assert (result.width, result.height, result.format, result.seed) == (1248, 832, "png", 4)
    assert result.preview and result.fitting is None and result.model_s is not None
    with Image.open(io.BytesIO(result.image)) as im:
        assert im.format == "PNG" and im.size == (1248, 832)
    assert share(result.image, RED, (0, 0, 624, 832)) > 0.5 and share(result.image, BLUE, (624, 0, 1248, 832)) > 0.5
    again = client.edit(ImageEditRequest("make them friends", refs, seed=4))
    assert again.image == result.image
    jpeg = client.edit(ImageEditRequest("x", refs[:1], size="256x192", output_format="jpeg", n=2, seed=1))
    assert len(jpeg.images) == 2 and all(Image.open(io.BytesIO(d)).size == (256, 192) for d in jpeg.images)


def test_real_engine_refusal_is_its_own_message(client: ImageClient) -> None:
    with pytest.raises(ServerError) as err:
        client.edit(ImageEditRequest("x", (EditReference(encoded()),), model="stabilityai/sdxl"))
    assert err.value.status == 400 and "Model mismatch" in str(err.value) and "HTTP 400" in str(err.value)
    with pytest.raises(ServerError) as none:  # the transport alone: no image part at all
        client.transport.edit(b"--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nx\r\n--b--\r\n",
                              "multipart/form-data; boundary=b")
    assert none.value.status == 422 and "Field 'image' or 'url' is required" in str(none.value)


def test_real_engine_edit_is_recorded_with_its_references_and_usable_for_video(client: ImageClient, tmp_path) -> None:
    history = History(tmp_path)
    source = record_image(client, history, ImageRequest("a red kite", size="256x256", seed=2))
    refs = (EditReference.from_job(source), EditReference(encoded(BLUE), "upload.png"))
    job = record_edit(client, history, ImageEditRequest("the kite over the sea", refs, seed=3))
    again = History(tmp_path).jobs.get(job.id)
    assert again.kind == "image" and again.status == "succeeded" and again.meta["edit"] is True
    assert again.meta["preview"] is True and again.meta["fitting"] is None and again.meta["references"] == 2
    assert [r["job_id"] for r in again.params["references"]] == [source.id, None]
    assert again.params["size"] == "1024x1024" and again.params["seed"] == 3
    assert again.inputs == ["reference-1.png", "reference-2.png"]
    assert again.input_file("reference-1.png") == source.output_files()[0][1]
    edited = again.output_files()[0][1]
    assert Image.open(io.BytesIO(edited)).size == (1024, 1024)
    gallery = history.jobs.list("image", statuses=("succeeded",))  # what the gallery and "Use for video" list
    assert [j.id for j in gallery] == [job.id, source.id]
    VideoRequest("the kite flies", reference=edited, reference_name=f"gallery: {job.id}").validated()


def test_a_failed_edit_keeps_its_references_and_settings(tmp_path) -> None:
    history = History(tmp_path)
    url = f"http://127.0.0.1:{free_port()}"
    refs = (EditReference(encoded(RED), "red.png"),)
    with pytest.raises(BackendUnreachable):
        record_edit(ImageClient(OmniImageTransport(url, connect_timeout=2)), history, ImageEditRequest("x", refs, seed=8))
    failed = history.jobs.list("image")[0]
    assert failed.status == "failed" and url in (failed.error or "") and failed.params["seed"] == 8
    assert failed.input_file("reference-1.png") == refs[0].data
