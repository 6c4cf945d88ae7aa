"""Side by side: the same prompt on 2–4 variants at once, each a full set of settings and a target.

    variants = [ImageVariant("A", ImageRequest(prompt, size="512x512", steps=4)),
                ImageVariant("B", ImageRequest(prompt, steps=8), Target("server", url="http://gpu-box:8091"))]
    for outcome in compare_images(variants, settings=settings, history=history, default=backend):
        outcome.job, outcome.error, outcome.cost_per_item_usd, outcome.price_note

A target is the backend the caller already has (`default`: the sidebar's), a vLLM-Omni server by URL, or a
SageMaker endpoint by name — from the studio's closed set only (services/targets.py: a registered server, the
deployment's endpoint; Forbidden otherwise, before anything is built or sent); the others are built with `create_backend(settings.with_overrides(...))` and
closed afterwards. Every image is recorded in the history like any other (a failed one too, with its
settings). Everything is checked before anything is sent: a bad variant is named and nothing runs.

Videos the same way (`compare_videos`, VideoVariant with a VideoRequest): each a job of its own (VideoJobs),
waited for here, recorded like the video page's.

Voices too (`compare_voices`, VoiceVariant with the options of services.speech.speech_config): the text spoken
by each variant at once; the WAV and its figures (TTFA, RTF, latency) come back in the outcome (the history
keeps images and videos only).

Progress: `on_progress(outcome, done, total)` is called in the caller's thread as each variant finishes (in
the order they finish), so a page can say which are done while the others still run.

Cost per item: the target's hourly price (given by hand, or for a SageMaker endpoint the shipped table's rate
for the instance type it runs on, services/pricing.py) times the time the image took, spread over the images
of the request — the share of an hour of instance time the item used. Unknown price: no cost, and why.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from protocol.errors import InvalidInput, StudioError
from protocol.limits import Range
from services.access import Principal, require
from services.backend import create_backend
from services.base import Backend
from services.history import History, Job
from services.images import ImageRequest, record_image
from services.kinds import backend_name
from services.pricing import cost_of_seconds
from services.settings import Settings
from services.targets import TargetBook, target_overrides
from services.videos import VideoJobs, VideoRequest

VARIANTS = Range(2, 4)
OnProgress = Callable[["Outcome", int, int], None]  # (the finished variant's outcome, how many are done, of how many)
TargetKind = Literal["default", "server", "sagemaker"]
TARGET_KINDS: tuple[TargetKind, ...] = ("default", "server", "sagemaker")


@dataclass(frozen=True)
class Target:
    """Where a variant runs: `default` (the caller's backend), a vLLM-Omni `server` by `url`, or a SageMaker
    `endpoint`. `usd_per_hour` prices it by hand (wins over the table). A kind under its former name ("omni", from a
    kept record or an older caller) is read as today's."""

    kind: TargetKind = "default"
    url: str | None = None
    endpoint: str | None = None
    usd_per_hour: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", backend_name(self.kind))

    def key(self) -> tuple[str, str | None]:
        return self.kind, self.url if self.kind == "server" else self.endpoint if self.kind == "sagemaker" else None

    def describe(self, default: str) -> str:
        return {"default": default, "server": f"vLLM-Omni {self.url}",
                "sagemaker": f"SageMaker endpoint {self.endpoint}"}[self.kind]


@dataclass(frozen=True)
class ImageVariant:
    label: str
    request: ImageRequest
    target: Target = field(default_factory=Target)


@dataclass(frozen=True)
class VideoVariant:
    label: str
    request: VideoRequest
    target: Target = field(default_factory=Target)


@dataclass(frozen=True)
class VoiceVariant:
    """`options`: speech_config's keywords (voice, language, task_type, instructions, split_granularity,
    initial_codec_chunk_frames); `request` is the text, so every variant speaks the same."""

    label: str
    request: str
    options: dict = field(default_factory=dict)
    target: Target = field(default_factory=Target)


Variant = ImageVariant | VideoVariant | VoiceVariant


@dataclass
class Outcome:
    """One variant's result: its recorded job (None when it failed before recording), the error text, the
    target in words, and the cost per item when the price is known (`price_note` says why not)."""

    variant: Variant
    target: str
    job: Job | None = None
    error: str | None = None
    usd_per_hour: float | None = None
    price_note: str | None = None
    media: bytes | None = None  # a voice's WAV (images and videos are the job's files)
    figures: dict = field(default_factory=dict)  # a voice's ttfa_ms, rtf, audio_seconds, latency_s

    @property
    def latency_s(self) -> float | None:
        if self.job is None:
            return self.figures.get("latency_s")
        return self.job.timings.get("total_s", self.job.timings.get("wall_s"))

    @property
    def model_s(self) -> float | None:
        return self.job.timings.get("model_s") if self.job else self.figures.get("model_s")

    @property
    def cost_per_item_usd(self) -> float | None:
        if self.usd_per_hour is None or self.latency_s is None or self.error:
            return None
        if self.job is None and self.media is None:
            return None
        items = max(1, len(self.job.outputs)) if self.job is not None else 1
        cost = cost_of_seconds(self.usd_per_hour, self.latency_s)
        return None if cost is None else cost / items


def target_settings(settings: Settings, target: Target, modality: str = "image") -> Settings:
    """The settings a non-default target's backend is built from (ConfigError names a bad URL)."""
    if target.kind == "server":
        if not (target.url or "").strip():
            raise InvalidInput("a vLLM-Omni target needs its URL, e.g. http://gpu-box:8091")
        return settings.with_overrides(**target_overrides(modality, url=target.url.strip()))
    if target.kind == "sagemaker":
        if not (target.endpoint or "").strip():
            raise InvalidInput("a SageMaker target needs the endpoint's name")
        return settings.with_overrides(**target_overrides(modality, endpoint=target.endpoint.strip()))
    raise InvalidInput(f"unknown target {target.kind!r}: one of {', '.join(TARGET_KINDS)}")


def check_variants(variants: list[Variant]) -> list[Variant]:
    """2–4 variants with distinct, non-empty labels and valid requests; the first fault is named."""
    if not VARIANTS.lo <= len(variants) <= VARIANTS.hi:
        raise InvalidInput(f"compare {VARIANTS.lo:g} to {VARIANTS.hi:g} variants (got {len(variants)})")
    labels = [v.label.strip() for v in variants]
    if any(not label for label in labels):
        raise InvalidInput("every variant needs a label")
    if len(set(labels)) != len(labels):
        raise InvalidInput(f"variant labels must differ (got {', '.join(labels)})")
    out = []
    for v in variants:
        try:
            if isinstance(v, VoiceVariant):
                from services.speech import speech_config

                if not v.request.strip():
                    raise InvalidInput("the text is empty: type what to say")
                speech_config(**v.options)  # every rule checked before anything is sent
                request = v.request.strip()
            else:
                request = v.request.validated()
        except InvalidInput as exc:
            raise InvalidInput(f"variant {v.label}: {exc}") from None
        if v.target.kind not in TARGET_KINDS:
            raise InvalidInput(f"variant {v.label}: unknown target {v.target.kind!r}")
        if v.target.kind == "server" and not (v.target.url or "").strip():
            raise InvalidInput(f"variant {v.label}: a vLLM-Omni target needs its URL, e.g. http://gpu-box:8091")
        if v.target.kind == "sagemaker" and not (v.target.endpoint or "").strip():
            raise InvalidInput(f"variant {v.label}: a SageMaker target needs the endpoint's name")
        if v.target.usd_per_hour is not None and not 0 < v.target.usd_per_hour <= 1000:
            raise InvalidInput(f"variant {v.label}: the price per hour must be above 0 and at most 1000 USD")
        out.append(replace(v, label=v.label.strip(), request=request))
    return out


def _price(backend: Backend, settings: Settings, target: Target, modality: str) -> tuple[float | None, str | None]:
    if target.usd_per_hour is not None:
        return target.usd_per_hour, None
    if backend.name != "sagemaker":
        return None, "no hourly price is known for this target: give one for a cost per item"
    from services.load.target import describe_target

    try:
        t = describe_target(backend, settings, modality)  # type: ignore[arg-type]
    except StudioError as exc:
        return None, f"no price: {exc}"
    return t.usd_per_hour, t.price_note


def compare_images(variants: list[ImageVariant], *, settings: Settings, history: History, default: Backend,
                   build: Callable[[Settings], Backend] = create_backend,
                   on_progress: OnProgress | None = None) -> list[Outcome]:
    """Run every variant at once and record each image (as `history`'s actor: Forbidden before any target is built
    when their role may not generate); outcomes in the variants' order. One variant's failure (its target down, a
    refusal) is its outcome's error; the others go on."""
    require(history.actor, "generate")
    return _compare(variants, "image", lambda backend, v: record_image(backend.client("image"), history, v.request),
                    settings=settings, default=default, build=build, actor=history.actor,
                    book=TargetBook(settings, history), on_progress=on_progress)


def compare_videos(variants: list[VideoVariant], *, settings: Settings, history: History, default: Backend,
                   build: Callable[[Settings], Backend] = create_backend, timeout_s: float | None = None,
                   on_progress: OnProgress | None = None) -> list[Outcome]:
    """Every variant as a video job at once (recorded like the video page's, as `history`'s actor: Forbidden first
    when their role may not generate), waited for; outcomes in order."""
    require(history.actor, "generate")

    def run(backend: Backend, v: Variant) -> Job:
        jobs = VideoJobs(backend.client("video"), history, recover=False)
        job = jobs.wait(jobs.start(v.request).id, timeout_s)
        if job.status != "succeeded":
            raise StudioError(job.error or f"the video job is {job.status}")
        return job

    return _compare(variants, "video", run, settings=settings, default=default, build=build, actor=history.actor,
                    book=TargetBook(settings, history), on_progress=on_progress)


def compare_voices(variants: list[VoiceVariant], *, settings: Settings, default: Backend, actor: Principal,
                   build: Callable[[Settings], Backend] = create_backend, book: TargetBook | None = None,
                   on_progress: OnProgress | None = None) -> list[Outcome]:
    """Every variant speaks the text at once; each outcome holds the WAV and its figures, in order. Forbidden
    before any target is built unless `actor` may generate."""
    require(actor, "generate")
    import asyncio
    import time

    from services.speech import speech_config

    def run(backend: Backend, v: Variant, outcome: Outcome) -> None:
        started = time.perf_counter()
        utterance = asyncio.run(backend.client("voice").say(speech_config(**v.options), v.request))
        if not utterance.ok:
            raise StudioError(str(utterance.error))
        stats = utterance.stats
        outcome.media = utterance.wav()
        outcome.figures = {"latency_s": time.perf_counter() - started, "ttfa_ms": stats.ttfa_ms, "rtf": stats.rtf,
                           "audio_seconds": stats.audio_seconds}

    return _compare(variants, "voice", run, settings=settings, default=default, build=build, fills=True, actor=actor,
                    book=book or TargetBook(settings, History.of(settings)), on_progress=on_progress)


def _compare(variants: list, modality: str, make: Callable[..., Any], *, settings: Settings,
             default: Backend, build: Callable[[Settings], Backend], actor: Principal, book: TargetBook,
             fills: bool = False, on_progress: OnProgress | None = None) -> list[Outcome]:
    """`make(backend, variant)` returns the recorded job; with `fills`, `make(backend, variant, outcome)` fills
    the outcome itself. Every target is checked against the closed set before any is built."""
    variants = check_variants(list(variants))
    for v in variants:
        book.check(actor, v.target.kind, url=v.target.url, endpoint=v.target.endpoint, modality=modality,
                   who=f"variant {v.label}")
    built: dict[tuple[str, str | None], Backend | StudioError] = {}
    for v in variants:  # one backend per distinct target, built before the run
        if v.target.kind != "default" and v.target.key() not in built:
            try:
                built[v.target.key()] = build(target_settings(settings, v.target, modality))
            except StudioError as exc:
                built[v.target.key()] = exc

    def run(v: Variant) -> Outcome:
        backend = default if v.target.kind == "default" else built[v.target.key()]
        outcome = Outcome(v, v.target.describe(f"{default.name} ({default.target})"))
        if isinstance(backend, StudioError):
            outcome.error = f"the target could not be set up: {backend}"
            return outcome
        own = settings if v.target.kind == "default" else target_settings(settings, v.target, modality)
        outcome.usd_per_hour, outcome.price_note = _price(backend, own, v.target, modality)
        try:
            if fills:
                make(backend, v, outcome)
            else:
                outcome.job = make(backend, v)
        except StudioError as exc:
            outcome.error = str(exc)  # recorded as a failed job with its settings
        return outcome

    try:
        with ThreadPoolExecutor(max_workers=len(variants), thread_name_prefix="compare") as pool:
            futures = [pool.submit(run, v) for v in variants]
            if on_progress is not None:  # here, in the caller's thread: a page may draw from it
                for done, future in enumerate(as_completed(futures), 1):
                    on_progress(future.result(), done, len(futures))
            return [f.result() for f in futures]
    finally:
        for backend in built.values():
            if isinstance(backend, Backend):
                backend.close()
