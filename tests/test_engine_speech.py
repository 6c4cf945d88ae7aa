"""The offline engine's speech side against the real server (`python -m offline`), with plain clients.

Every case drives the WebSocket `/v1/audio/speech/stream` or the REST routes over loopback and checks the
message sequence, the fields, and the audio bytes themselves (speech-like PCM at 24 kHz, WAV files that
parse, lengths that grow with the text).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import socket
import threading
import wave
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import numpy as np
import pytest
import uvicorn
import websockets
from fastapi import FastAPI
from websockets.asyncio.client import ClientConnection, connect

from offline.voice import VoiceEngine
from offline.speech import CONFIG_TIMEOUT_ENV, IDLE_TIMEOUT_ENV, SpeechStreamHandler
from protocol.limits import SPEECH_INPUT_MAX_CHARS
from protocol.speech import QWEN3_TTS_SPEAKERS, SPEECH_STREAM_PATH
from tests.conftest import free_port

# The engine answers to the Piper voice and every Qwen3-TTS CustomVoice speaker and language (offline.styles).
SUPPORTED_VOICES = "aiden, default, dylan, eric, joe, ono_anna, ryan, serena, sohee, uncle_fu, vivian"
SUPPORTED_LANGUAGES = "Auto, Chinese, English, French, German, Italian, Japanese, Korean, Portuguese, Russian, Spanish"

RECV_TIMEOUT_S = 30.0  # generous bound on any single frame; the engine answers in well under a second


def ws_url(http_url: str) -> str:
    return http_url.replace("http://", "ws://", 1) + SPEECH_STREAM_PATH


class Client:
    """A thin test client over one WebSocket: JSON out, JSON or bytes in, every wait bounded."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, **message: Any) -> None:
        await self.ws.send(json.dumps(message))

    async def recv(self) -> dict[str, Any] | bytes:
        frame = await asyncio.wait_for(self.ws.recv(), RECV_TIMEOUT_S)
        return frame if isinstance(frame, bytes) else json.loads(frame)

    async def recv_json(self) -> dict[str, Any]:
        frame = await self.recv()
        assert isinstance(frame, dict), f"expected a JSON text frame, got {len(frame)} binary bytes"
        return frame

    async def until(self, message_type: str) -> list[dict[str, Any] | bytes]:
        """Every frame up to and including the first JSON message of `message_type`."""
        frames: list[dict[str, Any] | bytes] = []
        for _ in range(10_000):
            frame = await self.recv()
            frames.append(frame)
            if isinstance(frame, dict) and frame["type"] == message_type:
                return frames
        raise AssertionError(f"no {message_type} in {len(frames)} frames")

    async def closed(self) -> int | None:
        """Wait for the server to end the connection; returns the close code it sent (None: no close frame)."""
        try:
            frame = await asyncio.wait_for(self.ws.recv(), RECV_TIMEOUT_S)
        except websockets.ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
        raise AssertionError(f"connection still open; got {frame!r:.200}")


@asynccontextmanager
async def session(url: str) -> AsyncIterator[Client]:
    async with connect(ws_url(url), max_size=None, open_timeout=10, close_timeout=2) as ws:
        yield Client(ws)


def run(coro) -> Any:
    return asyncio.run(coro)


def units_of(frames: list[dict[str, Any] | bytes]) -> list[tuple[dict[str, Any], bytes, dict[str, Any]]]:
    """Group frames into (audio.start, audio bytes, audio.done) units, checking their order."""
    units = []
    current: tuple[dict[str, Any], bytearray] | None = None
    for frame in frames:
        if isinstance(frame, bytes):
            assert current is not None, "binary audio outside audio.start/audio.done"
            current[1].extend(frame)
        elif frame["type"] == "audio.start":
            assert current is None, "audio.start before the previous unit's audio.done"
            current = (frame, bytearray())
        elif frame["type"] == "audio.done":
            assert current is not None and current[0]["sentence_index"] == frame["sentence_index"]
            units.append((current[0], bytes(current[1]), frame))
            current = None
    assert current is None, "a unit without audio.done"
    return units


