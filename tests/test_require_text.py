"""`require_text`: what counts as something to speak, checked before anything is sent (the CLI and the pages)."""

from __future__ import annotations

import asyncio

import pytest

from protocol.errors import InvalidInput
from services import speech
from services.speech import MockTransport, SpeechClient, require_text


@pytest.mark.parametrize("text", ["\u200b\u200b", "\u2060", "\ufeff", " \u200d\n\u200c ", "\u00ad", "\u2800\u3164",
                                  "\u200e\u200f\u202a\u202c", "\u034f\ufe0f", "\U000e0041\U000e007f"])
def test_invisible_text_is_nothing_to_speak(text: str) -> None:
    with pytest.raises(InvalidInput, match="nothing to speak: the text has no speakable characters") as info:
        require_text(text)
    assert "U+" in str(info.value)  # names the invisible character it found


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_keeps_its_message(text: str) -> None:
    with pytest.raises(InvalidInput, match="no text to speak"):
        require_text(text)


@pytest.mark.parametrize("text", ["Hi", "\u200bHello\u200b", "e\u0301", "日本語", "42", "\ufeffBonjour."])
def test_text_with_something_to_say_passes_unchanged(text: str) -> None:
    assert require_text(text) is text


def test_the_client_refuses_invisible_text_before_making_a_transport() -> None:
    def factory() -> MockTransport:
        raise AssertionError("no transport may be made for text with nothing to speak")

    client = SpeechClient(factory, catalog=None, target="mock://")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="nothing to speak"):
        asyncio.run(client.say(None, "\u200b\u200b"))
    with pytest.raises(InvalidInput, match="nothing to speak"):
        speech.SpeechRun(None, client, None, "\u2060")  # type: ignore[arg-type]
