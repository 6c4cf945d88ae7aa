"""`python -m services image|video` as a real subprocess against the real offline engine (and, once, the
offline backend the CLI starts by itself): files written and decoded, --json figures, the history, and
errors that name what to fix with a non-zero exit."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import av
import pytest
from PIL import Image

from services.history import History
from tests.conftest import free_port
from tests.disk_support import run_on_tiny_disk
from tests.test_videos import png
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str | bytes, data: Path, timeout: float = 120, cwd: Path = ROOT,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """The command as a subprocess; bytes arguments and stdin go to it as they are (not necessarily UTF-8)."""
    env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": "",
           "PYTHONPATH": str(ROOT)}
    p = run_cli([sys.executable, "-m", "services", *args], cwd=cwd, env=env, capture_output=True,
                       input=stdin, timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(errors="replace"),
                                       p.stderr.decode(errors="replace"))


def test_image_json_writes_the_png_and_records_it(engine_url: str, tmp_path: Path) -> None:
    out = tmp_path / "a.png"
    r = cli("image", "--url", engine_url, "--prompt", "a lighthouse at dawn", "--size", "512x384", "--seed", "42",
            "--out", str(out), "--json", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures["ok"] and figures["out"] == [str(out)] and figures["preview"] is True
    p = figures["params"]
    assert (p["prompt"], p["size"], p["steps"], p["seed"]) == ("a lighthouse at dawn", "512x384", 4, 42)
    assert set(figures["timings"]) >= {"request_s", "total_s", "model_s"}
    image = Image.open(out)
    assert image.format == "PNG" and image.size == (512, 384)
    job = History(tmp_path / "data").jobs.get(figures["job_id"])
    assert job.status == "succeeded" and job.output_files()[0][1] == out.read_bytes()


def test_image_plain_output_and_several_images(engine_url: str, tmp_path: Path) -> None:
    out = tmp_path / "many.jpg"
    r = cli("image", "--url", engine_url, "--prompt", "pair", "--size", "128x128", "--n", "2", "--format", "jpeg",
            "--out", str(out), "--no-history", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    assert "(offline preview)" in r.stdout and "seed" in r.stdout
    for name in ("many-1.jpg", "many-2.jpg"):
        assert Image.open(tmp_path / name).format == "JPEG"
    assert History(tmp_path / "data").jobs.list() == []


def test_video_with_an_image_json(engine_url: str, tmp_path: Path) -> None:
    ref = tmp_path / "ref.png"
    ref.write_bytes(png(1024, 1024))
    out = tmp_path / "v.mp4"
    r = cli("video", "--url", engine_url, "--prompt", "the camera pans", "--image", str(ref), "--frames", "9",
            "--steps", "4", "--seed", "5", "--out", str(out), "--json", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    p = figures["params"]
    assert (p["frames"], p["steps"], p["seed"], p["width"], p["height"], p["has_reference"]) == (9, 4, 5, 480, 320, True)
    assert figures["video"]["frames"] == 9 and figures["video"]["fps"] == 8
    t = figures["timings"]
    assert t["wall_s"] >= t["model_s"] > 0 and "overhead_s" in t
    with av.open(str(out)) as c:
        frames = list(c.decode(video=0))
    assert len(frames) == 9 and (frames[0].width, frames[0].height) == (480, 320)
    job = History(tmp_path / "data").jobs.get(figures["job_id"])
    assert job.status == "succeeded" and Image.open(io.BytesIO(job.input_file("reference.jpg"))).size == (480, 320)


def test_video_plain_output_warns_about_smoke_test_steps(engine_url: str, tmp_path: Path) -> None:
    r = cli("video", "--url", engine_url, "--prompt", "drift", "--frames", "5", "--steps", "4",
            "--out", str(tmp_path / "v.mp4"), data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    assert "smoke test only" in r.stderr and "wrote" in r.stdout and "5 frames 480x320" in r.stdout


def test_errors_name_what_to_fix_and_exit_non_zero(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    not_image = tmp_path / "notes.png"
    not_image.write_text("just text")
    closed = f"http://127.0.0.1:{free_port()}"
    cases = [
        (("image", "--url", engine_url, "--prompt", ""), "prompt is empty"),
        (("image", "--url", engine_url, "--prompt", "x", "--size", "huge"), "WIDTHxHEIGHT"),
        (("image", "--url", engine_url, "--prompt", "x", "--size", "4096x4096"), "between 64 and 2048"),
        (("image", "--url", engine_url, "--prompt", "x", "--steps", "0"), "steps must be"),
        (("image", "--url", closed, "--prompt", "x", "--size", "64x64"), f"cannot reach the image server at {closed}"),
        (("image", "--url", engine_url, "--prompt", "x", "--size", "64x64", "--out", str(tmp_path / "no" / "a.png")),
         "cannot write"),
        (("video", "--url", engine_url, "--prompt", "x", "--frames", "5", "--out", str(tmp_path)), "cannot write"),
        (("video", "--url", engine_url, "--prompt", "x", "--frames", "5", "--timeout", "-1"), "--timeout must be"),
        (("video", "--url", engine_url, "--prompt", "x", "--frames", "0"), "frames must be"),
        (("video", "--url", engine_url, "--prompt", "x", "--image", str(tmp_path / "missing.png")), "cannot read --image"),
        (("video", "--url", engine_url, "--prompt", "x", "--image", str(not_image)), "not an image this studio reads"),
        (("video", "--url", closed, "--prompt", "x", "--frames", "5"), f"cannot reach the video server at {closed}"),
    ]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(3) as pool:  # independent processes: run a few at once
        results = list(pool.map(lambda case: cli(*case[0], data=data), cases))
    for (args, words), r in zip(cases, results):
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("error: ") and words in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
    # the failed server calls are in the history with their text; bad input (an --out that cannot be
    # written included) never got there: it is refused before any backend starts
    jobs = History(data).jobs.list()
    assert sorted(j.kind for j in jobs) == ["image", "video"]
    assert all(j.status == "failed" and closed in j.error for j in jobs if j.prompt == "x" and closed in j.target)


def test_offline_backend_starts_its_own_engine(tmp_path: Path) -> None:
    out = tmp_path / "o.png"
    r = cli("image", "--backend", "offline", "--prompt", "self-contained", "--size", "96x64", "--out", str(out),
            "--json", data=tmp_path / "data", timeout=180)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["backend"] == "offline"
    assert Image.open(io.BytesIO(out.read_bytes())).size == (96, 64)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_write_that_fails_after_generation_keeps_the_result_in_a_fallback_file(engine_url: str,
                                                                                tmp_path: Path) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    r = cli("image", "--url", engine_url, "--prompt", "kept", "--size", "64x64", "--out", "/dev/full", "--json",
            "--no-history", data=tmp_path / "data", cwd=work)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: cannot write /dev/full (No space left on device)") and "Traceback" not in r.stderr
    (saved,) = work.glob("*.png")
    assert str(saved) in r.stderr and Image.open(saved).size == (64, 64)
    figures = json.loads(r.stdout)
    assert figures["ok"] is False and figures["out"] == [str(saved)] and "cannot write" in figures["error"]
    r = cli("video", "--url", engine_url, "--prompt", "kept", "--frames", "5", "--steps", "4", "--out", "/dev/full",
            data=tmp_path / "data", cwd=work)
    assert r.returncode == 1 and "cannot write /dev/full" in r.stderr, r.stderr
    (saved,) = work.glob("*.mp4")
    assert str(saved) in r.stderr
    with av.open(str(saved)) as c:
        assert len(list(c.decode(video=0))) == 5


def test_a_full_data_disk_still_writes_the_video_to_out_and_the_job_says_why(engine_url: str, tmp_path: Path) -> None:
    """The history's media folder on a real tiny filesystem (4 KiB): the MP4 goes to --out first, the job is
    recorded failed naming the disk (not left running), and no partial file stays behind."""
    data, out = tmp_path / "data", tmp_path / "clip.mp4"
    History(data)  # the database on the ordinary disk; media/ becomes the tiny one
    env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": "", "PYTHONPATH": str(ROOT)}
    r = run_on_tiny_disk(data / "media", "4k", [sys.executable, "-m", "services", "video", "--url", engine_url,
                                                "--prompt", "kept", "--frames", "5", "--steps", "4", "--out", str(out)],
                         cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    with av.open(str(out)) as c:
        assert len(list(c.decode(video=0))) == 5  # the video itself is not lost
    (job,) = History(data).jobs.list("video")
    where = data / "media" / job.id / "video.mp4"
    assert job.status == "failed" and job.error == (f"No space left on device writing {where}: free space on "
                                                    f"{data / 'media'} (the media folder, media_url) and run it again")
    assert r.stderr.splitlines()[-1] == f"error: wrote {out}, but the history could not keep video job {job.id}: {job.error}"
    assert not list(data.rglob("*.part"))


def test_prompts_that_are_not_utf8_are_named_and_exit_2(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    data = tmp_path / "data"
    cases = [
        (("image", "--url", closed, "--prompt", b"cat \xff"), None, "--prompt is not valid UTF-8 (byte 0xff at position 4)"),
        (("image", "--url", closed, "--prompt", "-"), "caf\u00e9".encode("latin-1"),
         "--prompt - (stdin) is not valid UTF-8 (byte 0xe9 at position 3)"),
        (("image", "--url", closed, "--prompt", "x", "--negative-prompt", b"\xe9t\xe9"), None,
         "--negative-prompt is not valid UTF-8 (byte 0xe9 at position 0)"),
        (("video", "--url", closed, "--prompt", b"pan \xc3("), None, "--prompt is not valid UTF-8 (byte 0xc3 at position 4)"),
        (("video", "--url", closed, "--prompt", "-"), b"drift \xff\xfe", "--prompt - (stdin) is not valid UTF-8 (byte 0xff at position 6)"),
    ]
    for args, stdin, words in cases:
        r = cli(*args, "--out", str(tmp_path / "x.out"), data=data, stdin=stdin, timeout=30)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith(f"error: {words}"), (args, r.stderr)
        assert "Traceback" not in r.stderr
    assert not (tmp_path / "x.out").exists() and History(data).jobs.list() == []


# ---------------------------------------------------------------------------------------------------------
# image --edit
def test_image_edit_json_writes_the_edit_and_records_its_references(engine_url: str, tmp_path: Path) -> None:
    red, blue = tmp_path / "red.png", tmp_path / "blue.jpg"
    red.write_bytes(png(300, 200, color=(230, 20, 20)))
    buf = io.BytesIO()
    Image.new("RGB", (200, 300), (20, 30, 230)).save(buf, "JPEG")
    blue.write_bytes(buf.getvalue())
    out = tmp_path / "edited.png"
    r = cli("image", "--url", engine_url, "--edit", str(red), "--edit", str(blue), "--prompt", "make them friends",
            "--seed", "6", "--out", str(out), "--json", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures["ok"] and figures["edit"] is True and figures["fitting"] is None and figures["preview"] is True
    p = figures["params"]
    assert (p["size"], p["seed"], p["steps"]) == ("1248x832", 6, 4)  # the first reference's proportions
    assert [(ref["name"], ref["format"], ref["sent"]["type"]) for ref in p["references"]] == [
        ("red.png", "PNG", "image/png"), ("blue.jpg", "JPEG", "image/jpeg")]
    image = Image.open(out).convert("RGB")
    assert image.size == (1248, 832)
    left, right = image.getpixel((300, 500)), image.getpixel((950, 500))
    assert left[0] > 150 > left[2] and right[2] > 150 > right[0]  # red on the left, blue on the right
    job = History(tmp_path / "data").jobs.get(figures["job_id"])
    assert job.kind == "image" and job.meta["edit"] is True and job.output_files()[0][1] == out.read_bytes()
    assert job.input_file("reference-1.png") == red.read_bytes()
    assert job.input_file("reference-2.jpg") == blue.read_bytes()
    plain = cli("image", "--url", engine_url, "--edit", str(red), "--prompt", "alone", "--size", "128x96",
                "--out", str(tmp_path / "p.png"), "--no-history", data=tmp_path / "data")
    assert plain.returncode == 0, plain.stderr
    assert "edit of 1 reference(s), 128x96" in plain.stdout and "(offline preview)" in plain.stdout
    assert Image.open(tmp_path / "p.png").size == (128, 96)


def test_image_edit_bad_references_exit_1_naming_them(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    ok = tmp_path / "ok.png"
    ok.write_bytes(png(64, 64))
    text = tmp_path / "notes.png"
    text.write_text("just text")
    bomb = tmp_path / "bomb.png"
    buf = io.BytesIO()
    Image.new("1", (10000, 10000)).save(buf, "PNG")
    bomb.write_bytes(buf.getvalue())
    base = ("image", "--url", engine_url, "--prompt", "x", "--out", str(tmp_path / "e.png"))
    cases = [
        ((*base, *(["--edit", str(ok)] * 5)), "an edit takes 1 to 4 reference images; got 5"),
        ((*base, "--edit", str(ok), "--edit", str(text)), "reference 2 (notes.png) is not an image this studio reads"),
        ((*base, "--edit", str(bomb)), "reference 1 (bomb.png) declares too many pixels"),
        ((*base, "--edit", str(tmp_path / "missing.png")), "cannot read --edit"),
        ((*base, "--edit", str(ok), "--size", "10x10"), "between 64 and 2048"),
    ]
    for args, words in cases:
        r = cli(*args, data=data, timeout=60)
        assert r.returncode == 1, (args, r.stderr)
        assert r.stderr.startswith("error: ") and words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    assert History(data).jobs.list() == [] and not (tmp_path / "e.png").exists()


def test_image_edit_server_refusal_exits_1_with_the_servers_words(tmp_path: Path) -> None:
    """A vLLM-Omni serving a single-image edit model refuses two references with its own message."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[tuple[str, str]] = []

    class SingleImageModel(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, self.headers["Content-Type"]))
            body = json.dumps({"error": {"message": "Received multiple input images. Only a single image is "
                                                   "supported by this model.", "type": "Bad Request", "param": None,
                                         "code": 400}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), SingleImageModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ref = tmp_path / "a.png"
        ref.write_bytes(png(64, 64))
        r = cli("image", "--url", f"http://127.0.0.1:{server.server_port}", "--edit", str(ref), "--edit", str(ref),
                "--prompt", "x", "--out", str(tmp_path / "e.png"), data=tmp_path / "data", timeout=60)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "HTTP 400" in r.stderr and "Only a single image is supported by this model." in r.stderr
    assert seen and seen[0][0] == "/v1/images/edits" and seen[0][1].startswith("multipart/form-data; boundary=")
    (job,) = History(tmp_path / "data").jobs.list()
    assert job.status == "failed" and "single image" in (job.error or "") and len(job.inputs) == 2
