"""The emulator's HTTP/2 bidirectional stream, driven by the real `aws-sdk-sagemaker-runtime-http2` client.

TLS with the emulator's test CA (CRT transport), signed event-stream frames, bridged to the real offline
engine's WebSocket `/v1/audio/speech/stream`. Every await has a timeout, so a broken stream fails in
seconds instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
from aws_sdk_sagemaker_runtime_http2.models import (
    InputValidationError,
    InvokeEndpointWithBidirectionalStreamInput,
    ModelError,
    ModelStreamError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
)
from botocore.eventstream import EventStreamBuffer
from smithy_aws_event_stream.exceptions import InvalidEventBytes

from emulator.eventstream import encode_message
from protocol.common import dumps
from protocol.speech import InputDone, InputText, SessionConfig

pytest.register_assert_rewrite("tests.emulator_support")  # its helpers assert; rewrite them too
from tests.emulator_support import EmulatorHandle, deploy_endpoint, http2_config

pytest_plugins = ["tests.emulator_support"]  # the emulator fixtures, registered once per session

STEP_S = 15.0  # the longest any single await may take
SPEECH_PATH = "v1/audio/speech/stream"
TEXT = "Hello from the emulator. This stream crosses HTTP/2 and a WebSocket. Every sentence comes back as audio!"


def utf8_part(text: str, state: str = "COMPLETE") -> RequestStreamEventPayloadPart:
    return RequestStreamEventPayloadPart(value=RequestPayloadPart(bytes_=text.encode(), data_type="UTF8", completion_state=state))


def speech_messages(voice: str | None = None) -> list[str]:
    config = SessionConfig(voice=voice, response_format="pcm", stream_audio=True, split_granularity="sentence")
    return [dumps(config), dumps(InputText(text=TEXT)), dumps(InputDone())]


@dataclass
class Received:
    events: list[dict[str, Any]] = field(default_factory=list)  # JSON text messages, in order
    order: list[str] = field(default_factory=list)  # event types with "pcm" for binary parts
    pcm: bytearray = field(default_factory=bytearray)
    ended: bool = False  # the stream ended normally (receive() returned None)


async def open_stream(handle: EmulatorHandle, endpoint: str, path: str = SPEECH_PATH, *, from_env: bool = False) -> tuple[Any, Any]:
    client = AsyncSageMakerRuntimeHTTP2Client(config=await http2_config(handle, from_env=from_env))
    stream = await asyncio.wait_for(
        client.invoke_endpoint_with_bidirectional_stream(
            InvokeEndpointWithBidirectionalStreamInput(endpoint_name=endpoint, model_invocation_path=path)
        ),
        STEP_S,
    )
    return client, stream


async def converse(stream: Any, parts: list[RequestStreamEventPayloadPart], *, close_after_session_done: bool = True) -> Received:
    """Send the parts, read until session.done, close the input, read until the stream ends."""
    for part in parts:
        await asyncio.wait_for(stream.input_stream.send(part), STEP_S)
    _, output = await asyncio.wait_for(stream.await_output(), STEP_S)
    got = Received()
    for _ in range(10_000):  # bounded: a stream that never ends fails the test
        event = await asyncio.wait_for(output.receive(), STEP_S)
        if event is None:
            got.ended = True
            return got
        part = event.value
        if part.data_type == "UTF8":
            message = json.loads(part.bytes_)
            got.events.append(message)
            got.order.append(message["type"])
            if message["type"] == "session.done" and close_after_session_done:
                await asyncio.wait_for(stream.input_stream.close(), STEP_S)
        else:
            assert part.data_type == "BINARY"
            got.pcm.extend(part.bytes_)
            if not got.order or got.order[-1] != "pcm":
                got.order.append("pcm")
    raise AssertionError("the stream did not end")


@pytest.fixture
def voice_endpoint(emulator: EmulatorHandle) -> str:
    deploy_endpoint(emulator, "voice-bidi", environment={"SM_VLLM_MODEL": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"})
    return "voice-bidi"


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_speech_streams_over_http2_with_several_sentences(emulator: EmulatorHandle, voice_endpoint: str) -> None:
    async def scenario() -> Received:
        _, stream = await open_stream(emulator, voice_endpoint)
        return await converse(stream, [utf8_part(m) for m in speech_messages()])

    got = run(scenario())
    assert got.ended
    # audio.start, PCM, audio.done per sentence, then session.done — strictly in that order
    assert got.order == ["audio.start", "pcm", "audio.done"] * 3 + ["session.done"]
    starts = [e for e in got.events if e["type"] == "audio.start"]
    assert [s["sentence_index"] for s in starts] == [0, 1, 2]
    assert starts[0]["sentence_text"] == "Hello from the emulator."
    assert all(s["sample_rate"] == 24_000 and s["format"] == "pcm" for s in starts)
    done = [e for e in got.events if e["type"] == "audio.done"]
    assert all(not d["error"] for d in done)
    assert sum(d["total_bytes"] for d in done) == len(got.pcm)
    assert len(got.pcm) > 2000 and len(got.pcm) % 2 == 0
    samples = memoryview(bytes(got.pcm)).cast("h")
    assert max(abs(s) for s in samples[::7]) > 1000  # real speech, not silence
    assert got.events[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 3}


def test_partial_parts_are_merged_into_one_websocket_message(emulator_env: EmulatorHandle, voice_endpoint: str) -> None:
    config, text, done = speech_messages()
    pieces = [config[:10], config[10:25], config[25:]]
    parts = [utf8_part(pieces[0], "PARTIAL"), utf8_part(pieces[1], "PARTIAL"), utf8_part(pieces[2]), utf8_part(text), utf8_part(done)]

    async def scenario() -> Received:
        # endpoint and credentials from the environment, as the studio's backend will find them
        _, stream = await open_stream(emulator_env, voice_endpoint, from_env=True)
        return await converse(stream, parts)

    got = run(scenario())
    assert got.order[-1] == "session.done" and len(got.pcm) > 2000  # the engine understood the split config


def test_unknown_voice_comes_back_as_error_events(emulator: EmulatorHandle, voice_endpoint: str) -> None:
    async def scenario() -> Received:
        _, stream = await open_stream(emulator, voice_endpoint)
        return await converse(stream, [utf8_part(m) for m in speech_messages(voice="nobody-by-that-name")])

    got = run(scenario())
    errors = [e for e in got.events if e["type"] == "error"]
    assert errors and "Invalid voice 'nobody-by-that-name'" in errors[0]["message"]
    assert [e["error"] for e in got.events if e["type"] == "audio.done"] == [True, True, True]
    assert got.order[-1] == "session.done" and not got.pcm and got.ended


def test_leading_slash_in_invocation_path_is_rejected(emulator: EmulatorHandle, voice_endpoint: str) -> None:
    async def scenario() -> None:
        _, stream = await open_stream(emulator, voice_endpoint, path="/" + SPEECH_PATH)
        await asyncio.wait_for(stream.await_output(), STEP_S)

    with pytest.raises(InputValidationError) as info:
        run(scenario())
    assert "modelInvocationPath" in info.value.message and "leading slash" in info.value.message


def test_path_the_container_does_not_serve_is_a_model_error(emulator: EmulatorHandle, voice_endpoint: str) -> None:
    async def scenario() -> None:
        _, stream = await open_stream(emulator, voice_endpoint, path="v1/no/such/socket")
        await asyncio.wait_for(stream.await_output(), STEP_S)

    with pytest.raises(ModelError) as info:
        run(scenario())
    assert info.value.original_status_code == 403  # the engine refused the WebSocket upgrade


def test_unknown_endpoint_and_endpoint_without_streaming_ami(emulator: EmulatorHandle) -> None:
    deploy_endpoint(emulator, "no-ami", ami=None)

    async def attempt(name: str) -> None:
        _, stream = await open_stream(emulator, name)
        await asyncio.wait_for(stream.await_output(), STEP_S)

    with pytest.raises(InputValidationError) as missing:
        run(attempt("never-created"))
    assert f"Endpoint never-created of account {emulator.account_id} not found." in missing.value.message
    with pytest.raises(InputValidationError) as no_ami:
        run(attempt("no-ami"))
    assert "InferenceAmiVersion" in no_ami.value.message and "al2023-ami-sagemaker-inference-gpu-4-1" in no_ami.value.message


def test_credentials_expiring_mid_stream_end_it_with_model_stream_error(emulator: EmulatorHandle, voice_endpoint: str) -> None:
    emulator.set_faults(bidi_expire_after_frames=1)

    async def scenario() -> Received:
        _, stream = await open_stream(emulator, voice_endpoint)
        return await converse(stream, [utf8_part(m) for m in speech_messages()])

    with pytest.raises(ModelStreamError) as info:
        run(scenario())
    assert info.value.error_code == "ExpiredTokenException"


def test_stream_cut_mid_audio_keeps_what_arrived(emulator: EmulatorHandle, voice_endpoint: str) -> None:
    emulator.set_faults(bidi_cut_after_output_parts=3)  # audio.start, one PCM part, one more part: then reset
    got = Received()

    async def scenario() -> None:
        _, stream = await open_stream(emulator, voice_endpoint)
        for part in [utf8_part(m) for m in speech_messages()]:
            await asyncio.wait_for(stream.input_stream.send(part), STEP_S)
        _, output = await asyncio.wait_for(stream.await_output(), STEP_S)
        for _ in range(100):
            # The CRT transport reports a reset stream as an error, as a truncated event (the reset can
            # land mid-frame), or as the end of the stream.
            try:
                event = await asyncio.wait_for(output.receive(), STEP_S)
            except (OSError, RuntimeError, ModelStreamError, InvalidEventBytes):
                return
            if event is None:
                got.ended = True
                return
            if event.value.data_type == "UTF8":
                got.events.append(json.loads(event.value.bytes_))
            else:
                got.pcm.extend(event.value.bytes_)

    run(scenario())
    types = [e["type"] for e in got.events]
    assert types[0] == "audio.start" and len(got.pcm) > 0  # what arrived before the cut is kept
    assert "session.done" not in types and "audio.done" not in types  # the answer stopped mid-sentence
    assert len(got.events) + (1 if got.pcm else 0) <= 3


def _signed_looking_headers(handle: EmulatorHandle) -> dict[str, str]:
    """Headers that pass the emulator's signature-shape check (it does not know secrets to verify more)."""
    return {
        "authorization": f"AWS4-HMAC-SHA256 Credential={handle.access_key_id}/20260101/{handle.region}/sagemaker/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64,
        "x-amz-date": "20260101T000000Z",
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-EVENTS",
        "x-amzn-sagemaker-model-invocation-path": SPEECH_PATH,
        "content-type": "application/vnd.amazon.eventstream",
    }


