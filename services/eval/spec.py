"""The SPEC of an evaluation: a TOML file (or the same dict from a page) checked before anything runs.

    name = "0.6B vs 1.7B"
    modality = "voice"                # voice | image | video | listen
    prompts = ["Hello there.", "Welcome back."]      # or prompts_file = "prompts.txt" (one per line; .csv: first column)
    repeats = 1

    [[variants]]
    label = "calm"
    backend = "omni"                  # offline | omni | sagemaker, and url / endpoint / region / profile / state_file
    price_per_hour = 1.2              # or instance_type = "ml.g6.xlarge"; SageMaker: its instance's table rate
    url = "http://127.0.0.1:8091"
    voice = "vivian"
    instructions = "slow and warm"

A listen evaluation names its items instead of prompts: `[[items]]` tables of `audio` (a recording's path,
relative to the SPEC) and `reference` (the text spoken), or `items_file` (a CSV with the columns audio,
reference; paths relative to it). Its variants are listen targets (`model`, `language`, `route` = file | stream).
A voice evaluation's `intelligibility` names the listen target its speech is transcribed by ("offline", the
default; "none"; a URL; or a table of backend / url / endpoint / model).

Each variant takes the setting names of the matching command (`speak`, `image`, `video`; `first-chunk-frames`
and `first_chunk_frames` are the same). Refused, naming what to fix: unknown keys or settings, fewer than 2
variants, duplicate labels, an empty prompt set, more than MAX_ITEMS_UNCONFIRMED items without `yes`, a `seed`
that is not a whole number from 0 to 2**32 − 1, a `price_per_hour` outside load's range, and TOML's inf or nan
for any number (named with the range it must be in).
"""

from __future__ import annotations

import csv
import io
import math
import tomllib
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from protocol import limits
from protocol.catalog import FAMILY_NAMES
from protocol.errors import InvalidInput
from protocol.limits import PROMPTS_FILE_MAX_BYTES, SPEC_FILE_MAX_BYTES, Range, check_length
from services.eval.requests import build_request
from services.kinds import BackendName
from services.files import read_user_file

MAX_ITEMS_UNCONFIRMED = 1000
MAX_REPEATS = 100
TARGET_KEYS = ("backend", "url", "endpoint", "region", "profile", "state_file", "instance_type", "price_per_hour")
TOP_KEYS = ("name", "modality", "prompts", "prompts_file", "items", "items_file", "repeats", "variants", "seed",
            "intelligibility")
class _Variant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {}
    EXAMPLE: ClassVar[str] = ""  # a variant's settings as a person would type them (the Evaluations form's hint)
    label: str
    backend: BackendName | None = None
    url: str | None = None
    endpoint: str | None = None
    region: str | None = None
    profile: str | None = None
    state_file: str | None = None
    instance_type: str | None = None  # what the target runs on, to price it (as `load --instance-type`)
    price_per_hour: float | None = None  # the target's hourly price by hand (as `load --price-per-hour`)


# The numeric settings' ranges, for a message that names the range when TOML's inf or nan is given (pydantic
# only says "finite"); values inside these are checked by the request itself (build_request).
class VoiceVariant(_Variant):
    EXAMPLE: ClassVar[str] = 'instructions = "slow and warm"\nsplit = "sentence"'  # valid on every target
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {"first_chunk_frames": (limits.FIRST_CHUNK_FRAMES, True)}
    voice: str | None = None
    language: str | None = None
    task_type: Literal["CustomVoice", "VoiceDesign"] | None = None
    instructions: str | None = None
    first_chunk_frames: int | None = None
    split: Literal["none", "sentence", "clause"] = "clause"


class ImageVariant(_Variant):
    EXAMPLE: ClassVar[str] = "steps = 8\nseed = 1"
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {
        "steps": (limits.IMAGE_STEPS, True), "guidance": (limits.IMAGE_GUIDANCE, False), "seed": (limits.SEED, True)}
    size: str | None = None
    steps: int | None = None
    guidance: float | None = None
    seed: int | None = None
    negative_prompt: str | None = None


class VideoVariant(_Variant):
    EXAMPLE: ClassVar[str] = "frames = 17\nsteps = 4"
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {
        "width": (limits.VIDEO_SIZE, True), "height": (limits.VIDEO_SIZE, True),
        "frames": (limits.VIDEO_FRAMES, True), "fps": (limits.VIDEO_FPS, True), "steps": (limits.VIDEO_STEPS, True),
        "guidance": (limits.VIDEO_GUIDANCE, False), "seed": (limits.SEED, True)}
    width: int | None = None
    height: int | None = None
    frames: int | None = None
    fps: int | None = None
    steps: int | None = None
    guidance: float | None = None
    seed: int | None = None
    negative_prompt: str | None = None