def assert_speech(pcm: bytes, *, min_seconds: float = 0.3) -> np.ndarray:
    """24 kHz s16le mono PCM that sounds like speech: loud enough, energy in the voice band, no clipping."""
    assert len(pcm) % 2 == 0, "s16le PCM has an even number of bytes"
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    assert len(samples) / 24_000 >= min_seconds, f"only {len(samples) / 24_000:.2f} s of audio"
    rms = float(np.sqrt(np.mean(samples**2)))
    assert rms > 500, f"RMS {rms:.0f} is too quiet for speech"
    assert np.max(np.abs(samples)) < 32_767, "audio clips"
    # A Hann window (scaled to keep noise power) so the ends of the clip do not smear energy everywhere.
    window = np.hanning(len(samples))
    power = np.abs(np.fft.rfft(samples * window / np.sqrt(np.mean(window**2)))) ** 2
    freqs = np.fft.rfftfreq(len(samples), 1 / 24_000)
    voice_band = power[(freqs >= 100) & (freqs <= 4_000)].sum() / power.sum()
    assert voice_band > 0.8, f"only {voice_band:.0%} of the energy is in 100-4000 Hz"
    # Resampled from Piper's 22 050 Hz to 24 kHz: above the source's 11 025 Hz Nyquist there is nothing but
    # int16 rounding noise (mean bin power N/12). Piper's own samples sent as if they were 24 kHz would put
    # its top band there: twenty to thousands of times that floor.
    high_band = power[freqs > 11_300].mean() / (len(samples) / 12)
    assert high_band < 4, f"{high_band:.0f}x the rounding floor above 11.3 kHz: not resampled from 22 050 Hz"
    return samples


