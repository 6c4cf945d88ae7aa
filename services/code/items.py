"""A kept item as the code generators read it: its kind, the request it was made with, its target, its files.

    item = find(history, "20261206-151034-3501f102")   # a job's id, a speech take's or a transcript's
    item.route, item.request, item.base_url, item.files, item.notes
    item.endpoint, item.region     # an item made on SageMaker: its endpoint and region (sagemaker_target)

`request` is what the family's client sent, rebuilt from what the history kept (the job's `params`, the take's
`config`, the transcript's model and language) — nothing the studio added for itself (timings, body sizes, ids).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from protocol import catalog
from protocol.errors import InvalidInput, StudioError
from protocol.sagemaker import DEFAULT_REGION
from services.history import History

from protocol.images import IMAGE_EDITS_PATH, IMAGES_PATH
from protocol.listen import TRANSCRIPTIONS_PATH
from protocol.sound import SOUND_PATH
from protocol.videos import VIDEO_SYNC_PATH

ENGINE_URL = "http://127.0.0.1:8091"  # where `make engine` serves the offline engine
REFERENCE_FILE = "reference.wav"  # a cloned take's reference recording, beside the script (never kept with it)
SPEECH_PATH = "/v1/audio/speech"  # the REST speech route (protocol/speech.py's SpeechRequest)
JOB_ROUTES = (IMAGES_PATH, VIDEO_SYNC_PATH, SOUND_PATH)  # a job's kept target ends with the route it was sent to
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class UnknownItem(InvalidInput):
    """No item by that id the reader may see (exit code 2: the argument cannot be used)."""

    exit_code = 2


class UnreadableItem(InvalidInput):
    """The item is there, but its record lacks what its request needs (an old or damaged one): no code for it."""


@dataclass(frozen=True)
class Item:
    id: str
    route: str  # the path the request goes to (IMAGES_PATH, IMAGE_EDITS_PATH, …): what the generators dispatch on
    noun: str  # what the studio calls it ("image job", "speech take")
    command: str  # the studio's command that makes it (`python -m services <command>`)
    title: str  # what it was made from (the prompt, the text, the recording's name)
    request: dict[str, Any]  # the family's request as it was sent (None values: the server's defaults)
    target: str  # the target as kept
    target_kind: str  # services/kinds.py: "offline" | "server" | "sagemaker"
    base_url: str  # the address a script calls by default
    made_on: str = ""  # the base URL it was made on, as kept
    files: dict[str, bytes | None] = field(default_factory=dict)  # reference files (None: deleted since)
    notes: tuple[str, ...] = ()
    endpoint: str = ""  # made on SageMaker: the endpoint's name ("" when the kept target does not say)
    region: str = ""  # … and its region
    s3_requests: str = ""  # an async job's: where the studio puts request bodies over the inline limit (s3://b/p)


def find(history: History, item_id: str, *, jobs: bool = True) -> Item:
    """The item `item_id` the history's actor may see — a job (unless `jobs` is False: the caller looked), a speech
    take or a transcript; UnknownItem naming it otherwise."""
    for read in ((_job, _take, _transcript) if jobs else (_take, _transcript)):
        try:
            return located(read(history, item_id))
        except UnreadableItem:
            raise
        except InvalidInput:
            continue
    raise UnknownItem(f"there is no item {item_id!r} (a job, speech take, transcript or evaluation item) you can "
                      f"see in the history at {history.where}: `python -m services history list` lists them")


def _target(target: str, route: str | None = None) -> tuple[str, str, list[str]]:
    """(kind, base URL, notes) of a kept target."""
    if not target.startswith(("http://", "https://")):
        return "sagemaker", target, []
    base = target[: -len(route)] if route and target.endswith(route) else target
    base = base.rstrip("/")
    if urlsplit(base).hostname in _LOOPBACK and base != ENGINE_URL:
        return "offline", ENGINE_URL, [f"{LOCAL_ENGINE_NOTE} at {base}, which may be gone; the script "
                                       f"calls `make engine`'s address, {ENGINE_URL} (set BASE_URL for another)"]
    return ("offline" if base == ENGINE_URL else "server"), base, []


# The forms a SageMaker target is kept in: the transports' "SageMaker endpoint NAME (REGION)" (also with ", HTTP/2
# PATH" after the region), the video jobs' "sagemaker://REGION/NAME", the voice library's "sagemaker:REGION/NAME", a
# picker's "sagemaker:NAME", and the backend's label "SageMaker REGION: voice=NAME, image=NAME" (a take's).
_SAGEMAKER_FORMS = (
    re.compile(r"SageMaker endpoint (?P<name>[A-Za-z0-9-]+) \((?P<region>[a-z0-9-]+)(?:, [^)]*)?\)"),
    re.compile(r"sagemaker://(?P<region>[a-z0-9-]+)/(?P<name>[A-Za-z0-9-]+)/?"),
    re.compile(r"sagemaker:(?:(?P<region>[a-z0-9-]+)/)?(?P<name>[A-Za-z0-9-]+)"),
)
_SAGEMAKER_LABEL = re.compile(r"SageMaker (?P<region>[a-z0-9-]+): (?P<names>.*)")


def sagemaker_target(target: str, family: str | None = None) -> tuple[str | None, str | None]:
    """(endpoint name, region) of a kept SageMaker target, None for what it does not say; `family` picks the
    endpoint out of the backend's label, which names one per family."""
    for form in _SAGEMAKER_FORMS:
        if m := form.fullmatch(target.strip()):
            return m["name"], m["region"]
    if m := _SAGEMAKER_LABEL.fullmatch(target.strip()):
        names = dict(pair.strip().partition("=")[::2] for pair in m["names"].split(","))
        return (names.get(family) or None) if family else None, m["region"]
    return None, None


