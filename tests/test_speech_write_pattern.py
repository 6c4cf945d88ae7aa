"""The speech session's write pattern: what it hands to the transport together leaves together.

On SageMaker's HTTP/2 stream every write of the CRT client is its own small TCP segment, and a small segment
behind an unacknowledged one waits for the server's delayed ACK (~40 ms). So `session.config` waits for the
utterance's first text, and `speak` hands its text and `input.done` over with it: one write, checked here on
the real SDK through the local emulator (the messages still reach the container as separate WebSocket
messages, in order). A config with no text behind it still goes out on its own before the server's wait for
it runs out.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import Any

import pytest
from botocore.eventstream import EventStreamBuffer

from protocol.speech import InputText
from services.backend import create_backend
from services.settings import Settings
from services.speech import session as session_module
from services.speech import speech_config
from services.speech.mock import MockPeer, MockTransport
from services.speech.http2_clients import sockets_to
from services.speech.sagemaker_http2 import Http2SpeechTransport
from services.speech.session import SpeechSession

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import EmulatorHandle, deploy_endpoint

pytest_plugins = ["tests.emulator_support"]

TEXT = "Hello from SageMaker. One write carries the config, this text and input.done."


class CountingWriter:
    """Stands in front of the SDK publisher's writer and keeps every write it passes on."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer
        self.writes: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        await self._writer.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


def messages_in(write: bytes) -> list[dict[str, Any]]:
    """The JSON messages of the PayloadPart events in one write (signed outer frames around inner events);
    an empty signed frame, the end of the client's input, is {"end": True}."""
    outer = EventStreamBuffer()
    outer.add_data(write)
    found: list[dict[str, Any]] = []
    for frame in outer:
        if not frame.payload:
            found.append({"end": True})
            continue
        inner = EventStreamBuffer()
        inner.add_data(frame.payload)
        for event in inner:
            assert event.headers[":event-type"] == "PayloadPart"
            assert event.headers["DataType"] == "UTF8" and event.headers.get("CompletionState", "COMPLETE") == "COMPLETE"
            found.append(json.loads(event.payload))
    return found


