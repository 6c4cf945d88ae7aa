"""SpeechSession: unit tests over the in-memory MockTransport, then integration against the real engine."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from protocol.errors import BackendUnreachable, InvalidInput, ServerError, StreamError
from protocol.limits import MAX_INPUT_TEXT_MESSAGE_BYTES
from protocol.speech import QWEN3_TTS_LANGUAGES, AudioDone, AudioStart, ErrorEvent, SessionDone
from services import speech
from services.playback import Playback
from services.speech import (
    MockPeer,
    MockTransport,
    PcmChunk,
    SpeechClient,
    omni_client,
    speech_config,
)
from services.speech.audio import read_wav
from services.speech.text import message_bytes, split_for_input

RATE = 24_000


def tone(seconds: float, freq: float = 440.0, rate: int = RATE) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * freq * t) * 8000).astype("<i2").tobytes()


def fake_server(*, voices=("joe",), chunk_s: float = 0.05, chunks_per_unit: int = 3, cut_after_chunks: int | None = None,
                rate: int = RATE, limit: int = MAX_INPUT_TEXT_MESSAGE_BYTES):
    """A scripted server following vLLM-Omni's order of messages (one unit per input.done)."""

    async def handler(peer: MockPeer) -> None:
        config = None
        buf = ""
        utt = 0
        sent = 0
        while (raw := await peer.receive()) is not None:
            if len(raw) > limit:
                await peer.send(json.dumps({"type": "error", "message": "input.text message too large"}))
                continue
            msg = json.loads(raw)
            if msg["type"] == "session.config":
                config = msg
            elif config is None:
                await peer.send(json.dumps({"type": "error", "message": f"Expected session.config, got: {msg['type']}"}))
                await peer.close()
                return
            elif msg["type"] == "input.text":
                buf += msg["text"]
            elif msg["type"] == "input.done":
                start = {"type": "audio.start", "utterance_index": utt, "sentence_index": 0, "sentence_text": buf,
                         "format": "pcm", "sample_rate": rate, "channels": 1}
                if config.get("voice") not in voices:
                    await peer.send(json.dumps(start))
                    await peer.send(json.dumps({"type": "error", "message": f"Generation failed: Invalid voice '{config.get('voice')}'. Supported: {', '.join(voices)}"}))
                    await peer.send(json.dumps({"type": "audio.done", "utterance_index": utt, "sentence_index": 0, "total_bytes": 0, "error": True}))
                else:
                    await peer.send(json.dumps(start))
                    total = 0
                    for _ in range(chunks_per_unit):
                        if cut_after_chunks is not None and sent >= cut_after_chunks:
                            await peer.cut()
                            return
                        pcm = tone(chunk_s, rate=rate)
                        total += len(pcm)
                        sent += 1
                        await peer.send(pcm)
                    await peer.send(json.dumps({"type": "audio.done", "utterance_index": utt, "sentence_index": 0, "total_bytes": total, "error": False}))
                await peer.send(json.dumps({"type": "session.done", "utterance_index": utt, "total_sentences": 1}))
                utt += 1
                buf = ""
            elif msg["type"] == "session.close":
                await peer.close()
                return

    return handler


def mock_client(handler, **kw) -> tuple[SpeechClient, list[MockTransport]]:
    made: list[MockTransport] = []

    def factory() -> MockTransport:
        t = MockTransport(handler, **kw)
        made.append(t)
        return t

    class Catalog:
        def voices(self) -> list[str]:
            return ["joe"]

        def languages(self) -> list[str]:
            return ["Auto", "English"]

    return SpeechClient(factory, Catalog(), target="mock://speech"), made


def sent_messages(t: MockTransport) -> list[dict]:
    return [json.loads(m) for m in t.peer.received]


# ---------------------------------------------------------------------------------------------------
# text splitting
def test_short_text_is_one_piece() -> None:
    assert split_for_input("Hello there.") == ["Hello there."]