def test_unsigned_frames_and_http1_are_refused(emulator: EmulatorHandle, voice_endpoint: str) -> None:
    """A hand-made client: an event-stream frame without :date/:chunk-signature, and HTTP/1.1."""
    inner = encode_message(
        {":message-type": "event", ":event-type": "PayloadPart", "DataType": "UTF8", "CompletionState": "COMPLETE"},
        speech_messages()[0].encode(),
    )
    unsigned_frame = encode_message({}, inner)
    url = f"{emulator.https_url}/endpoints/{voice_endpoint}/invocations-bidirectional-stream"
    tls = ssl.create_default_context(cafile=str(emulator.ca_file))
    with httpx.Client(http2=True, verify=tls, trust_env=False, timeout=STEP_S) as h2_client:
        response = h2_client.post(url, content=unsigned_frame, headers=_signed_looking_headers(emulator))
    assert response.http_version == "HTTP/2" and response.status_code == 200
    events = EventStreamBuffer()
    events.add_data(response.content)
    (event,) = list(events)
    assert event.headers[":message-type"] == "exception" and event.headers[":exception-type"] == "ModelStreamError"
    assert json.loads(event.payload) == {
        "Message": "Event-stream frame 1 is not signed (missing :date or :chunk-signature)",
        "ErrorCode": "InvalidSignatureException",
    }
    with httpx.Client(http2=False, verify=tls, trust_env=False, timeout=STEP_S) as h1_client:
        refused = h1_client.post(url, content=unsigned_frame, headers=_signed_looking_headers(emulator))
    assert refused.status_code == 400 and refused.headers["x-amzn-errortype"] == "InputValidationError"
    assert "needs HTTP/2" in refused.json()["Message"]
