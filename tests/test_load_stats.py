"""The load sweep's arithmetic and its input checks, held against values computed by hand: nearest-rank
percentiles, per-level figures and throughput from given samples, the SLO's passing run of levels, the cost per
unit, and every bad input named before anything is sent. No server is needed here (tests/test_load.py runs
sweeps against the real engine and the emulator)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from protocol.errors import InvalidInput, ServerError, StreamError
from services.aws import aws_error
from services.load import (
    LevelReport,
    LoadPlan,
    LoadReport,
    Sample,
    Slo,
    is_throttling,
    parse_levels,
    parse_slo,
)
from services.stats import percentile, summary


# ---- percentiles: nearest-rank, x[ceil(p/100 * n)] of the sorted values ---------------------------------
@pytest.mark.parametrize("values, p, expected", [
    ([15, 20, 35, 40, 50], 5, 15),      # ceil(0.25) = 1st
    ([15, 20, 35, 40, 50], 30, 20),     # ceil(1.5) = 2nd
    ([15, 20, 35, 40, 50], 40, 20),     # ceil(2.0) = 2nd (exact rank: no rounding up)
    ([15, 20, 35, 40, 50], 50, 35),     # ceil(2.5) = 3rd
    ([15, 20, 35, 40, 50], 100, 50),
    ([3, 1, 4, 2], 50, 2),              # sorted 1 2 3 4: ceil(2.0) = 2nd
    ([3, 1, 4, 2], 95, 4),              # ceil(3.8) = 4th
    (list(range(1, 21)), 95, 19),       # 20 values: ceil(19.0) = 19th
    (list(range(1, 11)), 95, 10),       # 10 values: ceil(9.5) = 10th, the largest
    ([7.5], 50, 7.5),
    ([5, 1], 0, 1),                     # the 0th is the smallest
])
def test_nearest_rank_percentile(values, p, expected):
    assert percentile(values, p) == expected


def test_percentile_of_nothing_and_out_of_range():
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1], 101)


def test_summary_carries_the_sample_size_and_skips_missing_values():
    assert summary([0.4, None, 0.1, 0.3, 0.2]) == {"n": 4, "p50": 0.2, "p95": 0.4, "max": 0.4}
    assert summary([]) == {"n": 0, "p50": None, "p95": None, "max": None}


# ---- a level's figures from its samples ---------------------------------------------------------------
def voice(i, start, end, ttfa, audio, ok=True, error=None, throttled=False, rtf=0.5):
    return Sample(index=i, start_s=start, end_s=end, ok=ok, ttfa_ms=ttfa, audio_s=audio, bytes=int(audio * 48000),
                  rtf=rtf, error=error, throttled=throttled)


def test_voice_level_figures_by_hand():
    samples = (voice(0, 0.0, 1.0, 100.0, 2.0, rtf=0.2), voice(1, 0.0, 1.5, 300.0, 3.0, rtf=0.4),
               voice(2, 1.0, 2.0, 200.0, 2.0, rtf=0.3),
               voice(3, 1.5, 4.0, None, 0.0, ok=False, error="HTTP 503: busy", throttled=True))
    level = LevelReport("voice", 2, 4, samples)
    d = level.to_dict()
    assert (d["requests"], d["ok"], d["errors"], d["throttled"]) == (4, 3, 1, 1)
    # the successful ones: ttfa 100, 300, 200 -> sorted 100 200 300; p50 = 2nd, p95 = ceil(2.85) = 3rd
    assert d["ttfa_ms"] == {"n": 3, "p50": 200.0, "p95": 300.0, "max": 300.0}
    # latencies 1.0, 1.5, 1.0 -> sorted 1.0 1.0 1.5
    assert d["latency_s"] == {"n": 3, "p50": 1.0, "p95": 1.5, "max": 1.5}
    assert d["rtf_p50"] == 0.3
    # 7 s of audio made over the span 0.0 .. 4.0 (the failed request's end counts: it held a slot)
    assert d["wall_s"] == 4.0 and d["throughput"] == {"audio_s_per_s": 1.75}
    assert d["within_slo"] is False  # an error: the level did not hold
    assert d["first_errors"] == ["HTTP 503: busy"]
    assert [s["index"] for s in d["samples"]] == [0, 1, 2, 3] and d["samples"][1]["latency_s"] == 1.5


def test_image_and_video_throughput_units():
    img = LevelReport("image", 1, 2, (Sample(0, 0.0, 2.0, True, images=1, bytes=10),
                                      Sample(1, 2.0, 4.0, True, images=2, bytes=20)))
    assert img.throughput == 45.0  # 3 images in 4 s = 45 per minute
    vid = LevelReport("video", 1, 1, (Sample(0, 0.0, 36.0, True, video_s=2.0, bytes=99),))
    assert vid.throughput == 200.0  # 2 s of video per 36 s = 200 s per hour


def level(c, ttfa, audio=1.0, errors=0):
    """A voice level at concurrency c: c requests, each 1 s long, first audio `ttfa` ms, `audio` s of audio."""
    samples = [voice(i, 0.0, 1.0, ttfa, audio) for i in range(c - errors)]
    samples += [voice(c - errors + i, 0.0, 1.0, None, 0.0, ok=False, error="ThrottlingException") for i in range(errors)]
    return LevelReport("voice", c, c, tuple(samples))


def report(levels, slo=None, usd=None, **kw):
    return LoadReport("voice", "sagemaker", "SageMaker endpoint v (us-east-1)", levels, slo=slo, usd_per_hour=usd, **kw)


def test_slo_counts_the_run_of_passing_levels_and_prices_the_best_throughput():
    # throughput = c requests x 1 s audio over 1 s = c audio s/s
    levels = [level(1, 100), level(2, 150), level(4, 400), level(8, 200)]  # 8 passes again: noise, not capacity
    r = report(levels, Slo("ttfa_ms", 300), usd=1.2)
    assert r.max_concurrency_within_slo == 2
    cost = r.to_dict()["cost"]
    # best within the SLO: level 2 at 2 audio s/s = 120 audio minutes per hour -> $1.2 / 120 = $0.01
    assert cost == {"usd_per_audio_minute": 0.01, "at_concurrency": 2, "throughput": {"audio_s_per_s": 2.0},
                    "usd_per_hour": 1.2, "note": None}
    assert [lv["within_slo"] for lv in r.to_dict()["levels"]] == [True, True, False, True]


def test_no_price_no_cost_and_the_reason_is_given():
    r = report([level(1, 100)], Slo("ttfa_ms", 300), price_note="no price is known for ml.x in us-east-1")
    cost = r.cost()
    assert cost["usd_per_audio_minute"] is None and cost["at_concurrency"] == 1
    assert "no price is known for ml.x" in cost["note"]


def test_lowest_level_failing_gives_no_capacity_and_no_cost():
    r = report([level(1, 500), level(2, 100)], Slo("ttfa_ms", 300), usd=1.0)
    assert r.max_concurrency_within_slo is None
    assert r.cost()["usd_per_audio_minute"] is None and "no level ran within the SLO" in r.cost()["note"]


def test_without_an_slo_levels_without_errors_count():
    r = report([level(1, 900), level(2, 900), level(4, 900, errors=1)], usd=3.6)
    assert r.max_concurrency_within_slo is None
    # best of levels 1 and 2: 2 audio s/s = 120 min/h -> $3.6 / 120 = $0.03 per audio minute
    assert r.cost()["usd_per_audio_minute"] == 0.03 and r.cost()["at_concurrency"] == 2


def test_image_and_video_cost_units():
    img = LoadReport("image", "server", "u", [LevelReport("image", 1, 1, (Sample(0, 0.0, 3.0, True, images=1),))],
                     usd_per_hour=1.2)
    assert img.cost()["usd_per_image"] == pytest.approx(1.2 / 1200)  # 20 per minute = 1200 per hour
    vid = LoadReport("video", "server", "u", [LevelReport("video", 1, 1, (Sample(0, 0.0, 3600.0, True, video_s=4.0),))],
                     usd_per_hour=2.0)
    assert vid.cost()["usd_per_video_second"] == 0.5  # 4 video seconds per hour at $2/h


def test_report_round_trips_and_recomputes_from_its_samples():
    r = report([level(1, 100), level(2, 150)], Slo("ttfa_ms", 300), usd=1.2, instance_type="ml.g6.xlarge",
               price_source="table")
    d = r.to_dict()
    back = LoadReport.from_dict(d).to_dict()
    assert back == d
    assert d["percentiles"] == "nearest-rank" and d["slo"]["unit"] == "ms"


# ---- throttling -----------------------------------------------------------------------------------------
def test_throttling_is_recognised_from_status_text_and_sagemakers_code():
    boto = ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, "InvokeEndpoint")
    assert is_throttling(aws_error(boto, "invoking endpoint img"))
    assert is_throttling(ServerError("busy", status=429)) and is_throttling(ServerError("x", status=503))
    assert is_throttling(StreamError("the server said: HTTP 429 Too Many Requests"))
    assert not is_throttling(ServerError("bad prompt", status=400)) and not is_throttling(None)


# ---- bad input --------------------------------------------------------------------------------------------
def test_levels_are_increasing_positive_whole_numbers():
    assert parse_levels("1, 2,4,8") == (1, 2, 4, 8) and parse_levels([1, 3]) == (1, 3)
    for bad, words in [("1,4,2", "2 follows 4"), ("1,2,2", "2 follows 2"), ("0,1", "'0'"), ("1,-2", "'-2'"),
                       ("1,x", "'x'"), ("", "give the concurrency levels"), ("1,,2", "an empty entry"),
                       ("1.5", "'1.5'"), ("1,65", "from 1 to 64")]:
        with pytest.raises(InvalidInput, match=words):
            parse_levels(bad)


def test_slo_needs_a_unit():
    assert parse_slo("300ms", "voice") == Slo("ttfa_ms", 300)
    assert parse_slo("ttfa 0.25 s", "voice") == Slo("ttfa_ms", 250)
    assert parse_slo("p95 latency <= 1.5 s", "voice") == Slo("latency_s", 1.5)
    assert parse_slo("2s", "image") == Slo("latency_s", 2.0)
    assert parse_slo("1 min", "video") == Slo("latency_s", 60.0)
    assert parse_slo("  ", "voice") is None
    with pytest.raises(InvalidInput, match="has no unit: write 300ms or 300s"):
        parse_slo("300", "voice")
    with pytest.raises(InvalidInput, match="'h' is not one of ms, s, min"):
        parse_slo("2h", "image")
    with pytest.raises(InvalidInput, match="first audio .* is a voice figure"):
        parse_slo("ttfa 300ms", "image")
    with pytest.raises(InvalidInput, match="cannot read the SLO"):
        parse_slo("fast please", "voice")


def test_plan_guard_rails_and_work_checks():
    plan = LoadPlan.build("voice", levels="1,2,4", requests=4, slo="300ms")
    assert plan.total_requests == 12 and plan.work["text"] and plan.warmup == 1
    with pytest.raises(InvalidInput, match="unknown modality 'audio'"):
        LoadPlan.build("audio", requests=8)
    with pytest.raises(InvalidInput, match="3 requests per level are fewer than the highest concurrency level 4"):
        LoadPlan.build("image", levels="1,4", requests=3)
    with pytest.raises(InvalidInput, match="requests per level must be a whole number from 1 to 2000"):
        LoadPlan.build("image", levels="1", requests=2001)
    with pytest.raises(InvalidInput, match="wall-clock cap"):
        LoadPlan.build("image", levels="1", requests=1, max_wall_s=5 * 3600)
    with pytest.raises(InvalidInput, match="the prompt is empty"):
        LoadPlan.build("image", levels="1", requests=1, work={"prompt": " "})
    with pytest.raises(InvalidInput, match="width must be"):
        LoadPlan.build("video", levels="1", requests=1, work={"width": 8})
    with pytest.raises(InvalidInput, match="'colour' is not a field of a image request"):
        LoadPlan.build("image", levels="1", requests=1, work={"colour": "red"})
    with pytest.raises(InvalidInput, match="no text to speak"):
        LoadPlan.build("voice", levels="1", requests=1, work={"text": ""})


def test_unit_prices_read_as_dollars_with_four_significant_digits():
    from services.pricing import usd

    assert usd(1.1267 / 120, "unit") == "$0.009389" and usd(1.052e-6, "unit") == "$0.000001052"
    assert usd(1.1267, "unit") == "$1.1267" and usd(None, "unit") == "—" and usd(0.01, "unit") == "$0.01000"
    # The other two ways money is written: a total (cents, 4 places under a dollar) and an hourly rate.
    assert usd(1234.5) == "$1,234.50" and usd(0.04123) == "$0.0412" and usd(None) == "—"
    assert usd(0.7364, "rate") == "$0.7364" and usd(10.4, "rate") == "$10.4000"
