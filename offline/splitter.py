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

import re
import unicodedata
from dataclasses import dataclass
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


def unit_spans(buffer: str, granularity: Granularity, *, flush: bool) -> tuple[list[tuple[int, int]], int]:
    """Where `buffer`'s complete units are: ([(start, end), ...], where the unconfirmed rest begins).

    A unit is `strip_blank(buffer[start:end])`, never empty; `end` is just after its terminator run (closers
    included). The spans are in order and do not overlap; what lies between them is blank.
    """
    if granularity == "none":
        if not flush:
            return [], 0
        return ([(0, len(buffer))] if strip_blank(buffer) else []), len(buffer)

    ascii_marks, script_marks = _terminators(granularity)
    all_marks = ascii_marks | script_marks
    spans: list[tuple[int, int]] = []
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
        if strip_blank(buffer[last:j]):
            spans.append((last, j))
        last = k
        i = k

    if flush:
        if strip_blank(buffer[last:]):
            spans.append((last, n))
        last = n
    return spans, last


def extract_units(buffer: str, granularity: Granularity, *, flush: bool) -> tuple[list[str], str]:
    """Split `buffer` into complete units; returns (units, the unconfirmed rest)."""
    spans, rest = unit_spans(buffer, granularity, flush=flush)
    return [strip_blank(buffer[start:end]) for start, end in spans], buffer[rest:]


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


# ---------------------------------------------------------------------------------------------------------
# Pieces: where the voice may cut a unit's text so a busy engine can speak it a few words at a time.
SENTENCE, CLAUSE, PHRASE, WORD, WEAK = 3, 2, 1, 0, -1  # how natural a pause each kind of cut is
# WEAK: right after an article or preposition ("at | the"); used only when nothing else is near.
# A phrase starts before one of these ("… press Speak | at the same moment"): cutting there sounds least odd
# after a clause mark.
FUNCTION_WORDS = frozenset(
    {
        "a", "an", "the", "and", "but", "or", "nor", "so", "yet", "for", "because", "while", "when", "where",
        "whereas", "although", "though", "if", "unless", "until", "since", "as", "than", "that", "which", "who",
        "whom", "whose", "what", "at", "in", "on", "of", "to", "with", "from", "by", "into", "onto", "over",
        "under", "about", "after", "before", "between", "through", "during", "without", "within", "across",
        "against", "along", "around", "behind", "beyond", "toward", "towards", "upon", "via", "then",
    }
)
_DASHES = frozenset({"-", "–", "—", "--"})
_OPENERS = "\"'“‘([{«「『（"


@dataclass(frozen=True, slots=True)
class Cut:
    """A place a unit's text may be cut: `text[:end]` is whole words; `words` of them; `strength` how natural."""

    end: int
    words: int
    strength: int


def cut_points(text: str) -> list[Cut]:
    """Every place `text` may be cut into pieces, in order; the last one is always `len(text)` (a SENTENCE).

    Cuts are after a word that whitespace follows, or at a unit boundary of the splitter's rules (so "3.14",
    "Dr. Smith" and "J. R. R. Tolkien" are never cut inside, and a script's marks cut without whitespace).
    Cutting the text at any set of them and joining the pieces gives the text back, byte for byte.
    """
    sentence_ends = {end for _, end in unit_spans(text, "sentence", flush=True)[0]}
    clause_ends = {end for _, end in unit_spans(text, "clause", flush=True)[0]}
    tokens = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    cuts: list[Cut] = []
    words = 0
    for index, (start, end) in enumerate(tokens):
        # A script's marks end units inside a token ("你好，世界。再见"): those ends are cuts too.
        for inner in sorted(e for e in clause_ends if start < e < end):
            cuts.append(Cut(inner, words + 1, SENTENCE if inner in sentence_ends else CLAUSE))
        words += 1
        next_start = tokens[index + 1][0] if index + 1 < len(tokens) else len(text)
        following = text[next_start : tokens[index + 1][1]] if index + 1 < len(tokens) else ""
        token = text[start:end]
        if end in sentence_ends:
            strength = SENTENCE
        elif token.endswith(".") and _is_abbreviation(text, end - 1, next_start) is not False:
            continue  # "Dr. | Smith", "J. | Smith", "No. | 5": never a cut
        elif end in clause_ends or token.endswith(":") or following in _DASHES or token in _DASHES:
            strength = CLAUSE
        elif token.lstrip(_OPENERS).lower() in FUNCTION_WORDS:
            strength = WEAK
        elif following.lstrip(_OPENERS).lower() in FUNCTION_WORDS:
            strength = PHRASE
        else:
            strength = WORD
        cuts.append(Cut(end, words, strength))
    # Nothing but blanks after a cut: that is the end (no piece is ever blank).
    while cuts and not strip_blank(text[cuts[-1].end :]):
        cuts.pop()
    cuts.append(Cut(len(text), words, SENTENCE))
    return cuts


def next_piece(
    cuts: list[Cut],
    start: int,
    *,
    min_words: int = 1,
    max_words: int | None = None,
    min_strength: int = WORD,
    prefer: Literal["short", "long"] = "short",
    rank: bool = True,
) -> int:
    """Where the piece that begins at `start` ends (an index into the text `cuts` came from).

    A piece never goes past the end of its sentence. Among the cuts of at least `min_strength` leaving
    `min_words`..`max_words` words in the piece, the most natural one (highest strength) wins — or, with
    `rank=False`, any of them; of equals, the first (`prefer="short"`) or the last (`"long"`). A long piece
    looks for its natural cut in the upper half of the range only (a much shorter piece is no better for
    being cut at a comma). When none is in range: the first cut past `max_words` of at least `min_strength`,
    or the sentence's end.
    """
    before = 0
    candidates: list[Cut] = []
    for cut in cuts:
        if cut.end <= start:
            before = cut.words
            continue
        candidates.append(cut)
        if cut.strength == SENTENCE:
            break
    if not candidates:
        raise ValueError(f"no text left after index {start}")
    limit = candidates[-1]
    fitting = [
        c for c in candidates
        if c.strength >= min_strength and c.words - before >= min_words
        and (max_words is None or c.words - before <= max_words)
    ]
    if not fitting:
        later = [c for c in candidates if c.strength >= min_strength and c.words - before >= min_words]
        return later[0].end if later else limit.end
    if prefer == "long":
        half = (fitting[-1].words - before + 1) // 2
        fitting = [c for c in fitting if c.words - before >= half]
    best = max(c.strength for c in fitting) if rank else min_strength
    chosen = [c for c in fitting if c.strength >= best]
    return (chosen[0] if prefer == "short" else chosen[-1]).end
