"""The speech stream's text splitting: vLLM-Omni's sentence/clause rules, fed whole or in pieces."""

from __future__ import annotations

import random

import pytest

from offline.splitter import TextSplitter, split_text


def feed_in_pieces(text: str, cuts: list[int], granularity: str) -> list[str]:
    splitter = TextSplitter(granularity)  # type: ignore[arg-type]
    units: list[str] = []
    bounds = [0, *sorted(cuts), len(text)]
    for start, end in zip(bounds, bounds[1:]):
        units += splitter.feed(text[start:end])
    return units + splitter.flush()


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("Hello world. How are you? Fine!", ["Hello world.", "How are you?", "Fine!"]),
        ("It costs 3.14 dollars. Cheap.", ["It costs 3.14 dollars.", "Cheap."]),
        ("Version 2.0.1 is out. Get it.", ["Version 2.0.1 is out.", "Get it."]),
        ("Dr. Smith met Mr. Jones and Mrs. Brown. Ms. Green left.",
         ["Dr. Smith met Mr. Jones and Mrs. Brown.", "Ms. Green left."]),
        ("Bring fruit, e.g. apples, i.e. red ones. Thanks.", ["Bring fruit, e.g. apples, i.e. red ones.", "Thanks."]),
        ("She moved to the U.S. in May. Then home.", ["She moved to the U.S. in May.", "Then home."]),
        ("Pens, paper, etc. are here. Go.", ["Pens, paper, etc. are here.", "Go."]),
        ("J. R. R. Tolkien wrote it. Yes.", ["J. R. R. Tolkien wrote it.", "Yes."]),
        ("I said no. Then No. 5 won.", ["I said no.", "Then No. 5 won."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("Wait... what?! Really.", ["Wait...", "what?!", "Really."]),
        ("No space after.Dots join", ["No space after.Dots join"]),
        ("你好。今天天气很好！是吗？好的……再见", ["你好。", "今天天气很好！", "是吗？", "好的……", "再见"]),
        ("他说：「好。」然后走了。", ["他说：「好。」", "然后走了。"]),
        ("One, two; three. Four", ["One, two; three.", "Four"]),
        ("  padded.   Spaces  ", ["padded.", "Spaces"]),
        ("", []),
        ("   ", []),
    ],
)
def test_sentence_units(text: str, units: list[str]) -> None:
    assert split_text(text, "sentence") == units


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("Hello, world; this is fine. Next", ["Hello,", "world;", "this is fine.", "Next"]),
        ("We sold 1,000 units, then 2,500. Wow.", ["We sold 1,000 units,", "then 2,500.", "Wow."]),
        ("Pi is 3.14, roughly.", ["Pi is 3.14,", "roughly."]),
        ("Dr. Who, the doctor, arrived.", ["Dr. Who,", "the doctor,", "arrived."]),
        ("a,b;c", ["a,b;c"]),  # ASCII clause marks need whitespace after them
        ("你好，世界；再见。好", ["你好，", "世界；", "再见。", "好"]),
    ],
)
def test_clause_units(text: str, units: list[str]) -> None:
    assert split_text(text, "clause") == units


def test_sentence_mode_ignores_clause_marks() -> None:
    assert split_text("Hello, world; this is fine.", "sentence") == ["Hello, world; this is fine."]
    assert split_text("你好，世界。", "sentence") == ["你好，世界。"]


def test_none_releases_everything_on_flush_only() -> None:
    splitter = TextSplitter("none")
    assert splitter.feed("First sentence. Second one! ") == []
    assert splitter.feed("Third, with a clause") == []
    assert splitter.flush() == ["First sentence. Second one! Third, with a clause"]
    assert splitter.flush() == []  # the buffer is empty after a flush
    assert TextSplitter("none").flush() == []


