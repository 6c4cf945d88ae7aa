"""Word error rate against a reference, measured one stated way (docs/listen.md, "Word error rate").

Both texts are normalised the same way before jiwer counts substitutions, deletions and insertions:
1. lower case;
2. numbers written as English words with num2words: "2" → "two", "1,000" → "one thousand", "3.5" → "three point
   five", "2nd" → "second";
3. punctuation removed: apostrophes join ("don't" → "dont"), every other mark separates words;
4. whitespace collapsed.
WER = (S + D + I) / the reference's word count, so it can exceed 1. A reference in another script than the
transcript (Cyrillic against Latin, say) is refused, since the rate would mean nothing; two languages in the same
script cannot be told apart here.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from protocol.errors import InvalidInput

_ORDINAL = re.compile(r"(?<![\w.])(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w])\d+(?:,\d{3})*(?:\.\d+)?")
_APOSTROPHES = re.compile(r"['’‘`´]")


def _spell(match: re.Match[str]) -> str:
    from num2words import num2words

    text = match.group(0).replace(",", "")
    return f" {num2words(float(text) if '.' in text else int(text), lang='en')} "


def _spell_ordinal(match: re.Match[str]) -> str:
    from num2words import num2words

    return f" {num2words(int(match.group(1)), to='ordinal', lang='en')} "


def normalise(text: str) -> str:
    """The text as WER compares it (the four steps in the module's doc)."""
    text = text.lower()
    text = _ORDINAL.sub(_spell_ordinal, text)
    text = _NUMBER.sub(_spell, text)
    text = _APOSTROPHES.sub("", text)
    text = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in text)
    return " ".join(text.split())


def script_of(text: str) -> str | None:
    """The writing system most of the letters belong to ("LATIN", "CYRILLIC", "CJK", …), None without letters."""
    scripts = Counter(unicodedata.name(ch, "UNKNOWN").split()[0] for ch in text if ch.isalpha())
    return scripts.most_common(1)[0][0] if scripts else None


@dataclass(frozen=True)
class WerCounts:
    """The word error rate and the counts it is made of: (substitutions + deletions + insertions) / words."""

    substitutions: int
    deletions: int
    insertions: int
    reference_words: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        return self.errors / self.reference_words


def wer_counts(reference: str, hypothesis: str) -> WerCounts:
    """`word_error_rate` with its counts (the same normalisation and refusals)."""
    import jiwer

    ref, hyp = _checked(reference, hypothesis)
    n = len(ref.split())
    if not hyp:
        return WerCounts(0, n, 0, n)
    out = jiwer.process_words(ref, hyp)
    return WerCounts(out.substitutions, out.deletions, out.insertions, n)


def _checked(reference: str, hypothesis: str) -> tuple[str, str]:
    ref, hyp = normalise(reference), normalise(hypothesis)
    if not ref:
        raise InvalidInput("the reference has no words to compare with: give the text that is spoken")
    ref_script, hyp_script = script_of(ref), script_of(hyp)
    if ref_script and hyp_script and ref_script != hyp_script:
        raise InvalidInput(f"the reference is written in {ref_script.title()} script but the transcript in "
                           f"{hyp_script.title()}: give the reference in the language that is spoken")
    return ref, hyp


def word_error_rate(reference: str, hypothesis: str) -> float:
    """WER of `hypothesis` against `reference`, both normalised; InvalidInput for an empty reference or one
    written in another script than the hypothesis."""
    import jiwer

    ref, hyp = _checked(reference, hypothesis)
    return float(jiwer.wer(ref, hyp)) if hyp else 1.0