class ListenVariant(_Variant):
    EXAMPLE: ClassVar[str] = 'route = "file"'
    model: str | None = None
    language: str | None = None
    route: Literal["file", "stream"] = "file"  # stream: sent as a microphone would, paced at real time


VARIANT_MODELS: dict[str, type[_Variant]] = {"voice": VoiceVariant, "image": ImageVariant, "video": VideoVariant,
                                             "listen": ListenVariant}
# The catalog's families that can be evaluated: those with a variant class above.
Modality = Literal[tuple(f for f in FAMILY_NAMES if f in VARIANT_MODELS)]  # type: ignore[valid-type]
MODALITIES: tuple[str, ...] = get_args(Modality)
# Each modality's settings (its variant's own fields, in order) and their ranges (modality → key → (range, whole)).
SETTINGS: dict[str, tuple[str, ...]] = {
    m: tuple(f for f in cls.model_fields if f not in _Variant.model_fields) for m, cls in VARIANT_MODELS.items()}
RANGES: dict[str, dict[str, tuple[Range, bool]]] = {m: cls.RANGES for m, cls in VARIANT_MODELS.items()}


class EvalSpec(BaseModel):
    """A checked SPEC: prompts resolved (prompts_file read), variants typed for the modality."""
    model_config = ConfigDict(extra="forbid")
    name: str
    modality: Modality
    prompts: list[str]
    repeats: int = 1
    seed: int = 0
    variants: list[dict[str, Any]]
    audio: list[str] = []  # listen: each item's recording (a path), beside its reference in `prompts`
    intelligibility: dict[str, Any] | None = None  # voice: the listen target its speech is heard by (None: off)

    @property
    def labels(self) -> list[str]:
        return [v["label"] for v in self.variants]

    @property
    def item_count(self) -> int:
        return len(self.prompts) * self.repeats * len(self.variants)

    def settings(self, label: str) -> dict[str, Any]:
        """A variant's settings (target keys included), the Nones left out."""
        for v in self.variants:
            if v["label"] == label:
                return {k: val for k, val in v.items() if val is not None}
        raise KeyError(label)


def _norm(key: Any) -> str:
    return str(key).replace("-", "_")


def _pydantic_problem(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        where = ".".join(str(p) for p in e["loc"]) or "value"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)


