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

- a run without a boundary is cut at a word boundary once it passes SPEECH_UNIT_MAX_WORDS words or
  SPEECH_UNIT_MAX_CHARS characters (protocol.limits; a single longer "word" is cut at the character cap), at the
  most natural place in the upper half of the allowed words (`cap_cut`): unpunctuated text is spoken as it
  arrives, and no unit asks the voice for more than a bounded model run. The voice's pieces keep to the same
  caps (offline.voice.scheduler).

The splitter only confirms a boundary once it has seen what follows the terminator run, so the units are
the same however the text is cut into `input.text` messages.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from protocol.limits import SPEECH_UNIT_MAX_CHARS, SPEECH_UNIT_MAX_WORDS

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


def _word_before(text: str, end: int, floor: int = 0) -> str:
    """The whitespace-delimited token that ends at `end` (exclusive) and starts at `floor` at the earliest (where
    the unit began: a unit cut inside a giant word starts a word there), without leading quotes/brackets."""
    start = end
    while start > floor and not text[start - 1].isspace():
        start -= 1
    return text[start:end].lstrip("\"'“‘([{«「『（")


def _is_abbreviation(text: str, dot: int, after: int, floor: int = 0) -> bool | None:
    """Whether the dot at `dot` ends an abbreviation (None: the text after it is needed to tell).

    `after` is the index of the next non-space character (len(text) when none has arrived yet).
    """
    word = _word_before(text, dot, floor)
    if not word:
        return False
    lowered = word.lower()
    if lowered in ABBREVIATIONS:
        return True
    if lowered in NUMBER_ABBREVIATIONS:
        return text[after].isdigit() if after < len(text) else None
    return len(word) == 1 and word.isupper()  # an initial, as in "J. R. R. Tolkien"


def _next_boundary(buffer: str, start: int, marks: tuple[frozenset[str], frozenset[str]], *, flush: bool
                   ) -> tuple[bool, int, int]:
    """The end of the unit that begins at `start`: (True, its end, where the next one begins) once decided —
    just after its terminator run, or the end of a flushed buffer — else (False, how far it surely goes on, -).

    The scan stops at the first visible character past the character cap: the unit is cut there anyway.
    """
    ascii_marks, script_marks = marks
    all_marks = ascii_marks | script_marks
    n = len(buffer)
    limit = _visible_from(buffer, start, n) + SPEECH_UNIT_MAX_CHARS
    i = start
    while i < n:
        ch = buffer[i]
        if i >= limit and not _blank(ch):
            return False, i + 1, -1  # past the cap: decided by cap_cut, whatever follows
        if ch not in all_marks:
            i += 1
            continue
        # The terminator run: repeated marks ("?!", "...", "……") and the closers after them.
        j = i + 1
        while j < n and (buffer[j] in all_marks or buffer[j] in _CLOSERS):
            j += 1
        if j == n and not flush:
            return False, i, -1  # what follows decides; wait for more text
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
            abbreviation = _is_abbreviation(buffer, i, k, start)
            if abbreviation is None and not flush:
                return False, i, -1  # "No. " — whether a number follows decides; wait for more text
            boundary = not abbreviation
        if boundary:
            return True, j, k
        i = j
    return (True, n, n) if flush else (False, n, -1)


def unit_spans(buffer: str, granularity: Granularity, *, flush: bool) -> tuple[list[tuple[int, int]], int]:
    """Where `buffer`'s complete units are: ([(start, end), ...], where the unconfirmed rest begins).

    A unit is `strip_blank(buffer[start:end])`, never empty; `end` is just after its terminator run (closers
    included), or where the caps cut it (`cap_cut`). The spans are in order and do not overlap; what lies
    between them is blank.
    """
    if granularity == "none":
        if not flush:
            return [], 0
        return ([(0, len(buffer))] if strip_blank(buffer) else []), len(buffer)

    marks = _terminators(granularity)
    spans: list[tuple[int, int]] = []
    last, n = 0, len(buffer)
    while last < n:
        decided, stop, after = _next_boundary(buffer, last, marks, flush=flush)
        cut = cap_cut(buffer, last, stop)
        if cut is not None:  # too long for one unit: its first words are one
            spans.append((last, cut))
            while cut < n and buffer[cut].isspace():
                cut += 1
            last = cut
            continue
        if not decided:
            break
        if strip_blank(buffer[last:stop]):
            spans.append((last, stop))
        last = after
    if flush:
        last = n
    return spans, last


