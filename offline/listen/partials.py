"""Which words of a growing hypothesis may be sent as `transcription.delta`: deltas are only ever added to,
never taken back, so a word goes out once two successive hypotheses agree on it and it is not the newest word
(which may still be growing: "to" → "today")."""

from __future__ import annotations


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class StablePrefix:
    """The words of one utterance sent so far, from the hypotheses the recognizer gives while audio arrives."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._previous: list[str] = []

    def update(self, words: list[str]) -> list[str]:
        """The words to send now (possibly none), given the newest hypothesis."""
        agreed = words[: min(_common_prefix(self._previous, words), max(len(words) - 1, 0))]
        self._previous = words
        if len(agreed) <= len(self.sent) or agreed[: len(self.sent)] != self.sent:
            return []
        new = agreed[len(self.sent):]
        self.sent = agreed
        return new

    def finish(self, final: list[str]) -> list[str]:
        """The rest of the final hypothesis when it continues what was sent; nothing when it revised a sent
        word (the utterance's text is then the final hypothesis, not the deltas joined)."""
        if final[: len(self.sent)] != self.sent:
            return []
        new = final[len(self.sent):]
        self.sent = list(final)
        return new
