"""Load sweeps on any backend: how much one target holds, and what a unit of its work costs.

    plan = LoadPlan.build("voice", levels="1,2,4,8", requests=16, slo="ttfa 300ms")   # checked first
    target = describe_target(backend, settings, "voice")    # up? which instance? what does an hour cost?
    target.estimate(plan)                                   # said (and confirmed) before a SageMaker sweep
    report = asyncio.run(run_sweep(backend, plan, target, on_progress=...))
    report.to_dict()                                        # levels, samples, max_concurrency_within_slo, cost
    history.load_reports.save(report.to_dict())             # the Capacity page lists, reopens and overlays them

- plan.py     LoadPlan, Slo, parse_levels, parse_slo, the guard rails (≤ 64 in flight, ≤ 2000 requests per
              level, a wall-clock cap) and the work item (the text, prompt or request fields of every request)
- target.py   LoadTarget, describe_target: the target checked up and priced before any load (never starts
              an endpoint), the offline engine labelled as this machine's figure
- runner.py   run_sweep (closed loop per level, through the studio's own clients), SweepRun (for a UI
              thread), is_throttling
- report.py   Sample, LevelReport, LoadReport: every figure computed from the recorded samples
- family.py   LoadFamily: what a sweep asks of a family (its work item and inputs, its unit of work, what a sample
              counts, a level's own figures), WorkInput (an input of the Capacity page and the CLI, as data);
              each family's part is its own module — voice.py, image.py, video.py, listen.py — registered in
              services/families/<family>.py and found by plan.load_family(name)
- percentile, summary and PERCENTILE_METHOD come from services/stats.py (nearest-rank, the one definition)
- converse.py load converse: each request one whole conversation over recorded turns (run_conversations through
              the runner's run_levels), how many conversations hold a voice-to-voice SLO, its target priced
              (describe_conversations); imported from there, not here (it builds on services/converse)

The CLI is `python -m services load` (services/cli/load.py); the page is pages/capacity.py.
"""

from services.load.plan import (
    CONCURRENCY,
    DEFAULT_LEVELS,
    DEFAULT_WALL_CLOCK_S,
    MODALITIES,
    REQUESTS,
    WALL_CLOCK_S,
    LoadPlan,
    Modality,
    Slo,
    parse_levels,
    parse_slo,
    read_spec,
    slo_latency_s,
    slo_ttfa_ms,
)
from services.load.report import (
    COST_KEY,
    THROUGHPUT_KEY,
    UNIT_WORD,
    LevelReport,
    LoadReport,
    Sample,
)
from services.load.runner import Progress, SweepRun, is_throttling, run_sweep
from services.stats import PERCENTILE_METHOD, percentile, summary
from services.load.target import LoadTarget, describe_target

__all__ = [
    "CONCURRENCY", "COST_KEY", "DEFAULT_LEVELS", "DEFAULT_WALL_CLOCK_S", "MODALITIES", "PERCENTILE_METHOD",
    "REQUESTS", "THROUGHPUT_KEY", "UNIT_WORD", "WALL_CLOCK_S", "LevelReport", "LoadPlan", "LoadReport",
    "LoadTarget", "Modality", "Progress", "Sample", "Slo", "SweepRun", "describe_target", "is_throttling",
    "parse_levels", "parse_slo", "percentile", "read_spec", "run_sweep", "slo_latency_s", "slo_ttfa_ms", "summary",
]
