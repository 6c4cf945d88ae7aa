"""The scripted reply's format lives in protocol/script.py (the offline engine's duplex session answers from the
same rules); this module is its name on the services side."""

from protocol.script import ARROW, DEFAULT, DEFAULT_SCRIPT, SCRIPT_MAX_CHARS, Rule, Script, parse_script, words

__all__ = ["ARROW", "DEFAULT", "DEFAULT_SCRIPT", "SCRIPT_MAX_CHARS", "Rule", "Script", "parse_script", "words"]