def test_long_text_splits_under_the_limit_at_sentence_ends_and_joins_back() -> None:
    sentence = "Streaming speech starts while the model is still talking, üñíçødé and “quotes” included. "
    text = sentence * 4000  # ~ 370 KB
    pieces = split_for_input(text)
    assert len(pieces) >= 3
    assert "".join(pieces) == text
    for p in pieces:
        assert message_bytes(p) <= MAX_INPUT_TEXT_MESSAGE_BYTES
        assert len(json.dumps({"type": "input.text", "text": p}, ensure_ascii=False, separators=(",", ":")).encode()) == message_bytes(p)
    assert all(p.endswith(". ") for p in pieces[:-1])  # cut after a sentence end


def test_split_counts_json_escapes_and_cuts_at_whitespace_or_anywhere() -> None:
    text = ('"\\' * 20_000) + " " + "x" * 300_000  # escapes double the size; a 300k run has no boundary
    pieces = split_for_input(text, limit=64 * 1024)
    assert "".join(pieces) == text
    assert all(message_bytes(p) <= 64 * 1024 for p in pieces)
    assert len(pieces) >= 6


# ---------------------------------------------------------------------------------------------------
# the session over the mock transport
def test_speak_sends_config_text_done_and_yields_typed_events_with_stats() -> None:
    client, made = mock_client(fake_server())
    heard: list[PcmChunk] = []

    async def go():
        async with client.open(speech_config(voice="joe", language="English"), on_audio=heard.append) as s:
            events = [e async for e in s.speak("Hello there, studio.")]
            return s, events

    s, events = asyncio.run(go())
    msgs = sent_messages(made[0])
    assert msgs[0] == {"type": "session.config", "voice": "joe", "language": "English", "response_format": "pcm",
                       "speed": 1.0, "stream_audio": True, "split_granularity": "clause", "word_timestamps": False}
    assert msgs[1:] == [{"type": "input.text", "text": "Hello there, studio."}, {"type": "input.done"},
                        {"type": "session.close"}]
    kinds = [type(e) for e in events]
    assert kinds == [AudioStart, PcmChunk, PcmChunk, PcmChunk, AudioDone, SessionDone]
    st = s.stats
    assert (st.chunks, st.bytes, st.sentences, st.state, st.ttfa_from) == (3, 3 * 2400, 1, "done", "input.done")
    assert st.ttfa_ms is not None and st.ttfa_ms >= 0
    assert st.audio_seconds == pytest.approx(0.15)
    assert st.rtf is not None and st.rtf > 0
    assert [c.data for c in heard] == [e.data for e in events if isinstance(e, PcmChunk)]
    pcm, rate, ch = read_wav(s.wav())
    assert (rate, ch, len(pcm)) == (RATE, 1, 3 * 2400)


def test_empty_or_whitespace_text_is_refused_before_any_request() -> None:
    client, made = mock_client(fake_server())
    for text in ["", "   \n\t "]:
        with pytest.raises(InvalidInput, match="no text"):
            asyncio.run(client.say(None, text))
        with pytest.raises(InvalidInput):
            speech.SpeechRun(None, client, None, text)  # type: ignore[arg-type]
    assert made == []  # not even a transport was made


def test_long_text_goes_out_in_several_messages_under_the_limit() -> None:
    limit = 2048
    client, made = mock_client(fake_server(limit=limit))
    text = "One sentence of a long reading, spoken in parts. " * 200  # ~ 10 KB

    async def go():
        s = client.open(speech_config(voice="joe"))
        s.max_message_bytes = limit
        async with s:
            return await s.say(text)

    u = asyncio.run(go())
    assert u.ok, u.error
    texts = [m for m in sent_messages(made[0]) if m["type"] == "input.text"]
    assert len(texts) >= 5 and "".join(m["text"] for m in texts) == text
    assert u.stats.text_messages == len(texts)
    assert u.stats.ttfa_from == "first_text"  # the text did not go out in one message right before input.done


