"""What a load sweep is asked to do, checked before anything is sent: `LoadPlan`, the SLO, the work item.

    plan = LoadPlan.build("voice", levels="1,2,4,8", requests=16, slo="ttfa 300ms",
                          work={"text": "Hello there. How are you today?"})

Before the first level, `warmup` requests (default 1) run one at a time and are kept apart from the figures:
a cold first request (a model warming up, a new connection) is not what the target does under steady load.

What a request of a family's sweep sends is its load part's (services/load/family.py, `load_family`): the fields
its work item may name, their defaults and checks, the SLO it holds when none is given. A listen sweep's work is a
recording streamed at real time over `/v1/realtime`: one given (`recording=`, the CLI's `--audio FILE`), or by
default a sentence (`text`) the offline engine's voice speaks, made once when the sweep starts
(services/load/listen.py). Its SLO is the final text's p95 (`final_ms`, from the last audio sent to
`transcription.done`), 1000 ms unless another is given.

A converse sweep (`CONVERSE`, services/load/converse.py) holds whole conversations: each request is one pipeline
conversation over the same recorded turns (`inputs=`, the CLI's `--input`), and its SLO is on voice-to-voice: a
conversation holds it when none of its turns failed and the p95 (nearest-rank) of its turns' voice-to-voice is
within the limit (1500 ms unless another is given). It is not a catalog family — a pipeline spans listen, a reply
and voice — so its unit of work, throughput and price unit are the catalog's conversation turn (`unit_family`).

Every rule is an InvalidInput naming what to fix: an unknown modality, concurrency levels that are not
increasing positive whole numbers, more in flight than the limit (64), more requests than the limit (2000)
or fewer requests than the highest level (a level of 8 needs at least 8 requests), an SLO without a unit,
a TTFA SLO for images or videos, a work item a request would refuse (an empty prompt, a size out of range).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from protocol.catalog import FAMILY_NAMES, Family, family
from protocol.errors import InvalidInput
from protocol.limits import SPEC_FILE_MAX_BYTES, Range
from services import families
from services.files import read_user_file
from services.listen import ListenAudio
from services.load.family import LoadFamily, joined

# The catalog's families that a sweep can load: those whose family module registers a load part (its work item
# and unit of work: services/load/<family>.py, found by `load_family`).
Modality = Literal[families.having("load")]  # type: ignore[valid-type]
MODALITIES: tuple[Modality, ...] = get_args(Modality)
# Whole conversations (the pipeline: listen, a reply, voice), counted in the catalog's conversation turns
CONVERSE = "converse"
CONVERSE_UNITS = "omni"  # the catalog family whose unit is the conversation turn (turns per minute, $ per turn)
_CONVERSE_FIELDS = ("reply", "voice", "silence_ms")  # the setup, as a person reads it (the targets are the report's)
LOAD_KINDS: tuple[str, ...] = (*MODALITIES, CONVERSE)
SloMetric = Literal["ttfa_ms", "final_ms", "first_partial_ms", "latency_s", "v2v_ms"]
# Each figure an SLO can hold: its words for people, its unit, and the word an SLO's text names it by.
SLO_FIGURES: dict[str, tuple[str, str, str]] = {
    "ttfa_ms": ("first audio", "ms", "ttfa"), "final_ms": ("final text", "ms", "final"),
    "first_partial_ms": ("first partial", "ms", "first partial"), "latency_s": ("latency", "s", "latency"),
    "v2v_ms": ("voice-to-voice", "ms", "v2v")}
_SLO_WORDS = {"ttfa": "ttfa_ms", "first audio": "ttfa_ms", "final": "final_ms", "final text": "final_ms",
              "first partial": "first_partial_ms", "latency": "latency_s", "v2v": "v2v_ms",
              "voice to voice": "v2v_ms"}
DEFAULT_V2V_MS = 1500.0  # a converse sweep's when none is given: each conversation's p95 voice-to-voice
_CONVERSE_SLO = "a converse sweep's SLO is on voice-to-voice, e.g. \"v2v 1500ms\" (--slo-v2v-ms 1500)"

# The guard rails: a sweep is a measurement, not a load generator for hire.
CONCURRENCY = Range(1, 64)  # requests in flight at one level
REQUESTS = Range(1, 2000)  # requests per level
WALL_CLOCK_S = Range(10, 4 * 3600)  # the whole sweep stops sending after this long
WARMUP = Range(0, 5)  # requests sent one at a time before the first level, kept apart from the figures
DEFAULT_WALL_CLOCK_S = 30 * 60.0
DEFAULT_LEVELS = (1, 2, 4, 8)

UNITS_S = {"ms": 0.001, "s": 1.0, "sec": 1.0, "min": 60.0}
_SLO = re.compile(r"^\s*(?:(?:p95\s+)?(?P<metric>ttfa|first[ -]audio|final(?:[ -]text)?|first[ -]partial|latency|"
                  r"v2v|voice[ -]to[ -]voice)"
                  r"\s*(?:<=|<|=|:)?\s*)?"
                  r"(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>[a-zA-Z]*)\s*$", re.IGNORECASE)


def check_modality(modality: str) -> Modality:
    if modality not in MODALITIES:
        why = f" ({modality} is not load-tested yet)" if modality in FAMILY_NAMES else ""
        raise InvalidInput(f"unknown modality {modality!r}{why}: a sweep loads {', '.join(MODALITIES)}")
    return modality  # type: ignore[return-value]


@functools.cache
def load_family(modality: str) -> LoadFamily:
    """The load part of the family called `modality` (its work item, unit of work, figures and inputs), as its
    family module registers it; InvalidInput for a family without one (naming those with one)."""
    return families.code(check_modality(modality)).load()


def unit_family(kind: str) -> Family:
    """The catalog family whose unit of work, throughput and price unit a load kind counts: its own, or — for a
    converse sweep — the catalog's conversation turn."""
    return family(CONVERSE_UNITS if kind == CONVERSE else kind)


