"""Which words of a growing hypothesis go out as `transcription.delta`: deltas are only ever added to, never taken
back, so a word goes out once two successive hypotheses agree on it and it is not the newest word (which may still
be growing: "to" → "today").

The recognizer's early hypothesis can revise words already sent ("her and luck" becomes "turn left at" once
more audio is heard). Deltas then go on from the same position — they are live captions, words keep arriving —
and the utterance's final text (`transcription.done`) is the rescored hypothesis, which may differ from the deltas
joined.
"""

from __future__ import annotations


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class StablePrefix:
    """How many words of one utterance went out, and which, from the hypotheses given while audio arrives."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._previous: list[str] = []

    def update(self, words: list[str]) -> list[str]:
        """The words to send now (possibly none), given the newest hypothesis."""
        agreed = min(_common_prefix(self._previous, words), max(len(words) - 1, 0))
        self._previous = words
        new = words[len(self.sent):agreed]
        self.sent += new
        return new

    def finish(self, final: list[str]) -> list[str]:
        """The words of the final hypothesis past those already sent."""
        new = final[len(self.sent):]
        self.sent += new
        return new


class Captions:
    """One stream's deltas as text: the words joined, with a space before every delta but the first."""

    def __init__(self) -> None:
        self.started = False

    def text(self, new: list[str]) -> str:
        if not new:
            return ""
        out = (" " if self.started else "") + " ".join(new)
        self.started = True
        return out
