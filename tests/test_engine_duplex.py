"""The offline engine's duplex session (`/v1/realtime?duplex=1`) against the real engine, with a plain websockets
client: two turns spoken by the engine's own voice are heard (speech_started/stopped, the transcript) and
answered by the session's script (transcript deltas, 24 kHz audio deltas, response.done); speech over a playing
response cancels it (barge-in), response.cancel and conversation.item.truncate are honoured; bad events get
`error` with their codes; the route without ?duplex=1 is still the transcription session."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect

from protocol.listen import LISTEN_BYTES_PER_S
from services.listen import load_audio
from services.listen.sample import spoken_sample_at
from protocol.script import words as script_words

TURNS = ("What time do you open?", "Thank you very much.")
SCRIPT = """\
# the test's shop
time open => We open at nine in the morning, every day of the week.
thank => You are most welcome.
default => Sorry, say that again?
"""
SILENCE = bytes(LISTEN_BYTES_PER_S)  # one second
CHUNK = LISTEN_BYTES_PER_S // 10


@pytest.fixture(scope="module")
def turns(engine_url: str) -> list[bytes]:
    return [load_audio(spoken_sample_at(engine_url, text), name=text).pcm for text in TURNS]


def ws_url(engine_url: str, query: str = "?duplex=1") -> str:
    return engine_url.replace("http://", "ws://").rstrip("/") + "/v1/realtime" + query


async def send_audio(ws: ClientConnection, pcm: bytes) -> None:
    for at in range(0, len(pcm), CHUNK):
        await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                  "audio": base64.b64encode(pcm[at:at + CHUNK]).decode()}))


async def until(ws: ClientConnection, kind: str, seen: list[dict[str, Any]], timeout: float = 60) -> dict:
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), timeout))
        seen.append(event)
        if event["type"] == kind:
            return event


async def open_session(ws: ClientConnection, instructions: str = SCRIPT) -> None:
    await ws.send(json.dumps({"type": "session.update", "session": {
        "instructions": instructions,
        "turn_detection": {"type": "server_vad", "threshold": 0.5, "silence_duration_ms": 500}}}))
    created = json.loads(await ws.recv())
    assert created["type"] == "session.created" and created["session"]["id"].startswith("duplex-")
    assert json.loads(await ws.recv())["type"] == "session.updated"


def test_two_turns_heard_and_answered(engine_url: str, turns: list[bytes]) -> None:
    async def go() -> list[list[dict]]:
        out = []
        async with connect(ws_url(engine_url), max_size=None) as ws:
            await open_session(ws)
            for pcm in turns:
                seen: list[dict] = []
                await send_audio(ws, pcm + SILENCE)
                await until(ws, "response.done", seen)
                out.append(seen)
        return out

    replies = ("We open at nine in the morning, every day of the week.", "You are most welcome.")
    for seen, reply, words in zip(asyncio.run(go()), replies, (("open",), ("thank",)), strict=True):
        kinds = [e["type"] for e in seen]
        order = ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                 "conversation.item.input_audio_transcription.completed", "response.created",
                 "response.output_audio_transcript.delta", "response.output_audio.delta", "response.done"]
        assert [kinds.index(k) for k in order] == sorted(kinds.index(k) for k in order), kinds
        started, stopped = seen[kinds.index(order[0])], seen[kinds.index(order[1])]
        assert 0 <= started["audio_start_ms"] < stopped["audio_end_ms"]
        transcript = seen[kinds.index(order[2])]["transcript"].lower()
        assert all(w in script_words(transcript) for w in words), transcript
        text = "".join(e["delta"] for e in seen if e["type"] == "response.output_audio_transcript.delta")
        assert text.strip() == reply
        audio = b"".join(base64.b64decode(e["delta"]) for e in seen if e["type"] == "response.output_audio.delta")
        assert all(e["sample_rate_hz"] == 24000 for e in seen if e["type"] == "response.output_audio.delta")
        samples = np.frombuffer(audio, dtype="<i2")
        assert samples.size / 24000 > 0.5 and np.abs(samples).max() > 1000  # real speech, not silence
        assert seen[-1]["response"]["status"] == "completed"


def test_barge_in_cancel_and_truncate(engine_url: str, turns: list[bytes]) -> None:
    async def go() -> tuple[list[dict], list[dict], list[dict]]:
        async with connect(ws_url(engine_url), max_size=None) as ws:
            await open_session(ws)
            barge: list[dict] = []
            await send_audio(ws, turns[0] + SILENCE)
            await until(ws, "response.output_audio.delta", barge)
            await send_audio(ws, turns[1] + SILENCE)  # the person speaks over the agent
            await until(ws, "response.done", barge)
            await until(ws, "response.done", barge)  # the second turn is answered
            cancel: list[dict] = []
            await send_audio(ws, turns[0] + SILENCE)
            delta = await until(ws, "response.output_audio.delta", cancel)
            await ws.send(json.dumps({"type": "response.cancel"}))
            await until(ws, "response.done", cancel)
            truncated: list[dict] = []
            await ws.send(json.dumps({"type": "conversation.item.truncate", "item_id": delta["item_id"],
                                      "content_index": 0, "audio_end_ms": 50}))
            await until(ws, "conversation.item.truncated", truncated)
            return barge, cancel, truncated

    barge, cancel, truncated = asyncio.run(go())
    dones = [e for e in barge if e["type"] == "response.done"]
    assert dones[0]["response"]["status"] == "cancelled"
    assert dones[0]["response"]["status_details"]["reason"] == "barge_in"
    kinds = [e["type"] for e in barge]
    assert kinds.index("response.done") > kinds.index("input_audio_buffer.speech_started")
    assert dones[1]["response"]["status"] == "completed"
    second = "".join(e["delta"] for e in barge[kinds.index("response.done"):]
                     if e["type"] == "response.output_audio_transcript.delta")
    assert second.strip() == "You are most welcome."
    assert cancel[-1]["response"]["status_details"]["reason"] == "client_cancelled"
    assert truncated[-1]["audio_end_ms"] == 50


def test_bad_events_get_errors(engine_url: str) -> None:
    async def go() -> list[dict]:
        errors = []
        async with connect(ws_url(engine_url)) as ws:
            async def ask(payload: str) -> dict:
                await ws.send(payload)
                return json.loads(await asyncio.wait_for(ws.recv(), 30))

            errors.append(await ask("not json"))
            errors.append(await ask(json.dumps({"type": "input_audio_buffer.append", "audio": "AAAA"})))
            errors.append(await ask(json.dumps({"type": "session.update", "session": {
                "instructions": "hello there\n"}})))
            await open_session(ws)
            errors.append(await ask(json.dumps({"type": "bogus.event"})))
            errors.append(await ask(json.dumps({"type": "input_audio_buffer.append", "audio": "@@@"})))
            errors.append(await ask(json.dumps({"type": "response.cancel"})))
            errors.append(await ask(json.dumps({"type": "conversation.item.truncate", "item_id": "x",
                                                "audio_end_ms": 10})))
            errors.append(await ask(json.dumps({"type": "conversation.item.truncate", "item_id": "x"})))
        return errors

    errors = asyncio.run(go())
    assert all(e["type"] == "error" for e in errors), errors
    codes = [e["error"]["code"] for e in errors]
    assert codes == ["invalid_json", "session_not_started", "invalid_instructions", "unknown_event",
                     "invalid_audio", "response_cancel_not_active", "item_not_found", "invalid_event"]
    assert "line 1" in errors[2]["error"]["message"]
    assert "audio_end_ms" in errors[7]["error"]["message"]


def test_the_route_without_duplex_is_still_transcription(engine_url: str) -> None:
    async def go() -> dict:
        async with connect(ws_url(engine_url, "")) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 30))

    assert asyncio.run(go())["type"] == "session.created"  # sent on connect: vLLM's transcription session