def test_feed_incrementally_like_an_llm() -> None:
    client, made = mock_client(fake_server())

    async def go():
        async with client.open(speech_config(voice="joe")) as s:
            for token in ["  ", "Hello", " there", ",", " friend", "."]:
                await s.feed(token)
            events = [e async for e in s.finish()]
            return s, events

    s, events = asyncio.run(go())
    texts = [m["text"] for m in sent_messages(made[0]) if m["type"] == "input.text"]
    assert texts == ["  Hello", " there", ",", " friend", "."]  # leading space waited for real text
    assert s.stats.ttfa_from == "first_text" and s.stats.state == "done"
    assert isinstance(events[-1], SessionDone)


def test_audio_is_consumed_while_text_is_still_fed() -> None:
    """A server that speaks each input.text as it arrives (clause mode): audio comes before input.done."""

    async def eager(peer: MockPeer) -> None:
        await peer.receive()  # config
        n = 0
        while (raw := await peer.receive()) is not None:
            msg = json.loads(raw)
            if msg["type"] == "input.text":
                await peer.send(json.dumps({"type": "audio.start", "sentence_index": n, "sample_rate": RATE}))
                await peer.send(tone(0.05))
                await peer.send(json.dumps({"type": "audio.done", "sentence_index": n, "total_bytes": 2400}))
                n += 1
            elif msg["type"] == "input.done":
                await peer.send(json.dumps({"type": "session.done", "total_sentences": n}))

    client, _ = mock_client(eager)

    async def go():
        async with client.open(speech_config(voice="joe")) as s:
            heard_before_done = asyncio.Event()
            got: list = []

            async def consume():
                async for e in s.events():
                    got.append(e)
                    if isinstance(e, PcmChunk):
                        heard_before_done.set()

            consumer = asyncio.create_task(consume())
            await s.feed("First clause, ")
            await asyncio.wait_for(heard_before_done.wait(), 5)  # audio while the "LLM" still writes
            await s.feed("second clause.")
            await s.end_input()
            await asyncio.wait_for(consumer, 5)
            return s, got

    s, got = asyncio.run(go())
    assert sum(isinstance(e, PcmChunk) for e in got) == 2 and isinstance(got[-1], SessionDone)
    assert s.stats.ttfa_from == "first_text" and s.stats.state == "done"


def test_finish_without_text_is_refused_and_sends_nothing() -> None:
    client, made = mock_client(fake_server())

    async def go():
        async with client.open(speech_config(voice="joe")) as s:
            await s.feed("   ")
            with pytest.raises(InvalidInput):
                async for _ in s.finish():
                    pass

    asyncio.run(go())
    assert [m["type"] for m in sent_messages(made[0])] == ["session.config", "session.close"]


def test_unknown_voice_shows_the_server_error_and_the_session_stays_usable() -> None:
    client, made = mock_client(fake_server())

    async def go():
        async with client.open(speech_config(voice="nobody")) as s:
            bad = await s.say("Hello.")
            await s.configure(speech_config(voice="joe"))
            good = await s.say("Hello again.")
            return bad, good

    bad, good = asyncio.run(go())
    assert isinstance(bad.error, ServerError) and "Invalid voice 'nobody'" in str(bad.error)
    assert bad.stats.state == "failed" and bad.pcm == b""
    assert good.ok and good.stats.chunks == 3 and good.stats.state == "done"
    assert len(made) == 1  # one connection for both utterances
    assert [m["type"] for m in sent_messages(made[0])].count("session.config") == 2


def test_error_events_are_yielded_as_typed_events() -> None:
    client, _ = mock_client(fake_server())

    async def go():
        async with client.open(speech_config(voice="nobody")) as s:
            return [e async for e in s.speak("Hi.")]

    events = asyncio.run(go())
    assert [type(e) for e in events] == [AudioStart, ErrorEvent, AudioDone, SessionDone]
    assert events[2].error is True


