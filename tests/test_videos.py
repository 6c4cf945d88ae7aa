"""VideoClient and VideoJobs: request checks, the multipart body field by field, the MP4 check, jobs that
succeed, fail or time out (always recorded) — against mocks, a small misbehaving HTTP server on loopback,
and the real offline engine (real H.264 MP4s decoded with PyAV).
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import io
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from fastapi import (
    Request,  # module level: the fault server's handler annotation must resolve
)
from PIL import Image

from protocol.errors import BackendUnreachable, InvalidInput, JobFailed, ServerError
from services import imaging
from services.history import History
from services.settings import Settings
from services.videos import (
    REFERENCE_FILE,
    JobHandle,
    MockVideoTransport,
    OmniVideoTransport,
    VideoClient,
    VideoJobs,
    VideoPayload,
    VideoRequest,
    check_mp4,
    encode_request,
    job_request,
)
from tests.conftest import free_port
from tests.disk_support import run_on_tiny_disk

ROOT = Path(__file__).resolve().parent.parent


def make_mp4(frames: int = 17, width: int = 480, height: int = 320, fps: int = 8) -> bytes:
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as c:
        s = c.add_stream("libx264", rate=fps)
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        s.time_base = Fraction(1, fps)
        for i in range(frames):
            f = av.VideoFrame.from_ndarray(np.full((height, width, 3), (i * 13) % 255, np.uint8), format="rgb24")
            f.pts = i
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return buf.getvalue()


def png(w: int, h: int, noisy: bool = False, color=(200, 60, 20)) -> bytes:
    if noisy:  # incompressible: a PNG of this is far over the part limit in base64
        img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (h, w, 3), dtype=np.uint8))
    else:
        img = Image.new("RGB", (w, h), color)
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


def parse_multipart(body: bytes, content_type: str) -> dict[str, str]:
    """The parts of a multipart/form-data body, by an independent parser (the stdlib's email)."""
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    assert msg.is_multipart()
    return {part.get_param("name", header="content-disposition"): part.get_content() for part in msg.iter_parts()}


def decode(mp4: bytes) -> tuple[int, int, int, float]:
    with av.open(io.BytesIO(mp4)) as c:
        s = c.streams.video[0]
        frames = [f for f in c.decode(s)]
        return len(frames), frames[0].width, frames[0].height, float(s.average_rate)


# ---------------------------------------------------------------------------------------------------------
def test_defaults_are_the_published_ones() -> None:
    r = VideoRequest("pan")
    assert (r.width, r.height, r.frames, r.fps, r.steps, r.guidance) == (480, 320, 17, 8, 30, 5.0)
    assert not r.smoke_test and VideoRequest("pan", steps=4).smoke_test


@pytest.mark.parametrize("change, words", [
    ({"prompt": ""}, "motion prompt is empty"),
    ({"frames": 0}, "frames must be a whole number from 1 to 257"),
    ({"frames": 1000}, "4k+1"),
    ({"steps": 0}, "steps must be"),
    ({"steps": 300}, "steps must be"),
    ({"fps": 0}, "fps must be"),
    ({"width": 8}, "width must be"),
    ({"height": 5000}, "height must be"),
    ({"guidance": -1.0}, "guidance must be"),
    ({"reference": b"GIF89a but not really"}, "not an image this studio reads"),
    ({"reference": b""}, "is empty"),
])
def test_bad_requests_are_refused_before_sending(change: dict, words: str) -> None:
    transport = MockVideoTransport(lambda b, c: VideoPayload(make_mp4(), 1.0))
    with pytest.raises(InvalidInput) as err:
        VideoClient(transport).generate(VideoRequest(**{"prompt": "pan", **change}))
    assert words in str(err.value)
    assert transport.submitted == []


def test_the_multipart_body_field_by_field() -> None:
    request = VideoRequest("the camera pans over the lake", seed=11, steps=30, negative_prompt="blur",
                           reference=png(1024, 1024)).validated()
    body = encode_request(request)
    parts = parse_multipart(body.body, body.content_type)
    assert parts == body.fields  # what we say we send is what an independent parser reads
    assert {k: v for k, v in parts.items() if k != "image_reference"} == {
        "prompt": "the camera pans over the lake", "width": "480", "height": "320", "num_frames": "17", "fps": "8",
        "num_inference_steps": "30", "guidance_scale": "5.0", "seed": "11", "negative_prompt": "blur",
    }
    ref = json.loads(parts["image_reference"])
    assert list(ref) == ["image_url"] and ref["image_url"].startswith("data:image/jpeg;base64,")
    jpeg = base64.b64decode(ref["image_url"].split(",", 1)[1])
    assert jpeg == body.reference_jpeg
    im = Image.open(io.BytesIO(jpeg))
    assert im.format == "JPEG" and im.size == (480, 320)  # fitted to the video size
    assert "image_reference" not in encode_request(VideoRequest("p", seed=1)).fields


def test_a_large_detailed_reference_is_kept_under_the_part_limit() -> None:
    big = png(2048, 1536, noisy=True)
    assert len(base64.b64encode(big)) > 1_048_576  # as a PNG data URL it would break the ~1 MB part cap
    request = VideoRequest("p", width=1280, height=960, seed=1, reference=big).validated()
    body = encode_request(request)
    assert len(body.fields["image_reference"].encode()) <= imaging.REFERENCE_PART_LIMIT
    assert Image.open(io.BytesIO(body.reference_jpeg)).format == "JPEG"


def test_a_decompression_bomb_and_a_huge_upload_are_refused() -> None:
    bomb = io.BytesIO()
    Image.new("1", (12_000, 12_000)).save(bomb, "PNG")  # 144 MP of one colour: tiny file, huge decode
    assert len(bomb.getvalue()) < 100_000
    with pytest.raises(InvalidInput, match="decompression bomb"):
        VideoRequest("p", reference=bomb.getvalue()).validated()
    with pytest.raises(InvalidInput, match="MB are accepted"):
        imaging.check_image(b"\x89PNG" + bytes(imaging.MAX_UPLOAD_BYTES), "huge.png")
    truncated = png(300, 200, noisy=True)[:5000]
    with pytest.raises(InvalidInput, match="damaged or cut short"):
        imaging.check_image(truncated, "cut.png")


def test_transparent_and_rotated_references_are_fitted_sensibly() -> None:
    rgba = Image.new("RGBA", (100, 50), (0, 0, 0, 0))
    out = io.BytesIO()
    rgba.save(out, "PNG")
    fitted = imaging.fit_to(imaging.open_image(out.getvalue()), 64, 64)
    assert fitted.mode == "RGB" and fitted.size == (64, 64) and fitted.getpixel((32, 32)) == (255, 255, 255)


def test_check_mp4_accepts_real_mp4_and_names_what_is_wrong() -> None:
    info = check_mp4(make_mp4(17, 480, 320, 8))
    assert (info.frames, info.width, info.height, info.fps, info.codec) == (17, 480, 320, 8.0, "h264")
    assert info.duration_s == pytest.approx(17 / 8)
    with pytest.raises(ServerError, match="empty body"):
        check_mp4(b"")
    with pytest.raises(ServerError, match="not a playable MP4"):
        check_mp4(b"\x00\x00\x00\x18ftypmp42" + b"garbage" * 100)
    with pytest.raises(ServerError, match="not an MP4"):
        buf = io.BytesIO()
        Image.new("RGB", (8, 8)).save(buf, "PNG")
        check_mp4(buf.getvalue())


def test_the_client_is_a_job_submit_poll_result() -> None:
    mp4 = make_mp4(9, 160, 96, 8)
    transport = MockVideoTransport(lambda b, c: VideoPayload(mp4, 0.25, "req-1"), polls_until_done=3)
    client = VideoClient(transport)
    request, body = client.prepare(VideoRequest("p", frames=9, width=160, height=96, reference=png(64, 64)))
    handle = client.submit(body)
    assert transport.submitted == [(body.body, body.content_type)]  # the client's bytes, as they are
    assert JobHandle.from_dict(json.loads(json.dumps(handle.to_dict()))) == handle
    states = [client.poll(handle).state for _ in range(3)]
    assert states == ["running"] * 3 and client.poll(handle).state == "succeeded"
    assert client.result(handle).mp4 == mp4
    result = VideoClient(MockVideoTransport(lambda b, c: VideoPayload(mp4, 0.25, "req-2"), polls_until_done=2)).generate(request)
    assert result.info.frames == 9 and result.request.seed == request.seed and result.request_id == "req-2"
    assert result.model_s == 0.25 and result.timings()["overhead_s"] == pytest.approx(result.wall_s - 0.25, abs=1e-3)


def test_a_failed_job_raises_the_servers_text() -> None:
    def fail(body, ct):
        raise ServerError("the video server refused the request (HTTP 400): bad reference image")

    with pytest.raises(JobFailed, match="bad reference image"):
        VideoClient(MockVideoTransport(fail)).generate(VideoRequest("p"))


def test_jobs_record_success_failure_and_timeout(tmp_path) -> None:
    history = History(tmp_path)
    ok = VideoJobs(VideoClient(MockVideoTransport(lambda b, c: VideoPayload(make_mp4(5, 64, 64, 4), 0.5, "r"),
                                                  polls_until_done=2)), history)
    job = ok.start(VideoRequest("ok", width=64, height=64, frames=5, fps=4, reference=png(300, 100)))
    assert job.status == "queued" and job.has(REFERENCE_FILE)  # recorded before it runs
    done = ok.wait(job.id, 10)
    assert done.status == "succeeded" and done.meta["frames"] == 5 and done.meta["duration_s"] == 1.25
    assert done.timings["model_s"] == 0.5 and done.timings["wall_s"] > 0 and done.handle["transport"] == "mock"
    again = job_request(done)
    assert (again.prompt, again.frames, again.seed) == ("ok", 5, done.params["seed"])
    assert Image.open(io.BytesIO(again.reference)).size == (64, 64)

    def broken(body, ct):
        raise BackendUnreachable("cannot reach the video server at http://gpu:8091")

    bad = VideoJobs(VideoClient(MockVideoTransport(broken)), history).start(VideoRequest("bad"))
    slow = VideoJobs(VideoClient(MockVideoTransport(lambda b, c: VideoPayload(b"", 1), polls_until_done=10**9)),
                     history, job_timeout_s=0.5).start(VideoRequest("slow"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(history.jobs.get(j.id).finished for j in (bad, slow)):
        time.sleep(0.05)
    assert history.jobs.get(bad.id).status == "failed" and "http://gpu:8091" in history.jobs.get(bad.id).error
    assert history.jobs.get(slow.id).status == "failed" and "no result" in history.jobs.get(slow.id).error
    assert history.jobs.get(done.id).status == "succeeded"  # nothing else lost
    with pytest.raises(InvalidInput):
        ok.start(VideoRequest("", frames=17))
    assert len(history.jobs.list("video")) == 3


def test_a_non_mp4_answer_fails_the_job(tmp_path) -> None:
    history = History(tmp_path)
    jobs = VideoJobs(VideoClient(MockVideoTransport(lambda b, c: VideoPayload(b"<html>oops</html>", 1.0))), history)
    job = jobs.wait(jobs.start(VideoRequest("p")).id, 10)
    assert job.status == "failed" and "not a playable MP4" in job.error and job.outputs == []


# The whole data folder on a real tiny filesystem (tests/disk_support.py): the background runner the Video page
# uses (VideoJobs) meets a real ENOSPC writing a finished MP4.
_FULL_DISK_SCRIPT = """
import json, sys
from pathlib import Path
import av, numpy as np, io
from fractions import Fraction
from pathlib import Path
from services.history import History
from services.videos import MockVideoTransport, VideoClient, VideoJobs, VideoPayload, VideoRequest
from tests.test_videos import make_mp4

def noisy_mp4():  # incompressible frames: an MP4 far larger than the disk's free space
    buf, rng = io.BytesIO(), np.random.default_rng(0)
    with av.open(buf, "w", format="mp4") as c:
        s = c.add_stream("libx264", rate=4)
        s.width, s.height, s.pix_fmt, s.time_base = 256, 256, "yuv420p", Fraction(1, 4)
        for i in range(8):
            f = av.VideoFrame.from_ndarray(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8), format="rgb24")
            f.pts = i
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return buf.getvalue()

data = Path(sys.argv[1])
history = History(data)
payloads = iter([noisy_mp4(), make_mp4(5, 64, 64, 4)])
jobs = VideoJobs(VideoClient(MockVideoTransport(lambda b, c: VideoPayload(next(payloads), 0.5))), history)
big = jobs.wait(jobs.start(VideoRequest("big", width=256, height=256, frames=9, fps=4)).id, 60)
small = jobs.wait(jobs.start(VideoRequest("small", width=64, height=64, frames=5, fps=4)).id, 60)
print(json.dumps({"big": [big.id, big.status, big.error, jobs.problem(big.id)],
                  "small": [small.status, small.error, len(small.read("video.mp4")) if small.outputs else 0],
                  "parts": sorted(str(p) for p in data.rglob("*.part"))}))
"""


def test_a_full_disk_fails_the_job_naming_the_disk_and_the_next_job_has_room(tmp_path) -> None:
    data = tmp_path / "data"
    r = run_on_tiny_disk(data, "320k", [sys.executable, "-c", _FULL_DISK_SCRIPT, str(data)], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    job_id, status, error, unrecorded = out["big"]
    assert status == "failed" and unrecorded is None  # recorded, not left running
    assert error == (f"No space left on device writing {data}/media/{job_id}/video.mp4: free space on {data}/media "
                     "(the media folder, media_url) and run it again")
    assert out["parts"] == []  # the partial file is gone: its space is free again
    assert out["small"][:2] == ["succeeded", None] and out["small"][2] > 0  # so the next job is kept


def test_a_failure_the_full_history_cannot_record_is_kept_for_whoever_waits(tmp_path, monkeypatch) -> None:
    """The disk so full that even the failure cannot be written: the runner says why (the CLI prints it) and
    the record stays unfinished, for History.recover in a later process, never silently 'running: None'."""
    from services.history import HistoryError, JobStore

    history = History(tmp_path)
    delivered: list[bytes] = []
    jobs = VideoJobs(VideoClient(MockVideoTransport(lambda b, c: VideoPayload(make_mp4(5, 64, 64, 4), 0.5))), history)

    def full(*_a, **_k):
        raise HistoryError(f"No space left on device writing {history.db_path}: free space on {tmp_path} and run it "
                           "again")

    monkeypatch.setattr(JobStore, "succeed", full)
    monkeypatch.setattr(JobStore, "fail", full)
    job = jobs.wait(jobs.start(VideoRequest("kept", width=64, height=64, frames=5, fps=4),
                               deliver=delivered.append).id, 30)
    assert job.status == "running" and len(delivered) == 1 and check_mp4(delivered[0], where="t").frames == 5
    assert jobs.problem(job.id) == (f"No space left on device writing {history.db_path}: free space on {tmp_path} "
                                    "and run it again (the history could not record this)")


# ---------------------------------------------------------------------------------------------------------
# a small misbehaving vLLM-Omni on loopback (real HTTP), for faults the offline engine does not make
@pytest.fixture(scope="module")
def fault_server() -> Iterator[str]:
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, Response

    app = FastAPI()

    @app.post("/v1/videos/sync")
    async def sync(request: Request):
        form = await request.form()
        prompt = str(form.get("prompt"))
        if prompt == "oom":
            return JSONResponse({"error": {"message": "CUDA out of memory", "type": "InternalServerError", "code": 500}},
                                status_code=500)
        if prompt.startswith("slow"):  # "slow" or "slow:<seconds>"
            import asyncio
            await asyncio.sleep(float(prompt.split(":", 1)[1]) if ":" in prompt else 0.5)
        return Response(make_mp4(int(form["num_frames"]), int(form["width"]), int(form["height"]), int(form["fps"])),
                        media_type="video/mp4", headers={"X-Inference-Time-S": "0.123", "X-Request-Id": "fault-1"})

    @app.get("/health")
    async def health():
        return {"status": "healthy"}

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                          timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(5)


def test_server_5xx_is_recorded_with_its_message_and_nothing_else_is_lost(fault_server: str, tmp_path) -> None:
    history = History(tmp_path)
    jobs = VideoJobs(VideoClient(OmniVideoTransport(fault_server)), history)
    good = jobs.start(VideoRequest("fine", frames=5, width=64, height=64))
    bad = jobs.start(VideoRequest("oom", frames=5, width=64, height=64, reference=png(64, 64)))
    good, bad = jobs.wait(good.id, 20), jobs.wait(bad.id, 20)
    assert bad.status == "failed" and "HTTP 500" in bad.error and "CUDA out of memory" in bad.error
    assert bad.has(REFERENCE_FILE) and bad.params["frames"] == 5
    assert good.status == "succeeded" and good.meta["request_id"] == "fault-1" and good.timings["model_s"] == 0.123


def test_a_running_job_is_visible_as_running(fault_server: str, tmp_path) -> None:
    history = History(tmp_path)
    jobs = VideoJobs(VideoClient(OmniVideoTransport(fault_server)), history)
    job = jobs.start(VideoRequest("slow", frames=5, width=64, height=64))
    deadline = time.monotonic() + 5
    while history.jobs.get(job.id).status == "queued" and time.monotonic() < deadline:
        time.sleep(0.01)
    running = history.jobs.get(job.id)
    assert running.status == "running" and running.handle["resumable"] is False and job.id in jobs.running()
    assert jobs.wait(job.id, 20).status == "succeeded"


def test_an_unreachable_video_server_is_named(tmp_path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    jobs = VideoJobs(VideoClient(OmniVideoTransport(url, connect_timeout=2)), History(tmp_path))
    job = jobs.wait(jobs.start(VideoRequest("p")).id, 20)
    assert job.status == "failed" and url in job.error and "is it running" in job.error


# ---------------------------------------------------------------------------------------------------------
# against the real offline engine
@pytest.fixture(scope="module")
def client(engine_url: str) -> VideoClient:
    from services.videos import omni_client

    return omni_client(engine_url, Settings())


def test_real_engine_default_video_from_a_generated_image(client: VideoClient, engine_url: str) -> None:
    from services.images import ImageRequest
    from services.images import omni_client as images

    picture = images(engine_url, Settings()).generate(ImageRequest("a harbour at night", size="1024x1024", seed=3))
    result = client.generate(VideoRequest("waves roll in slowly", reference=picture.image, seed=9))
    frames, w, h, fps = decode(result.mp4)
    assert (frames, w, h, fps) == (17, 480, 320, 8.0)
    assert result.info.duration_s == pytest.approx(17 / 8)
    assert result.model_s is not None and 0 < result.model_s <= result.wall_s
    assert result.request_id
    assert Image.open(io.BytesIO(result.reference_jpeg)).size == (480, 320)


def test_real_engine_rounds_like_wan_and_jobs_are_recorded(client: VideoClient, tmp_path) -> None:
    jobs = VideoJobs(client, History(tmp_path))
    job = jobs.wait(jobs.start(VideoRequest("no reference", width=200, height=120, frames=10, fps=12, steps=4)).id, 60)
    assert job.status == "succeeded", job.error
    frames, w, h, fps = decode(job.read("video.mp4"))
    assert (frames, w, h, fps) == (9, 192, 112, 12.0)  # 4k+1 frames, multiples of 16
    assert job.meta["smoke_test"] is True and job.timings["model_s"] > 0


def test_real_engine_rejects_a_bad_reference_and_the_job_says_so(client: VideoClient) -> None:
    from urllib3.filepost import encode_multipart_formdata

    from protocol.videos import VideoSyncForm

    # a body the client would never build (its reference is checked first): the server's own 400
    form = VideoSyncForm(prompt="p", num_frames=5, image_reference='{"image_url": "data:image/jpeg;base64,AAAA"}')
    body, content_type = encode_multipart_formdata(form.form_fields())
    state = client.wait(client.transport.submit(body, content_type), timeout_s=30)
    assert state.state == "failed" and "HTTP 400" in state.error and "image" in state.error.lower()
