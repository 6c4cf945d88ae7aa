"""Word error rate against a reference, measured one stated way (docs/listen.md, "Word error rate").

Both texts are normalised the same way before jiwer counts substitutions, deletions and insertions:
1. lower case;
2. tags removed: <s>, [noise], (laughter) — what transcripts of recordings mark that nobody said;
3. numbers written as English words with num2words: "2" → "two", "1,000" → "one thousand", "3.5" → "three point
   five", "2nd" → "second";
4. contractions expanded ("don't" → "do not", "it's" → "it is", "we'll" → "we will", "I'd" → "i would", "let's" →
   "let us", "won't" → "will not", "can't" → "can not") and spoken titles written out ("Mr." → "mister", "Mrs." →
   "missus", "Dr." → "doctor");
5. punctuation removed: the apostrophes left join ("o'clock" → "oclock"), every other mark separates words
   ("ill-disposed" → "ill disposed");
6. fillers dropped (uh, um, er, erm, ah, hmm, mm, mhm): spontaneous speech has them, references rarely agree on
   them;
7. whitespace collapsed.
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
_TAGS = re.compile(r"<[^<>]*>|\[[^\[\]]*\]|\([^()]*\)")
_WHOLE = {"won't": "will not", "can't": "can not", "shan't": "shall not", "let's": "let us", "ain't": "is not"}
_ENDINGS = (("n't", " not"), ("'re", " are"), ("'ve", " have"), ("'ll", " will"), ("'m", " am"), ("'d", " would"))
_IS = frozenset({"it's", "that's", "he's", "she's", "what's", "there's", "here's", "where's", "who's", "how's"})
_TITLES = {"mr": "mister", "mrs": "missus", "dr": "doctor"}
_FILLERS = frozenset({"uh", "um", "uhm", "er", "erm", "ah", "hmm", "mm", "mhm"})
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*\.?")


def _spell(match: re.Match[str]) -> str:
    from num2words import num2words

    text = match.group(0).replace(",", "")
    return f" {num2words(float(text) if '.' in text else int(text), lang='en')} "


def _spell_ordinal(match: re.Match[str]) -> str:
    from num2words import num2words

    return f" {num2words(int(match.group(1)), to='ordinal', lang='en')} "


def _expand(match: re.Match[str]) -> str:
    word = match.group(0)
    bare = word.rstrip(".")
    if bare in _TITLES:
        return _TITLES[bare]
    if bare in _WHOLE:
        return _WHOLE[bare] + word[len(bare):]
    if bare in _IS:
        return bare[:-2] + " is" + word[len(bare):]
    for ending, spelled in _ENDINGS:
        if bare.endswith(ending) and len(bare) > len(ending):
            return bare[: -len(ending)] + spelled + word[len(bare):]
    return word


def normalise(text: str) -> str:
    """The text as WER compares it (the seven steps in the module's doc)."""
    text = _APOSTROPHES.sub("'", text.lower())
    text = _TAGS.sub(" ", text)
    text = _ORDINAL.sub(_spell_ordinal, text)
    text = _NUMBER.sub(_spell, text)
    text = _WORD.sub(_expand, text)
    text = text.replace("'", "")
    text = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in text)
    return " ".join(w for w in text.split() if w not in _FILLERS)


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