def _visible_from(text: str, start: int, stop: int) -> int:
    """The first index at or after `start` (before `stop`) that is not blank; `stop` when there is none."""
    while start < stop and _blank(text[start]):
        start += 1
    return start


_TOKEN = re.compile(r"\S+")
_PAUSE_MARKS = _ASCII_CLAUSE | _SCRIPT_CLAUSE | frozenset(":")  # a word ending in one is a clause-like cut


def _cap_strength(text: str, words: list[tuple[int, int]], k: int, allowed: int, floor: int) -> int | None:
    """How natural a cut after `words[k]` is (None: never there — "Dr. | Smith"); the word after it counts only
    when it is one of the `allowed` first words (so the answer never depends on text still to come)."""
    start, end = words[k]
    token = text[start:end]
    following = text[slice(*words[k + 1])] if k + 1 < allowed else ""
    after = words[k + 1][0] if k + 1 < len(words) else end
    if token.endswith(".") and _is_abbreviation(text, end - 1, after, floor) is not False:
        return None
    if token.rstrip(_CLOSER_CHARS)[-1:] in _PAUSE_MARKS or token in _DASHES or following in _DASHES:
        return CLAUSE
    if token.lstrip(_OPENERS).lower() in FUNCTION_WORDS:
        return WEAK
    if following.lstrip(_OPENERS).lower() in FUNCTION_WORDS:
        return PHRASE
    return WORD


def cap_cut(text: str, start: int, stop: int) -> int | None:
    """Where the unit beginning at `start` must be cut to keep within the caps, when `text[start:stop]` holds no
    unit boundary and the unit goes on at least to `stop`; None when it may still end within them.

    It is over the caps with more than SPEECH_UNIT_MAX_WORDS words, or a visible character past
    SPEECH_UNIT_MAX_CHARS. The cut is after a word — the most natural one (a clause-like mark, before a function
    word, …) among the upper half of the words that fit, the last of equals — or, when the first word alone is
    longer than the character cap, at the cap (not before a combining mark). It depends only on the words that
    fit and the one after them, so text arriving in any pieces is cut the same way.
    """
    begin = _visible_from(text, start, stop)
    limit = begin + SPEECH_UNIT_MAX_CHARS
    words: list[tuple[int, int]] = []
    for match in _TOKEN.finditer(text, begin, stop):
        if strip_blank(match.group()):
            words.append(match.span())
            if len(words) > SPEECH_UNIT_MAX_WORDS or match.start() >= limit:
                break
    if len(words) <= SPEECH_UNIT_MAX_WORDS and _visible_from(text, limit, stop) >= stop:
        return None
    allowed = sum(1 for _, end in words[:SPEECH_UNIT_MAX_WORDS] if end <= limit)
    if allowed == 0:  # one giant "word": cut at the cap, keeping a base character with its marks
        cut = limit
        while cut > begin + 1 and (unicodedata.category(text[cut])[0] == "M" or text[cut - 1] == "\u200d"):
            cut -= 1
        return cut
    best: tuple[int, int] | None = None  # (strength, k)
    for k in range((allowed - 1) // 2, allowed):
        strength = _cap_strength(text, words, k, allowed, begin)
        if strength is not None and (best is None or strength >= best[0]):
            best = (strength, k)
    return words[best[1] if best is not None else allowed - 1][1]


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
