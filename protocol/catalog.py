"""The catalog: every model family the studio serves, the models in each, and the studio's pages — as data.

This is the one place a family is named. Infra's roles, the evaluation and load modalities, the history's
record kinds, the pages, the price units and the home page's lines all derive from `FAMILIES` and `PAGES`;
`tests/test_catalog.py` fails when a list of families is written anywhere else. docs/architecture.md,
"Adding a model family", lists the files a new family needs.

Every figure of a model says where it comes from (`source`). GPU memory is the figure the published material
never gives; docs/models.md explains how each one was reached and protocol/instances.py holds the other side
(each SageMaker instance type's GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How SageMaker serves a family: InvokeEndpoint, InvokeEndpointAsync (S3 in, S3 out) or the HTTP/2 stream.
Serving = Literal["realtime", "async", "bidirectional"]

# One GPU-memory rule for models without a published serving figure: the bf16 weights (2 bytes a parameter)
# plus 20 % for activations and caches, plus 1 GB for the CUDA context.
BF16_BYTES = 2
ACTIVATION_HEADROOM = 0.20
CUDA_CONTEXT_GB = 1.0


def computed_need_gb(weights_gb: float) -> float:
    """GPU memory to serve a model of `weights_gb` by the catalog's stated rule (rounded up to 0.1 GB)."""
    need = weights_gb * (1 + ACTIVATION_HEADROOM) + CUDA_CONTEXT_GB
    return round(-(-need * 10 // 1) / 10, 1)


@dataclass(frozen=True)
class Model:
    """One model a family can serve, with the figures a deployment needs."""

    id: str  # the Hugging Face id, SM_VLLM_MODEL
    family: str
    task_types: tuple[str, ...]  # what vLLM-Omni lets it do (Qwen3-TTS: one per checkpoint)
    params_b: float  # parameters, billions, all components that are loaded
    weights_gb: float  # what is loaded onto the GPU
    gpu_need_gb: float  # GPU memory to serve it, headroom included
    licence: str
    needs_bf16: bool = True  # T4 (g4dn) has no bf16: these models fail their health check there
    source: str = ""  # where the figures come from


@dataclass(frozen=True)
class Family:
    """One model family: how it is served, what its unit of work is, where it lives in the studio."""

    name: str  # the role, the page, the modality, the record kind — one word
    title: str
    icon: str
    blurb: str  # the home page's line
    routes: tuple[str, ...]  # the vLLM-Omni routes it speaks
    serving: Serving  # how SageMaker serves it
    unit: str  # the unit of work a load sweep counts
    price_unit: str  # what a cost is quoted per
    price_unit_size: float  # how many units make one price unit (60 audio seconds make an audio minute)
    throughput_key: str  # the load report's throughput figure
    throughput_title: str  # … in words
    throughput_window_s: float  # … per this many seconds (audio s per 1 s, images per 60 s, video s per 3600 s)
    cost_key: str  # the load report's cost figure
    load_noun: str  # what a load sweep sends, in words
    item_nouns: tuple[str, str]  # one result, several (a gallery's words)
    media_suffix: str  # the file a result is kept as
    default_model: str
    default_pool: tuple[str, ...]  # instance types, in order of preference
    startup_timeout_s: int  # ContainerStartupHealthCheckTimeoutInSeconds: image pull + model load
    extra_env: tuple[tuple[str, str], ...] = ()
    records: str | None = None  # what the history keeps of its results ("takes", "jobs")
    # Invocations per instance per minute a realtime endpoint's autoscaling holds (infra/scaling.py); an async
    # endpoint scales on its backlog instead. A voice line takes seconds, an image about 10 s.
    invocations_target: float | None = None
    # Opt-in: `python -m infra deploy` (and `plan`) with no endpoint named leaves it out; `--with <name>` or
    # naming it adds it. The published sample's three are not opt-in.
    opt_in: bool = False
    # Whether the studio has a page for it (pages/<name>.py): a family without one is served from the CLI only.
    page: bool = True
    # The timings a load sweep reports per level beside the request's latency (services/load/report.py FIGURES),
    # the first being the one an SLO means when it names none: voice's first audio, listen's final text.
    load_figures: tuple[str, ...] = ()

    @property
    def endpoint_kind(self) -> Literal["realtime", "async"]:
        """The endpoint config's kind: async endpoints have an AsyncInferenceConfig; the others are realtime
        (a bidirectional stream is a realtime endpoint that also answers InvokeEndpointWithBidirectionalStream)."""
        return "async" if self.serving == "async" else "realtime"


# The published pool order. SageMaker provisions ONE instance, but checks the quota of EVERY entry.
PUBLISHED_POOL = ("ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge", "ml.g4dn.xlarge")
# FLUX.2-klein-4B and Wan2.1-VACE want bf16, which the T4 (g4dn) lacks, and Wan2.1-VACE with its text encoder
# needs more than the T4's 16 GB: g4dn is in the voice pool only.
LARGE_GPU_POOL = ("ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge")

# Qwen3-Omni's ≈ 85 GB does not fit one GPU of the published pool: 4× L40S (192 GB), 8× A100 80 GB, 8× H100.
MULTI_GPU_POOL = ("ml.g6e.12xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge")

FAMILIES: tuple[Family, ...] = (
    Family(
        name="voice", title="Voice", icon="🗣️", blurb="Voice — text in, speech out while it is generated",
        routes=("/v1/audio/speech/stream", "/v1/audio/speech", "/v1/audio/voices"),
        serving="bidirectional", unit="audio second", price_unit="audio minute",
        price_unit_size=60, throughput_key="audio_s_per_s", throughput_title="audio seconds per second",
        throughput_window_s=1, cost_key="usd_per_audio_minute", load_noun="voice sessions",
        item_nouns=("take", "takes"), media_suffix=".wav",
        default_model="Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", default_pool=PUBLISHED_POOL,
        startup_timeout_s=1800, records="takes", invocations_target=30.0, load_figures=("ttfa_ms",)),
    Family(
        name="image", title="Image", icon="🖼️", blurb="Image — FLUX.2-klein, realtime",
        routes=("/v1/images/generations", "/v1/images/edits"),
        serving="realtime", unit="image", price_unit="image",
        price_unit_size=1, throughput_key="images_per_min", throughput_title="images per minute",
        throughput_window_s=60, cost_key="usd_per_image", load_noun="image generations",
        item_nouns=("image", "images"), media_suffix=".png",
        default_model="black-forest-labs/FLUX.2-klein-4B", default_pool=LARGE_GPU_POOL,
        startup_timeout_s=1800, records="jobs", invocations_target=6.0),
    Family(
        name="video", title="Video", icon="🎬", blurb="Video — Wan2.1-VACE jobs, conditioned on your images",
        routes=("/v1/videos/sync",),
        serving="async", unit="video second", price_unit="video second",
        price_unit_size=1, throughput_key="video_s_per_hour", throughput_title="video seconds per hour",
        throughput_window_s=3600, cost_key="usd_per_video_second", load_noun="video jobs",
        item_nouns=("video", "videos"), media_suffix=".mp4",
        default_model="Wan-AI/Wan2.1-VACE-1.3B-diffusers", default_pool=LARGE_GPU_POOL,
        startup_timeout_s=3600, extra_env=(("SM_VLLM_VAE_USE_TILING", "true"),), records="jobs"),
    Family(
        name="listen", title="Listen", icon="👂", blurb="Listen — speech in, text out, from a file or as a stream",
        routes=("/v1/realtime", "/v1/audio/transcriptions"),
        serving="bidirectional", unit="audio second", price_unit="audio hour",
        price_unit_size=3600, throughput_key="audio_s_per_s", throughput_title="audio seconds per second",
        throughput_window_s=1, cost_key="usd_per_audio_hour", load_noun="transcriptions",
        item_nouns=("transcript", "transcripts"), media_suffix=".txt",
        load_figures=("final_ms", "first_partial_ms"),
        default_model="mistralai/Voxtral-Mini-4B-Realtime-2602", default_pool=LARGE_GPU_POOL,
        startup_timeout_s=1800, records="transcripts", invocations_target=30.0, opt_in=True),
    Family(
        name="omni", title="Omni", icon="💬", blurb="Omni — one model that hears and speaks: a spoken conversation",
        routes=("/v1/realtime", "/v1/chat/completions"),
        serving="bidirectional", unit="conversation turn", price_unit="conversation turn",
        price_unit_size=1, throughput_key="turns_per_min", throughput_title="conversation turns per minute",
        throughput_window_s=60, cost_key="usd_per_conversation_turn", load_noun="conversations",
        item_nouns=("conversation", "conversations"), media_suffix=".wav",
        default_model="Qwen/Qwen3-Omni-30B-A3B-Instruct", default_pool=MULTI_GPU_POOL,
        startup_timeout_s=3600, invocations_target=10.0, opt_in=True, page=False),
    Family(
        name="sound", title="Sound", icon="🔊", blurb="Sound — Stable Audio Open: effects, ambiences and music",
        routes=("/v1/audio/generate",),
        serving="realtime", unit="audio second", price_unit="generated minute",
        price_unit_size=60, throughput_key="audio_s_per_min", throughput_title="audio seconds generated per minute",
        throughput_window_s=60, cost_key="usd_per_generated_minute", load_noun="sound generations",
        item_nouns=("sound", "sounds"), media_suffix=".wav",
        default_model="stabilityai/stable-audio-open-1.0", default_pool=LARGE_GPU_POOL,
        startup_timeout_s=1800, records="jobs", invocations_target=6.0, opt_in=True),
)

FAMILY_NAMES: tuple[str, ...] = tuple(f.name for f in FAMILIES)
BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}
# Families whose results the history keeps as media jobs (one row per image or video made).
JOB_KINDS: tuple[str, ...] = tuple(f.name for f in FAMILIES if f.records == "jobs")
# The families `python -m infra deploy` deploys when no endpoint is named (the opt-in ones are added by name).
DEFAULT_FAMILY_NAMES: tuple[str, ...] = tuple(f.name for f in FAMILIES if not f.opt_in)


def family(name: str) -> Family:
    """The family called `name`; KeyError names the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no model family {name!r}; the catalog has {', '.join(FAMILY_NAMES)}") from None


def _qwen3_tts(size: str, task: str) -> Model:
    params = 0.6 if size == "0.6B" else 1.7
    weights = round(params * BF16_BYTES, 1)
    return Model(
        id=f"Qwen/Qwen3-TTS-12Hz-{size}-{task}", family="voice", task_types=(task,), params_b=params,
        weights_gb=weights, gpu_need_gb=computed_need_gb(weights), licence="Apache-2.0", needs_bf16=False,
        source="parameters from the model id (Qwen3-TTS model cards); weights and need by the catalog's rule")


MODELS: tuple[Model, ...] = (
    _qwen3_tts("0.6B", "CustomVoice"),
    _qwen3_tts("1.7B", "CustomVoice"),
    _qwen3_tts("0.6B", "Base"),
    _qwen3_tts("1.7B", "Base"),
    _qwen3_tts("1.7B", "VoiceDesign"),
    Model(id="black-forest-labs/FLUX.2-klein-4B", family="image", task_types=("generate", "edit"), params_b=8.0,
          weights_gb=16.0, gpu_need_gb=computed_need_gb(16.0), licence="Apache-2.0",
          source="4B flow transformer + 4B Qwen3 text encoder (Black Forest Labs' FLUX.2 [klein] model card); "
                 "weights at bf16 and need by the catalog's rule"),
    Model(id="Wan-AI/Wan2.1-VACE-1.3B-diffusers", family="video", task_types=("generate", "condition"),
          params_b=7.1, weights_gb=14.3, gpu_need_gb=computed_need_gb(14.3), licence="Apache-2.0",
          source="1.3B DiT + 5.7B umT5-XXL text encoder + 0.1B VAE (Wan2.1 model card); bf16, catalog's rule"),
    Model(id="mistralai/Voxtral-Mini-4B-Realtime-2602", family="listen", task_types=("transcribe", "realtime"),
          params_b=4.0, weights_gb=8.0, gpu_need_gb=computed_need_gb(8.0), licence="Apache-2.0", needs_bf16=True,
          source="parameters from the model id (4B; the model card's exact count, audio encoder included, is not "
                 "checked here); weights at bf16 and need by the catalog's rule"),
    Model(id="Qwen/Qwen3-Omni-30B-A3B-Instruct", family="omni", task_types=("converse", "chat"), params_b=35.0,
          weights_gb=70.0, gpu_need_gb=computed_need_gb(70.0), licence="Apache-2.0",
          source="≈ 35B parameters in all components — MoE thinker (30B, 3B active), talker, audio and vision "
                 "encoders, code2wav — and Apache-2.0 from the Qwen3-Omni model card; weights at bf16 (computed: "
                 "35 × 2 = 70 GB) and need by the catalog's rule (70 × 1.2 + 1 = 85 GB), so multi-GPU types only"),
    Model(id="stabilityai/stable-audio-open-1.0", family="sound", task_types=("generate",), params_b=1.3,
          weights_gb=2.6, gpu_need_gb=computed_need_gb(2.6), licence="Stability AI Community License",
          source="≈ 1.3B parameters in all components — a 1.06B DiT, a T5-base text encoder (0.11B) and the Oobleck "
                 "VAE (0.16B) — from the Stable Audio Open paper and model card (rounded; not checked here); weights "
                 "at bf16 and need by the catalog's rule"),
)
MODELS_BY_ID: dict[str, Model] = {m.id: m for m in MODELS}


def model(model_id: str | None) -> Model | None:
    """The catalog's entry for `model_id` (exact, else case-insensitive), None for a model it does not know."""
    if not model_id:
        return None
    if model_id in MODELS_BY_ID:
        return MODELS_BY_ID[model_id]
    lowered = model_id.strip().lower()
    return next((m for m in MODELS if m.id.lower() == lowered), None)


def models_of(family_name: str) -> tuple[Model, ...]:
    return tuple(m for m in MODELS if m.family == family_name)


def models_differ(family_name: str) -> bool:
    """Whether what a family's endpoint can do depends on which of its models is deployed (Qwen3-TTS: one task
    type per checkpoint): then the deploy form offers its models, and status shows the deployed one's task types."""
    return len({m.task_types for m in models_of(family_name)}) > 1


@dataclass(frozen=True)
class Page:
    """One page of the studio: its URL path (= its name), its script, how it is shown and who may open it."""

    name: str
    title: str
    icon: str
    blurb: str
    min_role: str  # viewer < creator < admin (services/access.py)

    @property
    def script(self) -> str:
        return f"pages/{self.name}.py"


# The family pages first (in catalog order; only families that have a page), then the studio's tools.
PAGES: tuple[Page, ...] = tuple(Page(f.name, f.title, f.icon, f.blurb, "viewer") for f in FAMILIES if f.page) + (
    Page("endpoints", "Endpoints", "☁️", "Endpoints — the SageMaker deployment: status, cost, deploy, delete",
         "admin"),
    Page("capacity", "Capacity", "📈", "Capacity — load sweeps: how much a target holds, what a unit costs",
         "viewer"),
    Page("evaluations", "Evaluations", "⚖️",
         "Evaluations — variants rated blind, win rates with their uncertainty", "viewer"),
    Page("converse", "Converse", "💬", "Converse — talk to a voice agent; the silence after you stop, measured",
         "viewer"),
)
PAGE_NAMES: tuple[str, ...] = tuple(p.name for p in PAGES)