def test_stream_cut_mid_way_raises_stream_error_and_keeps_the_audio() -> None:
    client, _ = mock_client(fake_server(cut_after_chunks=2))

    async def go():
        s = client.open(speech_config(voice="joe"))
        got = []
        async with s:
            with pytest.raises(StreamError, match="cut") as info:
                async for e in s.speak("A sentence that will not finish."):
                    got.append(e)
        return s, got, info.value

    s, got, err = asyncio.run(go())
    assert sum(isinstance(e, PcmChunk) for e in got) == 2
    assert "4800 bytes" in str(err)  # says what was kept
    assert s.stats.state == "failed" and len(s.recording()) == 2 * 2400
    assert read_wav(s.wav())[0] == s.recording()
    u = asyncio.run(client.say(speech_config(voice="joe"), "Again, cut."))
    assert isinstance(u.error, StreamError) and len(u.pcm) == 2 * 2400  # Utterance keeps it too


def test_server_error_then_close_is_a_server_error_with_its_message() -> None:
    async def handler(peer: MockPeer) -> None:
        await peer.receive()
        await peer.send(json.dumps({"type": "error", "message": "Invalid session config: voice too long"}))
        await peer.close()

    client, _ = mock_client(handler)
    u = asyncio.run(client.say(speech_config(voice="joe"), "Hello."))
    assert isinstance(u.error, ServerError) and "Invalid session config: voice too long" in str(u.error)


def test_cancel_closes_the_stream_and_keeps_what_arrived() -> None:
    async def slow(peer: MockPeer) -> None:
        await peer.receive()
        await peer.receive()
        await peer.receive()
        await peer.send(json.dumps({"type": "audio.start", "sample_rate": RATE, "format": "pcm"}))
        for _ in range(1000):
            await peer.send(tone(0.02))
            await asyncio.sleep(0.01)

    client, made = mock_client(slow)

    async def go():
        s = client.open(speech_config(voice="joe"))
        async with s:
            n = 0
            async for e in s.speak("Talk for a long time."):
                n += isinstance(e, PcmChunk)
                if n == 3:
                    await s.cancel()
            return s

    s = asyncio.run(go())
    assert s.stats.state == "cancelled" and s.stats.chunks >= 3
    assert made[0].peer.closed_by_client


def test_sample_rate_comes_from_audio_start() -> None:
    client, _ = mock_client(fake_server(rate=16_000))
    u = asyncio.run(client.say(speech_config(voice="joe"), "Hi."))
    assert u.stats.sample_rate == 16_000 and u.stats.audio_seconds == pytest.approx(0.15)
    assert read_wav(u.wav())[1] == 16_000


def test_playback_forwards_and_resamples_to_the_track_rate() -> None:
    class Sink:
        def __init__(self):
            self.got = []
            self.cleared = 0

        def push(self, pcm):
            self.got.append(np.asarray(pcm))

        def clear(self):
            self.cleared += 1

    pb = Playback()
    pb.push(tone(0.1))
    assert pb.dropped_chunks == 1
    sink = Sink()
    pb.attach(sink)
    pb.start_utterance()
    pb.push(tone(0.1))
    for _ in range(10):
        pb.push(tone(0.1, rate=16_000), sample_rate=16_000)
    assert sink.cleared == 1 and sink.got[0].dtype == np.int16 and sink.got[0].size == 2400
    resampled = sum(g.size for g in sink.got[1:])
    assert abs(resampled - 10 * 2400) < 600  # 1 s at 16 kHz → about 1 s at 24 kHz (resampler delay)


def test_unreachable_backend_names_the_url() -> None:
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"
    client = omni_client(url)
    u = asyncio.run(client.say(speech_config(), "Hello."))
    assert isinstance(u.error, BackendUnreachable) and f"127.0.0.1:{url.rsplit(':', 1)[1]}" in str(u.error)
    with pytest.raises(BackendUnreachable, match=url):
        client.voices()


def test_speech_run_on_the_background_loop() -> None:
    from services.runtime import BackgroundLoop

    loop = BackgroundLoop("test-loop")
    try:
        client, _ = mock_client(fake_server(chunks_per_unit=5))
        run = speech.SpeechRun(loop, client, speech_config(voice="joe"), "Hello from the loop.")
        u = run.result(timeout=10)
        assert run.done and u.ok and run.stats().chunks == 5 and run.pcm() == u.pcm
    finally:
        loop.stop()


