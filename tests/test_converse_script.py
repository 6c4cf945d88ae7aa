"""The scripted reply's format: rules in order, words anywhere and in any case, the default, comments, and every
invalid line refused naming its number and what to fix."""

from __future__ import annotations

import pytest

from protocol.errors import InvalidInput
from services.converse.script import DEFAULT_SCRIPT, parse_script

SCRIPT = """\
# a shop's answers
time OPEN => We open at nine.
open => We are open now.

thank => You are welcome.
default => Sorry?
"""


def test_first_matching_rule_wins_words_anywhere_any_case() -> None:
    script = parse_script(SCRIPT)
    assert script.reply_to("What time do you open?") == "We open at nine."
    assert script.reply_to("open, at what TIME") == "We open at nine."  # any order, punctuation ignored
    assert script.reply_to("are you open") == "We are open now."  # the first rule needs "time" too
    assert script.reply_to("Thank you!") == "You are welcome."
    assert script.reply_to("hello") == "Sorry?"
    assert script.reply_to("reopen") == "Sorry?"  # whole words only


def test_without_default_an_unmatched_transcript_is_named() -> None:
    script = parse_script("thank => You are welcome.")
    with pytest.raises(InvalidInput, match="no rule matching 'hello' and no `default"):
        script.reply_to("hello")


@pytest.mark.parametrize(("text", "message"), [
    ("thank => ok\njust words\n", "line 2: 'just words' has no `=>`"),
    ("# c\n => hi\n", "line 2: the pattern before `=>` is empty"),
    ("thank =>   \n", "line 1: the reply after `=>` is empty"),
    ("default => a\nthank => b\nDefault => c\n", "line 3: a second `default` rule \\(the first is on line 1\\)"),
    ("?! => hm\n", "line 1: the pattern '\\?!' has no words"),
    ("# only comments\n\n", "has no rules"),
])
def test_invalid_lines_are_named(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_script(text)


def test_the_default_script_parses_and_answers_the_tests_turns() -> None:
    script = parse_script(DEFAULT_SCRIPT)
    assert "nine" in script.reply_to("what time do you open")
    assert script.reply_to("thank you") == "You are welcome. Have a nice day!"
