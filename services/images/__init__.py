"""Realtime images: `ImageClient` over an `ImageTransport` — generation from a prompt, and edits of 1–4 images.

- request.py     ImageRequest (checked field by field), defaults
- edits.py       ImageEditRequest, EditReference, prepare_edit (the multipart body, fitted under a size limit)
- client.py      ImageClient (checks what comes back), ImageResult, record_image / record_edit (the history)
- transports.py  the interface (generate, edit, payload_limit); vLLM-Omni over httpx; a mock
- sagemaker.py   invoke_endpoint with the container route in CustomAttributes

Editing, for a page or a script (backend.client("image") is an ImageClient on every backend):

    refs = (EditReference.from_job(gallery_job),                # a gallery image: its job id is recorded
            EditReference(uploaded_bytes, name="sketch.png"))   # an upload: checked like every image
    job = record_edit(backend.client("image"), history, ImageEditRequest("make them friends", refs, seed=7))
    job.output_files()                     # the edited image(s), (name, bytes): an "image" job, so the gallery and
                                           # "Use for video" take it like any other
    job.params["references"]               # name, job_id, format, size, what was sent, per reference
    job.input_file("reference-1.png")      # the reference files kept with the job (bytes)
    job.meta["edit"], job.meta["fitting"]  # True; what was done to fit the references, or None

    result = backend.client("image").edit(request)  # the same without the history: an ImageResult with
                                           # .images, .width, .height, .seed, .fitting, .references

- 1 to 4 references (protocol.limits.IMAGE_EDIT_REFERENCES); each one is refused with InvalidInput naming
  it when it is not an image, is over MAX_UPLOAD_BYTES, or declares too many pixels (a decompression bomb)
  — all before anything is sent or recorded.
- `size=None` (the default) gives the first reference's proportions at about 1 MP; `steps` defaults to 4.
- On SageMaker the body must fit InvokeEndpoint's 6 MB: the references are re-encoded as JPEG and scaled
  down until it does, and `fitting` says so ("3 references resized to 1024 px and sent as JPEG q82 to fit
  SageMaker's 6 MB limit (the request was 14.2 MB)"); a request that cannot fit is InvalidInput.
- Server refusals are ServerError with the server's own words and status; an unreachable server is
  BackendUnreachable; the offline engine answers a labelled preview (`result.preview`).
"""

from services.images.client import ImageClient, ImageResult, omni_client, record_edit, record_image
from services.images.edits import EditBody, EditReference, ImageEditRequest, SentReference, prepare_edit
from services.images.request import DEFAULT_SIZE, DEFAULT_STEPS, FORMATS, ImageRequest
from services.images.transports import (
    ImageTransport,
    MockImageTransport,
    OmniImageTransport,
    TransportTimings,
)

__all__ = [
    "DEFAULT_SIZE", "DEFAULT_STEPS", "FORMATS", "EditBody", "EditReference", "ImageClient", "ImageEditRequest",
    "ImageRequest", "ImageResult", "ImageTransport", "MockImageTransport", "OmniImageTransport", "SentReference",
    "TransportTimings", "omni_client", "prepare_edit", "record_edit", "record_image",
]
