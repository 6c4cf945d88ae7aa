"""The offline engine's voice scheduler with the real Piper voice: concurrent WebSocket sessions all hear all of
their text, every unit's pieces tile it byte for byte, and a stopped piece leaves nothing behind.

No timing is asserted: how the pieces are cut depends on when sessions arrive; that every unit is spoken
completely, once and in order, must not.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import connect

from offline import voice
from offline.splitter import split_text
from offline.styles import Style
from protocol.speech import SPEECH_STREAM_PATH
from tests.loopback_support import serving_asgi

TEXTS = [
    "Eight people press Speak at the same moment. Each of them should hear the first words quickly, "
    "while the rest of the sentence is still being made.",
    "The second listener reads a recipe: add the salt, then stir for two minutes; serve it warm.",
    "Dr. Smith paid 3.14 dollars on Jan. 5, i.e. nothing much. No. 5 is J. R. R. Tolkien — a writer!",
    "Short one.",
    "A fifth voice asks a question, and waits for the answer? It comes, slowly, word by word.",
    "The sixth session speaks the longest text of all, so that it is still playing when others start, "
    "and keeps going for several more clauses, one after another, until the very end.",
]


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    """An in-process engine, so the voice's pieces can be watched."""
    from offline.server import create_app

    app = create_app()
    with serving_asgi(app) as url:
        app.state.voice.speaker()  # loaded before the sessions race
        yield url.replace("http://", "ws://") + SPEECH_STREAM_PATH


async def speak(url: str, text: str) -> list[tuple[dict[str, Any], bytes, dict[str, Any]]]:
    """One session: config, the text, input.done; (audio.start, its PCM, audio.done) per unit."""
    async with connect(url, max_size=None, open_timeout=10) as ws:
        await ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True,
                                  "split_granularity": "clause"}))
        await ws.send(json.dumps({"type": "input.text", "text": text}))
        await ws.send(json.dumps({"type": "input.done"}))
        units, start, pcm = [], None, bytearray()
        while True:
            frame = await asyncio.wait_for(ws.recv(), 120)
            if isinstance(frame, bytes):
                pcm += frame
                continue
            event = json.loads(frame)
            assert event["type"] != "error", event
            if event["type"] == "audio.start":
                start, pcm = event, bytearray()
            elif event["type"] == "audio.done":
                units.append((start, bytes(pcm), event))
            elif event["type"] == "session.done":
                return units


def loud(pcm: bytes) -> bool:
    samples = np.frombuffer(pcm, dtype="<i2")
    return samples.size > 2400 and int(np.abs(samples).max()) > 1000


def test_concurrent_sessions_all_complete_with_all_their_text(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made: dict[voice.Stream, list[tuple[str, int, int]]] = {}  # keeps the streams: no id is reused
    lock = threading.Lock()
    synthesize = voice.Stream.synthesize

    def watched(self: voice.Stream, start: int, end: int, piper: Any = None) -> list[bytes]:
        frames = synthesize(self, start, end, piper)
        with lock:
            made.setdefault(self, []).append((self.text, start, end))
        return frames

    monkeypatch.setattr(voice.Stream, "synthesize", watched)

    async def everyone() -> list[Any]:
        return list(await asyncio.gather(*(speak(engine, text) for text in TEXTS)))

    results = asyncio.run(asyncio.wait_for(everyone(), 300))
    for text, units in zip(TEXTS, results, strict=True):
        assert [start["sentence_text"] for start, _, _ in units] == split_text(text, "clause")
        for start, pcm, done in units:
            assert done["error"] is False and done["total_bytes"] == len(pcm), (start, done)
            assert loud(pcm), start["sentence_text"]
    # Every unit was made piece after piece from its first character to its last: all of it, nothing twice.
    units_made = list(made.values())
    assert len(units_made) == sum(len(split_text(text, "clause")) for text in TEXTS)
    for pieces in units_made:
        text = pieces[0][0]
        assert [start for _, start, _ in pieces] == [0] + [end for _, _, end in pieces[:-1]]
        assert pieces[-1][2] == len(text)
        assert "".join(text[start:end] for _, start, end in pieces) == text


def test_an_interrupted_piece_leaves_nothing_behind() -> None:
    engine = voice.VoiceEngine()
    speaker = engine.speaker()
    session = speaker.piper_voice.session
    assert isinstance(session, voice.InterruptibleSession)
    text = "An interrupted piece is made again, as if it had never started."

    def spoken(voicing: voice.Voicing) -> bytes:
        session.begin()
        return b"".join(voicing.speak(text)) + b"".join(voicing.end())

    fresh = spoken(speaker.voicing(style=Style(deterministic=True)))
    voicing = speaker.voicing(style=Style(deterministic=True))
    made = engine.stats().pieces
    session.begin()
    session.interrupt()  # before the run starts: it stops at once
    with pytest.raises(voice.Interrupted):
        list(voicing.speak(text))
    assert engine.stats().pieces == made  # nothing was counted as made
    assert spoken(voicing) == fresh  # the same voicing goes on exactly as a fresh one
