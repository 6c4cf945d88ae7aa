"""services/eval/stats.py against values computed by hand (the computation is in the comments)."""

from __future__ import annotations

import pytest

from services.eval import stats
from services.eval.stats import Comparison as C


def test_win_rate_counts_ties_half():
    # 2 wins, 1 loss, 1 tie: (2 + 1/2) / 4 = 0.625
    assert stats.win_rate(2, 1, 1) == pytest.approx(0.625)
    assert stats.win_rate(0, 0, 3) == pytest.approx(0.5)
    assert stats.win_rate(0, 0, 0) is None


def test_wilson_interval_by_hand():
    # p = 0.625, n = 4, z² = 1.959964² = 3.841459, z²/n = 0.960365, denominator 1.960365
    # centre = (0.625 + 3.841459/8) / 1.960365 = 1.105182 / 1.960365 = 0.563763
    # half   = 1.959964/1.960365 · √(0.625·0.375/4 + 3.841459/64) = 0.999795 · √0.118617 = 0.344338
    # → [0.219425, 0.908101]
    low, high = stats.wilson(0.625, 4)
    assert low == pytest.approx(0.219425, abs=2e-6)
    assert high == pytest.approx(0.908101, abs=2e-6)
    # 0 of 10: centre = (3.841459/20)/1.384146 = 0.138767, half = 1.416009·√(3.841459/400) = 0.138767
    low, high = stats.wilson(0.0, 10)
    assert low == pytest.approx(0.0, abs=1e-9)
    assert high == pytest.approx(0.277533, abs=2e-6)
    assert stats.wilson(0.5, 0) is None
    with pytest.raises(ValueError):
        stats.wilson(1.5, 3)


def test_tallies_and_matrix_with_sample_sizes():
    comps = [C("A", "B", "a"), C("B", "A", "b"), C("A", "B", "tie"), C("A", "B", "b"),
             C("A", "C", "a"), C("C", "B", "tie")]
    t = stats.variant_tallies(comps, ["A", "B", "C", "D"])
    # A: beat B twice (rows 1, 2), tied B, lost to B, beat C → 3 W, 1 L, 1 T, n 5, rate 3.5/5 = 0.7
    assert t["A"] | {"ci95": None} == {"ratings": 5, "wins": 3, "losses": 1, "ties": 1, "win_rate": 0.7,
                                       "ci95": None}
    assert t["A"]["ci95"] == pytest.approx(list(stats.wilson(0.7, 5)))
    # B: 1 W, 2 L, 2 T (with A and with C) → 2/5 = 0.4
    assert (t["B"]["wins"], t["B"]["losses"], t["B"]["ties"], t["B"]["win_rate"]) == (1, 2, 2, 0.4)
    # C: lost to A, tied B → 0.5/2 = 0.25
    assert (t["C"]["ratings"], t["C"]["win_rate"]) == (2, 0.25)
    assert t["D"] == {"ratings": 0, "wins": 0, "losses": 0, "ties": 0, "win_rate": None, "ci95": None}
    m = stats.win_matrix(comps, ["A", "B", "C"])
    # A vs B only: 2 W, 1 L, 1 T, n 4 → 2.5/4
    assert m["A"]["B"] == {"n": 4, "wins": 2, "losses": 1, "ties": 1, "win_rate": 0.625}
    assert m["B"]["A"] == {"n": 4, "wins": 1, "losses": 2, "ties": 1, "win_rate": 0.375}
    assert m["B"]["C"]["ties"] == 1 and m["C"]["A"]["losses"] == 1
    with pytest.raises(ValueError):
        stats.variant_tallies([C("A", "B", "x")])  # type: ignore[arg-type]


def test_agreement_percent_and_cohens_kappa():
    # Pairs p1..p4 (items i1..i8), outcomes in "lower id first" terms:
    # X: first, first, second, tie   Y: first, second, second, tie   → agree on 3 of 4: p_o = 0.75
    # X shares: first .5, second .25, tie .25; Y: first .25, second .5, tie .25
    # p_e = .5·.25 + .25·.5 + .25·.25 = 0.3125; κ = (0.75 − 0.3125)/(1 − 0.3125) = 0.4375/0.6875 = 0.636364
    comps = [
        C("A", "B", "a", "i1", "i2", "X"), C("A", "B", "b", "i4", "i3", "X"),  # i4 shown first; b → i3
        C("A", "B", "b", "i5", "i6", "X"), C("A", "B", "tie", "i7", "i8", "X"),
        C("A", "B", "b", "i2", "i1", "Y"),  # same pair shown the other way round: Y also chose i1
        C("A", "B", "b", "i3", "i4", "Y"), C("A", "B", "b", "i5", "i6", "Y"), C("A", "B", "tie", "i8", "i7", "Y"),
        C("A", "B", "a", "i9", "i10", "Z"),  # Z shares no pair with X or Y: no entry
    ]
    [row] = stats.agreement(comps)
    assert row["raters"] == ["X", "Y"] and row["n"] == 4
    assert row["percent_agreement"] == pytest.approx(0.75)
    assert row["kappa"] == pytest.approx(0.4375 / 0.6875)
    # both always "tie": p_e = 1 → κ undefined
    [same] = stats.agreement([C("A", "B", "tie", "i1", "i2", "X"), C("A", "B", "tie", "i1", "i2", "Y")])
    assert same["percent_agreement"] == 1.0 and same["kappa"] is None


