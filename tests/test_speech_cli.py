"""`python -m services speak` as a real subprocess, against the real engine and a faulty server."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import wave
from pathlib import Path

import pytest

from services.speech.audio import read_wav
from tests.conftest import free_port
from tests.test_reference_audio import encode, speech_like
from tests.test_voice_page import (
    fault_url,  # noqa: F401  (the misbehaving loopback server fixture)
)
from tests.test_voices import (
    unique,
    vllm_omni_models,  # noqa: F401  (a loopback server answering /v1/models with the test's model ids)
)
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_STUDIO_")}
    return {**env, "OMNI_STUDIO_CONFIG": "", "PYTHONPATH": str(ROOT)}


def speak(*args: str | bytes, timeout: float = 120, cwd: Path = ROOT, stdin: bytes | None = None,
          command: str = "speak", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command as a subprocess; bytes arguments and stdin go to it as they are (not necessarily UTF-8)."""
    p = run_cli([sys.executable, "-m", "services", *command.split(), *args], cwd=cwd, capture_output=True,
                       input=stdin, timeout=timeout, env={**cli_env(), **(env or {})})
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(errors="replace"),
                                       p.stderr.decode(errors="replace"))


def wav_frames(path: Path) -> int:
    with wave.open(str(path), "rb") as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24_000, 1, 2)
        return w.getnframes()


def test_speak_writes_the_wav_and_prints_the_figures(engine_url: str, tmp_path: Path) -> None:
    out = tmp_path / "hello.wav"
    p = speak("--text", "Hello from the command line. It streams, then writes a file.", "--voice", "joe",
              "--language", "English", "--url", engine_url, "--out", str(out), "--json")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1
    figures = json.loads(lines[0])
    for key in ("ttfa_ms", "chunks", "bytes", "audio_seconds", "rtf"):
        assert key in figures
    assert figures["chunks"] > 0 and figures["ttfa_ms"] > 0 and 0 < figures["rtf"] < 1
    pcm, rate, channels = read_wav(out.read_bytes())
    assert (rate, channels) == (24_000, 1) and len(pcm) == figures["bytes"]
    assert abs(figures["audio_seconds"] - len(pcm) / 48_000) < 1e-3
    assert figures["backend"] == "server" and figures["out"] == str(out)


