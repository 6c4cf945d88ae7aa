"""Word error rate, checked against values counted by hand (services/listen/wer.py states the normalisation).

WER = (substitutions + deletions + insertions) / words in the reference, after both texts are lower-cased, tags are
removed, numbers are written as English words, contractions and titles are written out, punctuation is removed,
fillers are dropped and whitespace collapsed.
"""

from __future__ import annotations

import pytest

from protocol.errors import InvalidInput
from protocol.listen import is_english
from services.listen.wer import normalise, script_of, wer_counts, word_error_rate


@pytest.mark.parametrize(("reference", "hypothesis", "expected"), [
    ("The cat sat.", "the cat sat on", 1 / 3),  # one insertion over three words
    ("I have 2 dogs", "i have two dogs", 0.0),  # a number and its words are the same word
    ("the cat sat", "the cat sat", 0.0),
    ("the cat sat", "the dog sat", 1 / 3),  # one substitution
    ("the cat sat on the mat", "the cat on the mat", 1 / 6),  # one deletion
    ("the cat sat", "a dog stood there", 4 / 3),  # three substitutions and an insertion: more than 1
    ("Hello, world!", "hello world", 0.0),  # punctuation and case do not count
    ("It's 3.5 km", "it is three point five km", 0.0),
    ("It's 3.5 km", "its three point five km", 2 / 6),  # "it is" against "its": a substitution and a deletion
    ("Mr. John Dashwood", "mister john dashwood", 0.0),
    ("we can't, we won't", "we can not we will not", 0.0),
    ("<s> he was not an ill disposed young man </s>", "He was not an ill-disposed young man.", 0.0),
    ("so I um went [noise] there", "so uh i went there", 0.0),  # fillers and tags, on both sides
    ("1,000 people", "one thousand people", 0.0),
    ("on the 2nd of May", "on the second of may", 0.0),
    ("  spaced   out\ttext ", "spaced out text", 0.0),
    ("twenty-one", "21", 0.0),  # "twenty one" both ways
    ("one two three four", "", 1.0),  # nothing heard: every word deleted
])
def test_hand_counted_rates(reference: str, hypothesis: str, expected: float) -> None:
    assert word_error_rate(reference, hypothesis) == pytest.approx(expected)


def test_the_normalisation_is_the_stated_one() -> None:
    assert normalise("The Cat SAT.") == "the cat sat"
    assert normalise("I have 2 dogs") == "i have two dogs"
    assert normalise("Don't stop—go!") == "do not stop go"
    assert normalise("It's 3.5 km, on the 2nd of May; 1,000 people") == (
        "it is three point five km on the second of may one thousand people")
    assert normalise("At seven o'clock, Mrs. Dashwood's (laughs) I'd say: um, let's go") == (
        "at seven oclock missus dashwoods i would say let us go")


def test_a_reference_in_another_script_or_without_words_is_refused() -> None:
    with pytest.raises(InvalidInput, match="Cyrillic script but the transcript in Latin"):
        word_error_rate("Кошка сидела на ковре", "the cat sat on the mat")
    with pytest.raises(InvalidInput, match="no words"):
        word_error_rate(" ... ", "hello")
    assert script_of("你好") == "CJK" and script_of("123") is None


def test_english_is_what_wer_is_measured_in() -> None:
    assert is_english(None) and is_english("en") and is_english("English") and is_english(" EN-us ")
    assert not is_english("de") and not is_english("French")


@pytest.mark.parametrize(("reference", "hypothesis", "counts"), [
    ("The cat sat.", "the cat sat on", (0, 0, 1, 3)),  # (S, D, I, reference words), counted by hand
    ("the cat sat", "the dog sat", (1, 0, 0, 3)),
    ("the cat sat on the mat", "the cat on the mat", (0, 1, 0, 6)),
    ("the cat sat", "a dog stood there", (3, 0, 1, 3)),
    ("one two three four", "", (0, 4, 0, 4)),
    ("I have 2 dogs", "i have two dogs", (0, 0, 0, 4)),
])
def test_wer_counts_are_the_rates_parts(reference: str, hypothesis: str, counts: tuple[int, int, int, int]) -> None:
    got = wer_counts(reference, hypothesis)
    assert (got.substitutions, got.deletions, got.insertions, got.reference_words) == counts
    assert got.wer == pytest.approx(word_error_rate(reference, hypothesis))
    assert got.errors == sum(counts[:3])
