"""Incremental text splitting for the speech stream, with vLLM-Omni's boundary rules.

A *unit* is what one `audio.start` … `audio.done` run speaks. With `split_granularity="none"` the whole
buffer is one unit, released on flush (`input.done`); `"sentence"` and `"clause"` release units while text
is still arriving.

Rules (docs/protocols.md, "Speech stream"):
- sentence terminators: `.!?` followed by whitespace, and `。！？…` (plus the Devanagari danda and the
  Arabic question mark, which vLLM-Omni also treats as sentence ends);
- clause granularity adds `, ;` (followed by whitespace) and `，；` (and the Arabic comma);
- no split inside numbers (`3.14`, `1,000`: the mark is not followed by whitespace) nor after common
  abbreviations (`Dr.`, `Mr.`, `e.g.`, `U.S.`, `etc.`, ...) or a single capital initial (`J. Smith`);
- units are stripped, and one with nothing left is never emitted (vLLM-Omni strips whitespace; here
  invisible format characters such as zero-width spaces go too, so "\\u200b\\u200b" is no unit at all).

The splitter only confirms a boundary once it has seen what follows the terminator run, so the units are
the same however the text is cut into `input.text` messages.
"""

from __future__ import annotations

import unicodedata
from typing import Literal

Granularity = Literal["none", "sentence", "clause"]

# ASCII marks are abbreviation- and number-prone: they need following whitespace (or a flush).
_ASCII_SENTENCE = frozenset(".!?")
_ASCII_CLAUSE = frozenset(",;")
# Script-specific marks close a unit by themselves.
_SCRIPT_SENTENCE = frozenset("。！？…।॥؟")
_SCRIPT_CLAUSE = frozenset("，；،")
# Closing quotes and brackets that belong to the unit they end: `He said "Hi." Then ...`.
_CLOSER_CHARS = "\"'”’)]}»」』）】》"
_CLOSERS = frozenset(_CLOSER_CHARS)

# Lower-cased, without the final dot. A dot after one of these never ends a unit.
ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "vs", "etc", "cf", "al",
        "e.g", "i.e", "u.s", "u.k", "u.n", "u.s.a", "a.m", "p.m", "fig", "figs", "inc", "ltd",
        "co", "corp", "dept", "approx", "capt", "sgt", "jan", "feb", "mar", "apr", "jun", "jul",
        "aug", "sep", "sept", "oct", "nov", "dec", "vol",
    }
)
# Abbreviations that are also ordinary words ("I said no."): only when a number follows ("No. 5").
NUMBER_ABBREVIATIONS = frozenset({"no", "nos", "nr", "pp", "p", "ch", "art", "sec"})


def _blank(ch: str) -> bool:
    """Whitespace, or an invisible format character (zero-width space/joiners, word joiner, BOM, soft hyphen)."""
    return ch.isspace() or unicodedata.category(ch) == "Cf"


def strip_blank(text: str) -> str:
    """`text` without leading and trailing whitespace or invisible format characters.

    vLLM-Omni strips whitespace and skips a unit that is then empty; text of only zero-width characters has
    nothing to speak either, so it is treated the same way ("" here).
    """
    start, end = 0, len(text)
    while start < end and _blank(text[start]):
        start += 1
    while end > start and _blank(text[end - 1]):
        end -= 1
    return text[start:end]


def _terminators(granularity: Granularity) -> tuple[frozenset[str], frozenset[str]]:
    """(ASCII marks, script marks) that end a unit at this granularity."""
    if granularity == "clause":
        return _ASCII_SENTENCE | _ASCII_CLAUSE, _SCRIPT_SENTENCE | _SCRIPT_CLAUSE
    return _ASCII_SENTENCE, _SCRIPT_SENTENCE