@pytest.fixture
def voice(emulator_env: EmulatorHandle) -> str:
    deploy_endpoint(emulator_env, "sm-voice", environment={"SM_VLLM_MODEL": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"})
    return "sm-voice"


def test_config_text_and_input_done_leave_in_one_write_over_http2(emulator_env: EmulatorHandle, voice: str) -> None:
    backend = create_backend(Settings.model_validate({
        "backend": "sagemaker", "voice_endpoint": voice, "image_endpoint": "sm-image", "video_endpoint": "sm-video",
        "connect_timeout_s": 5.0, "request_timeout_s": 30.0, "state_file": "/nonexistent/state.json"}))

    async def go() -> tuple[CountingWriter, list[Any], SpeechSession]:
        session = backend.client("voice").open(speech_config("default", split_granularity="sentence"))
        async with session:
            publisher = session.transport._stream.input_stream
            spy = CountingWriter(publisher._writer)
            publisher._writer = spy
            events = [e async for e in session.speak(TEXT)]
            return spy, events, session

    spy, events, session = asyncio.run(asyncio.wait_for(go(), 90))
    first = messages_in(spy.writes[0])
    assert [m["type"] for m in first] == ["session.config", "input.text", "input.done"]
    # Closing: session.close and the end of the input stream leave together too.
    assert len(spy.writes) == 2 and messages_in(spy.writes[1]) == [{"type": "session.close"}, {"end": True}]
    assert first[0]["voice"] == "default" and first[1]["text"] == TEXT
    # The container took them as three messages: it spoke both sentences and finished the utterance.
    assert session.stats.state == "done" and session.stats.sentences == 2 and session.stats.bytes > 2000
    assert type(events[-1]).__name__ == "SessionDone"


def test_a_held_config_goes_out_alone_when_no_text_follows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "CONFIG_HOLD_S", 0.05)
    seen: list[str] = []

    async def server(peer: MockPeer) -> None:
        while (message := await peer.receive()) is not None:
            seen.append(json.loads(message)["type"])

    async def go() -> tuple[list[str], list[str]]:
        session = SpeechSession(MockTransport(server), speech_config(voice="joe"))
        async with session:
            await asyncio.sleep(0.01)
            assert seen == []  # held for the first text
            await asyncio.sleep(0.3)  # longer than CONFIG_HOLD_S: the config went out on its own
            after_hold = list(seen)
            await session.feed("Late text.")
            await asyncio.sleep(0.05)
        return after_hold, list(seen)

    after_hold, everything = asyncio.run(go())
    assert after_hold == ["session.config"]
    assert everything == ["session.config", "input.text", "session.close"]


def test_without_send_texts_each_message_is_sent_in_order() -> None:
    received: list[dict[str, Any]] = []

    async def server(peer: MockPeer) -> None:
        while (message := await peer.receive()) is not None:
            received.append(json.loads(message))

    async def go() -> None:
        session = SpeechSession(MockTransport(server), speech_config(voice="joe"))
        session.max_message_bytes = 40  # the text is cut into several input.text messages
        async with session:
            await session._send_pieces(["One piece.", "Another piece."], done=True)
            await asyncio.sleep(0.05)

    asyncio.run(go())
    assert [m["type"] for m in received] == ["session.config", "input.text", "input.text", "input.done",
                                             "session.close"]
    assert [m.get("text") for m in received[1:3]] == [InputText(text="One piece.").text, "Another piece."]


def open_files() -> set[tuple[int, int]]:
    """(device, inode) of every descriptor this process has open."""
    out = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            info = os.fstat(int(name))
        except (ValueError, OSError):
            continue
        out.add((info.st_dev, info.st_ino))
    return out


def no_delay_of_new_connections(peers: set[tuple[str, int]], before: set[tuple[int, int]]) -> list[int]:
    """TCP_NODELAY of each of this process's connections to `peers` that was not open `before`: only this
    session's, since an earlier test in the same process (tests run in several workers, in any order) may leave a
    connection of its own to the emulator that is not this transport's to change."""
    found = sockets_to(peers, before)
    values = []
    for name in os.listdir("/proc/self/fd"):
        try:
            info = os.fstat(int(name))
        except (ValueError, OSError):
            continue
        if (info.st_dev, info.st_ino) in found:
            with socket.socket(fileno=os.dup(int(name))) as sock:
                values.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    return values


def sagemaker_speech(voice: str) -> Any:
    return create_backend(Settings.model_validate({
        "backend": "sagemaker", "voice_endpoint": voice, "image_endpoint": "sm-image", "video_endpoint": "sm-video",
        "connect_timeout_s": 5.0, "request_timeout_s": 30.0, "state_file": "/nonexistent/state.json"})).client("voice")


async def no_delay_after_saying(speech: Any, before: set[tuple[int, int]]) -> list[int]:
    """One short utterance on a session, then the TCP_NODELAY of its connections (before it closes)."""
    session = speech.open(speech_config("default"))
    async with session:
        await session.say("Short.")
        return no_delay_of_new_connections(await session.transport.clients.peers(), before)


def test_the_http2_connection_socket_has_tcp_nodelay(emulator_env: EmulatorHandle, voice: str) -> None:
    """The CRT client leaves Nagle on; the transport turns it off on its own connection (and only there)."""
    speech = sagemaker_speech(voice)
    before = open_files()

    values = asyncio.run(asyncio.wait_for(no_delay_after_saying(speech, before), 60))
    assert values and all(values), values


def test_a_connection_that_comes_up_after_the_first_send_gets_tcp_nodelay_too(
        emulator_env: EmulatorHandle, voice: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK hands back the stream before its connection exists (it connects in a background task), and the
    session writes into it at once: on a busy machine the connection only comes up after the session's first
    send. Here it is held until then, every time; its socket must still get TCP_NODELAY before anything more
    is sent on it."""
    from smithy_http.aio.crt import AWSCRTHTTPClient

    speech = sagemaker_speech(voice)
    before = open_files()
    sent = asyncio.Event()
    build, publish = AWSCRTHTTPClient._build_new_connection, Http2SpeechTransport._publish

    async def build_after_the_first_send(client: Any, url: Any) -> Any:
        await asyncio.wait_for(sent.wait(), 30)
        return await build(client, url)

    async def publish_then_let_it_connect(transport: Any, messages: list[str], *, end: bool = False) -> None:
        sent.set()
        await publish(transport, messages, end=end)

    monkeypatch.setattr(AWSCRTHTTPClient, "_build_new_connection", build_after_the_first_send)
    monkeypatch.setattr(Http2SpeechTransport, "_publish", publish_then_let_it_connect)

    values = asyncio.run(asyncio.wait_for(no_delay_after_saying(speech, before), 60))
    assert sent.is_set()
    assert values and all(values), values
