"""The offline engine's listen routes against the real server (`python -m offline`), with plain clients.

The speech is the engine's own: its Piper voice speaks a sentence (`POST /v1/audio/speech`, seeded), and its
recognizer hears it back over `/v1/realtime` and `POST /v1/audio/transcriptions`. Errors are checked against
vLLM's texts and codes (protocol.listen).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect

from offline.decoding import decode_mono
from offline.listen.partials import StablePrefix
from offline.listen.recognizer import pcm16
from hearing.vad import WINDOW_S
from offline.listen.vad import speech_regions
from protocol.audio import wav_bytes
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from protocol.listen import (
    DEFAULT_LISTEN_MODEL,
    MODEL_NOT_VALIDATED_TEXT,
    REALTIME_PATH,
    TRANSCRIPTIONS_PATH,
    model_not_found_text,
)
from services.listen.wer import word_error_rate

SENTENCE = "Please call me back when you get home tonight."
SECOND = "The children played in the garden after school."
RECV_TIMEOUT_S = 20.0
RATE = 16_000


def speak(url: str, text: str) -> bytes:
    """The engine's voice saying `text`, as a WAV file (seeded: the same bytes every time)."""
    r = httpx.post(f"{url}/v1/audio/speech", json={"input": text, "voice": "joe", "seed": 7}, timeout=60, trust_env=False)
    assert r.status_code == 200, r.text
    return r.content


@pytest.fixture(scope="module")
def sentence_wav(engine_url: str) -> bytes:
    return speak(engine_url, SENTENCE)


@pytest.fixture(scope="module")
def two_sentences_wav(engine_url: str) -> bytes:
    """Two sentences with a second of silence between them, as 16 kHz WAV."""
    a, _ = decode_mono(speak(engine_url, SENTENCE))
    b, _ = decode_mono(speak(engine_url, SECOND))
    gap = np.zeros(RATE, dtype=np.float32)
    return wav_bytes(pcm16(np.concatenate([gap[:4000], a, gap, b, gap[:4000]])), RATE)


def pcm_of(wav: bytes) -> bytes:
    samples, _ = decode_mono(wav)
    return pcm16(samples)


# ---------------------------------------------------------------------------------------------------------
# /v1/realtime
class Client:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, **message: Any) -> None:
        await self.ws.send(json.dumps(message))

    async def recv(self) -> dict[str, Any]:
        return json.loads(await asyncio.wait_for(self.ws.recv(), RECV_TIMEOUT_S))

    async def append(self, pcm: bytes) -> None:
        await self.send(type="input_audio_buffer.append", audio=base64.b64encode(pcm).decode())

    async def until_done(self) -> list[dict[str, Any]]:
        events = []
        while not events or events[-1]["type"] not in ("transcription.done", "error"):
            events.append(await self.recv())
        return events


@asynccontextmanager
async def realtime(url: str, *, validated: bool = False) -> AsyncIterator[Client]:
    async with connect(url.replace("http://", "ws://", 1) + REALTIME_PATH, open_timeout=10, close_timeout=2) as ws:
        client = Client(ws)
        created = await client.recv()
        assert created["type"] == "session.created" and created["id"].startswith("sess-")
        assert isinstance(created["created"], int)
        if validated:
            await client.send(type="session.update", model=DEFAULT_LISTEN_MODEL)
        yield client


async def utterance(client: Client, pcm: bytes, *, chunk_s: float = 0.1, speedup: float = 5.0) -> list[dict[str, Any]]:
    """One utterance: commit, the audio in chunks (faster than real time), the final commit; every event after."""
    await client.send(type="input_audio_buffer.commit")
    step = int(chunk_s * RATE) * 2
    for at in range(0, len(pcm), step):
        await client.append(pcm[at:at + step])
        await asyncio.sleep(chunk_s / speedup)
    await client.send(type="input_audio_buffer.commit", final=True)
    return await client.until_done()


