"""The listen client and `python -m services listen` against the real offline engine, a server without the
realtime route, and an unreachable address — real bytes, loopback only.

The speech is the engine's own voice (`POST /v1/audio/speech`, seeded) saying a sentence; other formats and rates
are made from it with PyAV's encoders.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import numpy as np
import pytest
import soxr

from protocol.audio import wav_bytes
from protocol.errors import BackendUnreachable, InvalidInput
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from protocol.listen import (
    DEFAULT_LISTEN_MODEL,
    UNSUPPORTED_TEXT,
    TranscriptionUnsupported,
)
from services.listen import NoSpeech, OmniListen, load_audio, word_error_rate
from tests.loopback_support import serving
from tests.test_reference_audio import encode
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "Please call me back when you get home tonight."
# the offline engine names what answered for the model (its card's served_by): one key more than a real server's
FILE_KEYS = {"text", "segments", "audio_s", "rtf", "model", "served_by", "backend", "target", "wer"}
STREAM_KEYS = FILE_KEYS | {"first_partial_ms", "final_ms", "partials"}


@pytest.fixture(scope="module")
def sentence_wav(engine_url: str) -> bytes:
    r = httpx.post(f"{engine_url}/v1/audio/speech", json={"input": SENTENCE, "voice": "joe", "seed": 7}, timeout=60,
                   trust_env=False)
    assert r.status_code == 200, r.text
    return r.content


@pytest.fixture(scope="module")
def files(sentence_wav: bytes, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sentence as WAV (24 kHz mono), MP3 (44.1 kHz stereo) and OGG/Opus (48 kHz stereo); plus silence,
    noise and a text file."""
    folder = tmp_path_factory.mktemp("listen")
    mono = np.frombuffer(sentence_wav[44:], "<i2").astype(np.float32) / 32768.0
    made = {"speech.wav": sentence_wav}
    for name, rate, kind in (("speech.mp3", 44_100, "mp3"), ("speech.ogg", 48_000, "ogg")):
        resampled = soxr.resample(mono, 24_000, rate).astype(np.float32)
        made[name] = encode(np.stack([resampled, resampled * 0.8]), rate, kind)
    made["silence.wav"] = wav_bytes(bytes(16_000 * 2 * 2), 16_000)
    made["noise.wav"] = wav_bytes(np.random.default_rng(5).normal(0, 300, 48_000).astype("<i2").tobytes(), 16_000)
    made["notes.wav"] = b"these are meeting notes, not a recording\n"
    for name, data in made.items():
        (folder / name).write_bytes(data)
    return {name: folder / name for name in made}


