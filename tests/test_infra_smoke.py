"""The smoke test through the studio's services layer, against the real offline engine (a vLLM-Omni URL):
a WAV with real speech-like PCM, a decodable PNG and a decodable smoke-only MP4 are written to disk."""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from infra.cli import main as infra_main
from infra.smoke import run_smoke
from services.smoke import MIN_AUDIO_BYTES
from services.smoke.image import IMAGE_FILE
from services.smoke.video import VIDEO_FILE
from services.smoke.voice import VOICE_FILE
from services.backend import server_backend
from services.settings import Settings


def check_wav(path: Path) -> int:
    with wave.open(str(path)) as w:
        assert (w.getframerate(), w.getsampwidth(), w.getnchannels()) == (24000, 2, 1)
        pcm = w.readframes(w.getnframes())
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    assert len(pcm) > MIN_AUDIO_BYTES
    assert np.sqrt(np.mean(samples**2)) > 100  # not silence
    return len(pcm)


def check_png(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        return im.size


def check_mp4(path: Path) -> int:
    with av.open(str(path)) as container:
        assert "mp4" in container.format.name
        return sum(1 for _ in container.decode(container.streams.video[0]))


def test_smoke_writes_a_valid_wav_png_and_mp4(engine_url: str, tmp_path: Path):
    seen = []
    backend = server_backend(engine_url, Settings())
    try:
        report = run_smoke(backend, tmp_path, progress=seen.append)
    finally:
        backend.close()
    assert report.ok, [c.detail for c in report.checks]
    assert [c.role for c in seen] == ["voice", "image", "video"]
    voice = report.check("voice")
    assert voice.figures["audio_start"] >= 1 and voice.figures["audio_done"] >= 1
    assert check_wav(tmp_path / VOICE_FILE) == voice.bytes
    assert check_png(tmp_path / IMAGE_FILE) == (512, 512)
    video = report.check("video")
    assert video.figures["smoke_only"] and video.figures["steps"] == 4 and "smoke-only" in video.detail
    assert check_mp4(tmp_path / VIDEO_FILE) == video.figures["frames"] > 0


def test_smoke_cli_against_a_vllm_omni_url(engine_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code = infra_main(["smoke", "voice", "--backend", "server", "--url", engine_url, "--out-dir", str(tmp_path), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["ok"] and [c["role"] for c in data["checks"]] == ["voice"]
    check_wav(tmp_path / VOICE_FILE)


def test_smoke_against_an_unreachable_server_fails_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from tests.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    # --backend omni: the server's former name, still taken
    code = infra_main(["smoke", "image", "--backend", "omni", "--url", url, "--out-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 5 and "smoke test FAILED" in out.out
    assert "image" in out.err and url.split("//")[1] in out.err
    assert not (tmp_path / IMAGE_FILE).exists()


def test_smoke_of_a_deployment_needs_its_state_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert infra_main(["smoke", "--state-file", str(tmp_path / "none.json")]) == 6
    assert "no state file" in capsys.readouterr().err
