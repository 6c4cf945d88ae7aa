"""The scripted reply: what the agent answers offline, from rules a person writes and can edit. It is labelled
as scripted everywhere it shows — it is not a model. One definition, here, for both readers of it: services/converse
(pipeline mode's reply stage) and the offline engine's duplex session (offline/listen/duplex.py).

The format, one rule per line:

    # a comment (a line whose first non-blank character is #)
    open hours => We open at nine in the morning.
    thank => You are welcome.
    default => Sorry, I only know about our opening hours.

A rule is `PATTERN => REPLY`. It matches when every word of PATTERN occurs as a word of the transcript, in any
order and anywhere in it, case-insensitively (words are runs of letters, digits and apostrophes, so punctuation
never matters). The first rule that matches wins. `default => REPLY` answers when none does (at most one). Blank
lines are skipped. Anything else is refused with an InvalidInput naming the line and what to fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from protocol.errors import InvalidInput

ARROW = "=>"
DEFAULT = "default"
SCRIPT_MAX_CHARS = 100_000
_WORD = re.compile(r"[a-z0-9']+")

DEFAULT_SCRIPT = """\
# The studio's default script (a scripted reply, not a model). Edit a copy and pass it with --script FILE.
hello => Hello! How can I help you today?
time open => We open at nine in the morning, every day.
thank => You are welcome. Have a nice day!
bye => Goodbye, and thank you for calling.
default => Sorry, I did not catch that. Could you say it again?
"""


def words(text: str) -> tuple[str, ...]:
    """The words of `text` as a rule compares them: lower case, letters, digits and apostrophes."""
    return tuple(_WORD.findall(text.lower()))


@dataclass(frozen=True)
class Rule:
    line: int
    pattern: tuple[str, ...]
    reply: str

    def matches(self, heard: set[str]) -> bool:
        return all(word in heard for word in self.pattern)


@dataclass(frozen=True)
class Script:
    """Parsed rules in order, and the default reply (None: no rule for an unmatched transcript)."""

    rules: tuple[Rule, ...]
    default: str | None
    name: str = "script"

    def reply_to(self, transcript: str) -> str:
        """The first matching rule's reply, else the default; InvalidInput when neither exists."""
        heard = set(words(transcript))
        for rule in self.rules:
            if rule.matches(heard):
                return rule.reply
        if self.default is None:
            raise InvalidInput(f"{self.name} has no rule matching {transcript!r} and no `default => REPLY` line: "
                               "add one")
        return self.default


def _rule(number: int, line: str, name: str) -> tuple[str, str]:
    where = f"{name} line {number}"
    if ARROW not in line:
        raise InvalidInput(f"{where}: {line.strip()!r} has no `=>`; write `PATTERN => REPLY` (or start it with # "
                           "for a comment)")
    pattern, reply = (part.strip() for part in line.split(ARROW, 1))
    if not pattern:
        raise InvalidInput(f"{where}: the pattern before `=>` is empty; give the words to listen for, or `default`")
    if not reply:
        raise InvalidInput(f"{where}: the reply after `=>` is empty; write what the agent says")
    if pattern.lower() != DEFAULT and not words(pattern):
        raise InvalidInput(f"{where}: the pattern {pattern!r} has no words (letters or digits) to match")
    return pattern, reply


def parse_script(text: str, name: str = "script") -> Script:
    """Parse a script (see the module's doc); InvalidInput naming the line and what to fix."""
    if len(text) > SCRIPT_MAX_CHARS:
        raise InvalidInput(f"{name} is {len(text)} characters; the limit is {SCRIPT_MAX_CHARS}: shorten it")
    rules: list[Rule] = []
    default: str | None = None
    default_line = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pattern, reply = _rule(number, line, name)
        if pattern.lower() == DEFAULT:
            if default is not None:
                raise InvalidInput(f"{name} line {number}: a second `default` rule (the first is on line "
                                   f"{default_line}); keep one")
            default, default_line = reply, number
        else:
            rules.append(Rule(number, words(pattern), reply))
    if not rules and default is None:
        raise InvalidInput(f"{name} has no rules: write at least one `PATTERN => REPLY` line")
    return Script(tuple(rules), default, name)