def test_a_spoken_sentence_streams_deltas_then_the_text(engine_url: str, sentence_wav: bytes) -> None:
    async def go() -> list[dict[str, Any]]:
        async with realtime(engine_url, validated=True) as client:
            return await utterance(client, pcm_of(sentence_wav))

    events = asyncio.run(go())
    *deltas, done = events
    assert done["type"] == "transcription.done", events
    assert deltas and all(e["type"] == "transcription.delta" and e["delta"] for e in deltas)
    assert len(deltas) >= 2  # words arrive while the audio does, not all at the end (Whisper decodes every 0.5 s)
    assert word_error_rate(SENTENCE, done["text"]) <= 0.2, done["text"]
    assert len("".join(e["delta"] for e in deltas).split()) >= len(done["text"].split()) - 2  # captions keep up
    usage = done["usage"]
    assert usage["completion_tokens"] == len(done["text"].split())
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] and usage["prompt_tokens"] > 0


def test_the_next_utterance_on_the_same_socket_and_silence_gives_an_empty_text(engine_url: str,
                                                                               sentence_wav: bytes) -> None:
    async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with realtime(engine_url, validated=True) as client:
            silent = await utterance(client, bytes(RATE * 2 * 2), speedup=20)  # two seconds of silence
            spoken = await utterance(client, pcm_of(sentence_wav), speedup=20)
            return silent, spoken

    silent, spoken = asyncio.run(go())
    assert silent == [silent[-1]] and silent[-1]["type"] == "transcription.done" and silent[-1]["text"] == ""
    assert spoken[-1]["type"] == "transcription.done" and word_error_rate(SENTENCE, spoken[-1]["text"]) <= 0.2


