"""`python -m services speak` as a real subprocess, against the real engine and a faulty server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from services.speech.audio import read_wav
from tests.conftest import free_port
from tests.test_voice_page import (
    fault_url,  # noqa: F401  (the misbehaving loopback server fixture)
)

ROOT = Path(__file__).resolve().parent.parent


def speak(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMNI_STUDIO_")}
    return subprocess.run([sys.executable, "-m", "services", "speak", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**env, "OMNI_STUDIO_CONFIG": "/nonexistent/studio.toml"})


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
    assert figures["backend"] == "omni" and figures["out"] == str(out)


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