def test_more_ratings_to_separate_by_hand():
    # rates 0.75 and 0.25 with 4 ratings each overlap. By symmetry low(0.75, N) = 1 − high(0.25, N), so they
    # separate once high(0.25, N) < 0.5:
    # N = 15: z²/N = 0.256097, centre = 0.378049/1.256097 = 0.300971,
    #         half = 1.560361·√(0.0125 + 0.004268) = 0.202054 → high 0.503025 (overlap)
    # N = 16: z²/N = 0.240091, centre = 0.370046/1.240091 = 0.298402,
    #         half = 1.580502·√(0.01171875 + 0.003751) = 0.196580 → high 0.494982 (separate)
    # → N = 16 each, 16 − 4 = 12 more
    assert stats.more_ratings_to_separate(0.75, 4, 0.25, 4) == {"n_each": 16, "more": 12}
    assert stats.more_ratings_to_separate(0.5, 10, 0.5, 10) is None
    assert stats.more_ratings_to_separate(1.0, 50, 0.0, 50)["more"] == 0
    assert stats.more_ratings_to_separate(0.5001, 1, 0.5, 1) is None  # beyond the cap
    assert stats.intervals_overlap(stats.wilson(0.75, 4), stats.wilson(0.25, 4))


def test_percentiles_reuse_the_shared_definition_and_cost_per_item():
    from services import stats as shared_stats
    assert stats.percentile is shared_stats.percentile
    # nearest rank: 5 values, p50 → ⌈2.5⌉ = 3rd = 3.0; p95 → ⌈4.75⌉ = 5th = 10.0
    s = stats.summary([1.0, 10.0, 2.0, 3.0, 4.0, None])
    assert (s["n"], s["p50"], s["p95"]) == (5, 3.0, 10.0)
    # (0.01 + 0.03) / 2 = 0.02 over the 2 known costs
    assert stats.cost_per_item([0.01, None, 0.03]) == {"n": 2, "usd": pytest.approx(0.02)}
    assert stats.cost_per_item([None]) == {"n": 0, "usd": None}


# ---- corpus WER and its bootstrap interval ------------------------------------------------------------------
def test_corpus_wer_is_total_errors_over_total_words_not_the_mean_of_rates():
    # (1 error in 2 words) and (0 in 8): 1/10 = 0.1, where the mean of the rates would be (0.5 + 0)/2 = 0.25
    assert stats.corpus_wer([(1, 2), (0, 8)]) == pytest.approx(0.1)
    assert stats.corpus_wer([]) is None
    res = stats.wer_bootstrap([(1, 2), (0, 8)])
    assert (res["wer"], res["n"], res["words"], res["errors"], res["resamples"]) == (pytest.approx(0.1), 2, 10, 1, 2000)


def test_bootstrap_of_two_utterances_against_its_exact_distribution():
    # utterances A = (1 error, 4 words), B = (0, 2). A resample of 2 draws is AA (prob 1/4): 2/8 = 0.25,
    # BB (1/4): 0/4 = 0, AB or BA (1/2): 1/6. The exact 2.5th percentile is 0 and the 97.5th 0.25, since each
    # end holds 25 % of the mass; with 2000 seeded resamples each end holds ~500 values, so the nearest-rank
    # ranks 50 and 1950 fall in them.
    values = stats.bootstrap_wers([(1, 4), (0, 2)])
    assert len(values) == 2000 and sorted(set(values)) == [0.0, pytest.approx(1 / 6), 0.25]
    shares = {v: values.count(v) / 2000 for v in set(values)}
    assert shares[0.0] == pytest.approx(0.25, abs=0.04) and shares[0.25] == pytest.approx(0.25, abs=0.04)
    res = stats.wer_bootstrap([(1, 4), (0, 2)])
    assert res["wer"] == pytest.approx(1 / 6) and res["ci95"] == [0.0, 0.25]
    assert res["ci95"][0] <= res["wer"] <= res["ci95"][1]
    assert stats.wer_bootstrap([(1, 4), (0, 2)]) == res  # seeded: the same interval every time


def test_bootstrap_interval_contains_the_estimate_and_is_zero_wide_for_identical_utterances():
    same = stats.wer_bootstrap([(1, 5)] * 7)
    assert same["wer"] == pytest.approx(0.2) and same["ci95"] == [pytest.approx(0.2), pytest.approx(0.2)]
    mixed = stats.wer_bootstrap([(0, 5), (3, 6), (1, 9), (2, 4), (0, 7)])
    # 6 errors in 31 words
    assert mixed["wer"] == pytest.approx(6 / 31)
    low, high = mixed["ci95"]
    assert 0 <= low < mixed["wer"] < high
    assert stats.wer_bootstrap([])["ci95"] is None and stats.wer_bootstrap([])["wer"] is None
    with pytest.raises(ValueError):
        stats.wer_bootstrap([(1, 0)])
