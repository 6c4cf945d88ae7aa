"""The SPEC of an evaluation: a TOML file (or the same dict from a page) checked before anything runs.

    name = "0.6B vs 1.7B"
    modality = "voice"                # voice | image | video | listen
    prompts = ["Hello there.", "Welcome back."]      # or prompts_file = "prompts.txt" (one per line; .csv: first column)
    repeats = 1

    [[variants]]
    label = "calm"
    backend = "server"                # offline | server | sagemaker, and url / endpoint / region / profile / state_file
    price_per_hour = 1.2              # or instance_type = "ml.g6.xlarge"; SageMaker: its instance's table rate
    url = "http://127.0.0.1:8091"
    voice = "vivian"
    instructions = "slow and warm"

A listen evaluation names its items instead of prompts: `[[items]]` tables of `audio` (a recording's path,
relative to the SPEC) and `reference` (the text spoken), or `items_file` (a CSV with the columns audio,
reference; paths relative to it). Its variants are listen targets (`model`, `language`, `route` = file | stream).
A voice evaluation's `intelligibility` names the listen target its speech is transcribed by ("offline", the
default; "none"; a URL; or a table of backend / url / endpoint / model).

A variant may instead take results already in the history as its outputs: `kept = ["take-…", …]` (voice takes;
image or video jobs), and nothing else — their prompts join the prompt set (EvalStore.create reads them).

What each family takes, makes and measures is its part's (services/eval/family.py, found by
services.eval.registry); this module names no family.

Each variant takes the setting names of the matching command (`speak`, `image`, `video`; `first-chunk-frames`
and `first_chunk_frames` are the same). Refused, naming what to fix: unknown keys or settings, fewer than 2
variants, duplicate labels, an empty prompt set, more than MAX_ITEMS_UNCONFIRMED items without `yes`, a `seed`
that is not a whole number from 0 to 2**32 − 1, a `price_per_hour` outside load's range, and TOML's inf or nan
for any number (named with the range it must be in).

`backend = "omni"`, a vLLM-Omni server's former name, is read as "server" — in a SPEC file and in an evaluation the
history kept (services/kinds.py).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from protocol import limits
from protocol.errors import InvalidInput
from protocol.limits import SPEC_FILE_MAX_BYTES
from services.eval.family import EvalFamily
from services.eval.prompts import read_prompts_file
from services.eval.registry import MODALITIES, Modality, evaluation
from services.files import read_user_file
from services.kinds import backend_name

__all__ = ["EvalSpec", "MODALITIES", "Modality", "check_catalog", "load_spec", "parse_spec", "read_prompts_file"]

MAX_ITEMS_UNCONFIRMED = 1000
MAX_REPEATS = 100
TARGET_KEYS = ("backend", "url", "endpoint", "region", "profile", "state_file", "instance_type", "price_per_hour")
TOP_KEYS = ("name", "modality", "prompts", "prompts_file", "items", "items_file", "repeats", "variants", "seed",
            "intelligibility")


def _evaluated(modality: str) -> str:
    return evaluation(modality).name  # a family with an evaluation part (the registry's, as it is now)


def _kind_today(target: dict[str, Any]) -> dict[str, Any]:
    """A variant's (or the hearing target's) keys with its backend under today's name: "omni" → "server"."""
    return target | {"backend": backend_name(target["backend"])} if "backend" in target else target


Target = Annotated[dict[str, Any], AfterValidator(_kind_today)]


class EvalSpec(BaseModel):
    """A checked SPEC: prompts resolved (prompts_file read), variants typed for the modality."""
    model_config = ConfigDict(extra="forbid")
    name: str
    modality: Annotated[str, AfterValidator(_evaluated)]  # one of Modality
    prompts: list[str]
    repeats: int = 1
    seed: int = 0
    variants: list[Target]
    audio: list[str] = []  # a family that takes audio (listen): each item's recording (a path), beside its reference
    intelligibility: Target | None = None  # the target its outputs are heard by (voice: a listen target)

    @property
    def labels(self) -> list[str]:
        return [v["label"] for v in self.variants]

    @property
    def item_count(self) -> int:
        """Each made variant's prompts × repeats, and each kept result once."""
        return sum(len(v["kept"]) if v.get("kept") else len(self.prompts) * self.repeats for v in self.variants)

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


def _check_numbers(name: str, part: EvalFamily, raw: dict[str, Any]) -> None:
    """A variant's price, and any numeric setting that is inf or nan, refused naming the key and its range."""
    from services.load.target import check_price  # the same rule as `load --price-per-hour`

    price = raw.get("price_per_hour")
    if price is not None:
        try:
            check_price(price)
        except InvalidInput as exc:
            raise InvalidInput(f"{name}: price_per_hour: {exc}") from None
    for key, (rng, whole) in part.variant.RANGES.items():
        value = raw.get(key)
        if isinstance(value, float) and not math.isfinite(value):
            rng.check(f"{name}: {key}", value, integer=whole)


def _check_kept(name: str, part: EvalFamily, raw: dict[str, Any]) -> None:
    """A variant of results from the history: a list of their ids, and nothing that would make others."""
    kept = raw["kept"]
    if part.keeps is None:
        raise InvalidInput(f"{name}: a {part.name} evaluation takes no results from the history (kept): its "
                           "variants make them")
    if not isinstance(kept, list) or not kept or not all(isinstance(k, str) and k.strip() for k in kept):
        raise InvalidInput(f"{name}: kept is a list of the ids of {part.keeps} in the history")
    if len(set(kept)) != len(kept):
        raise InvalidInput(f"{name}: kept names one result twice: keep each once")
    extra = [k for k in raw if k not in ("label", "kept")]
    if extra:
        raise InvalidInput(f"{name}: its outputs are kept results, so it has no target or settings: remove "
                           f"{', '.join(extra)}")