def test_speak_human_summary(engine_url: str, tmp_path: Path) -> None:
    p = speak("--text", "Short.", "--url", engine_url, "--out", str(tmp_path / "s.wav"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"wrote {tmp_path / 's.wav'}:") and "first audio" in p.stdout


def test_unknown_voice_prints_the_server_message_and_fails(engine_url: str, tmp_path: Path) -> None:
    out = tmp_path / "none.wav"
    p = speak("--text", "Hello.", "--voice", "nobody", "--url", engine_url, "--out", str(out))
    assert p.returncode == 1
    assert "Invalid voice 'nobody'" in p.stderr
    assert not out.exists()  # no audio arrived, no file


def test_a_cut_stream_still_writes_the_audio_and_fails(fault_url: str, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "partial.wav"
    p = speak("--text", "This gets cut.", "--voice", "joe", "--url", fault_url, "--out", str(out), "--json")
    assert p.returncode == 1
    figures = json.loads(p.stdout)
    assert figures["ok"] is False and "cut" in figures["error"] and figures["chunks"] == 3
    assert "error:" in p.stderr and str(out) in p.stderr
    pcm, _, _ = read_wav(out.read_bytes())
    assert len(pcm) == 3 * 4800 == figures["bytes"]


def test_empty_text_and_unreachable_server(tmp_path: Path) -> None:
    p = speak("--text", "  ", "--out", str(tmp_path / "x.wav"), timeout=30)
    assert p.returncode == 1 and "no text to speak" in p.stderr
    url = f"http://127.0.0.1:{free_port()}"
    p = speak("--text", "Hello.", "--url", url, "--out", str(tmp_path / "x.wav"), timeout=30)
    assert p.returncode == 1 and url.removeprefix("http://") in p.stderr
    assert not (tmp_path / "x.wav").exists()


def test_offline_backend_starts_its_own_engine(tmp_path: Path) -> None:
    out = tmp_path / "offline.wav"
    p = speak("--text", "The offline engine, started by the command itself.", "--backend", "offline",
              "--out", str(out), "--json")
    assert p.returncode == 0, p.stderr
    figures = json.loads(p.stdout)
    assert figures["backend"] == "offline" and figures["target"].startswith("http://127.0.0.1:")
    assert figures["bytes"] > 0 and out.stat().st_size == figures["bytes"] + 44


def test_an_out_that_cannot_be_written_is_refused_before_any_backend_starts(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # would fail with "cannot reach" if the backend were started
    for out, why in ((tmp_path / "missing" / "a.wav", "no folder"), (tmp_path, "is a directory")):
        p = speak("--text", "Hello.", "--url", closed, "--out", str(out), timeout=30)
        assert p.returncode == 1, p.stderr
        assert p.stderr.startswith(f"error: cannot write {out} (") and why in p.stderr, p.stderr
        assert "pick another --out" in p.stderr and "Traceback" not in p.stderr and "reach" not in p.stderr
    assert not (tmp_path / "missing").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_write_that_fails_after_synthesis_keeps_the_audio_in_a_fallback_file(engine_url: str,
                                                                              tmp_path: Path) -> None:
    p = speak("--text", "Nothing of this may be lost.", "--url", engine_url, "--out", "/dev/full", "--json",
              cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("error: cannot write /dev/full (No space left on device)"), p.stderr
    saved = list(tmp_path.glob("*.wav"))
    assert len(saved) == 1 and str(saved[0]) in p.stderr  # says where the audio went
    figures = json.loads(p.stdout)
    assert figures["out"] == str(saved[0]) and figures["ok"] is False and "cannot write" in figures["error"]
    assert wav_frames(saved[0]) * 2 == figures["bytes"] > 0


def test_ctrl_c_writes_the_audio_received_so_far_and_exits_130(engine_url: str, tmp_path: Path) -> None:
    out = tmp_path / "long.wav"
    text = " ".join(f"This is sentence number {i} of a long reading, and it keeps on going." for i in range(400))
    # SIGINT's default handler (KeyboardInterrupt) even if this test runs where SIGINT is ignored
    proc = subprocess.Popen([sys.executable, "-m", "services", "speak", "--backend", "server", "--url", engine_url,
                             "--text", text, "--out", str(out)], cwd=tmp_path, env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while not any("receiving audio" in line for line in seen):  # the first audio has arrived
            assert proc.poll() is None, ("the command ended before any audio arrived", seen)
            assert time.monotonic() < deadline, ("no audio within 60 s", seen)
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                pass
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    stdout = proc.stdout.read()
    stderr = "".join(seen) + "".join(lines.queue)
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    assert f"{out} holds the audio up to the interruption" in stderr, stderr
    assert wav_frames(out) > 0


def test_text_that_is_not_utf8_is_named_and_exits_2(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "x.wav"
    p = speak("--text", b"Hello \xff", "--url", closed, "--out", str(out), timeout=30)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("error: --text is not valid UTF-8 (byte 0xff at position 6)"), p.stderr
    p = speak("--text", "-", "--url", closed, "--out", str(out), stdin="Caf\u00e9 au lait.".encode("latin-1"),
              timeout=30)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("error: --text - (stdin) is not valid UTF-8 (byte 0xe9 at position 3)"), p.stderr
    p = speak("--text", "Hi.", "--voice", b"j\xf6e", "--url", closed, "--out", str(out), timeout=30)
    assert p.returncode == 2 and "--voice is not valid UTF-8 (byte 0xf6 at position 1)" in p.stderr, p.stderr
    assert not out.exists()
    # UTF-8 on stdin (with a byte-order mark, as some editors save it) is read as it is
    p = speak("--text", "-", "--url", closed, "--out", str(out), stdin="\ufeffCaf\u00e9.".encode(), timeout=30)
    assert p.returncode == 1 and "cannot reach" in p.stderr, p.stderr


def test_invisible_text_is_nothing_to_speak(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # refused before any backend starts
    for text in ("\u200b\u200b", "\u2060", "\ufeff", " \u200d\n"):
        p = speak("--text", text, "--url", closed, "--out", str(tmp_path / "x.wav"), "--json", timeout=30)
        assert p.returncode == 1, (text, p.stdout, p.stderr)
        assert p.stdout == "" and "nothing to speak" in p.stderr and "no speakable characters" in p.stderr
    assert not (tmp_path / "x.wav").exists()


# -- voice style, design and cloning ---------------------------------------------------------------------------
def recording(path: Path, seconds: float = 5.0, kind: str = "wav") -> Path:
    path.write_bytes(encode(speech_like(seconds, 48_000, channels=2), 48_000, kind))
    return path


def test_speak_with_style_a_designed_voice_and_a_clone(engine_url: str, tmp_path: Path) -> None:
    ref = recording(tmp_path / "me.ogg", kind="ogg")
    runs = {
        "CustomVoice": ("--voice", "joe", "--instructions", "slow and warm", "--first-chunk-frames", "2"),
        "VoiceDesign": ("--task-type", "VoiceDesign", "--instructions", "a calm, low voice"),
        "Base": ("--ref-audio", str(ref), "--ref-text", "What the recording says."),
    }
    for task_type, extra in runs.items():
        out = tmp_path / f"{task_type}.wav"
        p = speak("--text", "One voice, three ways.", "--url", engine_url, "--out", str(out), "--json", *extra)
        assert p.returncode == 0, (task_type, p.stderr)
        figures = json.loads(p.stdout)
        assert figures["task_type"] == task_type and figures["ok"] and figures["bytes"] > 4000
        assert wav_frames(out) * 2 == figures["bytes"]


def test_bad_style_design_and_clone_input_is_refused_before_any_backend(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # would say "cannot reach" if a backend were started
    short = recording(tmp_path / "short.flac", 2.0, "flac")
    cases = [
        (("--task-type", "VoiceDesign"), "describe the voice"),
        (("--task-type", "Base"), "needs a reference"),
        (("--instructions", "x" * 501), "501 characters; the limit is 500"),
        (("--first-chunk-frames", "0"), "first-chunk frames must be a whole number from 1 to 64"),
        (("--ref-audio", str(short)), f"--ref-audio {short}: the reference is 2.0 s"),
        (("--ref-audio", str(tmp_path / "missing.wav")), "cannot read --ref-audio"),
        (("--ref-audio", str(recording(tmp_path / "ok.wav")), "--task-type", "CustomVoice"), "not CustomVoice"),
        (("--ref-audio", str(tmp_path / "ok.wav"), "--saved-voice", "anna"), "--ref-audio or from --saved-voice"),
    ]
    for args, message in cases:
        p = speak("--text", "Hello.", "--url", closed, "--out", str(tmp_path / "x.wav"), *args, timeout=30)
        assert p.returncode == 1, (args, p.stderr)
        assert message in p.stderr and "reach" not in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)
    p = speak("--text", "Hello.", "--voice", "joe", "--saved-voice", "anna", "--url", closed, timeout=30)
    assert p.returncode == 2 and "not allowed with argument" in p.stderr
    assert not (tmp_path / "x.wav").exists()


def test_a_task_type_the_model_lacks_names_the_model_to_deploy(vllm_omni_models: tuple[str, object],  # noqa: F811
                                                               tmp_path: Path) -> None:
    url, handler = vllm_omni_models
    handler.models = ["Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"]  # type: ignore[attr-defined]
    p = speak("--text", "Hello.", "--url", url, "--task-type", "VoiceDesign", "--instructions", "a calm voice",
              "--out", str(tmp_path / "x.wav"), timeout=30)
    assert p.returncode == 1, p.stderr
    assert "serves Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice" in p.stderr and "not VoiceDesign" in p.stderr
    assert "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign" in p.stderr
    p = speak("--text", "Hello.", "--url", url, "--ref-audio", str(recording(tmp_path / "me.wav")),
              "--out", str(tmp_path / "x.wav"), timeout=30)
    assert p.returncode == 1 and "Qwen/Qwen3-TTS-12Hz-0.6B-Base or Qwen/Qwen3-TTS-12Hz-1.7B-Base" in p.stderr
    assert not (tmp_path / "x.wav").exists()


def voices_cli(*args: str, data_dir: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return speak(*args, command="voices", env={"OMNI_STUDIO_DATA_DIR": str(data_dir)}, timeout=timeout)


def test_voices_add_list_speak_delete(engine_url: str, tmp_path: Path) -> None:
    name = unique("cli")
    ref = recording(tmp_path / "her.mp3", 6.0, "mp3")
    data = tmp_path / "data"
    p = voices_cli("add", "--url", engine_url, "--name", name, "--audio", str(ref), "--consent", "consent-77",
                   "--ref-text", "What she says.", "--description", "warm narrator", "--who", "tester", "--json",
                   data_dir=data)
    assert p.returncode == 0, p.stderr
    added = json.loads(p.stdout)
    assert added["voice"]["name"] == name and added["voice"]["consent_id"] == "consent-77"
    assert 5.9 < added["reference_seconds"] < 6.1
    p = voices_cli("list", "--url", engine_url, "--json", data_dir=data)
    assert p.returncode == 0, p.stderr
    (listed,) = [v for v in json.loads(p.stdout)["voices"] if v["name"] == name]
    assert listed["who"] == "tester" and listed["consent_id"] == "consent-77"
    p = voices_cli("list", "--url", engine_url, data_dir=data)
    assert p.returncode == 0 and f"{name}\tconsent consent-77" in p.stdout and "by tester" in p.stdout

    out = tmp_path / "clone.wav"
    p = speak("--text", "Speaking with a saved voice.", "--url", engine_url, "--saved-voice", name,
              "--out", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["task_type"] == "Base" and wav_frames(out) > 0

    p = voices_cli("add", "--url", engine_url, "--name", name, "--audio", str(ref), "--consent", "consent-78",
                   data_dir=data)
    assert p.returncode == 1 and f"a voice named '{name}' already exists" in p.stderr, p.stderr
    p = voices_cli("delete", "--url", engine_url, "--name", name, data_dir=data)
    assert p.returncode == 0 and "deleted" in p.stdout, p.stderr
    p = voices_cli("delete", "--url", engine_url, "--name", name, data_dir=data)
    assert p.returncode == 1 and f"there is no saved voice '{name}'" in p.stderr, p.stderr
    p = speak("--text", "Gone.", "--url", engine_url, "--saved-voice", name, "--out", str(tmp_path / "gone.wav"))
    assert p.returncode == 1 and "no saved voice" in p.stderr and "voices add" in p.stderr


def test_voices_add_refuses_bad_input_before_any_backend(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    data = tmp_path / "data"
    ok = recording(tmp_path / "ok.wav")
    cases = [
        (("--name", "anna", "--audio", str(ok), "--consent", "  "), "needs the speaker's consent"),
        (("--name", "a/b", "--audio", str(ok), "--consent", "c-1"), "--name: Invalid voice name"),
        (("--name", "anna", "--audio", str(recording(tmp_path / "short.wav", 1.0)), "--consent", "c-1"),
         "the reference is 1.0 s"),
        (("--name", "anna", "--audio", str(tmp_path), "--consent", "c-1"), "cannot read --audio"),
    ]
    for args, message in cases:
        p = voices_cli("add", "--url", closed, *args, data_dir=data)
        assert p.returncode == 1 and message in p.stderr and "reach" not in p.stderr, (args, p.stderr)
    p = voices_cli("add", "--url", closed, "--name", "anna", "--audio", str(ok), data_dir=data)
    assert p.returncode == 2 and "--consent" in p.stderr  # consent is a required argument
    p = voices_cli("list", "--url", closed, data_dir=data)
    assert p.returncode == 1 and "cannot reach" in p.stderr
