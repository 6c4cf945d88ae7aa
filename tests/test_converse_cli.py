"""`python -m services converse` in pipeline mode on the real offline engine: two turns spoken by the engine's own
voice, answered by a script; the JSON timeline, voice-to-voice recomputed here, the stereo WAV's channels; a
reply target that is down, a bad script line, --mode native given pipeline's URLs, an input that is not audio."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from services.history import History
from tests.conftest import spoken_turn_files
from tests.cli_support import run_cli

TURNS = ("What time do you open?", "Thank you very much.")
SCRIPT = """\
# the test's shop
time open => We open at nine in the morning.
thank => You are most welcome.
default => Sorry, say that again?
"""


@pytest.fixture(scope="module")
def inputs(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return spoken_turn_files(engine_url, tmp_path_factory.mktemp("turns"), TURNS)


def converse(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli([sys.executable, "-m", "services", "converse", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=Path(__file__).resolve().parent.parent,
                          env=None if env is None else {**os.environ, **env})


def rms(x: np.ndarray) -> float:
    return float(np.sqrt((x.astype(np.float64) ** 2).mean())) if x.size else 0.0


def test_two_scripted_turns_timeline_and_stereo_wav(engine_url: str, inputs: list[Path], tmp_path: Path) -> None:
    script, out = tmp_path / "shop.txt", tmp_path / "conversation.wav"
    script.write_text(SCRIPT)
    p = converse("--input", str(inputs[0]), "--input", str(inputs[1]), "--listen-url", engine_url, "--speak-url",
                 engine_url, "--script", str(script), "--json", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "scripted reply" in p.stderr and "not a model" in p.stderr
    conv = json.loads(p.stdout)
    assert set(conv) == {"mode", "turns", "voice_to_voice_ms"} and conv["mode"] == "pipeline"
    turns = conv["turns"]
    assert [t["reply_text"] for t in turns] == ["We open at nine in the morning.", "You are most welcome."]
    for t in turns:
        assert set(t) == {"user_text", "reply_text", "user_speech_end_s", "transcript_final_s", "reply_first_token_s",
                          "first_audio_s", "voice_to_voice_ms", "interrupted", "error", "eot_rule", "eot_wait_ms",
                          "eot_probability"}
        assert t["eot_rule"] in ("learned", "cap", "fallback") and t["eot_wait_ms"] >= 200  # the floor, at least
        assert t["eot_rule"] != "learned" or t["eot_probability"] >= 0.5
        assert t["error"] is None and t["interrupted"] is False
        assert t["user_speech_end_s"] <= t["transcript_final_s"] <= t["reply_first_token_s"] <= t["first_audio_s"]
        assert t["voice_to_voice_ms"] == pytest.approx((t["first_audio_s"] - t["user_speech_end_s"]) * 1000, abs=0.2)
    assert turns[0]["first_audio_s"] < turns[1]["user_speech_end_s"]  # the second turn came after the first reply
    values = sorted(t["voice_to_voice_ms"] for t in turns)  # nearest-rank: p50 of 2 is the 1st, p95 the 2nd
    assert conv["voice_to_voice_ms"] == {"n": 2, "p50": values[0], "p95": values[1]}

    with wave.open(io.BytesIO(out.read_bytes())) as w:
        assert w.getnchannels() == 2 and w.getsampwidth() == 2 and w.getframerate() == 24000
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, 2)
    rate = 24000
    def window(a: float, b: float, ch: int) -> np.ndarray:
        return frames[math.floor(a * rate): math.floor(b * rate), ch]
    for t in turns:
        # the person's speech: its last 0.3 s is on the left and the agent is quiet there
        speech = (t["user_speech_end_s"] - 0.3, t["user_speech_end_s"])
        assert rms(window(*speech, 0)) > 300 and rms(window(*speech, 1)) == 0
        # the agent's first 0.5 s: on the right, and the person is silent
        reply = (t["first_audio_s"], t["first_audio_s"] + 0.5)
        assert rms(window(*reply, 1)) > 300 and rms(window(*reply, 0)) == 0


def test_a_reply_target_that_is_down(engine_url: str, inputs: list[Path], tmp_path: Path) -> None:
    p = converse("--input", str(inputs[0]), "--input", str(inputs[1]), "--listen-url", engine_url, "--speak-url",
                 engine_url, "--reply-url", "http://127.0.0.1:9", "--json", "--keep",
                 env={"OMNI_STUDIO_DATA_DIR": str(tmp_path), "OMNI_STUDIO_CONFIG": ""})
    assert p.returncode == 1, p.stderr  # no turn was answered: a target error
    turns = json.loads(p.stdout)["turns"]
    assert len(turns) == 2  # the conversation went on to the second input
    for t in turns:
        assert "cannot reach the reply server at http://127.0.0.1:9" in t["error"]
        assert t["user_text"] and t["transcript_final_s"] >= t["user_speech_end_s"]  # the stages before it kept
        assert t["reply_first_token_s"] is None and t["first_audio_s"] is None and t["voice_to_voice_ms"] is None
    assert "error: turn 2: cannot reach the reply server" in p.stderr
    # nothing was answered: not kept (the JSON above has it all)
    assert "every turn failed, so the conversation is not kept" in p.stderr
    assert History(tmp_path).conversations.list() == []


def test_bad_input_exits_2(inputs: list[Path], tmp_path: Path) -> None:
    script = tmp_path / "bad.txt"
    script.write_text("# ok\nthank => fine\nopen we are\n")
    p = converse("--input", str(inputs[0]), "--script", str(script))
    assert p.returncode == 2 and "line 3" in p.stderr and "has no `=>`" in p.stderr
    p = converse("--input", str(inputs[0]), "--mode", "native", "--speak-url", "http://127.0.0.1:9")
    assert p.returncode == 2 and "give --url" in p.stderr
    text = tmp_path / "notes.wav"
    text.write_text("not audio at all")
    p = converse("--input", str(text))
    assert p.returncode == 2 and "notes.wav" in p.stderr


LONG_SCRIPT = """\
time open => We open at nine in the morning, every day except Sunday, and we close at six in the evening.
default => You are most welcome, and thank you for calling us today.
"""
LONG_REPLY = LONG_SCRIPT.splitlines()[0].split(" => ")[1]


def _stereo(path: Path) -> np.ndarray:
    with wave.open(io.BytesIO(path.read_bytes())) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, 2)


def test_barge_in_stops_the_agent_and_keeps_what_was_heard(engine_url: str, inputs: list[Path],
                                                           tmp_path: Path) -> None:
    script, out = tmp_path / "shop.txt", tmp_path / "conversation.wav"
    script.write_text(LONG_SCRIPT)
    p = converse("--input", str(inputs[0]), "--input", str(inputs[1]), "--listen-url", engine_url, "--speak-url",
                 engine_url, "--script", str(script), "--barge-in-at", "0.3", "--json", "--out", str(out), "--keep",
                 env={"OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_CONFIG": ""})
    assert p.returncode == 0, p.stderr
    timeline = json.loads(p.stdout)
    first, second = timeline["turns"]
    assert first["interrupted"] is True and first["error"] is None
    assert first["reply_text"] and LONG_REPLY.startswith(first["reply_text"]) and first["reply_text"] != LONG_REPLY
    assert first["barge_in_stop_ms"] >= 100  # it cannot be decided before 100 ms of speech
    cut = first["agent_stop_s"]
    assert first["first_audio_s"] < cut < second["user_speech_end_s"]
    assert second["interrupted"] is False and "barge_in_stop_ms" not in second
    assert second["reply_text"] == LONG_SCRIPT.splitlines()[1].split(" => ")[1]

    frames, rate = _stereo(out), 24000
    right = frames[:, 1]
    assert rms(right[math.floor(first["first_audio_s"] * rate): math.floor(cut * rate)]) > 300  # it spoke
    quiet = right[math.ceil(cut * rate): math.floor(second["first_audio_s"] * rate)]
    windows = quiet[: len(quiet) // 480 * 480].reshape(-1, 480)  # 20 ms windows
    assert len(windows) > 10 and all(rms(w) == 0 for w in windows)  # nothing of the agent after the cut
    assert rms(right[math.floor(second["first_audio_s"] * rate):]) > 300  # and it answered the second turn

    [kept] = History(tmp_path / "data").conversations.list()  # --keep: in the history, as printed and written
    assert kept.id in p.stderr and kept.timeline == timeline and kept.audio_bytes() == out.read_bytes()
    assert kept.settings["script"] == LONG_SCRIPT and kept.settings["barge_in_at"] == 0.3
    assert kept.settings["silence_ms"] == 500 and kept.settings["listen"] == engine_url


def test_a_short_noise_burst_does_not_interrupt(engine_url: str, inputs: list[Path], tmp_path: Path) -> None:
    script, out, burst = tmp_path / "shop.txt", tmp_path / "conversation.wav", tmp_path / "cough.wav"
    script.write_text(LONG_SCRIPT)
    noise = (np.random.default_rng(3).uniform(-0.5, 0.5, 800) * 32767).astype("<i2")  # 50 ms at 16 kHz
    pcm = np.concatenate([noise, np.zeros(16000, dtype="<i2")])
    with wave.open(str(burst), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000), w.writeframes(pcm.tobytes())
    p = converse("--input", str(inputs[0]), "--input", str(burst), "--listen-url", engine_url, "--speak-url",
                 engine_url, "--script", str(script), "--barge-in-at", "0.3", "--json", "--out", str(out))
    assert p.returncode == 0, p.stderr
    first = json.loads(p.stdout)["turns"][0]
    assert first["interrupted"] is False and "barge_in_stop_ms" not in first
    assert first["reply_text"] == LONG_REPLY  # spoken to the end
    right = _stereo(out)[:, 1]
    after = right[math.floor((first["first_audio_s"] + 1.0) * 24000): math.floor((first["first_audio_s"] + 2.0) * 24000)]
    assert rms(after) > 300  # the agent still talks well after the burst at 0.3 s


def test_a_model_at_a_reply_url_answers_with_the_conversation_so_far(engine_url: str, inputs: list[Path]) -> None:
    """The three vLLM-protocol peers: the engine's realtime transcription and speech, a streaming chat server."""
    from tests.chat_support import MODEL, chat_app, serving_app

    app, seen = chat_app("We open at nine, every day of the week.")
    with serving_app(app) as chat:
        p = converse("--input", str(inputs[0]), "--input", str(inputs[1]), "--listen-url", engine_url,
                     "--speak-url", engine_url, "--reply-url", chat, "--system-prompt", "You are a shop.", "--json")
    assert p.returncode == 0, p.stderr
    first, second = json.loads(p.stdout)["turns"]
    assert first["reply_text"] == second["reply_text"] == "We open at nine, every day of the week."
    assert first["error"] is None and first["voice_to_voice_ms"] > 0
    assert MODEL in p.stderr  # the reply's label names the model that answered
    asked = seen[1]["messages"]  # the second turn: the system prompt, then the whole conversation so far
    assert asked[0] == {"role": "system", "content": "You are a shop."}
    assert [m["role"] for m in asked[1:]] == ["user", "assistant", "user"]
    assert asked[1]["content"] == first["user_text"] and asked[2]["content"] == first["reply_text"]
    assert asked[3]["content"] == second["user_text"]


def test_the_default_script_is_greeted_back(engine_url: str, tmp_path: Path) -> None:
    """The default script's first rule answers a greeting: the ear hears the engine's own "Hello there" as such
    (pocketsphinx heard it as "oh", and every greeting got the script's "Sorry, I did not catch that")."""
    [hello] = spoken_turn_files(engine_url, tmp_path, ["Hello there, can you help me?"])
    p = converse("--input", str(hello), "--listen-url", engine_url, "--speak-url", engine_url, "--json",
                 "--turn-detector", "silence")  # one turn (the learned detector may take "Hello there," for one)
    assert p.returncode == 0, p.stderr
    [turn] = json.loads(p.stdout)["turns"]
    assert turn["reply_text"] == "Hello! How can I help you today?", turn
    assert (turn["eot_rule"], turn["eot_wait_ms"], turn["eot_probability"]) == ("silence", 500.0, None)
