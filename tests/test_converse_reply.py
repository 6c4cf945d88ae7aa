"""The reply stage against a real local streaming chat server (a vLLM-protocol peer), one that is down, one
whose reply never ends, and the scripted reply behind the same interface."""

from __future__ import annotations

import asyncio

import pytest

from protocol.errors import BackendUnreachable
from services.converse.reply import ChatReply, ScriptedReply, StreamedChat, sse_lines
from services.converse.script import parse_script
from tests.chat_support import MODEL, chat_app, serving_app

ANSWER = "We open at nine, every day of the week."


async def collect(stage, messages) -> list[str]:  # type: ignore[no-untyped-def]
    return [piece async for piece in stage.stream(messages)]


def test_streamed_reply_with_system_prompt_and_history() -> None:
    app, seen = chat_app(ANSWER)
    history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi."},
               {"role": "user", "content": "what time do you open"}]
    with serving_app(app) as url:
        stage = ChatReply(url, system_prompt="You are a shop assistant.", max_tokens=50)
        pieces = asyncio.run(collect(stage, history))
    assert "".join(pieces) == ANSWER
    assert len(pieces) == len(ANSWER.split(" "))  # streamed piece by piece, not at once
    body = seen[0]
    assert body["model"] == MODEL and body["stream"] is True and body["max_tokens"] == 50
    assert body["messages"] == [{"role": "system", "content": "You are a shop assistant."}, *history]
    assert stage.capped is None and MODEL in stage.label


def test_a_reply_that_never_ends_is_capped() -> None:
    app, _ = chat_app("la", forever=True, delay_s=0.01)
    with serving_app(app) as url:
        by_tokens = ChatReply(url, max_tokens=7, max_seconds=30)
        assert "".join(asyncio.run(collect(by_tokens, [{"role": "user", "content": "sing"}]))) == "la " * 7
        assert by_tokens.capped == "tokens"
        by_time = ChatReply(url, max_tokens=10**9, max_seconds=0.5)
        pieces = asyncio.run(collect(by_time, [{"role": "user", "content": "sing"}]))
        assert pieces and by_time.capped == "seconds"


def test_a_down_target_fails_with_its_message() -> None:
    stage = ChatReply("http://127.0.0.1:9", model="m", connect_timeout=2)
    with pytest.raises(BackendUnreachable, match="cannot reach the reply server at http://127.0.0.1:9"):
        asyncio.run(collect(stage, [{"role": "user", "content": "hi"}]))


def test_scripted_reply_in_word_pieces() -> None:
    stage = ScriptedReply(parse_script("open => We open at nine.\ndefault => Sorry?", "shop.txt"))
    assert asyncio.run(collect(stage, [{"role": "user", "content": "when do you OPEN"}])) == ["We ", "open ", "at ", "nine."]
    assert stage.label == "a scripted reply (shop.txt), not a model"


def test_events_split_anywhere_read_the_same() -> None:
    """SageMaker's PayloadParts split a stream anywhere — inside a line, inside a UTF-8 character, between CR and
    LF: every split of a stream gives the same pieces as the whole."""
    events = ('data: {"choices": [{"delta": {"role": "assistant"}}]}\r\n\r\n: ping\n\n'
              'data: {"choices": [{"delta": {"content": "Caf\u00e9 "}}]}\n\n'
              'data: {"choices": [{"delta": {"content": "\u2615 ready."}}]}\n\ndata: [DONE]\n\n'
              'data: {"choices": [{"delta": {"content": "after the end"}}]}\n\n').encode()

    async def pieces(parts: list[bytes]) -> list[str]:
        async def chunks():  # type: ignore[no-untyped-def]
            for part in parts:
                yield part

        stage = StreamedChat(model=None, system_prompt=None, max_tokens=50, max_seconds=30)
        return [p async for p in stage._pieces(sse_lines(chunks()), float("inf"), "the test")]

    whole = asyncio.run(pieces([events]))
    assert whole == ["Café ", "☕ ready."]
    for cut in range(1, len(events)):
        assert asyncio.run(pieces([events[:cut], events[cut:]])) == whole, cut
    assert asyncio.run(pieces([events[i:i + 1] for i in range(len(events))])) == whole  # byte by byte