class NoRealtime(BaseHTTPRequestHandler):
    """A server with a model list and nothing else: no /v1/realtime (its handshake is answered 404)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        body = json.dumps({"object": "list", "data": [{"id": "whisper", "object": "model", "owned_by": "x"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


# ---------------------------------------------------------------------------------------------------------
# The client
def test_a_file_and_a_stream_through_the_client(engine_url: str, files: dict[str, Path]) -> None:
    audio = load_audio(files["speech.wav"].read_bytes(), "speech.wav")
    listener = OmniListen(engine_url)
    done = asyncio.run(listener.transcribe_file(audio))
    assert word_error_rate(SENTENCE, done.text) <= 0.2, done.text
    assert done.route == "file" and done.model == DEFAULT_LISTEN_MODEL and "Whisper tiny.en" in (done.preview or "")
    assert done.segments and 0 <= done.segments[0].start < done.segments[-1].end <= audio.seconds + 0.01
    assert done.rtf is not None and done.rtf > 0  # the machine's speed, not a verdict (bench/ measures it)

    partials: list[str] = []
    heard = asyncio.run(listener.stream(audio, on_partial=partials.append))
    assert word_error_rate(SENTENCE, heard.text) <= 0.2, heard.text
    assert heard.partials == len(partials) >= 3
    assert all(len(b) > len(a) and b.startswith(a) for a, b in zip(partials, partials[1:], strict=False))
    # Figures in order, whatever the machine's speed: the first partial before the end, the final after the last
    # audio; paced at real time, the stream never takes less than about one second per second (load only adds).
    assert heard.first_partial_ms is not None and 0 < heard.first_partial_ms <= heard.elapsed_s * 1000
    assert heard.final_ms is not None and 0 <= heard.final_ms <= heard.elapsed_s * 1000
    assert heard.rtf is not None and heard.rtf > 0.85


def test_any_format_rate_and_channel_count(engine_url: str, files: dict[str, Path]) -> None:
    seconds = load_audio(files["speech.wav"].read_bytes()).seconds
    for name in ("speech.mp3", "speech.ogg"):
        audio = load_audio(files[name].read_bytes(), name)
        assert abs(audio.seconds - seconds) < 0.1 and audio.source_channels == 2 and audio.source_rate != 16_000
        text = asyncio.run(OmniListen(engine_url).transcribe_file(audio)).text
        assert word_error_rate(SENTENCE, text) <= 0.25, (name, text)


def test_bad_audio_is_refused_before_anything_is_sent(files: dict[str, Path]) -> None:
    with pytest.raises(InvalidInput, match="is not audio that can be read"):
        load_audio(files["notes.wav"].read_bytes(), "notes.wav")
    with pytest.raises(NoSpeech, match="no speech found"):
        load_audio(b"", "empty.wav")
    with pytest.raises(NoSpeech, match="no speech found in silence.wav"):
        load_audio(files["silence.wav"].read_bytes(), "silence.wav")
    with pytest.raises(InvalidInput, match="the limit is 25.0 MB"):
        load_audio(bytes(TRANSCRIPTION_FILE_MAX_BYTES + 1), "huge.wav")
    truncated = files["speech.mp3"].read_bytes()[:600]
    with pytest.raises(InvalidInput):
        load_audio(truncated, "cut.mp3")


def test_noise_is_no_speech_on_both_routes(engine_url: str, files: dict[str, Path]) -> None:
    noise = load_audio(files["noise.wav"].read_bytes(), "noise.wav")
    with pytest.raises(NoSpeech):
        asyncio.run(OmniListen(engine_url).transcribe_file(noise))
    with pytest.raises(NoSpeech):
        asyncio.run(OmniListen(engine_url).stream(noise, pace=False))


def test_a_server_without_realtime_and_one_not_there(files: dict[str, Path]) -> None:
    audio = load_audio(files["speech.wav"].read_bytes())
    with serving(NoRealtime) as url:
        with pytest.raises(TranscriptionUnsupported, match=UNSUPPORTED_TEXT):
            asyncio.run(OmniListen(url).stream(audio, pace=False))
    with pytest.raises(BackendUnreachable) as err:
        asyncio.run(OmniListen("http://127.0.0.1:9").transcribe_file(audio))
    assert "127.0.0.1:9" in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------------------
# The command line
def listen(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_STUDIO_")}
    return run_cli([sys.executable, "-m", "services", "listen", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**env, "OMNI_STUDIO_CONFIG": "", "PYTHONPATH": str(ROOT)})


def test_cli_json_for_a_file_with_its_wer(engine_url: str, files: dict[str, Path]) -> None:
    p = listen(str(files["speech.mp3"]), "--url", engine_url, "--json", "--reference", SENTENCE)
    assert p.returncode == 0, p.stderr
    figures = json.loads(p.stdout)
    assert set(figures) == FILE_KEYS
    assert figures["backend"] == "server" and figures["target"] == engine_url and figures["model"] == DEFAULT_LISTEN_MODEL
    assert figures["wer"] == pytest.approx(word_error_rate(SENTENCE, figures["text"]), abs=1e-4) and figures["wer"] <= 0.25
    assert figures["segments"] and set(figures["segments"][0]) == {"start", "end", "text"}
    assert 2.0 < figures["audio_s"] < 4.0 and 0 < figures["rtf"] < 1
    assert "note: Offline preview" in p.stderr  # the offline engine's answers are labelled as what they are


def test_cli_stream_reports_its_figures(engine_url: str, files: dict[str, Path]) -> None:
    p = listen(str(files["speech.wav"]), "--stream", "--url", engine_url, "--json")
    assert p.returncode == 0, p.stderr
    figures = json.loads(p.stdout)
    assert set(figures) == STREAM_KEYS and figures["wer"] is None
    assert figures["partials"] >= 3 and 0 < figures["first_partial_ms"] < figures["audio_s"] * 1000
    assert 0 <= figures["final_ms"] < 2000 and word_error_rate(SENTENCE, figures["text"]) <= 0.2


def test_cli_writes_each_kind_of_file(engine_url: str, files: dict[str, Path], tmp_path: Path) -> None:
    for suffix in (".txt", ".srt", ".vtt", ".json"):
        out = tmp_path / f"transcript{suffix}"
        p = listen(str(files["speech.wav"]), "--url", engine_url, "--out", str(out))
        assert p.returncode == 0, p.stderr
        text = p.stdout.strip()
        written = out.read_text()
        if suffix == ".txt":
            assert written == text + "\n"
        elif suffix == ".srt":
            number, times, words = written.strip().split("\n")
            assert number == "1" and times.startswith("00:00:00,") and " --> 00:00:0" in times and words == text
        elif suffix == ".vtt":
            assert written.startswith("WEBVTT\n\n00:00:00.") and written.strip().endswith(text)
        else:
            assert set(json.loads(written)) == FILE_KEYS and json.loads(written)["text"] == text


def test_cli_exit_2_for_input_it_cannot_use(engine_url: str, files: dict[str, Path], tmp_path: Path) -> None:
    for args, said in (
        ([str(files["notes.wav"])], "is not audio that can be read"),
        ([str(files["silence.wav"])], "no speech found"),
        ([str(files["noise.wav"])], "no speech found"),
        ([str(tmp_path / "missing.wav")], "cannot read FILE"),
        ([str(files["speech.wav"]), "--out", str(tmp_path / "t.docx")], "use one of .txt, .srt, .vtt, .json"),
        ([str(files["speech.wav"]), "--reference", "Пожалуйста, перезвони мне"], "Cyrillic script"),
        ([str(files["speech.wav"]), "--language", "de", "--reference", "Ruf mich an"], "measured on English"),
    ):
        p = listen(*args, "--url", engine_url)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert said in p.stderr and p.stderr.count("\n") == p.stderr.count("note:") + 1, p.stderr


def test_cli_exit_1_when_the_target_fails(files: dict[str, Path]) -> None:
    p = listen(str(files["speech.wav"]), "--backend", "omni", "--url", "http://127.0.0.1:9")  # the former name
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith("error: cannot reach http://127.0.0.1:9") and p.stderr.count("\n") == 1, p.stderr
    with serving(NoRealtime) as url:
        p = listen(str(files["speech.wav"]), "--stream", "--url", url)
    assert p.returncode == 1 and p.stderr == f"error: {UNSUPPORTED_TEXT}\n"


def test_cli_backend_offline_starts_the_engine(files: dict[str, Path]) -> None:
    p = listen(str(files["speech.ogg"]), "--backend", "offline", "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    figures = json.loads(p.stdout)
    assert figures["backend"] == "offline" and figures["target"].startswith("http://127.0.0.1:")
    assert word_error_rate(SENTENCE, figures["text"]) <= 0.25


def test_a_live_source_streams_as_it_is_captured(engine_url: str, files: dict[str, Path]) -> None:
    """`stream_live`: chunks of 20 ms (a browser's frames, one with an odd byte count) fed through an asyncio.Queue
    at real time; the text and the figures come back as for a recording, the audio's length counted as sent."""
    from services.listen.realtime import queue_source

    audio = load_audio(files["speech.wav"].read_bytes(), "speech.wav")
    partials: list[str] = []

    async def run():  # type: ignore[no-untyped-def]
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        listening = asyncio.create_task(OmniListen(engine_url).stream_live(queue_source(queue),
                                                                           on_partial=partials.append))
        step = 640
        pieces = [audio.pcm[i:i + step] for i in range(0, len(audio.pcm), step)]
        pieces[3:5] = [pieces[3] + pieces[4][:1], pieces[4][1:]]  # an odd split: whole samples still go out
        for piece in pieces:
            await queue.put(piece)
            await asyncio.sleep(0.02)
        await queue.put(None)
        return await listening

    heard = asyncio.run(run())
    assert word_error_rate(SENTENCE, heard.text) <= 0.2, heard.text
    assert heard.route == "stream" and heard.partials == len(partials) >= 1
    assert heard.audio_s == pytest.approx(audio.seconds)
    assert heard.first_partial_ms is not None and heard.final_ms is not None and heard.final_ms >= 0


def test_a_live_source_with_no_words_is_no_speech(engine_url: str) -> None:
    async def silence():  # type: ignore[no-untyped-def]
        for _ in range(20):
            yield bytes(3200)

    with pytest.raises(NoSpeech, match="no speech found in microphone"):
        asyncio.run(OmniListen(engine_url).stream_live(silence()))


def _browser_frames(pcm16k: bytes) -> list:  # type: ignore[type-arg]
    """The recording as a browser's microphone sends it: 48 kHz stereo s16, 20 ms frames (av.AudioFrame)."""
    import av

    mono = soxr.resample(np.frombuffer(pcm16k, "<i2").astype(np.float32), 16_000, 48_000)
    stereo = np.repeat(np.clip(mono, -32768, 32767).astype("<i2"), 2)
    frames = []
    for at in range(0, stereo.size, 960 * 2):
        block = stereo[at:at + 960 * 2]
        frame = av.AudioFrame.from_ndarray(block.reshape(1, -1), format="s16", layout="stereo")
        frame.sample_rate = 48_000
        frames.append(frame)
    return frames


def test_a_microphone_utterance_is_heard_while_it_is_spoken(engine_url: str, files: dict[str, Path]) -> None:
    """LiveListening: 48 kHz stereo frames fed from another thread at real time; the partial text is there before
    the last frame, Stop gives the final text, and what was captured is kept as 16 kHz audio of the same length."""
    import time

    from services.listen import LiveListening
    from services.runtime import background_loop

    audio = load_audio(files["speech.wav"].read_bytes(), "speech.wav")
    loop = background_loop()
    try:
        live = LiveListening(OmniListen(engine_url), loop)
        partial_before_end = ""
        for frame in _browser_frames(audio.pcm):
            live.feed(frame)
            partial_before_end = live.partial or partial_before_end
            time.sleep(0.02)
        assert partial_before_end, "no partial text while the audio was still being sent"
        live.stop()
        heard = live.result(60)
    finally:
        loop.stop()
    assert word_error_rate(SENTENCE, heard.text) <= 0.2, heard.text
    assert heard.route == "stream" and heard.audio_s == pytest.approx(audio.seconds, abs=0.05)
    assert live.captured_s == pytest.approx(heard.audio_s)
    kept = load_audio(live.wav(), "microphone.wav")
    assert kept.seconds == pytest.approx(audio.seconds, abs=0.05)


def test_a_microphone_that_sent_nothing_is_no_speech(engine_url: str) -> None:
    from services.listen import LiveListening
    from services.runtime import background_loop

    loop = background_loop()
    try:
        live = LiveListening(OmniListen(engine_url), loop)
        live.stop()
        with pytest.raises(NoSpeech, match="no speech found in microphone"):
            live.result(30)
        assert live.captured_s == 0
    finally:
        loop.stop()
