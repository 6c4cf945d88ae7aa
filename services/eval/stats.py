"""The statistics of a blind evaluation, computed one way everywhere (the CLI report, the Evaluations page).

Every figure comes with its sample size, because a win rate of 3 ratings says less than one of 300.

- **Win rate** of a variant = (wins + ties / 2) / n, where n = wins + losses + ties is the number of rated
  comparisons it took part in (a "skip" is not a rating). Ties count half.
- **95 % Wilson score interval** for that rate p̂ over n ratings, z = 1.959964:

      centre = (p̂ + z²/(2n)) / (1 + z²/n)
      half   = z / (1 + z²/n) · √( p̂(1 − p̂)/n + z²/(4n²) )
      ci95   = [centre − half, centre + half]

  (Wilson 1927). With ties counted half, p̂ may sit between two whole counts; the formula takes p̂ as is.
  n = 0 gives no interval (None).
- **Pairwise win matrix**: `matrix[a][b]` is what a did against b only: wins, losses, ties, n, win_rate.
- **Rater agreement** on the pairs (the same two items) that two raters both rated: the *percent agreement*
  (share of those pairs where both chose the same outcome: the same item, or both "tie") and *Cohen's
  kappa* over the three outcomes {first item (lower id) better, second item better, tie}:
  κ = (p_o − p_e) / (1 − p_e), with p_o the agreement and p_e = Σ_c p₁(c)·p₂(c) the agreement expected by
  chance from each rater's own outcome shares. κ is None when p_e = 1 (both raters always gave one outcome).
- **"About N more ratings would separate them"**: assuming each variant's observed win rate stays as it is,
  the smallest number of ratings N per variant at which the two 95 % Wilson intervals (at those rates, with
  N ratings each) stop overlapping; "more" is N minus the smaller of the two current counts. None when the
  rates are equal (no number of ratings separates them at those rates) or when N would exceed 100 000.
  It is an estimate under that assumption, not a promise: the rates move as ratings come in.
- **Median and p95** use the nearest-rank percentile of services/stats.py (the one definition).
- **Cost per item** = the summed known cost of a variant's items / the number of those items; None when no
  item's cost is known.
- **Corpus word error rate** (listen evaluations, and a voice evaluation's intelligibility) = Σ errors / Σ
  reference words over a variant's utterances (services/listen/wer.py counts each utterance's substitutions +
  deletions + insertions after its normalisation) — not the mean of per-utterance rates, so a long utterance
  weighs by its words.
- **Its 95 % interval: a percentile bootstrap over utterances.** B = 2000 resamples (numpy's default_rng seeded
  with 0: the same interval every time): each draws n utterances with replacement from the n and takes their
  corpus WER; the interval is the nearest-rank 2.5th and 97.5th percentiles of the B values (ranks 50 and 1950).
  n = 0 gives no interval (None); identical utterances give a zero-width one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple

from services.stats import PERCENTILE_METHOD, percentile, summary

Z95 = 1.959964
WINNERS = ("a", "b", "tie")
SEPARATION_CAP = 100_000
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
WER_METHOD = ("corpus WER = total errors / total reference words; 95 % interval: percentile bootstrap over "
              f"utterances ({BOOTSTRAP_RESAMPLES} resamples with replacement, seed {BOOTSTRAP_SEED}, nearest-rank "
              "2.5th and 97.5th percentiles)")

__all__ = [
    "BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "PERCENTILE_METHOD", "SEPARATION_CAP", "WER_METHOD", "corpus_wer",
    "wer_bootstrap", "WINNERS", "Z95", "Comparison", "agreement", "cost_per_item",
    "intervals_overlap", "more_ratings_to_separate", "percentile", "summary", "variant_tallies", "wilson",
    "win_matrix", "win_rate",
]


class Comparison(NamedTuple):
    """One rated pair: the variant labels of the two items shown (a first), who won and by whose judgement."""
    label_a: str
    label_b: str
    winner: Literal["a", "b", "tie"]
    item_a: str = ""
    item_b: str = ""
    rater: str = ""


def win_rate(wins: int, losses: int, ties: int) -> float | None:
    """(wins + ties/2) / (wins + losses + ties); None when there is no rating."""
    n = wins + losses + ties
    return None if n == 0 else (wins + ties / 2) / n


def wilson(p: float | None, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval for the rate p over n ratings (formula in the module docstring)."""
    if n <= 0 or p is None:
        return None
    if not 0 <= p <= 1:
        raise ValueError(f"a rate is between 0 and 1, not {p}")
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def intervals_overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """True when the two intervals share a point (or either is unknown: nothing is separated yet)."""
    if a is None or b is None:
        return True
    return a[0] <= b[1] and b[0] <= a[1]


