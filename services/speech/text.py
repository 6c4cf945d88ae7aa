"""The text of a voice request: checked once where it comes in, then cut into `input.text` messages.

`speakable(text)` is the one check (`require_text`'s rule: something to speak, not only blanks or invisible
characters). It returns a `SpeakableText`, and every layer below (SpeechRun, SpeechClient.say,
SpeechSession.speak) passes one through as it is instead of checking it again; plain text that reaches them
directly (a script, a benchmark) is checked where it arrives.

Cutting: vLLM-Omni rejects an `input.text` message longer than 128 KiB ("input.text message too large") and
drops that text. The server concatenates every `input.text` of an utterance, so the pieces here join
back to exactly the original text; cuts fall after a sentence end where possible, else after
whitespace, else between two characters.
"""

from __future__ import annotations

import json
import re
import unicodedata

from protocol.errors import InvalidInput
from protocol.limits import MAX_INPUT_TEXT_MESSAGE_BYTES

# Characters that show nothing and say nothing: controls, format characters (zero-width space and joiners,
# word joiner, BOM, soft hyphen, bidi marks, tags), separators, marks with no base, unassigned/private/surrogate
# code points, and the few letters and symbols drawn blank (Hangul fillers, the blank braille pattern).
_SILENT_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me", "Mc"})
_BLANK_CHARACTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _speakable(ch: str) -> bool:
    return ch not in _BLANK_CHARACTERS and unicodedata.category(ch) not in _SILENT_CATEGORIES


def require_text(text: str) -> str:
    """`text` as it is, if it has anything to speak; else InvalidInput before anything is sent (the CLI, the pages)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("there is no text to speak: type a sentence first")
    if not any(map(_speakable, text)):
        seen = next(ch for ch in text if not ch.isspace())
        name = unicodedata.name(seen, "an invisible character")
        raise InvalidInput(f"nothing to speak: the text has no speakable characters, only invisible ones such as "
                           f"U+{ord(seen):04X} ({name}); type a sentence")
    return text


class SpeakableText(str):
    """Text `speakable` has passed: the layers below take it as it is."""

    __slots__ = ()


def speakable(text: str) -> SpeakableText:
    """The check of a voice request's text, made once: `require_text`, unless `text` has passed it already."""
    if isinstance(text, SpeakableText):
        return text
    return SpeakableText(require_text(text))



# A cut point is *after* one of these: a sentence end followed by whitespace, or any whitespace.
_SENTENCE_END = re.compile(r"[.!?…。！？][\"')\]]*\s+|[。！？]")
_WHITESPACE = re.compile(r"\s+")
# The JSON envelope around the text: {"type":"input.text","text":""}
_ENVELOPE_BYTES = len(json.dumps({"type": "input.text", "text": ""}, separators=(",", ":")).encode())


def message_bytes(text: str) -> int:
    """Size in bytes of the `input.text` message that carries `text` (as services.protocol.dumps writes it)."""
    return _ENVELOPE_BYTES + len(json.dumps(text, ensure_ascii=False).encode()) - 2


def split_for_input(text: str, limit: int = MAX_INPUT_TEXT_MESSAGE_BYTES) -> list[str]:
    """Pieces of `text`, in order, each fitting one `input.text` message of at most `limit` bytes.

    `"".join(pieces) == text`. Short text comes back as one piece.
    """
    if limit <= _ENVELOPE_BYTES + 8:
        raise ValueError(f"limit {limit} is too small for an input.text message")
    pieces: list[str] = []
    rest = text
    while rest:
        if message_bytes(rest) <= limit:
            pieces.append(rest)
            break
        cut = _cut_point(rest, limit)
        pieces.append(rest[:cut])
        rest = rest[cut:]
    return pieces


def _cut_point(text: str, limit: int) -> int:
    """Index after which to cut `text` so that text[:i] fits; prefers sentence ends, then whitespace."""
    fit = _longest_fitting_prefix(text, limit)
    window = text[:fit]
    # Prefer a boundary in the second half of the window, so pieces stay large (few messages).
    floor = fit // 2
    for pattern in (_SENTENCE_END, _WHITESPACE):
        best = -1
        for m in pattern.finditer(window):
            best = m.end()
        if best > floor:
            return best
    return fit


def _longest_fitting_prefix(text: str, limit: int) -> int:
    """The largest n with message_bytes(text[:n]) <= limit (binary search; sizes grow with n)."""
    lo, hi = 1, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if message_bytes(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    # Never split a surrogate pair (possible only for str built from UTF-16 data) or leave 0.
    return max(lo, 1)