def read_prompts_file(path: Path) -> list[str]:
    """One prompt per line (.txt), or the first column of each row (.csv; a header row `prompt` is skipped)."""
    data = read_user_file(path, what="prompts_file", limit=PROMPTS_FILE_MAX_BYTES,
                          hint="; give a UTF-8 .txt or .csv file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"cannot read prompts_file {path} ({exc}); give a UTF-8 .txt or .csv file") from None
    if path.suffix.lower() == ".csv":
        rows = [r[0] for r in csv.reader(io.StringIO(text)) if r]
        if rows and rows[0].strip().lower() == "prompt":
            rows = rows[1:]
        return [r.strip() for r in rows if r.strip()]
    return [line.strip() for line in text.splitlines() if line.strip()]


def _check_numbers(name: str, modality: str, raw: dict[str, Any]) -> None:
    """A variant's price, and any numeric setting that is inf or nan, refused naming the key and its range."""
    from services.load.target import check_price  # the same rule as `load --price-per-hour`

    price = raw.get("price_per_hour")
    if price is not None:
        try:
            check_price(price)
        except InvalidInput as exc:
            raise InvalidInput(f"{name}: price_per_hour: {exc}") from None
    for key, (rng, whole) in RANGES[modality].items():
        value = raw.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            rng.check(f"{name}: {key}", value, integer=whole)


def _prompts(data: dict[str, Any], modality: str, base_dir: Path | None) -> list[str]:
    """The SPEC's prompt set: `prompts` (a list, or lines of one text) or `prompts_file`, never empty."""
    if "prompts" in data and "prompts_file" in data:
        raise InvalidInput("give prompts or prompts_file, not both")
    if "prompts_file" in data:
        path = Path(str(data.pop("prompts_file")))
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        prompts = read_prompts_file(path)
    else:
        prompts = data.get("prompts", [])
        if isinstance(prompts, str):
            prompts = [p for p in prompts.splitlines()]
        if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
            raise InvalidInput("prompts must be a list of texts")
        prompts = [p.strip() for p in prompts if p.strip()]
    if not prompts:
        raise InvalidInput("the prompt set is empty: give at least one prompt (prompts = [...] or prompts_file)")
    if modality != "voice":  # what the image and video servers accept (voice text is split to fit)
        for i, prompt in enumerate(prompts, 1):
            check_length(f"prompt {i}", prompt)
    return prompts


def _items_file(path: Path) -> list[dict[str, Any]]:
    """A listen items_file: CSV rows of audio, reference (a header row `audio,reference` is skipped)."""
    data = read_user_file(path, what="items_file", limit=PROMPTS_FILE_MAX_BYTES, hint="; give a UTF-8 .csv file")
    try:
        rows = [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig"))) if any(c.strip() for c in r)]
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"cannot read items_file {path} ({exc}); give a UTF-8 .csv file") from None
    if rows and [c.strip().lower() for c in rows[0][:2]] == ["audio", "reference"]:
        rows = rows[1:]
    out = []
    for n, row in enumerate(rows, 1):
        if len(row) < 2:
            raise InvalidInput(f"items_file {path}, row {n}: give two columns, audio and reference")
        out.append({"audio": str(path.parent / row[0].strip()), "reference": row[1]})
    return out


def _listen_items(data: dict[str, Any], base_dir: Path | None) -> tuple[list[str], list[str]]:
    """A listen SPEC's items: (recording paths, references), each recording read and checked, never empty."""
    from services.eval.listening import check_reference
    from services.listen import load_audio

    if "prompts" in data or "prompts_file" in data:
        raise InvalidInput("a listen evaluation names recordings, not prompts: give [[items]] tables of audio and "
                           "reference, or items_file")
    if "items" in data and "items_file" in data:
        raise InvalidInput("give items or items_file, not both")
    raw = _items_file(_resolve(data["items_file"], base_dir)) if "items_file" in data else data.get("items", [])
    if not isinstance(raw, list) or not raw:
        raise InvalidInput("the listen evaluation has no items: give [[items]] tables of audio (a recording's path) "
                           "and reference (the text spoken), or items_file")
    paths, references = [], []
    for i, item in enumerate(raw, 1):
        if not isinstance(item, dict) or set(item) != {"audio", "reference"}:
            raise InvalidInput(f"item {i}: give exactly audio (a recording's path) and reference (the text spoken)")
        path, reference = _resolve(item["audio"], base_dir), str(item["reference"]).strip()
        check_reference(f"item {i} ({path.name})", reference)
        try:
            load_audio(read_user_file(path, what=f"item {i}'s audio", limit=limits.TRANSCRIPTION_FILE_MAX_BYTES,
                                      hint="; give a recording file"), path.name)
        except InvalidInput as exc:
            raise InvalidInput(f"item {i}: {exc}") from None
        paths.append(str(path.resolve()))
        references.append(reference)
    return paths, references


def _resolve(value: Any, base_dir: Path | None) -> Path:
    path = Path(str(value))
    return base_dir / path if base_dir is not None and not path.is_absolute() else path


def _variants(raw_variants: Any, modality: str) -> list[dict[str, Any]]:
    """The [[variants]] tables, each checked as its requests will be: at least 2, labelled uniquely."""
    if not isinstance(raw_variants, list) or len(raw_variants) < 2:
        n = len(raw_variants) if isinstance(raw_variants, list) else 0
        raise InvalidInput(f"an evaluation compares at least 2 variants ([[variants]] tables); this SPEC has {n}")
    model = VARIANT_MODELS[modality]
    known = ("label", *TARGET_KEYS, *SETTINGS[modality])
    variants: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_variants, 1):
        if not isinstance(raw, dict):
            raise InvalidInput(f"variant {i} is not a table ([[variants]])")
        raw = {_norm(k): v for k, v in raw.items()}
        label = raw.get("label")
        name = f"variant {i}" + (f" ({label!r})" if label else "")
        bad = [k for k in raw if k not in known]
        if bad:
            raise InvalidInput(f"{name}: unknown setting(s) {', '.join(bad)} for {modality}; the settings are "
                               f"{', '.join(known)}")
        if not isinstance(label, str) or not label.strip():
            raise InvalidInput(f"{name} has no label: give each variant a label")
        if label.strip() in seen:
            raise InvalidInput(f"two variants are labelled {label!r}: give each variant its own label")
        seen.add(label.strip())
        _check_numbers(name, modality, raw)
        try:
            checked = model.model_validate({**raw, "label": label.strip()})
        except ValidationError as exc:
            raise InvalidInput(f"{name}: {_pydantic_problem(exc)}") from None
        dumped = checked.model_dump()
        try:  # the values themselves (a size, a step count, a voice style) checked before anything runs
            build_request(modality, "check", dumped)
        except InvalidInput as exc:
            raise InvalidInput(f"{name}: {exc}") from None
        variants.append(dumped)
    return variants


