"""A live conversation (services/converse/live.py; native mode: live_native.py) on the real offline engine: a microphone fed at real time in
20 ms pieces, as a browser's WebRTC track delivers them, and the agent's speech played through streamlit-webrtc's
real PCM source track, whose frames are taken at real time as aiortc's sender takes them.

The microphone says the first turn, stays quiet until the agent has been heard for a moment, then says the second
turn over it (a barge-in); the track's frames after the cut are silence until the second reply plays. A loud tone
while the agent talks is no voice and stops nothing; a voice in which the recognizer hears no words stops the agent
and counts as its own echo."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from streamlit_webrtc.pcm_source import PcmAudioSource

from protocol.listen import LISTEN_BYTES_PER_S
from services.converse.live import LiveConversation, LivePipeline
from services.converse.live_native import LiveNative
from services.converse.reply import ScriptedReply
from services.converse.script import parse_script
from services.listen import load_audio
from services.listen.sample import spoken_sample_at
from services.playback import Playback
from services.runtime import BackgroundLoop

SCRIPT = """\
time open => We open at nine in the morning, every day except Sunday, and we close at six in the evening.
thank => You are most welcome.
default => Sorry, say that again?
"""
LONG_REPLY = SCRIPT.splitlines()[0].split(" => ")[1]
PIECE = int(0.02 * LISTEN_BYTES_PER_S)  # 20 ms, as WebRTC sends


@pytest.fixture(scope="module")
def turns(engine_url: str) -> list[bytes]:
    return [load_audio(spoken_sample_at(engine_url, text)).pcm
            for text in ("What time do you open?", "Thank you very much.")]


@pytest.fixture
def loop() -> Iterator[BackgroundLoop]:
    loop = BackgroundLoop("test-converse-live")
    yield loop
    loop.stop()


# Bounds on the waits below, not verdicts on speed: a loop that would otherwise never end stops there. Far above
# what a busy machine takes (a turn is answered in seconds), and within pytest's 180 s per test.
WAIT_S = 120.0


class Track:
    """The browser's end: 20 ms frames taken from the PCM source at real time, each with its time and RMS.

    A frame's time is when its samples were taken from the source, not when `recv` hands it over: `recv` takes
    them first, then sleeps until the frame is due, and on a busy machine its wake-up can come tens of ms late.
    The source is read and cleared on the conversation's own loop thread, so a frame taken after the time a cut
    was noted was taken after the cut: no allowance for delays is needed."""

    def __init__(self, loop: BackgroundLoop) -> None:
        self.source = PcmAudioSource(sample_rate=24_000)
        self.frames: list[tuple[float, float]] = []  # (perf_counter when taken from the source, RMS)
        self._stopping = False
        self._task = loop.submit(self._take())

    async def _take(self) -> None:
        while not self._stopping:
            taken = time.perf_counter()  # recv() reads the source at once, before any await
            frame = await self.source.track.recv()
            x = frame.to_ndarray().astype(np.float64).ravel()
            self.frames.append((taken, float(np.sqrt((x ** 2).mean()))))

    def stop(self) -> None:
        self._stopping = True
        self._task.result(WAIT_S)  # ends after the next frame (20 ms of real time)


def speak(live: LiveConversation, pcm: bytes) -> None:
    """`pcm` into the microphone at real time, 20 ms at a time."""
    start = time.perf_counter()
    for i, at in enumerate(range(0, len(pcm), PIECE)):
        live.feed_pcm(pcm[at:at + PIECE])
        time.sleep(max(0.0, start + (i + 1) * 0.02 - time.perf_counter()))  # the next piece once this one is spoken


def quiet_until(live: LiveConversation, done: Callable[[], bool]) -> None:
    """Silence into the microphone until `done()` (bounded by WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    while not done() and time.monotonic() < deadline:
        speak(live, bytes(PIECE * 5))
    assert done(), "the conversation did not get there in time"


def start(engine_url: str, loop: BackgroundLoop) -> tuple[LiveConversation, Track, Playback]:
    playback, track = Playback(), Track(loop)
    playback.attach(track.source)
    pipeline = LivePipeline(engine_url, engine_url, ScriptedReply(parse_script(SCRIPT, "the script")),
                            playback=playback, silence_ms=500)
    return LiveConversation(pipeline, loop), track, playback


def turns_done(live: LiveConversation, n: int) -> bool:
    view = live.view()
    turns = view["timeline"]["turns"]
    return len(turns) >= n and "first_audio_played_s" in turns[-1] and view["status"] == "listening"


def test_two_turns_and_a_barge_in_that_silences_the_track(engine_url: str, turns: list[bytes],
                                                         loop: BackgroundLoop) -> None:
    live, track, playback = start(engine_url, loop)
    speak(live, bytes(PIECE * 15) + turns[0])
    quiet_until(live, lambda: playback.pushed_chunks > 0 and live.view()["status"] == "agent")
    # the first turn's voice-to-voice shows while the call goes on, as soon as its answer plays
    assert live.view()["timeline"]["voice_to_voice_ms"]["n"] == 1
    speak(live, bytes(PIECE * 20))  # the agent is heard for 400 ms, then the person talks over it
    speak(live, turns[1])
    quiet_until(live, lambda: turns_done(live, 2) and playback.queued_seconds() == 0)
    live.stop()
    conv = live.result(60)
    track.stop()

    first, second = conv.turns
    assert "open" in first.user_text.lower() and "thank" in second.user_text.lower()
    assert first.interrupted and second.interrupted is False
    assert first.reply_text and LONG_REPLY.startswith(first.reply_text) and first.reply_text != LONG_REPLY
    assert second.reply_text == "You are most welcome."
    for turn in conv.turns:  # each stage after the one before, and the played audio after its arrival
        stages = [turn.user_speech_end_s, turn.transcript_final_s, turn.reply_first_token_s, turn.first_audio_s]
        assert None not in stages and stages == sorted(stages), stages
        assert turn.first_audio_played_s >= turn.first_audio_s
        assert turn.voice_to_voice_ms == pytest.approx((turn.first_audio_played_s - turn.user_speech_end_s) * 1000)
    assert live.view()["echo_suspects"] == 0

    # What the track played: the first reply until the cut, then silence until the second reply's first audio
    # arrived (it is pushed after its arrival time is noted, as the cut clears the source before its time is).
    t0 = live.runner._t0
    during = [rms for t, rms in track.frames if t0 + first.first_audio_played_s + 0.1 < t < t0 + first.agent_stop_s]
    after = [rms for t, rms in track.frames if t0 + first.agent_stop_s < t < t0 + second.first_audio_s]
    assert during and max(during) > 300
    assert len(after) > 10 and max(after) == 0
    assert max(rms for t, rms in track.frames if t > t0 + second.first_audio_played_s) > 300

    timeline = conv.as_json()
    assert timeline["voice_to_voice_ms"]["n"] == 2 and "first_audio_played_s" in timeline["turns"][0]
    wav = np.frombuffer(conv.stereo_wav()[44:], "<i2").reshape(-1, 2)
    assert np.abs(wav[:, 0]).max() > 1000 and np.abs(wav[:, 1]).max() > 1000  # the person left, the agent right


def tone(seconds: float, amplitude: float = 0.2) -> bytes:
    t = np.arange(int(seconds * 16_000)) / 16_000
    return (np.sin(2 * np.pi * 300 * t) * amplitude * 32767).astype("<i2").tobytes()


class HearsNoWordsAfterTheFirst:
    """The engine's realtime transcription, except that after the first turn it hears no words — what a recognizer
    gives for a wordless sound the voice detector took for speech (the agent's own voice coming back, most likely)."""

    def __init__(self, url: str) -> None:
        self.url, self.target, self.turns = url, url, 0

    async def outcome(self, source, *, on_partial=None, **_):  # type: ignore[no-untyped-def]
        from services.converse.pipeline import listen_model
        from services.listen.client import ws_url_of
        from services.listen.realtime import stream_pcm

        out = await stream_pcm(ws_url_of(self.url), source, model=await listen_model(self.url), on_partial=on_partial)
        self.turns += 1
        if self.turns > 1:
            out.text = ""
        return out


def test_a_loud_tone_is_no_barge_in_and_no_words_over_the_agent_count_as_its_echo(
        engine_url: str, turns: list[bytes], loop: BackgroundLoop) -> None:
    playback, track = Playback(), Track(loop)
    playback.attach(track.source)
    pipeline = LivePipeline(HearsNoWordsAfterTheFirst(engine_url), engine_url,
                            ScriptedReply(parse_script(SCRIPT, "the script")), playback=playback, silence_ms=500)
    live = LiveConversation(pipeline, loop)
    speak(live, bytes(PIECE * 10) + turns[0])
    quiet_until(live, lambda: playback.pushed_chunks > 0 and live.view()["status"] == "agent")
    speak(live, tone(0.6))  # loud, long enough — and no voice: the Silero detector does not take it for speech
    assert live.view()["status"] == "agent" and live.view()["echo_suspects"] == 0
    speak(live, turns[1])  # a voice over the agent: it stops; the recognizer hears no words in it
    quiet_until(live, lambda: live.view()["echo_suspects"] == 1 and live.view()["status"] == "listening")
    live.stop()
    conv = live.result(60)
    track.stop()
    [turn] = conv.turns  # what had no words is no turn
    assert turn.interrupted and LONG_REPLY.startswith(turn.reply_text) and turn.reply_text != LONG_REPLY


class ThinkingReply(ScriptedReply):
    """The script's replies, the first one held back until the test lets it go: the agent still thinking."""

    def __init__(self) -> None:
        super().__init__(parse_script(SCRIPT, "the script"))
        self.think = threading.Event()
        self.replies = 0

    async def stream(self, messages):  # type: ignore[no-untyped-def]
        self.replies += 1
        if self.replies == 1:
            while not self.think.is_set():  # cancellable: a barge-in cancels the reply's task here
                await asyncio.sleep(0.01)
        async for piece in super().stream(messages):
            yield piece


def test_speaking_while_the_agent_is_still_thinking_interrupts_its_answer(engine_url: str, turns: list[bytes],
                                                                          loop: BackgroundLoop) -> None:
    """The person speaks again after the agent heard them but before its first audio: the pending answer is
    dropped (it would otherwise play after they moved on, and the new answer queue behind it)."""
    playback = Playback()
    reply = ThinkingReply()
    live = LiveConversation(LivePipeline(engine_url, engine_url, reply, playback=playback, silence_ms=500), loop)
    speak(live, bytes(PIECE * 10) + turns[0])
    quiet_until(live, lambda: reply.replies == 1 and live.view()["status"] == "answering")
    speak(live, turns[1])
    quiet_until(live, lambda: len(turns := live.view()["timeline"]["turns"]) == 2 and "first_audio_s" in turns[1]
                and live.view()["status"] == "listening")
    reply.think.set()
    live.stop()
    conv = live.result(60)
    first, second = conv.turns
    assert first.interrupted and first.reply_text == "" and first.first_audio_s is None
    assert second.reply_text == "You are most welcome." and not second.interrupted
    assert second.first_audio_s is not None and live.view()["echo_suspects"] == 0


def test_stopped_while_speaking_the_turn_ends_and_a_listen_target_down_is_its_error(
        engine_url: str, turns: list[bytes], loop: BackgroundLoop) -> None:
    playback = Playback()
    pipeline = LivePipeline("http://127.0.0.1:9", engine_url, ScriptedReply(parse_script(SCRIPT, "the script")),
                            playback=playback)
    live = LiveConversation(pipeline, loop)
    speak(live, turns[0][: len(turns[0]) // 2])
    live.stop()
    conv = live.result(60)
    [turn] = conv.turns
    assert turn.error and "127.0.0.1:9" in turn.error and turn.user_speech_end_s is not None
    assert playback.pushed_chunks == 0  # no reply to a turn that was not heard


def test_native_mode_live_two_turns_in_one_session_and_a_barge_in(engine_url: str, turns: list[bytes],
                                                                 loop: BackgroundLoop) -> None:
    """Native mode: the microphone into the offline engine's duplex session, the server's VAD deciding the turns."""
    playback, track = Playback(), Track(loop)
    playback.attach(track.source)
    live = LiveConversation(LiveNative(engine_url, playback=playback, instructions=SCRIPT, silence_ms=500), loop)
    speak(live, bytes(PIECE * 15) + turns[0])
    quiet_until(live, lambda: playback.pushed_chunks > 0 and live.view()["status"] == "agent")
    speak(live, bytes(PIECE * 20))
    speak(live, turns[1])

    def answered() -> bool:
        view = live.view()
        done = view["timeline"]["turns"]
        return len(done) >= 2 and done[-1]["reply_text"] != "" and view["status"] == "listening"
    quiet_until(live, answered)
    live.stop()
    conv = live.result(60)
    track.stop()

    first, second = conv.turns
    assert "open" in first.user_text.lower() and "thank" in second.user_text.lower()
    assert first.interrupted and not second.interrupted and first.error is None and second.error is None
    assert LONG_REPLY.startswith(first.reply_text) and first.reply_text != LONG_REPLY
    assert second.reply_text == "You are most welcome."
    assert first.barge_in_stop_ms is not None and first.barge_in_stop_ms >= 0
    for turn in conv.turns:
        stages = [turn.user_speech_end_s, turn.transcript_final_s, turn.reply_first_token_s, turn.first_audio_s]
        assert None not in stages and stages == sorted(stages), stages
        assert turn.first_audio_played_s >= turn.first_audio_s
    t0 = live.runner._t0
    after = [rms for t, rms in track.frames if t0 + first.agent_stop_s < t < t0 + second.first_audio_s]
    assert len(after) > 10 and max(after) == 0  # nothing of the first answer after the cut
    assert max(rms for t, rms in track.frames if t > t0 + second.first_audio_played_s) > 300
    assert conv.as_json()["voice_to_voice_ms"]["n"] == 2