def voiced_seconds(pcm: bytes) -> float:
    """Seconds of 24 kHz s16le PCM in 20 ms frames louder than a tenth of the clip's loud frames (its 90th
    percentile RMS): the speech itself, without the pauses between pieces, which depend on how a busy engine cut
    the text (offline/voice/scheduler.py), not on what was said."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    frames = samples[: len(samples) // 480 * 480].reshape(-1, 480)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    return float(np.count_nonzero(rms > 0.1 * np.percentile(rms, 90))) * 0.02


def read_wav(data: bytes) -> bytes:
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24_000, 1, 2)
        frames = w.readframes(w.getnframes())
        assert len(frames) == w.getnframes() * 2
        return frames


# ---------------------------------------------------------------------------------------------------------
# Streaming PCM, splitting, utterances
def test_stream_audio_sentence_units(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", voice="Joe", language="English", response_format="pcm",
                         stream_audio=True, split_granularity="sentence", bogus_key={"ignored": True})
            await c.send(type="input.text", text="Hello there, friend. Dr. Smith paid 3")
            await c.send(type="input.text", text=".14 dollars. And then")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            units = units_of(frames)
            assert [start["sentence_text"] for start, _, _ in units] == [
                "Hello there, friend.", "Dr. Smith paid 3.14 dollars.", "And then",
            ]
            for i, (start, pcm, done) in enumerate(units):
                assert start == {"type": "audio.start", "utterance_index": 0, "sentence_index": i,
                                 "sentence_text": start["sentence_text"], "format": "pcm",
                                 "sample_rate": 24_000}
                assert done == {"type": "audio.done", "utterance_index": 0, "sentence_index": i,
                                "total_bytes": len(pcm), "error": False}
                assert_speech(pcm)
            assert frames[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 3}
            # The first unit arrived as several chunks: its first clause is synthesized on its own.
            first_unit_chunks = [f for f in frames[1 : frames.index(units[0][2])] if isinstance(f, bytes)]
            assert len(first_unit_chunks) >= 2
            # The second sentence is longer than the first, and so is its audio.
            assert len(units[1][1]) > len(units[0][1]) > len(units[2][1])

    run(scenario())


# The keys of each server event, in the order vLLM-Omni 0.30 writes them: its WebSocket handler
# vllm_omni/entrypoints/openai/serving_speech_stream.py (OmniStreamingSpeechHandler): the module docstring's
# examples, with audio.done as `_generate_and_send` sends it (the docstring abbreviates it) and `sample_rate`
# added to audio.start only with stream_audio + pcm. No `channels` anywhere.
VLLM_OMNI_EVENT_KEYS = {
    "audio.start": ["type", "utterance_index", "sentence_index", "sentence_text", "format"],
    "audio.start/stream_audio+pcm": ["type", "utterance_index", "sentence_index", "sentence_text", "format",
                                     "sample_rate"],
    "audio.done": ["type", "utterance_index", "sentence_index", "total_bytes", "error"],
    "session.done": ["type", "utterance_index", "total_sentences"],
    "error": ["type", "message"],
}


def shape(frames: list[dict[str, Any] | bytes]) -> list[str]:
    """Each frame as its kind: the event type, or "audio" for a run of binary frames."""
    kinds: list[str] = []
    for frame in frames:
        kind = "audio" if isinstance(frame, bytes) else frame["type"]
        if not (kind == "audio" and kinds and kinds[-1] == "audio"):
            kinds.append(kind)
    return kinds


def test_event_keys_and_order_are_vllm_omnis(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True, split_granularity="sentence")
            await c.send(type="input.text", text="First one. Second one.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            assert shape(frames) == ["audio.start", "audio", "audio.done", "audio.start", "audio", "audio.done",
                                     "session.done"]
            for frame in frames:
                if isinstance(frame, dict):
                    key = "audio.start/stream_audio+pcm" if frame["type"] == "audio.start" else frame["type"]
                    assert list(frame) == VLLM_OMNI_EVENT_KEYS[key], frame

            # A whole file per unit: one binary frame, and audio.start without sample_rate.
            await c.send(type="session.config", response_format="wav")
            await c.send(type="input.text", text="A file.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            assert shape(frames) == ["audio.start", "audio", "audio.done", "session.done"]
            assert sum(isinstance(f, bytes) for f in frames) == 1
            assert [list(f) for f in frames if isinstance(f, dict)] == [
                VLLM_OMNI_EVENT_KEYS["audio.start"], VLLM_OMNI_EVENT_KEYS["audio.done"],
                VLLM_OMNI_EVENT_KEYS["session.done"],
            ]

            await c.send(type="no.such.type")
            assert list(await c.recv_json()) == VLLM_OMNI_EVENT_KEYS["error"]

    run(scenario())


def test_audio_length_grows_with_text(engine_url: str) -> None:
    async def speak(c: Client, text: str) -> bytes:
        await c.send(type="input.text", text=text)
        await c.send(type="input.done")
        units = units_of(await c.until("session.done"))
        assert len(units) == 1
        return units[0][1]

    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True)
            short = await speak(c, "Good morning.")
            long = await speak(c, "Good morning. The weather today is sunny and warm, with a light breeze "
                                  "from the west and no rain expected before the evening.")
        assert_speech(short)
        assert_speech(long, min_seconds=3.0)
        assert len(long) > 3 * len(short)

    run(scenario())


def test_none_granularity_waits_for_input_done(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True)
            await c.send(type="input.text", text="First sentence. Second sentence! ")
            await c.send(type="input.text", text="Third, with a clause")
            # Messages are handled in order: had the text released a unit, audio.start would come first.
            await c.send(type="no.such.type")
            assert await c.recv_json() == {"type": "error", "message": "Unknown message type: no.such.type"}
            await c.send(type="input.done")
            units = units_of(await c.until("session.done"))
            assert [start["sentence_text"] for start, _, _ in units] == [
                "First sentence. Second sentence! Third, with a clause"
            ]
            assert_speech(units[0][1], min_seconds=2.0)

    run(scenario())


def test_clause_granularity_releases_units_before_input_done(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True, split_granularity="clause")
            await c.send(type="input.text", text="We sold 1,000 units, then more; ")
            frames = [await c.recv_json()]
            assert frames[0]["type"] == "audio.start" and frames[0]["sentence_text"] == "We sold 1,000 units,"
            frames += await c.until("audio.done")
            frames += await c.until("audio.done")
            assert [s["sentence_text"] for s, _, _ in units_of(frames)] == ["We sold 1,000 units,", "then more;"]
            await c.send(type="input.text", text="你好，世界。")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            assert [s["sentence_text"] for s, _, _ in units_of(frames)] == ["你好，", "世界。"]
            assert frames[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 4}

    run(scenario())


def test_wav_file_per_unit_then_config_resent_between_utterances(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", split_granularity="sentence")  # wav is the default
            await c.send(type="input.text", text="One small step. Then another, much longer step forward.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            assert sum(isinstance(f, bytes) for f in frames) == 2, "one whole file per unit"
            units = units_of(frames)
            pcms = []
            for start, data, done in units:
                assert start["format"] == "wav" and "sample_rate" not in start
                assert done["total_bytes"] == len(data) and done["error"] is False
                assert data[:4] == b"RIFF"
                pcms.append(read_wav(data))
                assert_speech(pcms[-1])
            assert len(pcms[1]) > len(pcms[0])
            assert frames[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 2}

            # A new config between utterances applies to the next one; indices go on / start over.
            await c.send(type="session.config", response_format="pcm", speed=1.5)
            await c.send(type="input.text", text="Faster now.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            (start, data, done), = units_of(frames)
            assert (start["utterance_index"], start["sentence_index"], start["format"]) == (1, 0, "pcm")
            assert sum(isinstance(f, bytes) for f in frames) == 1 and data[:4] != b"RIFF"
            assert_speech(data)
            assert frames[-1] == {"type": "session.done", "utterance_index": 1, "total_sentences": 1}

    run(scenario())


def test_other_encoded_formats(engine_url: str) -> None:
    magic = {"flac": (b"fLaC",), "mp3": (b"ID3", b"\xff\xfb", b"\xff\xf3"), "opus": (b"OggS",)}

    async def scenario() -> None:
        async with session(engine_url) as c:
            for fmt, prefixes in magic.items():
                await c.send(type="session.config", response_format=fmt)
                await c.send(type="input.text", text="Testing formats.")
                await c.send(type="input.done")
                (start, data, done), = units_of(await c.until("session.done"))
                assert start["format"] == fmt and done["error"] is False
                assert data.startswith(prefixes) and len(data) > 500

    run(scenario())


def test_config_cannot_change_mid_utterance(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True)
            await c.send(type="input.text", text="Half an utterance")
            await c.send(type="session.config", response_format="wav")
            assert await c.recv_json() == {
                "type": "error",
                "message": "session.config cannot be applied while an utterance is in progress; send input.done first",
            }
            await c.send(type="input.done")
            (start, pcm, _), = units_of(await c.until("session.done"))
            assert start["format"] == "pcm" and pcm[:4] != b"RIFF"  # the first config still applies

    run(scenario())


def test_empty_and_non_string_text(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config")
            await c.send(type="input.text", text=123)
            assert await c.recv_json() == {"type": "error", "message": "input.text requires a string value"}
            await c.send(type="input.text", text="")
            await c.send(type="input.text", text="   ")
            await c.send(type="input.done")
            assert await c.recv_json() == {"type": "session.done", "utterance_index": 0, "total_sentences": 0}
            await c.send(type="session.close")
            assert await c.closed() == 1000

    run(scenario())


def test_zero_width_text_is_nothing_to_speak(engine_url: str) -> None:
    # As whitespace-only text in vLLM-Omni: no unit at all, session.done with 0 sentences (REST answers 400
    # "Input text cannot be empty": test_rest_errors).
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True)
            await c.send(type="input.text", text="\u200b\u200b")
            await c.send(type="input.done")
            assert await c.recv_json() == {"type": "session.done", "utterance_index": 0, "total_sentences": 0}
            # Around real text the invisible characters are stripped from the unit.
            await c.send(type="session.config", response_format="pcm", stream_audio=True, split_granularity="sentence")
            await c.send(type="input.text", text="\ufeffHello there. \u200b\u2060")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            (start, pcm, done), = units_of(frames)
            assert start["sentence_text"] == "Hello there." and done["error"] is False
            assert_speech(pcm)
            assert frames[-1] == {"type": "session.done", "utterance_index": 1, "total_sentences": 1}

    run(scenario())


# ---------------------------------------------------------------------------------------------------------
# Errors that keep the connection, errors that end it
def test_nul_character_fails_the_unit_with_its_position(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True)
            await c.send(type="input.text", text="a\x00b")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            assert [f for f in frames if f["type"] == "error"] == [{  # type: ignore[index]
                "type": "error",
                "message": "Generation failed for utterance 0, sentence 0: "
                           "Input text contains a NUL character (U+0000) at index 1; remove it",
            }]
            assert frames[-2]["error"] is True  # type: ignore[index]

    run(scenario())


def test_lone_surrogate_is_refused_and_the_session_goes_on(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True)
            await c.send(type="input.text", text="Hello ")
            await c.ws.send('{"type": "input.text", "text": "ab\\ud800"}')  # JSON allows the escape; UTF-8 does not
            assert await c.recv_json() == {
                "type": "error",
                "message": "The input text is not valid Unicode: it holds a lone surrogate (U+D800) at index 2, "
                           "a JSON \\u escape without its pair; send the text as valid UTF-8",
            }
            await c.send(type="input.text", text="world.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            (start, pcm, done), = units_of(frames)
            assert start["sentence_text"] == "Hello world." and done["error"] is False
            assert_speech(pcm)
            await c.ws.send('{"type": "session.config", "voice": "\\udfff"}')
            error = await c.recv_json()
            assert error["message"].startswith("The field 'voice' is not valid Unicode: it holds a lone surrogate (U+DFFF)")
            await c.send(type="session.close")
            assert await c.closed() == 1000

    run(scenario())



def supported_voices(engine_url: str) -> str:
    """The engine's voices as its error names them: the presets and whatever this worker's earlier tests uploaded
    (the engine is shared by the session's tests, so its list depends on which ran before)."""
    listed = httpx.get(f"{engine_url}/v1/audio/voices", timeout=10).json()["voices"]
    assert set(SUPPORTED_VOICES.split(", ")) <= set(listed)
    return ", ".join(sorted(set(listed)))


def test_unknown_voice_and_language_fail_the_unit_but_keep_the_connection(engine_url: str) -> None:
    supported = supported_voices(engine_url)

    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", voice="nobody", response_format="pcm", stream_audio=True)
            await c.send(type="input.text", text="Hello.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            assert frames == [
                {"type": "audio.start", "utterance_index": 0, "sentence_index": 0, "sentence_text": "Hello.",
                 "format": "pcm", "sample_rate": 24_000},
                {"type": "error",
                 "message": f"Generation failed for utterance 0, sentence 0: Invalid voice 'nobody'. Supported: {supported}"},
                {"type": "audio.done", "utterance_index": 0, "sentence_index": 0, "total_bytes": 0, "error": True},
                {"type": "session.done", "utterance_index": 0, "total_sentences": 1},
            ]
            await c.send(type="session.config", voice="default", language="Klingon")
            await c.send(type="input.text", text="Hello.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            assert frames[1] == {
                "type": "error",
                "message": f"Generation failed for utterance 1, sentence 0: Invalid language 'Klingon'. Supported: {SUPPORTED_LANGUAGES}",
            }
            assert frames[2]["error"] is True
            # Still open: a valid voice now speaks.
            await c.send(type="session.config", voice="JOE", language="auto")
            await c.send(type="input.text", text="Hello again.")
            await c.send(type="input.done")
            (start, data, done), = units_of(await c.until("session.done"))
            assert done["error"] is False and start["utterance_index"] == 2
            assert_speech(read_wav(data))

    run(scenario())


def test_bad_messages_after_config_keep_the_connection(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm")
            await c.ws.send("{not json")
            assert await c.recv_json() == {"type": "error", "message": "Invalid JSON message"}
            await c.ws.send("[1, 2, 3]")
            assert await c.recv_json() == {"type": "error", "message": "WebSocket messages must be JSON objects"}
            await c.ws.send('{"type": "input.text", "text": ' + "[" * 100_000 + "]" * 100_000 + "}")
            assert await c.recv_json() == {"type": "error", "message": "Invalid JSON message"}
            await c.send(type="what.is.this")
            assert await c.recv_json() == {"type": "error", "message": "Unknown message type: what.is.this"}
            await c.send(type="input.text", text="x" * (128 * 1024 + 1))
            assert await c.recv_json() == {"type": "error", "message": "input.text message too large"}
            await c.ws.send(json.dumps({"type": "input.text", "text": "y" * (4 * 1024 * 1024)}))
            assert await c.recv_json() == {"type": "error", "message": "WebSocket message too large"}
            # An invalid config resent later is reported; the previous config stays.
            await c.send(type="session.config", stream_audio=True, response_format="pcm", speed=2.0)
            error = await c.recv_json()
            assert error["type"] == "error" and error["message"].startswith("Invalid session config: ")
            assert "requires speed=1.0" in error["message"]
            await c.send(type="input.text", text="Still here.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            (start, data, done), = units_of(frames)
            assert start["format"] == "pcm" and "sample_rate" not in start and done["error"] is False
            assert_speech(data)

    run(scenario())


@pytest.mark.parametrize(
    ("first", "message"),
    [
        ('{"type": "input.text", "text": "Hi"}', "Expected session.config, got: input.text"),
        ('{"text": "Hi"}', "Expected session.config, got: None"),
        ("not json at all", "Invalid JSON message"),
        ('"a string"', "WebSocket messages must be JSON objects"),
        ('{"type": "session.config", "stream_audio": true}', "Invalid session config: "),
        ('{"type": "session.config", "split_granularity": "paragraph"}', "Invalid session config: "),
        ('{"type": "session.config", "model": "no/such-model"}', "The model `no/such-model` does not exist."),
        (json.dumps({"type": "session.config", "ref_audio": "z" * (4 * 1024 * 1024)}), "WebSocket message too large"),
        ('{"type": "session.config", "instructions": "\\ud83d"}', "The field 'instructions' is not valid Unicode"),
        ("[" * 100_000 + "]" * 100_000, "Invalid JSON message"),  # too deep: invalid JSON, not an internal error
    ],
)
def test_bad_first_message_ends_the_connection(engine_url: str, first: str, message: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.ws.send(first)
            error = await c.recv_json()
            assert error["type"] == "error" and error["message"].startswith(message), error
            assert await c.closed() is None  # as vLLM-Omni: the handler returns without a close frame

    run(scenario())


def test_stream_audio_config_rules(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", stream_audio=True, response_format="wav")
            error = await c.recv_json()
            assert "requires response_format='pcm'" in error["message"] and "Got response_format='wav'" in error["message"]

    run(scenario())


def test_binary_frame_from_client_ends_the_connection(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config")
            await c.ws.send(b"\x00\x01")
            error = await c.recv_json()
            assert error["type"] == "error" and "text frame" in error["message"]
            assert await c.closed() is None

    run(scenario())


def test_client_closing_mid_stream_leaves_the_engine_serving(engine_url: str) -> None:
    long_text = " ".join(["This sentence keeps the voice busy for a while, on purpose."] * 12)

    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True)
            await c.send(type="input.text", text=long_text)
            await c.send(type="input.done")
            assert (await c.recv_json())["type"] == "audio.start"
            assert isinstance(await c.recv(), bytes)
        # The abandoned unit is aborted; a new session is served at once.
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True)
            await c.send(type="input.text", text="Next client.")
            await c.send(type="input.done")
            (_, pcm, done), = units_of(await c.until("session.done"))
            assert done["error"] is False
            assert_speech(pcm)

    run(scenario())


def test_word_timestamps_need_a_forced_aligner(engine_url: str) -> None:
    async def scenario() -> None:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True, word_timestamps=True)
            await c.send(type="input.text", text="Hi.")
            await c.send(type="input.done")
            frames = await c.until("session.done")
            assert frames[0]["type"] == "error" and "--forced-aligner" in frames[0]["message"]
            assert frames[1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 1}

    run(scenario())


# ---------------------------------------------------------------------------------------------------------
# Timeouts: the same handler class, with short timeouts, on an in-process server
@pytest.fixture(scope="module")
def short_timeout_url() -> Iterator[str]:
    handler = SpeechStreamHandler(config_timeout=0.4, idle_timeout=0.6)
    app = FastAPI()
    app.add_api_websocket_route(SPEECH_STREAM_PATH, handler.handle)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        threading.Event().wait(0.05)
    assert server.started, "the short-timeout server did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_config_timeout(short_timeout_url: str) -> None:
    async def scenario() -> None:
        async with session(short_timeout_url) as c:
            assert await c.recv_json() == {"type": "error", "message": "Timeout waiting for session.config"}
            assert await c.closed() is None

    run(scenario())


def test_idle_timeout(short_timeout_url: str) -> None:
    async def scenario() -> None:
        async with session(short_timeout_url) as c:
            await c.send(type="session.config")
            await c.send(type="input.text", text="")
            assert await c.recv_json() == {"type": "error", "message": "Idle timeout: no message received"}
            assert await c.closed() is None

    run(scenario())


def test_timeouts_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_TIMEOUT_ENV, raising=False)
    monkeypatch.delenv(IDLE_TIMEOUT_ENV, raising=False)
    default = SpeechStreamHandler.from_env()
    assert (default.config_timeout, default.idle_timeout) == (10.0, 30.0)
    monkeypatch.setenv(CONFIG_TIMEOUT_ENV, "1.5")
    monkeypatch.setenv(IDLE_TIMEOUT_ENV, "2")
    configured = SpeechStreamHandler.from_env()
    assert (configured.config_timeout, configured.idle_timeout) == (1.5, 2.0)
    monkeypatch.setenv(IDLE_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match=IDLE_TIMEOUT_ENV):
        SpeechStreamHandler.from_env()
    monkeypatch.setenv(IDLE_TIMEOUT_ENV, "-1")
    with pytest.raises(ValueError, match="positive"):
        SpeechStreamHandler.from_env()


# ---------------------------------------------------------------------------------------------------------
# REST
def test_voices(engine_url: str) -> None:
    response = httpx.get(f"{engine_url}/v1/audio/voices", timeout=10)
    assert response.status_code == 200
    body = response.json()
    # The presets, then what this worker's earlier tests uploaded to the shared engine (their names, lower-cased).
    uploaded = [v["name"] if isinstance(v, dict) else v for v in body["uploaded_voices"]]
    assert body["voices"][:len(QWEN3_TTS_SPEAKERS) + 2] == ["joe", *QWEN3_TTS_SPEAKERS, "default"]
    assert len(body["voices"]) == len(QWEN3_TTS_SPEAKERS) + 2 + len(uploaded)


def test_rest_wav_and_pcm(engine_url: str) -> None:
    with httpx.Client(base_url=engine_url, timeout=60) as http:
        wav = http.post("/v1/audio/speech", json={"input": "Hello from the offline engine.", "voice": "joe"})
        assert wav.status_code == 200 and wav.headers["content-type"] == "audio/wav"
        pcm_in_wav = read_wav(wav.content)
        assert_speech(pcm_in_wav)
        pcm = http.post("/v1/audio/speech", json={"input": "Hello from the offline engine.", "response_format": "pcm",
                                                   "language": "English", "model": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"})
        assert pcm.status_code == 200 and pcm.headers["content-type"] == "audio/pcm"
        assert_speech(pcm.content)
        # Neural synthesis is not bit-exact run to run, but the same text has about the same length of speech.
        # (Not of audio: when another listener is active, the engine cuts a first piece of a few words, and
        # the pause between pieces differs from the one after a clause: 0.78x once under load.)
        assert 0.8 < voiced_seconds(pcm.content) / voiced_seconds(pcm_in_wav) < 1.25
        slow = http.post("/v1/audio/speech", json={"input": "Hello from the offline engine.", "response_format": "pcm",
                                                    "speed": 0.5})
        assert voiced_seconds(slow.content) > 1.3 * voiced_seconds(pcm.content)  # half speed: longer phonemes


def test_rest_raw_audio_streaming(engine_url: str) -> None:
    body = {"input": "Streaming works, chunk by chunk. Second sentence here.", "stream": True, "stream_format": "audio"}
    with httpx.Client(base_url=engine_url, timeout=60) as http:
        with http.stream("POST", "/v1/audio/speech", json={**body, "response_format": "pcm"}) as response:
            assert response.status_code == 200 and response.headers["content-type"] == "audio/pcm"
            chunks = [c for c in response.iter_raw() if c]
        assert len(chunks) >= 2
        assert_speech(b"".join(chunks))
        with http.stream("POST", "/v1/audio/speech", json={**body, "response_format": "wav"}) as response:
            assert response.headers["content-type"] == "audio/wav"
            data = response.read()
        assert data[:4] == b"RIFF" and data[4:8] == b"\xff\xff\xff\xff"  # length unknown while streaming
        assert data[36:40] == b"data" and int.from_bytes(data[24:28], "little") == 24_000
        assert_speech(data[44:])


def test_rest_sse_streaming(engine_url: str) -> None:
    with httpx.Client(base_url=engine_url, timeout=60) as http:
        response = http.post("/v1/audio/speech", json={"input": "Events, one by one.", "stream": True,
                                                       "response_format": "pcm"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = [block for block in response.text.split("\n\n") if block.strip()]
    payloads = []
    for block in events:
        name, data = block.split("\n", 1)
        payload = json.loads(data.removeprefix("data: "))
        assert name == f"event: {payload['type']}"
        payloads.append(payload)
    assert payloads[-1] == {"type": "speech.audio.done"}
    deltas = payloads[:-1]
    assert deltas and all(p["type"] == "speech.audio.delta" and p["response_format"] == "pcm" for p in deltas)
    assert_speech(b"".join(base64.b64decode(p["audio"]) for p in deltas))


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"input": "   "}, 400, "Input text cannot be empty"),
        ({"input": "\u200b\u200b"}, 400, "Input text cannot be empty"),
        ({"input": "\u200b", "stream": True, "response_format": "pcm"}, 400, "Input text cannot be empty"),
        ({"input": "a\x00b"}, 400, "Input text contains a NUL character (U+0000) at index 1; remove it"),
        ({"input": "a\x00b", "stream_format": "audio", "response_format": "pcm"}, 400, "NUL character"),
        ({"input": "Hi", "voice": "Nobody"}, 400, f"Invalid voice 'nobody'. Supported: {SUPPORTED_VOICES}"),
        ({"input": "Hi", "language": "klingon"}, 400, f"Invalid language 'Klingon'. Supported: {SUPPORTED_LANGUAGES}"),
        ({"input": "Hi", "task_type": "Base"}, 400, "Base task requires 'ref_audio' or 'speaker_embedding' for voice cloning"),
        ({"input": "Hi", "task_type": "Base", "model": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"}, 400,
         "Qwen3-TTS CustomVoice checkpoint does not support task_type='Base'. Use task_type='CustomVoice' or load "
         "the matching Base checkpoint."),
        ({"input": "Hi", "model": "other/model"}, 404, "The model `other/model` does not exist."),
        ({"input": "Hi", "stream": True, "response_format": "mp3"}, 400,
         "Streaming (stream=true, stream_format='audio', or stream_format='sse') requires response_format='pcm' or 'wav'"),
        ({"input": "Hi", "stream": True, "stream_format": "audio", "response_format": "pcm", "speed": 2.0}, 400,
         "Streaming is not supported with speed adjustment"),
        ({"input": "Hi", "response_format": "aiff"}, 400, "response_format"),
        ({"text": "Hi"}, 400, "input"),
        ({"input": "Hi. " * (SPEECH_INPUT_MAX_CHARS // 4 + 1)}, 400,
         f"input\n  String should have at most {SPEECH_INPUT_MAX_CHARS} characters"),
    ],
)
def test_rest_errors(engine_url: str, body: dict[str, Any], status: int, message: str) -> None:
    response = httpx.post(f"{engine_url}/v1/audio/speech", json=body, timeout=30)
    assert response.status_code == status
    error = response.json()["error"]
    assert message in error["message"] and error["code"] == status and set(error) >= {"message", "type", "param", "code"}


def test_rest_invalid_json_body(engine_url: str) -> None:
    response = httpx.post(f"{engine_url}/v1/audio/speech", content=b"{oops", timeout=30,
                          headers={"content-type": "application/json"})
    assert response.status_code == 400 and "Invalid JSON" in response.json()["error"]["message"]


def test_concurrent_sessions_each_get_their_audio(engine_url: str) -> None:
    async def speak(text: str) -> list[tuple[dict[str, Any], bytes, dict[str, Any]]]:
        async with session(engine_url) as c:
            await c.send(type="session.config", response_format="pcm", stream_audio=True, split_granularity="sentence")
            await c.send(type="input.text", text=text)
            await c.send(type="input.done")
            return units_of(await c.until("session.done"))

    async def scenario() -> None:
        first, second = await asyncio.gather(
            speak("The first client talks about the weather. It is sunny."),
            speak("The second client reads a recipe. Add salt, then stir."),
        )
        assert [s["sentence_text"] for s, _, _ in first] == ["The first client talks about the weather.", "It is sunny."]
        assert [s["sentence_text"] for s, _, _ in second] == ["The second client reads a recipe.", "Add salt, then stir."]
        for _, pcm, done in first + second:
            assert done["error"] is False
            assert_speech(pcm)

    run(scenario())


# ---------------------------------------------------------------------------------------------------------
# Work nobody waits for: an in-process engine, so the voice's own counters can be read
INPROC: dict[str, VoiceEngine] = {}  # the in-process engine's voice (app.state.voice), set by inproc_url


def inproc_voice() -> VoiceEngine:
    return INPROC["voice"]


@pytest.fixture(scope="module")
def inproc_url() -> Iterator[str]:
    from offline.server import create_app

    port = free_port()
    app = create_app()
    INPROC["voice"] = app.state.voice
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        threading.Event().wait(0.05)
    assert server.started, "the in-process engine did not start"
    url = f"http://127.0.0.1:{port}"
    httpx.post(f"{url}/v1/audio/speech", json={"input": "Warm up."}, timeout=120).raise_for_status()  # voice loaded
    yield url
    server.should_exit = True
    thread.join(timeout=10)


@contextmanager
def voice_held() -> Iterator[None]:
    """Keep the voice's one synthesis thread busy for the block: whatever is asked meanwhile waits in its queue."""
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        release.wait(120)

    held = inproc_voice()._synthesis.submit(hold)
    assert holding.wait(60), "the synthesis thread did not pick up the hold"
    try:
        yield
    finally:
        release.set()
        held.result(timeout=60)


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded) for something the engine does after a client goes; fail naming it if it never does."""
    for _ in range(1500):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the engine never got there: {what} (voice stats: {inproc_voice().stats()})")


def open_streams(n: int) -> Callable[[], bool]:
    return lambda: inproc_voice().stats().open_streams == n


LONG_TEXT = " ".join(f"Sentence number {i} keeps the voice busy for a while." for i in range(40))


async def speak_once(url: str, text: str) -> bytes:
    async with session(url) as c:
        await c.send(type="session.config", response_format="pcm", stream_audio=True)
        await c.send(type="input.text", text=text)
        await c.send(type="input.done")
        (_, pcm, done), = units_of(await c.until("session.done"))
        assert done["error"] is False
        return pcm


def test_dropped_websocket_clients_leave_no_queued_synthesis(inproc_url: str) -> None:
    async def scenario() -> None:
        with voice_held():
            clients = []
            for stream_audio in (True, False, True, False, True):  # streamed PCM and whole files alike
                ws = await connect(ws_url(inproc_url), max_size=None, open_timeout=10, close_timeout=2)
                c = Client(ws)
                fmt = "pcm" if stream_audio else "wav"
                await c.send(type="session.config", response_format=fmt, stream_audio=stream_audio)
                await c.send(type="input.text", text=LONG_TEXT)
                await c.send(type="input.done")
                assert (await c.recv_json())["type"] == "audio.start"
                clients.append(ws)
            await until(open_streams(len(clients)), "every session waiting for its first chunk")
            pieces = inproc_voice().stats().pieces
            for ws in clients:
                await ws.close()
            await until(open_streams(0), "the dropped sessions' streams closed")
        # The next client is served, and nothing of the dropped sessions was synthesized in between.
        assert_speech(await speak_once(inproc_url, "Next client."))
        assert inproc_voice().stats().pieces - pieces == 1, "only the new client's one sentence"

    run(scenario())


def post_and_keep_open(url: str, body: dict[str, Any]) -> socket.socket:
    """A raw HTTP request whose client can then vanish without reading the answer."""
    port = int(url.rsplit(":", 1)[1])
    data = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return sock


@pytest.mark.parametrize(
    "extra",
    [{}, {"response_format": "flac"}, {"stream_format": "audio", "response_format": "pcm"},
     {"stream": True, "response_format": "wav"}],
    ids=["file", "flac-file", "raw-stream", "sse"],
)
def test_abandoned_rest_request_leaves_no_queued_synthesis(inproc_url: str, extra: dict[str, Any]) -> None:
    async def scenario() -> None:
        with voice_held():
            sock = post_and_keep_open(inproc_url, {"input": LONG_TEXT, **extra})
            await until(open_streams(1), "the request waiting for its first chunk")
            pieces = inproc_voice().stats().pieces
            sock.close()
            await until(open_streams(0), "the abandoned request's stream closed")
        assert_speech(await speak_once(inproc_url, "Next client."))
        assert inproc_voice().stats().pieces - pieces == 1, "only the new client's one sentence"

    run(scenario())


def test_abandoned_rest_request_stops_at_the_next_chunk(inproc_url: str) -> None:
    async def scenario() -> None:
        pieces = inproc_voice().stats().pieces
        sock = post_and_keep_open(inproc_url, {"input": LONG_TEXT})
        await until(lambda: inproc_voice().stats().pieces > pieces, "the long request synthesizing")
        pieces = inproc_voice().stats().pieces
        sock.close()
        await until(open_streams(0), "the abandoned request's stream closed")
        assert_speech(await speak_once(inproc_url, "Next client."))
        # The sentence being synthesized when the client went, maybe the one just queued, and the new client's.
        assert inproc_voice().stats().pieces - pieces <= 3, "the abandoned request went on synthesizing"

    run(scenario())
