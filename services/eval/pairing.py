"""Blind pairs: for each prompt (and repeat), two outputs of different variants in a random order.

With two variants every prompt gives one pair. With k > 2 variants each prompt gives k − 1 pairs, chosen so
that every pair of variants is compared about equally often: each next pair is the pair of variants compared
least so far that has both outputs for this prompt (ties broken by a seeded shuffle). Which output is shown
first is a seeded coin, and the pairs' order is shuffled. The schedule is a function of the evaluation id, its seed and which items succeeded,
so every rater (and every reload of the page) sees the same pairs; each rater gets the pairs they have not
rated yet, in that order.

A rating belongs to the evaluation when its two items are outputs of two different variants for the same
prompt and repeat (`check_pair`), whether or not the schedule offered that pair.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from protocol.errors import InvalidInput
from services.eval.stats import WINNERS
from services.eval.store import EvalStore, Item


@dataclass(frozen=True)
class Pair:
    item_a: str  # shown first ("1")
    item_b: str  # shown second ("2")
    prompt: str
    prompt_index: int
    repeat: int

    @property
    def key(self) -> frozenset[str]:
        return frozenset((self.item_a, self.item_b))


def schedule(store: EvalStore, eval_id: str) -> list[Pair]:
    ev = store.get(eval_id)
    labels = ev.spec.labels
    rng = random.Random(f"{eval_id}:{ev.spec.seed}")
    combos = list(itertools.combinations(labels, 2))
    rng.shuffle(combos)
    counts = {c: 0 for c in combos}
    groups: dict[tuple[int, int], dict[str, Item]] = {}
    for item in store.items(eval_id, status="succeeded"):
        groups.setdefault((item.prompt_index, item.repeat), {})[item.variant] = item
    per_group = max(1, len(labels) - 1)
    pairs: list[Pair] = []
    for (pi, r) in sorted(groups):
        got = groups[(pi, r)]
        usable = [c for c in combos if c[0] in got and c[1] in got]
        for _ in range(min(per_group, len(usable))):
            combo = min(usable, key=lambda c: counts[c])  # least compared so far; first in the shuffle on ties
            usable.remove(combo)
            counts[combo] += 1
            a, b = got[combo[0]], got[combo[1]]
            if rng.random() < 0.5:
                a, b = b, a
            pairs.append(Pair(a.id, b.id, a.prompt, pi, r))
    rng.shuffle(pairs)  # the order of the pairs too: no run of one prompt, no hint from the position
    return pairs


def next_pair(store: EvalStore, eval_id: str, rater: str, *, skipped: set[frozenset[str]] | None = None) -> Pair | None:
    """The next scheduled pair this rater has not rated (nor skipped this session); None when all are done."""
    rated = {frozenset((r.item_a, r.item_b)) for r in store.ratings(eval_id) if r.rater == rater}
    for pair in schedule(store, eval_id):
        if pair.key not in rated and (not skipped or pair.key not in skipped):
            return pair
    return None


def check_pair(items: dict[str, Item], item_a: str, item_b: str) -> str | None:
    """Why (item_a, item_b) is not a pair of this evaluation (`items` by id), or None when it is."""
    for name, item_id in (("item_a", item_a), ("item_b", item_b)):
        if item_id not in items:
            return f"{name} {item_id!r} is not an item of this evaluation"
    a, b = items[item_a], items[item_b]
    if a.variant == b.variant:
        return f"{item_a} and {item_b} are outputs of the same variant: not a pair of this evaluation"
    if (a.prompt_index, a.repeat) != (b.prompt_index, b.repeat):
        return f"{item_a} and {item_b} are outputs for different prompts: not a pair of this evaluation"
    if a.status != "succeeded" or b.status != "succeeded":
        return f"{item_a} or {item_b} has no output (it failed or was not generated yet)"
    return None


def record_rating(store: EvalStore, eval_id: str, item_a: str, item_b: str, winner: str, rater: str) -> None:
    """One rating (winner a, b or tie; a skip is not recorded). Refused, naming why, when it cannot count."""
    if winner not in WINNERS:
        raise InvalidInput(f"winner must be a, b or tie, not {winner!r}")
    if not rater.strip():
        raise InvalidInput("the rater's name is empty: say who rates")
    problem = check_pair({i.id: i for i in store.items(eval_id)}, item_a, item_b)
    if problem:
        raise InvalidInput(problem)
    store.add_ratings(eval_id, [(item_a, item_b, winner, rater.strip())])