def _variants(raw_variants: Any, part: EvalFamily) -> list[dict[str, Any]]:
    """The [[variants]] tables, each checked as its requests will be: at least 2, labelled uniquely."""
    if not isinstance(raw_variants, list) or len(raw_variants) < 2:
        n = len(raw_variants) if isinstance(raw_variants, list) else 0
        raise InvalidInput(f"an evaluation compares at least 2 variants ([[variants]] tables); this SPEC has {n}")
    known = ("label", *TARGET_KEYS, *part.settings)
    variants: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_variants, 1):
        if not isinstance(raw, dict):
            raise InvalidInput(f"variant {i} is not a table ([[variants]])")
        raw = {_norm(k): v for k, v in raw.items()}
        label = raw.get("label")
        name = f"variant {i}" + (f" ({label!r})" if label else "")
        bad = [k for k in raw if k not in known and k != "kept"]
        if bad:
            raise InvalidInput(f"{name}: unknown setting(s) {', '.join(bad)} for {part.name}; the settings are "
                               f"{', '.join(known)}")
        if not isinstance(label, str) or not label.strip():
            raise InvalidInput(f"{name} has no label: give each variant a label")
        if label.strip() in seen:
            raise InvalidInput(f"two variants are labelled {label!r}: give each variant its own label")
        seen.add(label.strip())
        if raw.get("kept") is not None:
            _check_kept(name, part, raw)
            variants.append({"label": label.strip(), "kept": [k.strip() for k in raw["kept"]]})
            continue
        _check_numbers(name, part, raw)
        try:
            checked = part.variant.model_validate({**raw, "label": label.strip()})
        except ValidationError as exc:
            raise InvalidInput(f"{name}: {_pydantic_problem(exc)}") from None
        dumped = checked.model_dump(exclude={"kept"})
        try:  # the values themselves (a size, a step count, a voice style) checked before anything runs
            part.request("check", dumped)
        except InvalidInput as exc:
            raise InvalidInput(f"{name}: {exc}") from None
        variants.append(dumped)
    return variants


def parse_spec(data: dict[str, Any], *, base_dir: Path | None = None, yes: bool = False) -> EvalSpec:
    """Check a SPEC dict (from TOML or a page); every refusal is an InvalidInput naming what to fix."""
    if not isinstance(data, dict):
        raise InvalidInput("a SPEC is a table of keys (name, modality, prompts, repeats, [[variants]])")
    data = {_norm(k): v for k, v in data.items()}
    if "family" in data:  # the catalog's word; `modality` is the key kept evaluations and older SPECs use
        family = data.pop("family")
        if data.setdefault("modality", family) != family:
            raise InvalidInput(f"the SPEC says family = {family!r} and modality = {data['modality']!r}: give one "
                               "(family is the same key)")
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise InvalidInput(f"unknown key(s) in the SPEC: {', '.join(unknown)}; the keys are {', '.join(TOP_KEYS)}")
    for key in ("name", "modality", "variants"):
        if key not in data:
            raise InvalidInput(f"the SPEC has no {key!r}")
    part = evaluation(data["modality"])
    raw_variants = data["variants"]
    some_kept = isinstance(raw_variants, list) and any(isinstance(v, dict) and v.get("kept") for v in raw_variants)
    prompts, audio = part.inputs(data, base_dir, required=not some_kept)  # else the kept ones' prompts join
    intelligibility = part.hearing(data)
    repeats = data.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= MAX_REPEATS:
        raise InvalidInput(f"repeats must be a whole number from 1 to {MAX_REPEATS}, not {repeats!r}")
    variants = _variants(raw_variants, part)
    seed = data.get("seed", 0)
    limits.SEED.check("seed", seed, hint="it orders the blind pairs")  # TOML's inf and nan too, naming the key
    try:
        spec = EvalSpec(name=str(data["name"]), modality=part.name, prompts=prompts, repeats=repeats,
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


# What a target offers for a family's `picks`, asked per variant before an evaluation is made (voice: its voices
# and its languages), or None when the target cannot be asked now (its run says why, item by item).
Offer = tuple[list[str], ...]


def check_catalog(spec: EvalSpec, offer: Any) -> None:
    """InvalidInput, naming the variant, the setting and what its target offers, when a variant picks a value of
    its family's `picks` its target does not offer (the offline engine: joe and English; Qwen3-TTS CustomVoice:
    nine speakers, ten languages). `offer(variant settings)` → Offer | None (any case matches, as the servers
    compare)."""
    picks = evaluation(spec.modality).picks
    for variant in spec.variants:
        wanted = {k: variant.get(k) for k in picks if variant.get(k)}
        if not wanted:
            continue
        offered = offer(spec.settings(variant["label"]))
        if offered is None:
            continue
        for (key, what), have in zip(picks.items(), offered):
            value = wanted.get(key)
            if value is not None and str(value).lower() not in {h.lower() for h in have}:
                raise InvalidInput(f"variant {variant['label']!r}: {key} {value!r} is not one of its target's "
                                   f"{what}: pick one of {', '.join(have) or 'none'}")
