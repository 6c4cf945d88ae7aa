"""`python -m services code` for image, video and sound jobs: the generated code, run unchanged against the offline
engine, makes the same item again (the same PNG and WAV bytes for a seed, an MP4 of as many frames); curl and the
studio's command line too; an unknown id, someone else's item and a deleted reference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import av
import pytest

from protocol.errors import InvalidInput
from services.access import Principal
from services.code import LANGS, UnknownItem, generate, generate_all
from services.history import History
from tests.code_support import ROOT, code_for, made, run_code, studio
from tests.loopback_support import serving_asgi
from tests.sound_peer import peer_app
from tests.test_videos import png


def frames(mp4: Path) -> int:
    with av.open(str(mp4)) as box:
        return sum(1 for _ in box.decode(video=0))


def test_a_seeded_image_again_from_python_curl_and_the_cli(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    job = made("image", "--url", engine_url, "--prompt", "a fox at dusk", "--size", "192x128", "--seed", "7",
               "--out", "fox.png", data=data, cwd=tmp_path)
    original = (tmp_path / "fox.png").read_bytes()
    script = code_for(job["job_id"], tmp_path / "py", data=data)
    text = script.read_text()
    assert 'os.environ.get("BASE_URL", "http://127.0.0.1:8091")' in text and "client.images.generate(" in text
    assert '"seed": 7' in text and "api_key" in text and "sk-" not in text
    assert run_code(script, engine_url).strip() == "image.png"
    assert (tmp_path / "py" / "image.png").read_bytes() == original

    shell = code_for(job["job_id"], tmp_path / "curl", data=data, lang="curl")
    assert "curl " in shell.read_text() and "--seed" not in shell.read_text()
    run_code(shell, engine_url)
    assert (tmp_path / "curl" / "image.png").read_bytes() == original

    line = code_for(job["job_id"], tmp_path / "cli", data=data, lang="cli")
    assert "python -m services image --url \"$BASE_URL\"" in line.read_text()
    run_code(line, engine_url, env=studio_env(data))
    assert (tmp_path / "cli" / "image.png").read_bytes() == original


def studio_env(data: Path) -> dict[str, str]:
    """What the CLI form needs to run: the studio's python on PATH, its folder importable, its history."""
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
            "OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": ""}


def test_an_image_edit_again_with_its_reference_beside_the_code(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "cat.png").write_bytes(png(160, 120))
    job = made("image", "--url", engine_url, "--edit", "cat.png", "--prompt", "make it blue", "--size", "160x120",
               "--seed", "9", "--out", "blue.png", data=data, cwd=tmp_path)
    script = code_for(job["job_id"], tmp_path / "py", data=data)
    assert "client.images.edit(" in script.read_text() and (tmp_path / "py" / "reference-1.png").is_file()
    run_code(script, engine_url)
    assert (tmp_path / "py" / "image.png").read_bytes() == (tmp_path / "blue.png").read_bytes()
    line = code_for(job["job_id"], tmp_path / "cli", data=data, lang="cli")
    assert '--edit "$REFERENCE_1"' in line.read_text()
    run_code(line, engine_url, env=studio_env(data))
    assert (tmp_path / "cli" / "image.png").read_bytes() == (tmp_path / "blue.png").read_bytes()