def _word_before(text: str, end: int) -> str:
    """The whitespace-delimited token that ends at `end` (exclusive), without leading quotes/brackets."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip("\"'“‘([{«「『（")


def _is_abbreviation(text: str, dot: int, after: int) -> bool | None:
    """Whether the dot at `dot` ends an abbreviation (None: the text after it is needed to tell).

    `after` is the index of the next non-space character (len(text) when none has arrived yet).
    """
    word = _word_before(text, dot)
    if not word:
        return False
    lowered = word.lower()
    if lowered in ABBREVIATIONS:
        return True
    if lowered in NUMBER_ABBREVIATIONS:
        return text[after].isdigit() if after < len(text) else None
    return len(word) == 1 and word.isupper()  # an initial, as in "J. R. R. Tolkien"


def extract_units(buffer: str, granularity: Granularity, *, flush: bool) -> tuple[list[str], str]:
    """Split `buffer` into complete units; returns (units, the unconfirmed rest)."""
    if granularity == "none":
        if not flush:
            return [], buffer
        piece = strip_blank(buffer)
        return ([piece] if piece else []), ""

    ascii_marks, script_marks = _terminators(granularity)
    all_marks = ascii_marks | script_marks
    units: list[str] = []
    last = 0
    i = 0
    n = len(buffer)
    while i < n:
        ch = buffer[i]
        if ch not in all_marks:
            i += 1
            continue
        # The terminator run: repeated marks ("?!", "...", "……") and the closers after them.
        j = i + 1
        while j < n and (buffer[j] in all_marks or buffer[j] in _CLOSERS):
            j += 1
        if j == n and not flush:
            break  # what follows decides; wait for more text
        run = buffer[i:j]
        if any(c in script_marks for c in run):
            boundary = True
        else:
            # ASCII only: needs whitespace (or the end of a flushed buffer) after the run.
            boundary = j == n or buffer[j].isspace()
        k = j
        while k < n and buffer[k].isspace():
            k += 1
        if boundary and run[0] == "." and len(run.rstrip(_CLOSER_CHARS)) == 1:
            abbreviation = _is_abbreviation(buffer, i, k)
            if abbreviation is None and not flush:
                break  # "No. " — whether a number follows decides; wait for more text
            boundary = not abbreviation
        if not boundary:
            i = j
            continue
        piece = strip_blank(buffer[last:j])
        if piece:
            units.append(piece)
        last = k
        i = k

    rest = buffer[last:]
    if flush:
        tail = strip_blank(rest)
        if tail:
            units.append(tail)
        rest = ""
    return units, rest


class TextSplitter:
    """Stateful splitter for one utterance: `feed()` text as it arrives, `flush()` on `input.done`."""

    def __init__(self, granularity: Granularity = "none") -> None:
        if granularity not in ("none", "sentence", "clause"):
            raise ValueError(f"Unsupported split_granularity: {granularity!r}; use 'none', 'sentence' or 'clause'")
        self.granularity: Granularity = granularity
        self._buffer = ""

    @property
    def buffered(self) -> str:
        return self._buffer

    def feed(self, text: str) -> list[str]:
        self._buffer += text
        units, self._buffer = extract_units(self._buffer, self.granularity, flush=False)
        return units

    def flush(self) -> list[str]:
        units, self._buffer = extract_units(self._buffer, self.granularity, flush=True)
        return units


def split_text(text: str, granularity: Granularity) -> list[str]:
    """All units of a complete text."""
    return extract_units(text, granularity, flush=True)[0]


def first_clause_split(text: str) -> list[str]:
    """`text` as [first clause of its first sentence, the rest] — or [text] when there is no such clause.

    The voice synthesizes the pieces one after the other, so a short first piece means fast first audio
    while the units the client sees stay as its split_granularity made them.
    """
    sentences = split_text(text, "sentence")
    if not sentences:
        return []
    clauses = split_text(sentences[0], "clause")
    if len(clauses) < 2:
        return [strip_blank(text)]
    first = clauses[0]
    # Find where the first clause ends in the original text so the rest keeps its own spacing.
    end = text.find(first) + len(first)
    rest = strip_blank(text[end:])
    return [first, rest] if rest else [first]