def test_feed_waits_for_what_follows_a_terminator() -> None:
    splitter = TextSplitter("sentence")
    assert splitter.feed("It costs 3.") == []  # maybe "3.14": wait
    assert splitter.feed("14 dollars.") == []  # maybe the end, maybe "dollars.com"
    assert splitter.feed(" Then") == ["It costs 3.14 dollars."]
    assert splitter.buffered == "Then"
    assert splitter.feed(" we went to see Dr.") == []
    assert splitter.feed(" Who. ") == ["Then we went to see Dr. Who."]
    assert splitter.feed("No.") == []
    assert splitter.feed(" ") == []  # "No. 5" or "No. Then": the next character decides
    assert splitter.feed("5 won") == []
    assert splitter.flush() == ["No. 5 won"]


def test_cjk_terminator_needs_no_space_but_waits_for_the_next_character() -> None:
    splitter = TextSplitter("sentence")
    assert splitter.feed("好的…") == []  # could be "……"
    assert splitter.feed("…再") == ["好的……"]
    assert splitter.flush() == ["再"]


def test_flush_completes_a_trailing_terminator() -> None:
    splitter = TextSplitter("clause")
    assert splitter.feed("Hello,") == []
    assert splitter.flush() == ["Hello,"]


TEXTS = [
    "Dr. Smith paid $3.14, i.e. 1,000 cents, to the U.S. office. Really?! Yes... OK. No. 5 said no. Fine",
    '你好。今天，天气很好！他说：「好。」是吗？好的……再见',
    'Mrs. Brown said "Hello, there." Then J. Smith left; etc. are fine. Wait…',
]


@pytest.mark.parametrize("granularity", ["none", "sentence", "clause"])
@pytest.mark.parametrize("text", TEXTS)
def test_units_do_not_depend_on_how_the_text_is_cut(text: str, granularity: str) -> None:
    expected = split_text(text, granularity)  # type: ignore[arg-type]
    assert expected, "every text here has units"
    for cut in range(1, len(text)):  # every two-piece cut
        assert feed_in_pieces(text, [cut], granularity) == expected, f"cut at {cut}: {text[:cut]!r}"
    rng = random.Random(1234)
    for _ in range(200):  # many-piece cuts, including one character at a time
        cuts = rng.sample(range(1, len(text)), rng.randint(2, min(12, len(text) - 1)))
        assert feed_in_pieces(text, cuts, granularity) == expected
    assert feed_in_pieces(text, list(range(1, len(text))), granularity) == expected


def test_units_keep_every_word() -> None:
    for text in TEXTS:
        for granularity in ("sentence", "clause"):
            units = split_text(text, granularity)  # type: ignore[arg-type]
            assert "".join(units).replace(" ", "") == text.replace(" ", "")


def test_unknown_granularity_is_rejected() -> None:
    with pytest.raises(ValueError, match="split_granularity"):
        TextSplitter("paragraph")  # type: ignore[arg-type]


@pytest.mark.parametrize("granularity", ["none", "sentence", "clause"])
def test_nothing_visible_is_no_unit(granularity: str) -> None:
    # Zero-width spaces/joiners, a word joiner, a BOM and a soft hyphen are as empty as whitespace: no unit
    # (the WebSocket then answers session.done with total_sentences 0, as vLLM-Omni does for "   ").
    for text in ("\u200b\u200b", " \u200c\u200d\t", "\u2060\ufeff\u00ad", "\u200b \u200b"):
        assert split_text(text, granularity) == []  # type: ignore[arg-type]
        splitter = TextSplitter(granularity)  # type: ignore[arg-type]
        assert splitter.feed(text) == [] and splitter.flush() == []


def test_invisible_characters_around_a_unit_are_stripped() -> None:
    assert split_text("\ufeffHello there. \u200b", "sentence") == ["Hello there."]
    assert split_text("\u200bOne, two.\u200b", "clause") == ["One,", "two."]
    assert split_text("\ufeff Hi \u200b", "none") == ["Hi"]
    # Inside a unit they stay: a zero-width joiner belongs to its emoji.
    assert split_text("Family: 👨\u200d👩\u200d👧.", "sentence") == ["Family: 👨\u200d👩\u200d👧."]