def _family(route: str) -> str | None:
    """The family whose route `route` is (protocol/catalog.py)."""
    return next((f.name for f in catalog.FAMILIES if route in f.routes), None)


def _on_sagemaker(item: Item) -> Item:
    """The item with its endpoint and region read from its kept target (a note for what the target does not say)."""
    name, region = sagemaker_target(item.target, _family(item.route))
    notes = list(item.notes)
    if name is None:
        notes.append(f"{item.id} was made on {item.target!r}, which names no endpoint: set ENDPOINT_NAME to yours")
    if region is None:
        notes.append(f"{item.id}'s target names no region: the code says {DEFAULT_REGION} (set REGION for another)")
    return replace(item, endpoint=name or "ENDPOINT-NAME", region=region or DEFAULT_REGION, notes=tuple(notes))


def _made_on(target: str, route: str | None = None) -> str:
    base = target[: -len(route)] if route and target.endswith(route) else target
    return base.rstrip("/")


LOCAL_ENGINE_NOTE = "made on this machine's engine"  # how the note on a loopback target starts


def _files(names: list[str], read: Any, what: str) -> tuple[dict[str, bytes | None], list[str]]:
    files: dict[str, bytes | None] = {}
    notes = []
    for name in names:
        try:
            files[name] = read(name)
        except StudioError:
            files[name] = None
        if files[name] is None:
            notes.append(f"{what}'s reference file {name} was deleted since: put a file by that name beside the "
                         "script before running it")
    return files, notes


def located(item: Item) -> Item:
    """`item`, with its endpoint and region when it was made on SageMaker."""
    return _on_sagemaker(item) if item.target_kind == "sagemaker" else item


def _job(history: History, item_id: str) -> Item:
    return job_item(history, history.jobs.get(item_id))


def job_item(history: History, job: Any) -> Item:
    """A job (services/history/jobs.py Job) read back into the request its family's client sent."""
    sent = next((r for r in JOB_ROUTES if job.target.endswith(r)), None)
    kind_, base, notes = _target(job.target, sent)
    # A SageMaker job's target names no route (it rides in CustomAttributes): its family's route the body is for.
    route = sent or next((r for r in catalog.family(job.kind).routes if r in _BODIES), None)
    if job.meta.get("edit"):
        route = IMAGE_EDITS_PATH
    if route is None:
        raise InvalidInput(f"{job.kind} job {job.id}: no code is written for that kind of job")
    files, lost = _files(list(job.inputs), job.read, f"{job.kind} {job.id}")
    if job.meta.get("fitting"):
        notes.append(f"the studio fitted the references before sending ({job.meta['fitting']}); the code sends them "
                     "as kept, before fitting")
    try:  # the prompt is the job's own column; an old or damaged record may lack the rest
        request = _BODIES[route]({"prompt": job.prompt, **job.params}, list(files))
    except (TypeError, KeyError, ValueError) as exc:
        raise UnreadableItem(f"{job.kind} job {job.id}'s record lacks what its request needs ({exc!r}): no code can "
                           "be written for it") from None
    return Item(job.id, route, f"{job.kind} job", job.kind, job.prompt, request, job.target, kind_, base,
                _made_on(job.target, sent), files, tuple(notes + lost), s3_requests=_s3_requests(job.handle))


