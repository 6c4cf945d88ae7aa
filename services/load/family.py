"""What a load sweep asks of a model family: `LoadFamily`, the base each family's load module fills in.

A sweep's tools never name a family. The plan (services/load/plan.py) asks the family's part for its work item,
the runner (runner.py) for its unit of work, the report (report.py) for the work a sample did and the figures a
level adds, the target (target.py) for what its estimate says, the Capacity page (ui/capacity_views.py) and
`python -m services load` (services/cli/load.py) for the inputs they offer. Each family's part is its own module
— services/load/voice.py, image.py, video.py, listen.py — registered in its family module
(services/families/<family>.py: `FamilyCode(..., load=_load)`, `_load` importing it lazily), and found by
`services.load.plan.load_family(name)`. The sweeps' families are the registry's (`families.having("load")`).

What is the catalog's stays there (protocol/catalog.py): the unit of work, the throughput key, window and title,
the price unit and the cost key, the noun of the estimate and the timings a level reports (`load_figures`, each a
figure `services.load.plan.SLO_FIGURES` names). A sample's figures are whatever the unit of work returns: a figure
the report does not know by name is kept with the sample all the same (`Sample.more`).

This module imports nothing of the load package (nor the registry), so a family's load module can build on it
without a cycle; it must not import services/load/plan.py, runner.py, report.py, target.py or services/base.py
either (they reach the registry, which reaches it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from protocol.catalog import Family, family
from protocol.errors import InvalidInput

# One request of a sweep: the sample's figures (`Failed` carrying some when it fails part way).
Send = Callable[[], Awaitable[dict[str, Any]]]


class Failed(Exception):
    """A request that failed after producing some figures (a voice session cut mid-way keeps its audio, a
    conversation with a failed turn its answered turns)."""

    def __init__(self, error: BaseException, figures: dict[str, Any]) -> None:
        super().__init__(str(error))
        self.error, self.figures = error, figures


@dataclass(frozen=True)
class UnitOfWork:
    """What a sweep sends, made once before its warm-up: `send()` is one request; `work` what the report's work item
    gains (a listen sweep: the recording its streams send, with its length)."""

    send: Send
    work: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkInput:
    """One input of a family's work item, as data: the Capacity page draws it, the CLI offers it as a flag.

    `kind`: "line" (one line of text), "area" (a text area) or "recording" (an uploaded file: a `ListenAudio`, the
    plan's `recording`; where uploads are off the page says `note` instead). Inputs with a `width` share a row in
    those proportions; the others have a row each."""

    field: str  # the work item's field it fills ("text", "prompt", "size"); "" for a recording
    label: str  # the page's label
    default: str = ""
    kind: Literal["line", "area", "recording"] = "line"
    key: str = ""  # its widget's key on the page
    width: int = 0
    height: int | None = None  # an area's height in pixels
    flag: str | None = None  # its `python -m services load` flag ("text": --text); None: only --spec gives it
    flag_help: str = ""  # what the flag is for this family (the CLI's help joins every family's)
    note: str = ""  # a recording: what the sweep sends without one
    replaces: tuple[str, ...] = ()  # a recording: the fields it stands in for when one is given


class LoadFamily:
    """A family's load part: its work item, its unit of work on a backend, what that measures, its inputs.

    A subclass sets the class attributes and writes `fill` and `unit`; the rest has defaults. To make a family
    load-testable — sound, say: a prompt in, a 44.1 kHz stereo clip out of `POST /v1/audio/generate`, its catalog
    row counting "audio second"s and pricing a "generated minute" — two things are written, nothing else:

    1. `services/load/sound.py`::

           class SoundLoad(LoadFamily):
               name = "sound"
               work_fields = ("prompt", "seconds", "seed")           # what --spec may name
               inputs = (WorkInput("prompt", "Prompt", DEFAULT_PROMPT, key="cap_prompt_sound", flag="prompt",
                                   flag_help="the prompt of every clip"),)
               work_figure = "audio_s"         # the catalog's unit: throughput and cost per generated minute follow
               level_columns = {"clips_per_min": ("clips per minute", "{:.1f}")}

               def fill(self, work, recording):                     # defaults in, checked as the request will be
                   work.setdefault("prompt", DEFAULT_PROMPT)
                   construct(SoundRequest, work).validated()
                   return work

               async def unit(self, backend, plan, target, pool):   # one clip per request, on the backend's client
                   loop = asyncio.get_running_loop()
                   async def send():
                       clip = await loop.run_in_executor(pool, backend.client("sound").generate,
                                                         SoundRequest(**plan.work))
                       return {"audio_s": clip.seconds, "clips": 1, "bytes": len(clip.wav)}
                   return UnitOfWork(send)

               def level_figures(self, samples):                   # beside the catalog's throughput
                   return {"clips_per_min": rate(samples, "clips", 60)}

    2. in `services/families/sound.py`, the part, imported when first asked for (and `load=_load` in its
       `FamilyCode(...)` line)::

           def _load():
               from services.load.sound import SoundLoad
               return SoundLoad()

    The sweep's list of families, the Capacity page's choice and inputs, the CLI's positional choice and flags
    (and their refusals), the report's throughput (`audio_s_per_min`) and cost (`usd_per_generated_minute`) then
    include it. A figure without a name in `Sample` (`clips` above) is kept in `Sample.more` and in the JSON.
    """

    name: ClassVar[str]  # the catalog family
    work_fields: ClassVar[tuple[str, ...]]  # the request fields a work item may name (--spec, the page's inputs)
    inputs: ClassVar[tuple[WorkInput, ...]] = ()  # what the Capacity page and the CLI ask for
    work_figure: ClassVar[str]  # the sample figure that counts the catalog's unit (audio_s, images, video_s)
    # A level's figures beyond the catalog's timings and throughput: key -> (its title for people, its format)
    level_columns: ClassVar[Mapping[str, tuple[str, str]]] = {}
    default_slo: ClassVar[str | None] = None  # the SLO a sweep holds when none is given ("final 1000ms")
    slo_example: ClassVar[str] = "latency 5s"  # an SLO for the page's placeholder

    @property
    def catalog(self) -> Family:
        return family(self.name)

    @property
    def takes_recording(self) -> bool:
        return any(i.kind == "recording" for i in self.inputs)

    def flags(self) -> dict[str, WorkInput]:
        """The CLI flags this family takes (their word → the input)."""
        return {i.flag: i for i in self.inputs if i.flag}

    # ---- what each family writes ---------------------------------------------------------------------------
    def fill(self, work: dict[str, Any], recording: Any | None) -> dict[str, Any]:
        """The work item (known fields only, None values dropped) with its defaults, checked as its request will be
        (InvalidInput naming the field). `recording` is the plan's, given only to a family that takes one."""
        raise NotImplementedError

    async def unit(self, backend: Any, plan: Any, target: Any, pool: Any) -> UnitOfWork:
        """The sweep's unit of work on `backend` (a services.base.Backend: `backend.client(self.name)`), built from
        `plan.work` (and `plan.recording`) for `target` (a LoadTarget); blocking calls run on `pool`, a thread
        pool as wide as the highest level. Called once, before the warm-up."""
        raise NotImplementedError

    # ---- defaults ------------------------------------------------------------------------------------------
    def work_done(self, sample: Any) -> float:
        """The catalog units a successful sample made (or transcribed): its `work_figure`."""
        return float(sample.get(self.work_figure) or 0.0)

    def level_figures(self, samples: tuple[Any, ...]) -> dict[str, Any]:
        """A level's own figures (keys of `level_columns`), from its samples."""
        return {}

    def requests_note(self, plan: Any) -> str:
        """What the estimate adds about each request (" Each is a live stream …"), or ""."""
        return ""

    def extra_cost_note(self, target: Any) -> str:
        """A cost the estimate's price leaves out on `target` (" S3 requests … come on top"), or ""."""
        return ""


def joined(words: Iterable[str]) -> str:
    """"listen", "voice and listen", "image, video and sound" (for messages that name families)."""
    kept = list(words)
    return " and ".join(filter(None, [", ".join(kept[:-1]), kept[-1]])) if kept else "none"


def rounded(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(float(x), digits)


def rate(samples: Iterable[Any], figure: str, window_s: float) -> float | None:
    """The successful samples' `figure`, summed, per `window_s` seconds of their span (first start to last end)."""
    kept = list(samples)
    if not kept:
        return None
    wall = max(s.end_s for s in kept) - min(s.start_s for s in kept)
    done = sum(float(s.get(figure) or 0.0) for s in kept if s.ok)
    return None if wall <= 0 else round(done / wall * window_s, 4)


def construct(cls: Any, work: dict[str, Any]) -> Any:
    """A request class built from a work item; InvalidInput when the fields do not fit it."""
    try:
        return cls(**work)
    except TypeError as exc:
        raise InvalidInput(f"the request fields do not fit: {exc}") from None


def request_fields(cls: Any, *, leave_out: tuple[str, ...] = ()) -> tuple[str, ...]:
    """A request dataclass's fields, for `work_fields`."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in leave_out)
