"""Unpunctuated text is spoken as it arrives, in bounded units (issue 31, M2).

Without punctuation the splitter used to hold a whole text as one unit and the voice made it in one model run:
200 words took ~20 s to the first audio and grew the engine by gigabytes. Units and the voice's pieces now keep
to SPEECH_UNIT_MAX_WORDS words and SPEECH_UNIT_MAX_CHARS characters (protocol.limits), cut at word boundaries,
and the Converse pipeline feeds a long unpunctuated reply to the speech session as it arrives. No timing is
asserted: what arrives before what, and how long the units and pieces are.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from websockets.asyncio.client import connect

from offline import voice
from offline.splitter import TextSplitter, split_text
from offline.voice.scheduler import Playback, Stream
from protocol.limits import SPEECH_UNIT_MAX_CHARS, SPEECH_UNIT_MAX_WORDS
from protocol.speech import SPEECH_STREAM_PATH
from services.converse.pipeline import Pipeline, feed_pieces, speakable_prefix
from services.converse.reply import ChatReply
from services.listen import load_audio
from services.listen.sample import spoken_sample_at
from tests.chat_support import MODEL, serving_app
from tests.loopback_support import serving_asgi
from tests.test_splitter import feed_in_pieces

VOCABULARY = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
              "quebec romeo sierra tango uniform victor whiskey xray yankee zulu the of and to in").split()
WORDS_200 = " ".join(random.Random(31).choice(VOCABULARY) for _ in range(200))
# What the engine really speaks in these tests: enough unpunctuated words for three capped units (the splitter and
# voice tests above take all 200; synthesising 200 words on the CPU would only cost the suite time).
SPOKEN = " ".join(WORDS_200.split(" ")[: 2 * SPEECH_UNIT_MAX_WORDS + 10])


def within_caps(unit: str) -> bool:
    return len(unit.split()) <= SPEECH_UNIT_MAX_WORDS and len(unit) <= SPEECH_UNIT_MAX_CHARS


# -- the splitter -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("granularity", ["sentence", "clause"])
def test_200_unpunctuated_words_are_units_within_the_caps_that_rejoin_to_the_words(granularity: str) -> None:
    units = split_text(WORDS_200, granularity)  # type: ignore[arg-type]
    assert len(units) >= 200 // SPEECH_UNIT_MAX_WORDS
    assert all(within_caps(unit) for unit in units), [u for u in units if not within_caps(u)]
    assert " ".join(units).split() == WORDS_200.split()
    # Fed a word at a time, as a reply streams in, the units are the same, and released before the end.
    splitter = TextSplitter(granularity)  # type: ignore[arg-type]
    released = [unit for word in WORDS_200.split(" ") for unit in splitter.feed(word + " ")]
    assert released and released + splitter.flush() == units


def test_a_giant_word_is_cut_at_the_character_cap() -> None:
    giant = "x" * (3 * SPEECH_UNIT_MAX_CHARS + 17)
    units = split_text(f"Say {giant} now", "sentence")
    assert all(len(unit) <= SPEECH_UNIT_MAX_CHARS for unit in units)
    assert "".join(units).replace(" ", "") == f"Say{giant}now"
    # An accent stays with its letter.
    accented = "e\u0301" * SPEECH_UNIT_MAX_CHARS
    assert all(not unit.startswith("\u0301") for unit in split_text(accented, "sentence"))


def test_a_long_run_is_cut_at_a_natural_place_never_inside_dr_smith() -> None:
    text = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
            "Dr. Smith went home to the old house by the river and stayed")
    units = split_text(text, "sentence")
    assert all(within_caps(unit) for unit in units)
    assert not any(unit.endswith("Dr.") for unit in units)
    assert units[0].split()[-1] in ("home", "house", "river")  # before a function word, not mid-phrase


LONG_TEXTS = [
    WORDS_200,
    "Dr. Smith said " + " ".join(["word"] * 45) + ". Then " + "y" * 450 + " end",
    " ".join(["No."] * 30) + " 5 won, and " + " ".join(["many"] * 25) + "; done",
    "你好" * 250 + "。再见",
]


@pytest.mark.parametrize("granularity", ["sentence", "clause"])
@pytest.mark.parametrize("text", LONG_TEXTS)
def test_capped_units_do_not_depend_on_how_the_text_is_cut(text: str, granularity: str) -> None:
    expected = split_text(text, granularity)  # type: ignore[arg-type]
    assert all(within_caps(unit) for unit in expected)
    assert "".join(expected).replace(" ", "") == text.replace(" ", "")
    rng = random.Random(7)
    for _ in range(40):
        cuts = rng.sample(range(1, len(text)), rng.randint(1, 40))
        assert feed_in_pieces(text, cuts, granularity) == expected
    assert feed_in_pieces(text, list(range(1, len(text))), granularity) == expected


# -- the voice's pieces -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("streaming", "busy"), [(True, False), (True, True), (False, False)])
def test_no_piece_of_the_voice_passes_the_caps(streaming: bool, busy: bool) -> None:
    stream = Stream(WORDS_200, Playback(streaming=streaming))
    pieces = []
    while not stream.finished:
        start, end = stream.cut(busy=busy, limit_s=1e6)
        pieces.append(WORDS_200[start:end])
        stream.playback.started = 0.0  # later pieces from here on
    assert len(pieces) > 1 and all(within_caps(piece) for piece in pieces)
    assert "".join(pieces) == WORDS_200


# -- a real engine ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    """An in-process engine, so the voice's pieces can be watched."""
    from offline.server import create_app

    app = create_app()
    with serving_asgi(app) as url:
        app.state.voice.speaker()
        yield url.removeprefix("http://")


