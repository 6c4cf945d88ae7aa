"""What an evaluation asks of a model family: its part, `EvalFamily`, registered in the family's module
(services/families/<name>.py, `evaluation=`) and found by `services.eval.registry.evaluation(name)`. The SPEC, the
runner, the report, the export and the Evaluations page ask the part; none of them names a family.

A part is light to import (the registry imports every family's): it holds its variant class and data, and imports
its clients and requests inside its methods. The parts: voice.py, image.py, video.py (rated blind in pairs) and
listen.py (measured: a word error rate against references, no rating).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from protocol.errors import InvalidInput
from protocol.limits import Range, check_length
from services.eval import rated, stats
from services.eval.prompts import text_prompts
from services.kinds import BackendField

# An evaluation's SPEC (services.eval.spec.EvalSpec) and its items (services.eval.store.Item): named, not imported
# — the registry imports this part, and those modules import the registry.
EvalSpec = Any
Item = Any

Takes = Literal["text", "audio"]  # what an item is made from: a text prompt, or a recording and its reference
VARIANT_COLUMNS = ("label", "items", "failed", "ratings", "wins", "losses", "ties", "win_rate", "ci95_low",
                   "ci95_high", "latency_p50_s", "latency_p95_s", "latency_n", "ttfa_p50_ms", "ttfa_p95_ms",
                   "cost_per_item_usd")


class Variant(BaseModel):
    """A variant's table in the SPEC: its label, where it runs (the target keys, its price), and — in a family's
    subclass — its settings, with `EXAMPLE` (a valid one, the form's hint) and `RANGES` (numeric settings: key →
    (range, whole), for a message naming the range when TOML's inf or nan is given). `kept`: the ids of results
    already in the history that are this variant's outputs (nothing is generated for it)."""
    model_config = ConfigDict(extra="forbid")
    RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {}
    EXAMPLE: ClassVar[str] = ""
    label: str
    backend: BackendField | None = None  # "omni", the server's former name, read as "server"
    url: str | None = None
    endpoint: str | None = None
    region: str | None = None
    profile: str | None = None
    state_file: str | None = None
    instance_type: str | None = None  # what the target runs on, to price it (as `load --instance-type`)
    price_per_hour: float | None = None  # the target's hourly price by hand (as `load --price-per-hour`)
    kept: list[str] | None = None


@dataclass(frozen=True)
class Kept:
    """A result already in the history, taken as a variant's output: the prompt it was made for, its media, its
    figures and what made it."""
    id: str
    prompt: str
    data: bytes
    figures: dict[str, Any]
    settings: dict[str, Any]


@dataclass(frozen=True)
class KeptChoice:
    id: str
    label: str  # how a picker shows it: its prompt, what made it, when


@dataclass(frozen=True)
class Chart:
    """How a page draws the variants' main figure: a point and its interval, from keys of the report's rows."""
    point: str
    low: str
    high: str
    title: str
    percent: bool = False  # an axis in per cent (else 0 to 1)


WIN_RATE_CHART = Chart("win_rate", "ci95_low", "ci95_high", "win rate (95 % interval)")


def wer_figures(prefix: str, pairs: list[tuple[int, int]]) -> dict[str, Any]:
    """The corpus WER of (errors, words) utterances with its bootstrap interval, under `prefix`."""
    w = stats.wer_bootstrap(pairs)
    return {f"{prefix}wer": w["wer"], f"{prefix}ci95": w["ci95"], f"{prefix}n": w["n"], f"{prefix}words": w["words"],
            f"{prefix}errors": w["errors"]}


def wer_text(wer: float | None, ci: Sequence[float] | None, n: int, words: int) -> str:
    if wer is None:
        return f"— (n={n} utterances)"
    bounds = "" if ci is None else f" [{ci[0]:.1%}, {ci[1]:.1%}]"
    return f"{wer:.1%}{bounds} (n={n} utterances, {words} words)"


class EvalFamily:
    """A family's part in evaluations. Its defaults are those of a family whose outputs are made from a text
    prompt and rated blind in pairs; a family overrides what differs.

    Adding one — e.g. sound (a text prompt → 44.1 kHz stereo audio over /v1/audio/generate, with a seed) — takes
    its own part module and one line in its family module, nothing else in the studio:

    1. `services/eval/sound.py` (its imports of the family's client inside the methods: the registry imports it):

           class SoundVariant(Variant):
               EXAMPLE: ClassVar[str] = "seconds = 5\nseed = 1"           # valid on every target: the form's hint
               RANGES: ClassVar[dict[str, tuple[Range, bool]]] = {"seed": (limits.SEED, True)}
               seconds: float | None = None
               seed: int | None = None

           class SoundEval(JobResults, EvalFamily):                      # JobResults: its kept sounds can be picked
               name, variant, makes, keeps = "sound", SoundVariant, "audio/wav", "sounds"

               def request(self, prompt, settings):                      # checked: InvalidInput names the setting
                   from services.sound import SoundRequest
                   return SoundRequest(prompt=prompt, **{k: settings[k] for k in self.settings
                                                         if settings.get(k) is not None}).validated()

               def generate(self, backend, prompt, settings, **_):
                   started = time.perf_counter()
                   result = backend.client(self.name).generate(self.request(prompt, settings))
                   return result.audio, {"latency_s": time.perf_counter() - started, **result.timings()}

           EVALUATION = SoundEval()

    2. `services/families/sound.py`: `from services.eval.sound import EVALUATION`, and `evaluation=EVALUATION` in
       its FamilyCode.

    The SPEC then takes `modality = "sound"` and the variant's settings (naming them in refusals), the runner makes
    its items on each variant's target (priced as a load sweep prices it), the pairs are scheduled blind, the report
    gives win rates with their intervals, the export an <audio> player per output, and the Evaluations page offers
    it: text prompts (`takes`), its settings with the example, Create and run, its outputs drawn by `makes` in the
    blind review, the results and exports. `tests/test_eval_family.py` runs exactly this part against the offline
    engine. Override the rest only where a family differs: `check_prompt` (voice splits long text), `picks` and
    `offer` (voice's voices and languages), `heard_by`, `hearing` and `hear` (voice's intelligibility), `timing`
    (voice's time to first audio), and for a family measured rather than rated (listen) `takes`, `inputs`,
    `rated`, `measured`, `columns`, `separate`, `verdicts`, `markdown`, `summary` and `chart`.
    """

    name: str = ""
    variant: type[Variant] = Variant
    takes: Takes = "text"
    makes: str = "application/octet-stream"  # the MIME type of an output: a page and the export draw it by this
    rated: bool = True  # outputs rated blind in pairs; False: measured (the page offers no rating)
    unrated_note: str = ""  # what the page says in place of rating, when not rated
    picks: Mapping[str, str] = {}  # settings picked from what a target offers: setting → what the target lists
    heard_by: str | None = None  # the family whose target measures the outputs (a SPEC's `intelligibility`)
    keeps: str | None = None  # what of the history a variant may take as its outputs ("voice takes"); None: nothing
    chart: Chart = WIN_RATE_CHART

    # -- the SPEC -----------------------------------------------------------------------------------------------
    @property
    def settings(self) -> tuple[str, ...]:
        """The variant's own settings, in order (the target keys and the label are everyone's)."""
        return tuple(f for f in self.variant.model_fields if f not in Variant.model_fields)

    def inputs(self, data: dict[str, Any], base_dir: Path | None, *,
               required: bool = True) -> tuple[list[str], list[str]]:
        """What each item is made from: (prompts, recordings — empty for a family that takes text)."""
        return text_prompts(data, base_dir, check=self.check_prompt, modality=self.name, required=required), []

    def check_prompt(self, what: str, prompt: str) -> None:
        """A prompt the family's server accepts (a family that splits text to fit accepts any length)."""
        check_length(what, prompt)

    def hearing(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """The SPEC's target that measures the outputs (`intelligibility`), as target keys; None when none."""
        if "intelligibility" in data:
            raise InvalidInput("intelligibility is a voice evaluation's setting (its speech heard by a listen target)")
        return None

    def request(self, prompt: str, settings: dict[str, Any]) -> Any:
        """The request a variant's settings make for `prompt`, checked: InvalidInput names the setting. The SPEC
        check calls it with the prompt "check", so bad values fail before anything runs."""
        raise NotImplementedError

    # -- making an item -----------------------------------------------------------------------------------------
    def generate(self, backend: Any, prompt: str, settings: dict[str, Any], *, recording: bytes | None = None,
                 name: str = "the recording") -> tuple[bytes, dict[str, Any]]:
        """One item on `backend` (services.backend.Backend; `backend.client(self.name)`): its output's bytes and
        figures (latency_s always; others the family's). A family that takes audio gets the item's `recording`."""
        raise NotImplementedError

    def offer(self, backend: Any) -> tuple[list[str], ...]:
        """What the target offers for each of `picks`, in order (voice: its voices and languages)."""
        return ()

    def hear(self, backend: Any, data: bytes, prompt: str, setting: dict[str, Any]) -> dict[str, Any]:
        """An output measured on the `heard_by` family's target (`backend`): the figures kept with the item."""
        raise NotImplementedError

    # -- results already in the history ---------------------------------------------------------------------------
    def kept_choices(self, history: Any, *, limit: int = 50) -> list[KeptChoice]:
        """The actor's results (and those shared) a variant may take as its outputs, newest first."""
        return []

    def kept(self, history: Any, record_id: str) -> Kept:
        """One of those results, read (InvalidInput when it is not one)."""
        raise InvalidInput(f"a {self.name} evaluation takes no results from the history: its variants make them")

    # -- the report --------------------------------------------------------------------------------------------------
    def timing(self, ok: list[Item]) -> dict[str, Any]:
        """A variant's figures beyond latency and cost over its made items (voice: time to first audio)."""
        return {}

    def measured(self, spec: EvalSpec, ok: list[Item]) -> dict[str, Any]:
        """A variant's measured figures (listen: its corpus WER; voice: its intelligibility)."""
        return {}

    def columns(self, res: dict[str, Any]) -> tuple[str, ...]:
        """The per-variant columns of the report's CSV and HTML table."""
        return VARIANT_COLUMNS

    def separate(self, a: str, b: str, ta: dict[str, Any], tb: dict[str, Any], rows: dict[str, dict[str, Any]]
                 ) -> dict[str, Any]:
        """Whether variants a and b separate: their tallies `ta`, `tb` and report rows by label."""
        return rated.separate(a, b, ta, tb)

    def verdicts(self, res: dict[str, Any]) -> list[str]:
        return rated.verdicts(res)

    def measured_lines(self, res: dict[str, Any]) -> list[str]:
        """Sentences on the measured figures, then how they were computed."""
        return []

    def markdown(self, res: dict[str, Any]) -> str:
        return rated.markdown(res, self.verdicts(res), self.measured_lines(res))

    def method_text(self, res: dict[str, Any]) -> str:
        """How the figures are made, one line of the HTML report (plain text)."""
        return rated.METHOD_TEXT

    def summary(self, v: dict[str, Any], res: dict[str, Any]) -> dict[str, Any]:
        """A variant's own cells in the short table a page shows (services/eval/table.py)."""
        return rated.summary(v)


class JobResults:
    """`kept_choices` and `kept` for a family whose results are the history's jobs of its kind (image, video)."""

    name: str

    def kept_choices(self, history: Any, *, limit: int = 50) -> list[KeptChoice]:
        jobs = history.jobs.list(self.name, statuses=("succeeded",), limit=limit)
        return [KeptChoice(j.id, f"{j.name[:70]} · {_params(j.params)}") for j in jobs if j.outputs]

    def kept(self, history: Any, record_id: str) -> Kept:
        job = history.jobs.get(record_id)
        if job.kind != self.name or job.status != "succeeded" or not job.outputs:
            raise InvalidInput(f"{record_id} is not a finished {self.name} in the history: pick one that is")
        data = job.read(job.outputs[0])
        figures = {"latency_s": job.timings["wall_s"]} if "wall_s" in job.timings else {}
        if "model_s" in job.timings:
            figures["model_s"] = job.timings["model_s"]
        return Kept(job.id, job.prompt, data, figures, {**job.params, "target": job.target})


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in params.items() if v is not None and not isinstance(v, (dict, list)))[:60]