def more_ratings_to_separate(p1: float, n1: int, p2: float, n2: int, z: float = Z95) -> dict[str, Any] | None:
    """`{"n_each", "more"}`: the smallest N ratings per variant at which the Wilson intervals at the observed
    rates p1 and p2 stop overlapping, and N − min(n1, n2) (0 when they already do not overlap). None when
    p1 = p2 or N > SEPARATION_CAP. The method is in the module docstring."""
    if p1 == p2:
        return None
    if not intervals_overlap(wilson(p1, n1, z), wilson(p2, n2, z)):
        return {"n_each": max(n1, n2), "more": 0}
    for n in range(max(1, min(n1, n2)), SEPARATION_CAP + 1):
        if not intervals_overlap(wilson(p1, n, z), wilson(p2, n, z)):
            return {"n_each": n, "more": max(0, n - min(n1, n2))}
    return None


def variant_tallies(comparisons: Iterable[Comparison], labels: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Per variant: `{"ratings", "wins", "losses", "ties", "win_rate", "ci95"}` over every comparison it was in.
    `labels` lists variants to include even with no rating (in that order, first)."""
    counts: dict[str, list[int]] = {label: [0, 0, 0] for label in labels}
    for c in comparisons:
        for label in (c.label_a, c.label_b):
            counts.setdefault(label, [0, 0, 0])
        if c.winner == "tie":
            counts[c.label_a][2] += 1
            counts[c.label_b][2] += 1
        elif c.winner in ("a", "b"):
            won, lost = (c.label_a, c.label_b) if c.winner == "a" else (c.label_b, c.label_a)
            counts[won][0] += 1
            counts[lost][1] += 1
        else:
            raise ValueError(f"a winner is a, b or tie, not {c.winner!r}")
    out: dict[str, dict[str, Any]] = {}
    for label, (w, lost, t) in counts.items():
        rate = win_rate(w, lost, t)
        ci = wilson(rate, w + lost + t)
        out[label] = {"ratings": w + lost + t, "wins": w, "losses": lost, "ties": t, "win_rate": rate,
                      "ci95": None if ci is None else [ci[0], ci[1]]}
    return out


def win_matrix(comparisons: Iterable[Comparison], labels: Sequence[str] = ()) -> dict[str, dict[str, dict[str, Any]]]:
    """`matrix[a][b]` = `{"n", "wins", "losses", "ties", "win_rate"}` of a against b only (a ≠ b); every
    ordered pair of the labels seen (or given) is present, with n = 0 when they never met."""
    seen = list(labels)
    cells: dict[tuple[str, str], list[int]] = {}
    for c in comparisons:
        for label in (c.label_a, c.label_b):
            if label not in seen:
                seen.append(label)
        if c.label_a == c.label_b:
            continue
        ab = cells.setdefault((c.label_a, c.label_b), [0, 0, 0])
        ba = cells.setdefault((c.label_b, c.label_a), [0, 0, 0])
        if c.winner == "tie":
            ab[2] += 1
            ba[2] += 1
        elif c.winner == "a":
            ab[0] += 1
            ba[1] += 1
        elif c.winner == "b":
            ab[1] += 1
            ba[0] += 1
        else:
            raise ValueError(f"a winner is a, b or tie, not {c.winner!r}")
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    for a in seen:
        matrix[a] = {}
        for b in seen:
            if a == b:
                continue
            w, lost, t = cells.get((a, b), [0, 0, 0])
            matrix[a][b] = {"n": w + lost + t, "wins": w, "losses": lost, "ties": t,
                            "win_rate": win_rate(w, lost, t)}
    return matrix


def _outcome(c: Comparison) -> tuple[tuple[str, str], str]:
    """The pair as (lower id, higher id) and the outcome in those terms: "first", "second" or "tie"."""
    key = tuple(sorted((c.item_a, c.item_b)))
    if c.winner == "tie":
        return key, "tie"  # type: ignore[return-value]
    winner_item = c.item_a if c.winner == "a" else c.item_b
    return key, ("first" if winner_item == key[0] else "second")  # type: ignore[return-value]


def agreement(comparisons: Iterable[Comparison]) -> list[dict[str, Any]]:
    """For every two raters who rated at least one same pair: `{"raters": [r1, r2], "n", "percent_agreement",
    "kappa"}` (Cohen's kappa over first/second/tie, see the module docstring). A rater's last rating of a
    pair counts. Sorted by rater names."""
    by_rater: dict[str, dict[tuple[str, str], str]] = {}
    for c in comparisons:
        key, outcome = _outcome(c)
        by_rater.setdefault(c.rater, {})[key] = outcome
    raters = sorted(by_rater)
    out = []
    for i, r1 in enumerate(raters):
        for r2 in raters[i + 1:]:
            common = sorted(set(by_rater[r1]) & set(by_rater[r2]))
            if not common:
                continue
            n = len(common)
            o1 = [by_rater[r1][k] for k in common]
            o2 = [by_rater[r2][k] for k in common]
            p_o = sum(x == y for x, y in zip(o1, o2)) / n
            p_e = sum((o1.count(c) / n) * (o2.count(c) / n) for c in ("first", "second", "tie"))
            kappa = None if p_e >= 1 else (p_o - p_e) / (1 - p_e)
            out.append({"raters": [r1, r2], "n": n, "percent_agreement": p_o, "kappa": kappa})
    return out


def cost_per_item(costs: Iterable[float | None]) -> dict[str, Any]:
    """`{"n", "usd"}`: the mean of the known costs (n of them); usd None when none is known."""
    known = [float(c) for c in costs if c is not None]
    return {"n": len(known), "usd": (sum(known) / len(known)) if known else None}


def corpus_wer(utterances: Iterable[tuple[int, int]]) -> float | None:
    """Σ errors / Σ reference words over (errors, words) per utterance; None without words."""
    pairs = list(utterances)
    words = sum(w for _, w in pairs)
    return None if words <= 0 else sum(e for e, _ in pairs) / words


def bootstrap_wers(utterances: Sequence[tuple[int, int]], *, resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = BOOTSTRAP_SEED) -> list[float]:
    """The corpus WER of each of `resamples` resamples (n utterances drawn with replacement, seeded)."""
    import numpy as np

    n = len(utterances)
    if n == 0:
        return []
    errors = np.array([e for e, _ in utterances], dtype=np.int64)
    words = np.array([w for _, w in utterances], dtype=np.int64)
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    return [float(x) for x in errors[picks].sum(axis=1) / words[picks].sum(axis=1)]


def wer_bootstrap(utterances: Iterable[tuple[int, int]], *, resamples: int = BOOTSTRAP_RESAMPLES,
                  seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """`{"wer", "ci95", "n", "words", "errors", "resamples"}`: the corpus WER of (errors, words) per utterance and
    its percentile-bootstrap 95 % interval over utterances (the method in the module docstring)."""
    pairs = [(int(e), int(w)) for e, w in utterances]
    if any(w <= 0 or e < 0 for e, w in pairs):
        raise ValueError("every utterance has at least one reference word and no negative error count")
    values = bootstrap_wers(pairs, resamples=resamples, seed=seed)
    ci = None if not values else [percentile(values, 2.5), percentile(values, 97.5)]
    return {"wer": corpus_wer(pairs), "ci95": ci, "n": len(pairs), "words": sum(w for _, w in pairs),
            "errors": sum(e for e, _ in pairs), "resamples": resamples}
