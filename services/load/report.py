"""A load sweep's report: the raw per-request samples and every figure computed from them (services/stats.py).

    report.to_dict()          # the JSON the CLI prints (--json) and writes (--out), and the history keeps
    LoadReport.from_dict(d)   # a saved report read back; its figures are recomputed from its samples

Per level: `concurrency`, `requests` (sent), `ok`, `errors`, `throttled` (of the errors: SageMaker's
ThrottlingException, HTTP 429 or 503), the family's timings (its catalog `load_figures`: `ttfa_ms` for voice,
`final_ms` and `first_partial_ms` for listen) and `latency_s` as {n, p50, p95, max} (nearest-rank, over the
requests that succeeded), the family's own figures (its load part's `level_figures`: `rtf_p50` for voice),
`throughput` and `samples`. A sample keeps every figure its family's unit of work returned (`Sample.more` those
without a field here).

Throughput is the work done by the successful requests (the catalog units each made or transcribed: its family's
`work_done`) over the level's wall-clock span (from its first request's start to its last request's end), per the
catalog's window: `audio_s_per_s` (voice: seconds of audio made per second; listen: seconds of audio transcribed
per second), `images_per_min` or `video_s_per_hour` (seconds of video made per hour).

A converse level (each request one whole conversation, services/load/converse.py) also has `turns` (heard),
`failed_turns`, `v2v_ms` — voice-to-voice {n, p50, p95, max} over every answered turn of its conversations (failed
conversations' answered turns too: a turn's figure does not depend on its neighbour's failure) — and
`conversations_within_slo`: how many conversations hold the SLO. **A conversation holds it** when none of its turns
failed and the p95 (nearest-rank) of its own turns' voice-to-voice is within the limit. Its throughput is answered
turns per minute (`turns_per_min`) and its cost `usd_per_conversation_turn`.

A level **meets the SLO** when every one of its requests succeeded and the p95 of the SLO's figure is within
the limit (with no SLO: when every request succeeded); a converse level, when every conversation holds it. The
levels that count are the run of levels from the lowest up to the first that fails (a level that passes above
a failing one is noise, not capacity); `max_concurrency_within_slo` is the highest of them (None with no SLO, or
when the lowest level fails). The cost per unit is the hourly price over the best throughput among them:
`usd_per_audio_minute`, `usd_per_image`, `usd_per_video_second` or `usd_per_audio_hour` (listen: $/h ÷ audio hours
transcribed per hour; None without a price, and the report says why).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from services.kinds import backend_name
from services.load.plan import CONVERSE, LOAD_KINDS, Slo, load_family, load_figures, unit_family
from services.stats import PERCENTILE_METHOD, percentile, summary

REPORT_VERSION = 1
# Each load kind's throughput and cost figure and the unit a cost is quoted per: the catalog's (protocol/catalog.py).
THROUGHPUT_KEY: dict[str, str] = {k: unit_family(k).throughput_key for k in LOAD_KINDS}
COST_KEY: dict[str, str] = {k: unit_family(k).cost_key for k in LOAD_KINDS}
UNIT_WORD: dict[str, str] = {k: unit_family(k).price_unit for k in LOAD_KINDS}


@dataclass(frozen=True)
class Sample:
    """One request as it went: times in seconds from the level's start, what it made, and how it ended."""

    index: int
    start_s: float
    end_s: float
    ok: bool
    ttfa_ms: float | None = None  # voice: first audio, from input.done (the session's own measure)
    bytes: int = 0  # audio PCM, image files, or the MP4
    audio_s: float | None = None  # voice: audio made; listen: audio transcribed
    rtf: float | None = None  # voice: generation time / audio duration; listen: first audio sent to done / audio
    final_ms: float | None = None  # listen: from the last audio sent to transcription.done
    first_partial_ms: float | None = None  # listen: from the first audio sent to the first delta (None: no delta)
    partials: int | None = None  # listen: how many deltas came
    images: int | None = None  # image
    video_s: float | None = None  # video
    turns: int | None = None  # converse: the turns heard in the conversation
    failed_turns: int | None = None  # converse: of them, those that failed (the first one's message is `error`)
    turn_v2v_ms: tuple[float, ...] | None = None  # converse: each answered turn's voice-to-voice, in order
    error: str | None = None
    throttled: bool = False  # the error was throttling (ThrottlingException, HTTP 429 or 503)
    # A family's own figures without a field here (its load part's: services/load/<family>.py), kept as given
    more: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, figures: dict[str, Any], **fixed: Any) -> Sample:
        """A sample from a request's figures, those without a field here kept in `more`."""
        named = {k: v for k, v in figures.items() if k in _FIELDS}
        return cls(**fixed, **named, more={k: v for k, v in figures.items() if k not in _FIELDS})

    def get(self, figure: str) -> Any:
        """A figure by its name: a field, or one of `more` (None when the sample has no such figure)."""
        return getattr(self, figure) if figure in _FIELDS else self.more.get(figure)

    @property
    def latency_s(self) -> float:
        return round(self.end_s - self.start_s, 4)

    @property
    def v2v_p95_ms(self) -> float | None:
        """converse: the conversation's own p95 voice-to-voice (nearest-rank over its answered turns)."""
        return percentile(self.turn_v2v_ms or (), 95)

    def holds(self, slo: Slo | None) -> bool:
        """converse: the conversation ran with no failed turn and (with an SLO) its p95 voice-to-voice is within it."""
        if not self.ok or slo is None:
            return self.ok
        p95 = self.v2v_p95_ms
        return p95 is not None and p95 <= slo.limit

    def to_dict(self) -> dict[str, Any]:
        """The figures this request has (a voice sample has no `images`, an image none of `audio_s`)."""
        d = {k: v for k, v in asdict(self).items() if (v is not None or k == "error") and k != "more"}
        d |= {k: v for k, v in self.more.items() if v is not None}
        d["latency_s"] = self.latency_s
        if self.turn_v2v_ms is not None:
            d["turn_v2v_ms"] = list(self.turn_v2v_ms)
            d["v2v_p95_ms"] = self.v2v_p95_ms
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Sample:
        kept = {k: v for k, v in d.items() if k in _FIELDS}
        if kept.get("turn_v2v_ms") is not None:
            kept["turn_v2v_ms"] = tuple(kept["turn_v2v_ms"])
        return cls(**kept, more={k: v for k, v in d.items() if k not in _FIELDS and k not in _COMPUTED})