def test_a_client_that_vanishes_mid_stream_leaves_the_recognizer_usable(engine_url: str, sentence_wav: bytes) -> None:
    pcm = pcm_of(sentence_wav)

    async def vanish() -> None:
        async with realtime(engine_url, validated=True) as client:
            await client.send(type="input_audio_buffer.commit")
            for at in range(0, len(pcm) // 2, 3200):
                await client.append(pcm[at:at + 3200])
            await asyncio.sleep(0.3)
            client.ws.transport.abort()  # gone mid-utterance, without a close frame

    async def listen() -> list[dict[str, Any]]:
        async with realtime(engine_url, validated=True) as client:
            return await utterance(client, pcm, speedup=20)

    for _ in range(2):  # the worker it held goes back to the pool, its open utterance dropped
        with contextlib.suppress(Exception):
            asyncio.run(vanish())
        done = asyncio.run(listen())[-1]
        assert done["type"] == "transcription.done" and word_error_rate(SENTENCE, done["text"]) <= 0.2, done


def test_errors_carry_vllm_texts_and_codes(engine_url: str) -> None:
    async def go() -> list[dict[str, Any]]:
        async with realtime(engine_url) as c:
            answers = []
            for message in (
                {"type": "input_audio_buffer.commit"},  # before session.update
                "{not json",
                {"type": "session.update"},
                {"type": "session.update", "model": "someone/else"},
                {"type": "input_audio_buffer.commit"},  # still not validated
                {"type": "no.such.event"},
                {"type": "input_audio_buffer.append", "audio": "!!!not base64"},
                {"type": "input_audio_buffer.append", "audio": base64.b64encode(b"\x01\x02\x03").decode()},
                {"type": "input_audio_buffer.append", "audio": ""},
                {"type": "input_audio_buffer.append"},
                ["a", "list"],
            ):
                await c.ws.send(message if isinstance(message, str) else json.dumps(message))
                answers.append(await c.recv())
            return answers

    answers = asyncio.run(go())
    assert all(a["type"] == "error" for a in answers)
    assert [a["code"] for a in answers] == [
        "model_not_validated", "invalid_json", "invalid_event", "model_not_found", "model_not_validated",
        "unknown_event", "invalid_audio", "invalid_audio", "invalid_audio", "processing_error", "processing_error"]
    assert answers[0]["error"] == MODEL_NOT_VALIDATED_TEXT
    assert answers[1]["error"] == "Invalid JSON"
    assert answers[2]["error"] == "Missing required field: model"
    assert answers[3]["error"] == model_not_found_text("someone/else")
    assert answers[5]["error"] == "Unknown event type: no.such.event"
    assert answers[6]["error"] == "Invalid audio data"
    assert "audio" in answers[9]["error"] and "Field required" in answers[9]["error"]


def test_audio_waiting_to_be_decoded_is_bounded(engine_url: str) -> None:
    async def go() -> list[dict[str, Any]]:
        async with realtime(engine_url, validated=True) as client:
            nine_mb = bytes(9 * 1024 * 1024)
            for _ in range(3):  # no commit: nothing is decoded, 27 MB would wait
                await client.append(nine_mb)
            return [await client.recv()]

    (answer,) = asyncio.run(go())
    assert answer["code"] == "invalid_audio" and answer["error"].startswith("Maximum file size exceeded")
    assert TRANSCRIPTION_FILE_MAX_BYTES < 27 * 1024 * 1024


# ---------------------------------------------------------------------------------------------------------
# POST /v1/audio/transcriptions
def transcribe(url: str, data: bytes, **fields: str) -> httpx.Response:
    return httpx.post(url + TRANSCRIPTIONS_PATH, files={"file": ("speech.wav", data, "audio/wav")}, data=fields,
                      timeout=60, trust_env=False)


def test_a_file_in_each_format(engine_url: str, two_sentences_wav: bytes) -> None:
    duration = len(pcm_of(two_sentences_wav)) / (RATE * 2)
    r = transcribe(engine_url, two_sentences_wav, model=DEFAULT_LISTEN_MODEL)
    assert r.status_code == 200 and "Whisper tiny.en" in r.headers["X-Offline-Preview"]
    body = r.json()
    assert set(body) == {"text", "usage"} and body["usage"] == {"type": "duration", "seconds": int(np.ceil(duration))}
    assert word_error_rate(f"{SENTENCE} {SECOND}", body["text"]) <= 0.2, body["text"]

    verbose = transcribe(engine_url, two_sentences_wav, response_format="verbose_json").json()
    assert verbose["task"] == "transcribe" and verbose["language"] == "en"
    assert abs(float(verbose["duration"]) - duration) < 0.05
    segments = verbose["segments"]
    assert [s["id"] for s in segments] == [0, 1], segments  # one per sentence: the second of silence splits them
    assert 0 <= segments[0]["start"] < segments[0]["end"] < segments[1]["start"] < segments[1]["end"] <= duration
    assert segments[1]["start"] - segments[0]["end"] > 0.4  # the gap is silence, not in either segment
    assert word_error_rate(SENTENCE, segments[0]["text"]) <= 0.3 and word_error_rate(SECOND, segments[1]["text"]) <= 0.3
    assert verbose["text"] == " ".join(s["text"] for s in segments) == body["text"]

    text = transcribe(engine_url, two_sentences_wav, response_format="text")
    assert text.headers["content-type"].startswith("text/plain") and text.text == body["text"] + "\n"
    srt = transcribe(engine_url, two_sentences_wav, response_format="srt").text
    cues = srt.strip().split("\n\n")
    assert [c.splitlines()[0] for c in cues] == ["1", "2"] and " --> " in cues[0].splitlines()[1]
    assert cues[0].splitlines()[1].startswith("00:00:00,") and cues[1].splitlines()[2] == segments[1]["text"]
    vtt = transcribe(engine_url, two_sentences_wav, response_format="vtt").text
    assert vtt.startswith("WEBVTT\n\n00:00:00.") and segments[0]["text"] in vtt


def test_silence_and_noise_have_no_speech(engine_url: str) -> None:
    rng = np.random.default_rng(3)
    for pcm in (bytes(RATE * 2 * 3), (rng.normal(0, 300, RATE * 3)).astype("<i2").tobytes()):
        r = transcribe(engine_url, wav_bytes(pcm, RATE), response_format="verbose_json")
        assert r.status_code == 200 and r.json()["text"] == "" and r.json()["segments"] == []


def test_file_errors_are_vllms(engine_url: str, sentence_wav: bytes) -> None:
    r = transcribe(engine_url, b"this is not audio at all")
    assert r.status_code == 400 and r.json()["error"]["message"] == "Invalid or unsupported audio file."
    r = httpx.post(engine_url + TRANSCRIPTIONS_PATH, data={"model": DEFAULT_LISTEN_MODEL}, timeout=30, trust_env=False)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("1 validation error:")
    assert r.json()["error"]["param"] == "body.file"
    r = transcribe(engine_url, sentence_wav, model="someone/else")
    assert r.status_code == 404 and r.json()["error"] == {
        "message": model_not_found_text("someone/else"), "type": "NotFoundError", "param": "model", "code": 404}
    r = transcribe(engine_url, sentence_wav, language="de")
    assert r.status_code == 400 and "English only" in r.json()["error"]["message"]
    r = transcribe(engine_url, sentence_wav, response_format="docx")
    assert r.status_code == 400 and "response_format" in r.json()["error"]["message"]
    r = transcribe(engine_url, bytes(TRANSCRIPTION_FILE_MAX_BYTES + 1))
    assert r.status_code == 400 and r.json()["error"]["message"] == "Maximum file size exceeded"


def test_the_engine_answers_while_it_recognizes(engine_url: str, two_sentences_wav: bytes) -> None:
    samples, _ = decode_mono(two_sentences_wav)
    long_wav = wav_bytes(pcm16(np.tile(samples, 4)), RATE)  # ~25 s of speech: seconds of CPU work
    outcome: dict[str, httpx.Response] = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("r", transcribe(engine_url, long_wav)))
    worker.start()
    time.sleep(0.3)
    answered_during = 0  # /health answers that came back while the recognition was still running
    while worker.is_alive():
        assert httpx.get(engine_url + "/health", timeout=30, trust_env=False).status_code == 200
        answered_during += worker.is_alive()
        time.sleep(0.05)
    worker.join()
    assert outcome["r"].status_code == 200 and len(outcome["r"].json()["text"].split()) > 30
    # Recognition runs off the event loop: the engine keeps answering while it works (a blocked loop would
    # answer once, after it). How fast it answers is a benchmark's question, not a test's.
    assert answered_during >= 3, f"/health answered {answered_during} times while a file was recognized"


