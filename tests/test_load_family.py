"""A family's load part (services/load/family.py) as the sweep's tools read it: found through the registry, its inputs
as data (the Capacity page's widgets, the CLI's flags), and a figure the report has no field for kept with its sample.
The figures below are worked by hand."""

from __future__ import annotations

import pytest

from protocol import catalog
from services import families
from services.cli.load import work_flags
from services.load import LevelReport, Sample
from services.load.family import LoadFamily, joined, rate
from services.load.plan import MODALITIES, load_family


def test_each_sweep_family_is_the_registrys_and_its_part_names_its_catalog_row():
    assert MODALITIES == families.having("load")
    for m in MODALITIES:
        part = load_family(m)
        assert isinstance(part, LoadFamily) and part.name == m and part.catalog is catalog.family(m)
        assert load_family(m) is part  # made once
        keys = [i.key for i in part.inputs]
        assert len(set(keys)) == len(keys) and all(keys)
    every = [i.key for m in MODALITIES for i in load_family(m).inputs]
    assert len(set(every)) == len(every)  # one page holds every family's widgets in turn: no key is shared


def test_the_cli_flags_are_the_families_inputs():
    flags = {flag: sorted(users) for flag, users in work_flags().items()}
    assert flags == {"text": ["listen", "voice"], "prompt": ["image", "sound", "video"], "audio": ["listen"]}
    assert joined(["image", "video", "sound"]) == "image, video and sound" and joined(["listen"]) == "listen"


def test_a_figure_without_a_field_is_kept_with_its_sample_and_summarised():
    s = Sample.of({"audio_s": 10.0, "clips": 1, "bytes": 9}, index=0, start_s=0.0, end_s=2.0, ok=True)
    assert s.audio_s == 10.0 and s.more == {"clips": 1} and s.get("clips") == 1 and s.get("nothing") is None
    d = s.to_dict()
    assert d["clips"] == 1 and "more" not in d and d["latency_s"] == 2.0
    assert Sample.from_dict(d).to_dict() == d
    level = LevelReport("voice", 1, 1, (s,))
    assert level.figure("clips") == {"n": 1, "p50": 1.0, "p95": 1.0, "max": 1.0}


def test_rate_counts_the_successful_samples_over_the_levels_span():
    samples = (Sample.of({"clips": 1}, index=0, start_s=0.0, end_s=2.0, ok=True),
               Sample.of({"clips": 1}, index=1, start_s=0.5, end_s=3.0, ok=True),
               Sample.of({"clips": 1}, index=2, start_s=1.0, end_s=1.5, ok=False))
    # 2 clips made over 3 s (the failed one's time counts in the span, not its clip): 2 / 3 × 60 = 40 per minute
    assert rate(samples, "clips", 60) == pytest.approx(40.0)
    assert rate((), "clips", 60) is None


def test_voice_adds_its_rtf_and_counts_audio_seconds():
    voice = load_family("voice")
    samples = tuple(Sample.of({"audio_s": a, "rtf": r}, index=i, start_s=0.0, end_s=1.0, ok=True)
                    for i, (a, r) in enumerate([(2.0, 0.3), (1.0, 0.1), (3.0, 0.2)]))
    assert voice.level_figures(samples) == {"rtf_p50": 0.2}  # nearest-rank: the 2nd of 0.1, 0.2, 0.3
    assert [voice.work_done(s) for s in samples] == [2.0, 1.0, 3.0]
    assert LevelReport("voice", 3, 3, samples).throughput == 6.0  # 6 audio seconds over 1 s
    assert load_family("image").work_done(Sample.of({"images": 2}, index=0, start_s=0, end_s=1, ok=True)) == 2.0