def parse_spec(data: dict[str, Any], *, base_dir: Path | None = None, yes: bool = False) -> EvalSpec:
    """Check a SPEC dict (from TOML or a page); every refusal is an InvalidInput naming what to fix."""
    if not isinstance(data, dict):
        raise InvalidInput("a SPEC is a table of keys (name, modality, prompts, repeats, [[variants]])")
    data = {_norm(k): v for k, v in data.items()}
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise InvalidInput(f"unknown key(s) in the SPEC: {', '.join(unknown)}; the keys are {', '.join(TOP_KEYS)}")
    for key in ("name", "modality", "variants"):
        if key not in data:
            raise InvalidInput(f"the SPEC has no {key!r}")
    modality = data["modality"]
    if modality not in SETTINGS:
        known = f"{', '.join(MODALITIES[:-1])} or {MODALITIES[-1]}"
        why = f" ({modality} is not evaluated yet)" if isinstance(modality, str) and modality in FAMILY_NAMES else ""
        raise InvalidInput(f"modality must be {known}, not {modality!r}{why}")
    audio: list[str] = []
    if modality == "listen":
        audio, prompts = _listen_items(data, base_dir)
    else:
        for key in ("items", "items_file"):
            if key in data:
                raise InvalidInput(f"{key} names a listen evaluation's recordings; a {modality} evaluation has prompts")
        prompts = _prompts(data, modality, base_dir)
    intelligibility = None
    if modality == "voice":
        from services.eval.listening import intelligibility_setting
        intelligibility = intelligibility_setting(data.get("intelligibility"))
    elif "intelligibility" in data:
        raise InvalidInput("intelligibility is a voice evaluation's setting (its speech heard by a listen target)")
    repeats = data.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= MAX_REPEATS:
        raise InvalidInput(f"repeats must be a whole number from 1 to {MAX_REPEATS}, not {repeats!r}")
    variants = _variants(data["variants"], modality)
    seed = data.get("seed", 0)
    limits.SEED.check("seed", seed, hint="it orders the blind pairs")  # TOML's inf and nan too, naming the key
    try:
        spec = EvalSpec(name=str(data["name"]), modality=modality, prompts=prompts, repeats=repeats,
                        seed=seed, variants=variants, audio=audio, intelligibility=intelligibility)
    except (ValidationError, TypeError, ValueError) as exc:
        raise InvalidInput(f"the SPEC: {exc}") from None
    if not spec.name.strip():
        raise InvalidInput("the SPEC's name is empty: give the evaluation a name")
    if spec.item_count > MAX_ITEMS_UNCONFIRMED and not yes:
        raise InvalidInput(f"this evaluation makes {spec.item_count} items ({len(prompts)} prompts × {repeats} repeats"
                           f" × {len(variants)} variants), more than {MAX_ITEMS_UNCONFIRMED}: confirm with --yes")
    return spec


def load_spec(path: Path, *, yes: bool = False) -> EvalSpec:
    """Read and check a SPEC.toml."""
    raw = read_user_file(path, what="the SPEC", limit=SPEC_FILE_MAX_BYTES)
    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the SPEC {path} is not valid TOML ({exc})") from None
    return parse_spec(data, base_dir=path.parent, yes=yes)


# What a target's speech model offers, asked per variant before an evaluation is made: (voices, languages), or
# None when the target cannot be asked now (its run says why, item by item).
SpeechOffer = tuple[list[str], list[str]]
CATALOG_SETTINGS = {"voice": "voices", "language": "languages"}


def check_catalog(spec: EvalSpec, offer: Any) -> None:
    """InvalidInput, naming the variant, the setting and what its target offers, when a voice variant asks for a
    voice or a language its target's model does not have (the offline engine: joe and English; Qwen3-TTS
    CustomVoice: nine speakers, ten languages). `offer(variant settings)` → SpeechOffer | None (any case matches,
    as the servers compare)."""
    if spec.modality != "voice":
        return  # image and video values are checked against their limits by parse_spec already
    for variant in spec.variants:
        wanted = {k: variant.get(k) for k in CATALOG_SETTINGS if variant.get(k)}
        if not wanted:
            continue
        offered = offer(spec.settings(variant["label"]))
        if offered is None:
            continue
        for (key, what), have in zip(CATALOG_SETTINGS.items(), offered):
            value = wanted.get(key)
            if value is not None and str(value).lower() not in {h.lower() for h in have}:
                raise InvalidInput(f"variant {variant['label']!r}: {key} {value!r} is not one of its target's "
                                   f"{what}: pick one of {', '.join(have) or 'none'}")