def test_the_models_list_labels_the_recognizer_a_preview(engine_url: str) -> None:
    cards = httpx.get(engine_url + "/v1/models", timeout=10, trust_env=False).json()["data"]
    card = next(c for c in cards if c["id"] == DEFAULT_LISTEN_MODEL)
    assert card["owned_by"] == "omni-studio-offline" and "Whisper tiny.en" in card["preview"] and "WER" in card["preview"]


# ---------------------------------------------------------------------------------------------------------
# The pure parts: speech regions from VAD scores, and which words a delta may carry
def test_speech_regions_pad_merge_and_drop() -> None:
    def probs(*runs: tuple[float, float]) -> np.ndarray:
        return np.concatenate([np.full(int(round(seconds / WINDOW_S)), p) for seconds, p in runs])

    # 1 s silence, 1 s speech, 1 s silence, 1 s speech, 0.2 s silence
    p = probs((1.0, 0.0), (1.0, 0.9), (1.0, 0.1), (1.0, 0.9), (0.2, 0.0))
    regions = speech_regions(p, len(p) * WINDOW_S)
    assert len(regions) == 2
    assert regions[0][0] == pytest.approx(0.8, abs=0.05) and regions[0][1] == pytest.approx(2.2, abs=0.05)
    assert regions[1][1] == pytest.approx(len(p) * WINDOW_S, abs=0.01)  # clamped to the audio's end
    assert speech_regions(probs((0.3, 0.0), (0.1, 0.9), (1.0, 0.0)), 1.4) == []  # a click is not speech
    short_gap = probs((1.0, 0.9), (0.3, 0.2), (1.0, 0.9))  # a pause shorter than MIN_SILENCE_S joins them
    assert len(speech_regions(short_gap, len(short_gap) * WINDOW_S)) == 1
    assert speech_regions(np.zeros(50), 1.6) == []


def test_deltas_never_take_back_a_word() -> None:
    prefix = StablePrefix()
    sent = [prefix.update(h.split()) for h in ("the", "the qu", "the quick", "the quick brown", "the quick brow fox")]
    assert sent == [[], ["the"], [], ["quick"], []]
    assert prefix.finish("the quick brown fox".split()) == ["brown", "fox"]
    revised = StablePrefix()
    revised.update("her and".split())
    assert revised.update("her and luck".split()) == ["her", "and"]
    assert revised.update("turn left at the".split()) == []  # revised: what went out stays out
    assert revised.update("turn left at the next".split()) == ["at", "the"]  # and captions go on from there
    assert revised.finish("turn left at the next corner".split()) == ["next", "corner"]