def test_a_seeded_sound_again_byte_for_byte(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    job = made("sound", "--url", engine_url, "--prompt", "rain on a tin roof", "--seconds", "2", "--seed", "11",
               "--out", "rain.wav", data=data, cwd=tmp_path)
    script = code_for(job["job_id"], tmp_path / "py", data=data)
    assert "httpx.post(BASE_URL + \"/v1/audio/generate\"" in script.read_text()
    run_code(script, engine_url)
    assert (tmp_path / "py" / "sound.wav").read_bytes() == (tmp_path / "rain.wav").read_bytes()
    shell = code_for(job["job_id"], tmp_path / "curl", data=data, lang="curl")
    run_code(shell, engine_url)
    assert (tmp_path / "curl" / "sound.wav").read_bytes() == (tmp_path / "rain.wav").read_bytes()
    line = code_for(job["job_id"], tmp_path / "cli", data=data, lang="cli")
    run_code(line, engine_url, env=studio_env(data))
    assert (tmp_path / "cli" / "sound.wav").read_bytes() == (tmp_path / "rain.wav").read_bytes()

    # The same scripts against a strict vLLM-Omni peer (vLLM-Omni 0.30's request model, an unknown key refused):
    # they send vLLM-Omni's fields and nothing the studio added, and the peer answers them.
    peer = peer_app()
    with serving_asgi(peer) as url:
        run_code(script, url)
        run_code(shell, url)
    python_sent, curl_sent = peer.state.seen
    assert python_sent == curl_sent
    assert {k: python_sent[k] for k in ("input", "audio_length", "seed", "response_format")} == {
        "input": "rain on a tin roof", "audio_length": 2.0, "seed": 11, "response_format": "wav"}
    assert (tmp_path / "py" / "sound.wav").read_bytes()[:4] == b"RIFF"


def test_a_video_with_a_reference_again_and_its_reference_deleted_since(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "ref.png").write_bytes(png(320, 240))
    job = made("video", "--url", engine_url, "--prompt", "waves", "--image", "ref.png", "--width", "256",
               "--height", "192", "--frames", "9", "--seed", "3", "--out", "waves.mp4", data=data, cwd=tmp_path)
    script = code_for(job["job_id"], tmp_path / "py", data=data)
    assert (tmp_path / "py" / "reference.jpg").is_file() and "image_reference" in script.read_text()
    run_code(script, engine_url)
    assert frames(tmp_path / "py" / "video.mp4") == frames(tmp_path / "waves.mp4") == 9
    shell = code_for(job["job_id"], tmp_path / "curl", data=data, lang="curl")
    run_code(shell, engine_url)
    assert frames(tmp_path / "curl" / "video.mp4") == 9

    (data / "media" / job["job_id"] / "reference.jpg").unlink()
    r = studio("code", job["job_id"], data=data)
    assert r.returncode == 0, r.stderr
    assert "reference.jpg was deleted since" in r.stderr and "reference.jpg was deleted since" in r.stdout


def test_an_unknown_id_exits_2_naming_it(tmp_path: Path) -> None:
    r = studio("code", "no-such-item-42", data=tmp_path / "data")
    assert r.returncode == 2 and "no-such-item-42" in r.stderr and "history list" in r.stderr


def test_someone_elses_item_is_refused_like_a_missing_one(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    job = made("image", "--url", engine_url, "--prompt", "mine", "--size", "64x64", "--seed", "1", "--out", "m.png",
               data=data, cwd=tmp_path)
    history = History(data)
    try:
        bob = history.acting_as(Principal(id="bob", name="Bob", role="creator", signed_in=True))
        with pytest.raises(UnknownItem, match=job["job_id"]):
            generate(bob, job["job_id"])
        history.set_shared("job", job["job_id"], True)
        assert "client.images.generate(" in generate(bob, job["job_id"]).text
        registered = generate(history, job["job_id"], servers=[engine_url])  # a registered server on this machine
        assert f'"BASE_URL", "{engine_url}")' in registered.text and not registered.notes
    finally:
        history.close()


def test_an_item_whose_server_is_gone_still_gets_its_code_with_a_note(tmp_path: Path) -> None:
    history = History(tmp_path / "data")
    try:
        job = history.jobs.create("image", "a fox", {"prompt": "a fox", "size": "64x64", "steps": 4, "seed": 3},
                                  target="http://gpu-box:8091/v1/images/generations", status="running")
        history.jobs.succeed(job.id, {"image-0.png": png(64, 64)})
        gone = generate(history, job.id, servers=["http://other-box:8091"])
        assert any("http://gpu-box:8091, where it was made, is no longer" in n for n in gone.notes)
        assert "no longer one of the studio's servers" in gone.text
        assert '"BASE_URL", "http://gpu-box:8091")' in gone.text and '"seed": 3' in gone.text
    finally:
        history.close()


def test_a_viewer_gets_a_shared_items_code_with_the_servers_address_left_as_a_variable(
        engine_url: str, tmp_path: Path) -> None:
    history = History(tmp_path / "data")
    try:
        job = history.jobs.create("image", "a fox", {"prompt": "a fox", "size": "64x64", "steps": 4, "seed": 3},
                                  target="http://gpu-box:8091/v1/images/generations", status="running")
        history.jobs.succeed(job.id, {"image-0.png": png(64, 64)})
        history.set_shared("job", job.id, True)
        creator = generate_all(history.acting_as(Principal(id="cy", name="Cy", role="creator", signed_in=True)),
                               job.id, servers=["http://gpu-box:8091"])
        assert all("gpu-box" in c.text for c in creator.values())
        viewer = history.acting_as(Principal(id="vi", name="Vi", role="viewer", signed_in=True))
        codes = {lang: generate(viewer, job.id, lang, servers=["http://gpu-box:8091"]) for lang in LANGS}
        for lang, code in codes.items():
            assert "gpu-box" not in code.text, lang  # not in the constants, the header or the notes
            assert "creators and admins only" in code.text, lang
        assert 'BASE_URL = os.environ["BASE_URL"]' in codes["python"].text
        assert '"${BASE_URL:?set BASE_URL' in codes["curl"].text and '"seed": 3' in codes["python"].text
    finally:
        history.close()
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "code.py").write_text(codes["python"].text)  # it runs once BASE_URL is set
    run_code(tmp_path / "py" / "code.py", engine_url)
    assert (tmp_path / "py" / "image.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (tmp_path / "sh").mkdir()
    (tmp_path / "sh" / "code.sh").write_text(codes["curl"].text)
    unset = subprocess.run(["sh", "code.sh"], cwd=tmp_path / "sh", capture_output=True, text=True, timeout=60,
                           env={"PATH": os.environ["PATH"]})
    assert unset.returncode != 0 and "set BASE_URL to the server's address" in unset.stderr


def test_a_job_kept_without_a_route_or_params_gets_its_code_from_its_prompt(tmp_path: Path) -> None:
    history = History(tmp_path / "data")
    try:
        job = history.jobs.create("video", "waves at dawn", {}, target="http://127.0.0.1:8091", status="running")
        code = generate(history, job.id)  # the route from its family, the prompt from the job's own column
        assert "/v1/videos/sync" in code.text and '"prompt": "waves at dawn"' in code.text
        odd = history.jobs.create("image", "a fox", {"size": 512}, target="http://127.0.0.1:8091", status="running")
        with pytest.raises(InvalidInput, match=f"image job {odd.id}'s record lacks what its request needs"):
            generate(history, odd.id)
    finally:
        history.close()