@pytest.fixture
def pieces_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    synthesize = voice.Stream.synthesize

    def watched(self: voice.Stream, start: int, end: int, piper: Any = None) -> list[bytes]:
        frames = synthesize(self, start, end, piper)
        made.append(self.text[start:end])
        return frames

    monkeypatch.setattr(voice.Stream, "synthesize", watched)
    return made


def test_a_long_unpunctuated_rest_request_is_made_in_capped_pieces(engine: str, pieces_made: list[str]) -> None:
    chunks = 0
    with httpx.stream("POST", f"http://{engine}/v1/audio/speech", timeout=300, trust_env=False,
                      json={"input": SPOKEN, "voice": "joe", "response_format": "pcm", "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        for chunk in resp.iter_bytes():
            chunks += bool(chunk)
    assert chunks > 1
    assert len(pieces_made) > 1 and all(within_caps(piece) for piece in pieces_made), pieces_made
    assert len(pieces_made) >= 3 and "".join(pieces_made) == SPOKEN


def test_streamed_unpunctuated_text_is_spoken_before_the_rest_arrives(engine: str) -> None:
    words = SPOKEN.split(" ")

    async def session() -> list[str]:
        async with connect(f"ws://{engine}{SPEECH_STREAM_PATH}", max_size=None, open_timeout=10) as ws:
            await ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True,
                                      "split_granularity": "clause"}))
            for word in words[: SPEECH_UNIT_MAX_WORDS + 5]:  # as a reply streams in: a word per message
                await ws.send(json.dumps({"type": "input.text", "text": word + " "}))
            # The first unit's audio comes while the rest of the text has not been sent.
            start = json.loads(await asyncio.wait_for(ws.recv(), 120))
            assert start["type"] == "audio.start", start
            assert isinstance(await asyncio.wait_for(ws.recv(), 120), bytes)
            for word in words[SPEECH_UNIT_MAX_WORDS + 5 :]:
                await ws.send(json.dumps({"type": "input.text", "text": word + " "}))
            await ws.send(json.dumps({"type": "input.done"}))
            texts = [start["sentence_text"]]
            while True:
                frame = await asyncio.wait_for(ws.recv(), 300)
                if isinstance(frame, bytes):
                    continue
                event = json.loads(frame)
                assert event["type"] != "error", event
                if event["type"] == "audio.start":
                    texts.append(event["sentence_text"])
                elif event["type"] == "session.done":
                    return texts

    texts = asyncio.run(session())
    assert len(texts) > 1 and all(within_caps(text) for text in texts)
    assert " ".join(texts).split() == words


# -- Converse: a reply streaming in without punctuation ------------------------------------------------------
def holding_chat(answer: str, hold_after: int, heard: threading.Event) -> FastAPI:
    """A chat server that streams `hold_after` words of `answer`, then holds the rest until `heard` is set (the
    first audio of the reply reached the client) or 120 s pass; `app.state.held` says which."""
    app = FastAPI()
    app.state.heard_while_holding = None

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL, "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> StreamingResponse:
        await request.json()

        async def events():  # type: ignore[no-untyped-def]
            for i, word in enumerate(answer.split(" ")):
                if i == hold_after:
                    app.state.heard_while_holding = await asyncio.to_thread(heard.wait, 120)
                chunk = {"choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def test_speakable_prefix_releases_a_long_unpunctuated_run_at_the_cap() -> None:
    words = WORDS_200.split(" ")
    short = " ".join(words[:SPEECH_UNIT_MAX_WORDS]) + " "
    assert speakable_prefix(short) == ("", short)  # within the cap: it may still end at a comma
    ready, rest = speakable_prefix(" ".join(words[: SPEECH_UNIT_MAX_WORDS + 3]) + " nov")
    assert ready.split() == words[: SPEECH_UNIT_MAX_WORDS + 3] and rest == "nov"
    giant = "Hi, there. And " + "x" * (SPEECH_UNIT_MAX_CHARS + 1)  # one word longer than a unit: all of it
    assert speakable_prefix(giant) == (giant, "")
    assert feed_pieces(giant) == ["Hi, ", "there. ", "And " + "x" * (SPEECH_UNIT_MAX_CHARS + 1)]
    assert speakable_prefix("We open at nine, every") == ("We open at nine,", " every")


def test_converse_speaks_an_unpunctuated_reply_while_it_still_streams(engine: str, tmp_path: Any) -> None:
    heard = threading.Event()

    class Watched(Pipeline):
        def _arrived(self, reply: Any, chunk: Any) -> None:
            super()._arrived(reply, chunk)
            heard.set()

    app = holding_chat(SPOKEN, SPEECH_UNIT_MAX_WORDS + 5, heard)
    url = f"http://{engine}"
    turn = load_audio(spoken_sample_at(url, "What are the opening hours?"), "turn1.wav")
    with serving_app(app) as chat_url:
        conversation = asyncio.run(asyncio.wait_for(
            Watched(url, url, ChatReply(chat_url, max_tokens=1000, max_seconds=300)).run([turn]), 400))
    assert app.state.heard_while_holding is True, "no audio came until the whole reply had arrived"
    (only,) = conversation.turns
    assert only.error is None and only.reply_text.split() == SPOKEN.split()