def load_figures(kind: str) -> tuple[str, ...]:
    """The timings a load kind reports per level (the first is what an SLO without a metric means)."""
    return ("v2v_ms",) if kind == CONVERSE else family(kind).load_figures


def parse_levels(levels: str | list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """"1,2,4,8" (or a list) as increasing positive whole numbers, each at most the concurrency limit."""
    shown = levels if isinstance(levels, str) else ",".join(map(str, levels))
    items = [s.strip() for s in shown.split(",")] if isinstance(levels, str) else list(levels)
    example = "e.g. 1,2,4,8"
    if not items or items == [""]:
        raise InvalidInput(f"give the concurrency levels to measure, {example}")
    out: list[int] = []
    for item in items:
        text = str(item).strip()
        if isinstance(item, bool) or not re.fullmatch(r"\d+", text) or int(text) < 1:
            what = repr(text) if text else "an empty entry"
            raise InvalidInput(f"concurrency levels are positive whole numbers, {example}; {what} in {shown!r} is not one")
        level = int(text)
        if out and level <= out[-1]:
            raise InvalidInput(f"concurrency levels must increase, {example}; in {shown!r} {level} follows {out[-1]}")
        CONCURRENCY.check("a concurrency level", level, hint="requests in flight at once")
        out.append(level)
    return tuple(out)


@dataclass(frozen=True)
class Slo:
    """A target for the p95 of one figure: first audio (`ttfa_ms`, voice), the final text or the first partial
    (`final_ms`, `first_partial_ms`, listen) or request latency (`latency_s`)."""

    metric: SloMetric
    limit: float  # in the metric's unit: ms for the *_ms figures, s for latency_s

    @property
    def unit(self) -> str:
        return SLO_FIGURES[self.metric][1]

    def label(self) -> str:
        if self.metric == "v2v_ms":  # held per conversation (services/load/converse.py)
            return f"each conversation's p95 voice-to-voice ≤ {self.limit:g} ms"
        return f"p95 {SLO_FIGURES[self.metric][0]} ≤ {self.limit:g} {self.unit}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "limit": self.limit, "unit": self.unit, "percentile": 95, "label": self.label()}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Slo | None:
        return None if not d else cls(d["metric"], float(d["limit"]))


def parse_slo(text: str, modality: str) -> Slo | None:
    """An SLO typed by a person: "300ms", "ttfa 300 ms", "latency 2s", "p95 latency <= 1.5 s" (blank: none).

    The unit is required (ms, s or min): "300" alone could be milliseconds or seconds. Without a metric, a sweep
    means its family's first load figure (voice: first audio, listen: "final 1000ms", the final text) and images
    and videos mean latency. First audio is voice's only; the final text and first partial listen's."""
    if text is None or not str(text).strip():
        return None
    m = _SLO.match(str(text))
    if m is None:
        raise InvalidInput(f"cannot read the SLO {text!r}: write a figure with its unit, e.g. \"ttfa 300ms\" or "
                           "\"latency 2s\"")
    unit = m["unit"].lower()
    if not unit:
        raise InvalidInput(f"the SLO {text.strip()!r} has no unit: write {m['number']}ms or {m['number']}s")
    if unit not in UNITS_S:
        raise InvalidInput(f"the SLO's unit {m['unit']!r} is not one of ms, s, min")
    word = m["metric"]
    metric = _SLO_WORDS[re.sub(r"[ -]+", " ", word.lower())] if word else (load_figures(modality) or
                                                                         ("latency_s",))[0]
    seconds = float(m["number"]) * UNITS_S[unit]
    if seconds <= 0:
        raise InvalidInput(f"the SLO {text.strip()!r} must be above zero")
    if metric != "latency_s":
        return slo_ms(metric, seconds * 1000.0, modality)
    if modality == CONVERSE:
        raise InvalidInput(_CONVERSE_SLO)
    return Slo("latency_s", round(seconds, 6))


def slo_ms(metric: SloMetric, ms: float, modality: str) -> Slo:
    """An SLO on one of the kind's timings in milliseconds (first audio: voice; final text, first partial:
    listen; voice-to-voice: converse)."""
    what = SLO_FIGURES[metric][0]
    own = load_figures(modality)
    if metric not in own:
        owner = next(f for f in LOAD_KINDS if metric in load_figures(f))
        name = "first audio (TTFA)" if metric == "ttfa_ms" else what
        fix = " or ".join([SLO_FIGURES[x][0] for x in own] + ([] if modality == CONVERSE else
                                                               ["latency, e.g. --slo-latency-s 5"]))
        raise InvalidInput(f"{name} is a {owner} figure; give a {modality} sweep an SLO on {fix}")
    if not ms > 0:
        raise InvalidInput(f"the {what} SLO must be above zero milliseconds; got {ms:g}")
    return Slo(metric, round(float(ms), 3))


def slo_ttfa_ms(ms: float, modality: Modality) -> Slo:
    return slo_ms("ttfa_ms", ms, modality)


def slo_final_ms(ms: float, modality: Modality) -> Slo:
    return slo_ms("final_ms", ms, modality)


def slo_v2v_ms(ms: float, kind: str) -> Slo:
    return slo_ms("v2v_ms", ms, kind)


def slo_latency_s(seconds: float) -> Slo:
    if not seconds > 0:
        raise InvalidInput(f"the latency SLO must be above zero seconds; got {seconds:g}")
    return Slo("latency_s", float(seconds))




def read_spec(path: Path) -> dict[str, Any]:
    """A --spec FILE: one JSON object of request fields (voice: text, voice, language; image and video: the
    request's fields, e.g. {"prompt": "…", "size": "512x512", "steps": 4})."""
    raw = read_user_file(path, what="the spec", limit=SPEC_FILE_MAX_BYTES)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the spec {path} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"the spec {path} must be one JSON object of request fields, e.g. {{\"prompt\": \"…\"}}")
    return data