# ---------------------------------------------------------------------------------------------------
# integration: the real offline engine (python -m offline) over the real WebSocket
def _speech_energy(pcm: bytes) -> float:
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(x**2))) if x.size else 0.0


def test_engine_voices_and_languages(engine_url: str) -> None:
    client = omni_client(engine_url)
    voices = client.voices()
    assert voices and all(isinstance(v, str) for v in voices)
    assert client.languages() == QWEN3_TTS_LANGUAGES  # all accepted, spoken with the engine's English voice
    assert {"joe", "vivian", "uncle_fu"} <= set(voices)  # the Piper voice and the model's preset speakers


def test_engine_speaks_a_sentence(engine_url: str) -> None:
    client = omni_client(engine_url)
    voice = client.voices()[0]
    heard: list[PcmChunk] = []
    u = asyncio.run(client.say(speech_config(voice=voice, language="English"),
                               "Hello from the studio. This sentence is streamed, chunk by chunk.", on_audio=heard.append))
    assert u.ok, u.error
    st = u.stats
    assert st.state == "done" and st.chunks >= 2 and st.sentences >= 2  # clause splitting: several units
    assert st.ttfa_ms is not None and st.rtf is not None
    assert 1.5 < st.audio_seconds < 15
    assert sum(len(c.data) for c in heard) == st.bytes == len(u.pcm)
    pcm, rate, ch = read_wav(u.wav())
    assert (rate, ch) == (RATE, 1) and pcm == u.pcm
    assert _speech_energy(u.pcm) > 300  # speech, not silence


def test_engine_unknown_voice_then_a_good_one_on_the_same_session(engine_url: str) -> None:
    client = omni_client(engine_url)
    voice = client.voices()[0]

    async def go():
        async with client.open(speech_config(voice="no-such-voice")) as s:
            bad = await s.say("Hello.")
            await s.configure(speech_config(voice=voice))
            good = await s.say("Hello again.")
            return bad, good

    bad, good = asyncio.run(go())
    assert isinstance(bad.error, ServerError) and "no-such-voice" in str(bad.error)
    assert good.ok and good.stats.bytes > 0


def test_engine_feed_incrementally(engine_url: str) -> None:
    client = omni_client(engine_url)

    async def go():
        async with client.open(speech_config(voice=client.voices()[0])) as s:
            for word in "Text arrives word by word, as a language model writes it.".split(" "):
                await s.feed(word + " ")
            events = [e async for e in s.finish()]
            return s, events

    s, events = asyncio.run(go())
    assert s.stats.state == "done" and s.stats.ttfa_from == "first_text" and s.stats.bytes > 0
    assert isinstance(events[-1], SessionDone)


def test_engine_long_text_in_parts(engine_url: str) -> None:
    """Text longer than one message (limit lowered so the engine's work stays small) is spoken whole."""
    client = omni_client(engine_url)
    text = "Part of a long text. " * 12  # ~250 bytes, sent in ~64-byte messages

    async def go():
        s = client.open(speech_config(voice=client.voices()[0], split_granularity="sentence"))
        s.max_message_bytes = 96
        async with s:
            return await s.say(text)

    u = asyncio.run(go())
    assert u.ok, u.error
    assert u.stats.text_messages >= 4 and u.stats.sentences == 12


def test_engine_over_128k_text_is_accepted(engine_url: str) -> None:
    """A 130 KB text goes out in parts the server accepts (no 'too large'); cancelled after first audio."""
    client = omni_client(engine_url)
    text = "This is a very long reading. " * 4600  # > 128 KiB

    async def go():
        async with client.open(speech_config(voice=client.voices()[0], split_granularity="none")) as s:
            got = []
            async for e in s.speak(text):
                got.append(e)
                if isinstance(e, PcmChunk):
                    await s.cancel()
            return s, got

    s, got = asyncio.run(go())
    assert s.stats.text_messages == 2
    assert not [e for e in got if isinstance(e, ErrorEvent)]
    assert any(isinstance(e, PcmChunk) for e in got) and s.stats.state == "cancelled"