_FIELDS = frozenset(f.name for f in fields(Sample)) - {"more"}
_COMPUTED = frozenset({"latency_s", "v2v_p95_ms"})  # what to_dict adds from the fields


def new_report_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def _work_done(modality: str, s: Sample) -> float:
    """The units of the catalog's `unit` a sample made (or transcribed): its family's load part counts them."""
    if not s.ok:
        return 0.0
    if modality == CONVERSE:  # the turns it answered
        return float(len(s.turn_v2v_ms or ()))
    return load_family(modality).work_done(s)


@dataclass(frozen=True)
class LevelReport:
    modality: str  # a Modality, or CONVERSE
    concurrency: int
    planned: int  # requests the plan asked for at this level
    samples: tuple[Sample, ...]

    @property
    def requests(self) -> int:
        return len(self.samples)

    @property
    def ok(self) -> int:
        return sum(1 for s in self.samples if s.ok)

    @property
    def errors(self) -> int:
        return self.requests - self.ok

    @property
    def throttled(self) -> int:
        return sum(1 for s in self.samples if not s.ok and s.throttled)

    @property
    def wall_s(self) -> float:
        """From the first request's start to the last one's end."""
        if not self.samples:
            return 0.0
        return round(max(s.end_s for s in self.samples) - min(s.start_s for s in self.samples), 4)

    def figure(self, metric: str) -> dict[str, Any]:
        """{n, p50, p95, max} of `latency_s` or one of the family's timings in ms (`ttfa_ms`, `final_ms`,
        `first_partial_ms`) over the successful requests that have it; `v2v_ms` (converse) over every answered
        turn of every conversation."""
        if metric == "v2v_ms":
            return summary((v for s in self.samples for v in s.turn_v2v_ms or ()), digits=2)
        good = [s for s in self.samples if s.ok]
        if metric == "latency_s":
            return summary((s.latency_s for s in good), digits=4)
        return summary((s.get(metric) for s in good), digits=2)

    @property
    def throughput(self) -> float | None:
        """Work per unit of time over the level's span (see THROUGHPUT_KEY); None when nothing ran."""
        wall = self.wall_s
        if wall <= 0:
            return None
        done = sum(_work_done(self.modality, s) for s in self.samples)
        return round(done / wall * unit_family(self.modality).throughput_window_s, 4)

    def within_slo(self, slo: Slo | None) -> int:
        """converse: how many of the level's conversations hold the SLO (Sample.holds)."""
        return sum(1 for s in self.samples if s.holds(slo))

    def meets(self, slo: Slo | None) -> bool:
        if self.requests == 0 or self.errors:
            return False
        if self.modality == CONVERSE:
            return self.within_slo(slo) == self.requests
        if slo is None:
            return True
        p95 = self.figure(slo.metric)["p95"]
        return p95 is not None and p95 <= slo.limit

    def to_dict(self, slo: Slo | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {"concurrency": self.concurrency, "requests": self.requests, "planned": self.planned,
                             "ok": self.ok, "errors": self.errors, "throttled": self.throttled}
        for metric in load_figures(self.modality):
            d[metric] = self.figure(metric)
        d["latency_s"] = self.figure("latency_s")
        if self.modality == CONVERSE:
            d["turns"] = sum(s.turns or 0 for s in self.samples)
            d["failed_turns"] = sum(s.failed_turns or 0 for s in self.samples)
            d["conversations_within_slo"] = self.within_slo(slo)
        if self.modality != CONVERSE:  # the family's own (voice: rtf_p50)
            d |= load_family(self.modality).level_figures(self.samples)
        d["wall_s"] = self.wall_s
        d["throughput"] = {THROUGHPUT_KEY[self.modality]: self.throughput}
        d["within_slo"] = self.meets(slo)
        errors = [s.error for s in self.samples if s.error]
        d["first_errors"] = list(dict.fromkeys(errors))[:3]  # distinct texts, for a person to read
        d["samples"] = [s.to_dict() for s in self.samples]
        return d


@dataclass
class LoadReport:
    """A whole sweep. Built by the runner (services/load/runner.py) or read back with `from_dict`."""

    modality: str  # a Modality, or CONVERSE
    backend: str  # offline | server | sagemaker ("omni", the server's former name, in older reports: read as server)
    target: str  # the URL, or "SageMaker endpoint NAME (region)"
    levels: list[LevelReport]
    slo: Slo | None = None
    instance_type: str | None = None
    usd_per_hour: float | None = None
    price_source: str | None = None  # where usd_per_hour came from
    price_note: str | None = None  # why there is no cost, when there is none
    machine: str | None = None  # set for the offline engine: whose figure this is (not a GPU's)
    emulated: bool = False  # measured on the local SageMaker emulator: its dollars price an instance that did not run
    work: dict[str, Any] = field(default_factory=dict)
    requests_per_level: int = 0
    max_wall_s: float | None = None
    stopped: str | None = None  # why the sweep ended early (the wall-clock cap, a stop), else None
    id: str = field(default_factory=lambda: new_report_id())
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    title: str | None = None  # a person's name for it ("g6 before the upgrade")
    warmup: list[Sample] = field(default_factory=list)  # sent one at a time before the levels; not in any figure

    # ---- what the levels say ----------------------------------------------------------------------------
    def passing(self) -> list[LevelReport]:
        """The run of levels, lowest first, up to (not including) the first that does not meet the SLO."""
        out = []
        for level in self.levels:
            if not level.meets(self.slo):
                break
            out.append(level)
        return out

    @property
    def max_concurrency_within_slo(self) -> int | None:
        if self.slo is None:
            return None
        passing = self.passing()
        return passing[-1].concurrency if passing else None

    def best_level(self) -> LevelReport | None:
        """The level with the highest throughput among those that count (lowest concurrency on a tie)."""
        candidates = [lv for lv in self.passing() if lv.throughput]
        return max(candidates, key=lambda lv: (lv.throughput, -lv.concurrency)) if candidates else None

    def cost(self) -> dict[str, Any]:
        key = COST_KEY[self.modality]
        best = self.best_level()
        out: dict[str, Any] = {key: None, "at_concurrency": best.concurrency if best else None,
                               "throughput": {THROUGHPUT_KEY[self.modality]: best.throughput} if best else None,
                               "usd_per_hour": self.usd_per_hour, "note": None}
        if best is None and not self.levels:  # stopped during the warm-up, before the first level
            why = f" (the sweep ended before its first level: {self.stopped})" if self.stopped else ""
            out["note"] = f"no level ran{why}, so there is no throughput to price"
        elif best is None:
            what = "within the SLO" if self.slo else "without errors"
            out["note"] = f"no level ran {what}, so there is no throughput to price"
        elif self.usd_per_hour is None:
            out["note"] = self.price_note or "no hourly price is known: give --price-per-hour (or --instance-type)"
        else:
            fam = unit_family(self.modality)  # price units made per hour at the best level's throughput
            per_hour = best.throughput * 3600.0 / fam.throughput_window_s / fam.price_unit_size
            out[key] = float(f"{self.usd_per_hour / per_hour:.4g}")  # 4 significant digits: a price, not a measurement
        return out

    # ---- JSON ------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "version": REPORT_VERSION, "id": self.id, "title": self.title, "modality": self.modality,
            "backend": self.backend, "target": self.target, "machine": self.machine, "emulated": self.emulated,
            "instance_type": self.instance_type, "usd_per_hour": self.usd_per_hour,
            "price_source": self.price_source, "price_note": self.price_note,
            "slo": self.slo.to_dict() if self.slo else None, "percentiles": PERCENTILE_METHOD,
            "requests_per_level": self.requests_per_level, "max_wall_s": self.max_wall_s, "work": self.work,
            "created_at": round(self.created_at, 3),
            "finished_at": None if self.finished_at is None else round(self.finished_at, 3),
            "stopped": self.stopped, "warmup": [s.to_dict() for s in self.warmup],
            "levels": [lv.to_dict(self.slo) for lv in self.levels],
            "max_concurrency_within_slo": self.max_concurrency_within_slo,
            "cost": self.cost(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadReport:
        """A report read back (the history, a --out file). Figures are recomputed from the samples."""
        modality = d["modality"]
        if modality not in LOAD_KINDS:
            raise ValueError(f"not a load report: modality {modality!r}")
        levels = [LevelReport(modality, int(lv["concurrency"]), int(lv.get("planned", lv["requests"])),
                              tuple(Sample.from_dict(s) for s in lv.get("samples", [])))
                  for lv in d.get("levels", [])]
        return cls(
            modality=modality, backend=backend_name(d["backend"]), target=d["target"], levels=levels,
            slo=Slo.from_dict(d.get("slo")), instance_type=d.get("instance_type"), usd_per_hour=d.get("usd_per_hour"),
            price_source=d.get("price_source"), price_note=d.get("price_note"), machine=d.get("machine"),
            emulated=bool(d.get("emulated")),
            work=dict(d.get("work") or {}), requests_per_level=int(d.get("requests_per_level") or 0),
            max_wall_s=d.get("max_wall_s"), stopped=d.get("stopped"), id=d.get("id") or new_report_id(),
            created_at=float(d.get("created_at") or time.time()), finished_at=d.get("finished_at"), title=d.get("title"),
            warmup=[Sample.from_dict(s) for s in d.get("warmup") or []],
        )

    # ---- for people ------------------------------------------------------------------------------------
    def emulated_note(self) -> str | None:
        """Beside every dollar figure of a sweep on the local SageMaker emulator; None otherwise."""
        if not self.emulated:
            return None
        what = self.instance_type or "the endpoint's instance type"
        return (f"measured on the local SageMaker emulator (the offline engine on this machine), not on {what}: "
                f"the dollar figures are {what}'s list price over this machine's throughput, not a GPU's cost")

    def label(self) -> str:
        """A short name for lists and chart legends."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.created_at))
        where = self.instance_type or ("this machine" if self.machine else self.target)
        where += " (emulated)" if self.emulated else ""
        return f"{self.title + ' · ' if self.title else ''}{self.modality} · {where} · {when}"