def _s3_requests(handle: dict[str, Any] | None) -> str:
    """s3://BUCKET/PREFIX/requests, where an async job's request bodies go, from its output location
    (s3://BUCKET/PREFIX/outputs/…, as `python -m infra deploy` configures it); "" when the job kept none."""
    output = str(((handle or {}).get("data") or {}).get("output") or "")
    if not output.startswith("s3://"):
        return ""
    bucket, _, key = output[5:].partition("/")
    prefix = key.rsplit("/outputs/", 1)[0] if "/outputs/" in key else ""
    return f"s3://{bucket}" + (f"/{prefix}" if prefix else "") + "/requests"


def _image_body(params: dict[str, Any], inputs: list[str]) -> dict[str, Any]:
    from services.images.request import ImageRequest

    fields = {k: params[k] for k in ImageRequest.__dataclass_fields__ if k in params}
    return ImageRequest(**fields).wire().model_dump(mode="json", exclude_none=True)


def _edit_body(params: dict[str, Any], inputs: list[str]) -> dict[str, Any]:
    keep = ("prompt", "negative_prompt", "size", "steps", "guidance", "seed", "n", "output_format", "model")
    names = {"steps": "num_inference_steps", "guidance": "guidance_scale"}
    body = {names.get(k, k): params[k] for k in keep if params.get(k) is not None}
    return body | {"response_format": "b64_json", "images": inputs}


def _sound_body(params: dict[str, Any], inputs: list[str]) -> dict[str, Any]:
    from services.sound.request import SoundRequest

    fields = {k: params[k] for k in SoundRequest.__dataclass_fields__ if k in params}
    return SoundRequest(**fields).wire().model_dump(mode="json", exclude_none=True)


def _video_body(params: dict[str, Any], inputs: list[str]) -> dict[str, Any]:
    from protocol.videos import VideoSyncForm

    form = VideoSyncForm(prompt=params["prompt"], model=params.get("model"), width=params.get("width"),
                         height=params.get("height"), num_frames=params.get("frames"), fps=params.get("fps"),
                         num_inference_steps=params.get("steps"), guidance_scale=params.get("guidance"),
                         seed=params.get("seed"), negative_prompt=params.get("negative_prompt"))
    return form.form_fields() | ({"image_reference": inputs[0]} if inputs else {})


# The body a job's family client sent to each route, rebuilt from the job's params (its own request class builds it).
_BODIES = {IMAGES_PATH: _image_body, IMAGE_EDITS_PATH: _edit_body, SOUND_PATH: _sound_body,
           VIDEO_SYNC_PATH: _video_body}


def _take(history: History, item_id: str) -> Item:
    take = history.takes.get(item_id)
    kind_, base, notes = _target(take.target)
    config = {k: v for k, v in take.config.items() if v is not None and k != "type"}
    # The session.config the take was streamed with (the studio streams PCM and keeps it as a WAV), and its text.
    request = {**config, "response_format": "pcm", "stream_audio": True, "input": take.text}
    files: dict[str, bytes | None] = {}
    if config.get("task_type") == "Base" and not config.get("voice"):  # a clone of a recording, not a saved voice
        files = {REFERENCE_FILE: None}
        notes.append(f"take {take.id} cloned a voice from a recording, which a take never keeps (a voice is personal "
                     f"data): put the speaker's recording beside the script as {REFERENCE_FILE} — with their consent")
    elif config.get("task_type") == "Base":
        notes.append(f"take {take.id} spoke with the saved voice {config['voice']!r}: the server the script calls "
                     "must have it (`python -m services voices add`, with the speaker's consent)")
    return Item(take.id, SPEECH_PATH, "speech take", "speak", take.text, request, take.target, kind_, base,
                _made_on(take.target), files, tuple(notes))


def _transcript(history: History, item_id: str) -> Item:
    record = history.transcripts.get(item_id)
    kind_, base, notes = _target(record.target)
    files, lost = ({}, [])
    if record.audio:
        try:
            data = record.audio_bytes()
        except StudioError:
            data = None
        files = {record.audio: data}
        if data is None:
            lost = [f"transcript {record.id}'s recording {record.audio} was deleted since: put a recording by that "
                    "name beside the script before running it"]
    else:
        notes.append(f"transcript {record.id} kept no recording: put the speech beside the script as recording.wav")
        files = {"recording.wav": None}
    if record.route == "stream":
        notes.append(f"transcript {record.id} was heard live over /v1/realtime; the code sends its kept recording to "
                     "the file route, /v1/audio/transcriptions")
    request = {"model": record.model, "file": next(iter(files))}
    language = record.figures.get("language") if isinstance(record.figures, dict) else None
    if language:
        request["language"] = language
    return Item(record.id, TRANSCRIPTIONS_PATH, "transcript", "listen", record.source, request, record.target,
                kind_, base, _made_on(record.target), files, tuple(notes + lost))