def check_work(modality: str, work: dict[str, Any], recording: ListenAudio | None = None,
               inputs: tuple[ListenAudio, ...] = ()) -> dict[str, Any]:
    """The work item with defaults filled in, checked as its request will be (InvalidInput naming the field).
    A recording, given to a family that takes one (listen), is named in it with its length (`audio`, `audio_s`); a
    converse sweep's recorded turns too (`inputs`, `inputs_s`)."""
    part = None if modality == CONVERSE else load_family(modality)
    if recording is not None and (part is None or not part.takes_recording):
        takers = joined(k for k in MODALITIES if load_family(k).takes_recording)
        raise InvalidInput(f"a recording is a {takers} sweep's work; a {modality} sweep does not take one")
    if part is None:
        return _conversation_work(work, inputs)
    if inputs:
        raise InvalidInput(f"recorded turns are a converse sweep's work; a {modality} sweep does not take them")
    allowed = part.work_fields
    unknown = sorted(set(work) - set(allowed))
    if unknown:
        raise InvalidInput(f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not a field of a "
                           f"{modality} request; use {', '.join(allowed)}")
    return part.fill({k: v for k, v in work.items() if v is not None}, recording)


def _conversation_work(work: dict[str, Any], inputs: tuple[ListenAudio, ...]) -> dict[str, Any]:
    unknown = sorted(set(work) - set(_CONVERSE_FIELDS))
    if unknown:
        raise InvalidInput(f"{', '.join(map(repr, unknown))}: a converse sweep's work names {', '.join(_CONVERSE_FIELDS)}")
    if not inputs:
        raise InvalidInput("a converse sweep needs the recorded turns every conversation plays (--input TURN.wav, "
                           "repeated for more turns)")
    return {**work, "inputs": [x.name for x in inputs], "inputs_s": [round(x.seconds, 3) for x in inputs]}


@dataclass(frozen=True)
class LoadPlan:
    """A checked sweep: the levels, the requests per level, the SLO, the wall-clock cap and the work item."""

    modality: str  # a Modality, or CONVERSE
    levels: tuple[int, ...]
    requests: int
    slo: Slo | None = None
    max_wall_s: float = DEFAULT_WALL_CLOCK_S
    work: dict[str, Any] = field(default_factory=dict)
    warmup: int = 1  # a cold first request (model load, caches, a new connection) is not the steady state
    # listen: the recording every stream sends (None: the offline voice speaks work["text"] when the sweep starts)
    recording: ListenAudio | None = field(default=None, repr=False, compare=False)
    # converse: the recorded turns every conversation plays, in order
    inputs: tuple[ListenAudio, ...] = field(default=(), repr=False, compare=False)

    @property
    def total_requests(self) -> int:
        return self.requests * len(self.levels)

    @classmethod
    def build(cls, modality: str, *, levels: str | list[int] | tuple[int, ...] = DEFAULT_LEVELS, requests: int,
              slo: Slo | str | None = None, max_wall_s: float = DEFAULT_WALL_CLOCK_S,
              work: dict[str, Any] | None = None, warmup: int = 1, recording: ListenAudio | None = None,
              inputs: tuple[ListenAudio, ...] | list[ListenAudio] = ()) -> LoadPlan:
        m = CONVERSE if modality == CONVERSE else check_modality(modality)
        parsed = parse_levels(levels)
        REQUESTS.check("requests per level", requests, hint="each level sends this many")
        if requests < parsed[-1]:
            raise InvalidInput(f"{requests} requests per level are fewer than the highest concurrency level "
                               f"{parsed[-1]}: a level needs at least as many requests as it keeps in flight "
                               f"(give --requests {parsed[-1]} or more)")
        WALL_CLOCK_S.check("the wall-clock cap (seconds)", max_wall_s, integer=False,
                           hint="the sweep stops sending new requests after it")
        WARMUP.check("warm-up requests", warmup, hint="sent one at a time before the first level, not counted")
        if isinstance(slo, str) or slo is None:
            slo = parse_slo(slo or "", m)
        elif slo.metric != "latency_s":
            slo = slo_ms(slo.metric, slo.limit, m)
        if slo is None and m != CONVERSE and (default := load_family(m).default_slo):
            slo = parse_slo(default, m)  # listen: the final text within a second
        if m == CONVERSE and slo is None:
            slo = Slo("v2v_ms", DEFAULT_V2V_MS)
        elif m == CONVERSE and slo.metric != "v2v_ms":
            raise InvalidInput(_CONVERSE_SLO)
        turns = tuple(inputs)
        return cls(m, parsed, int(requests), slo, float(max_wall_s), check_work(m, dict(work or {}), recording, turns),
                   int(warmup), recording, turns)
