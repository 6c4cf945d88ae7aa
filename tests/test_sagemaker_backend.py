"""The SageMaker backend end to end, with the real clients against the local SageMaker emulator.

The HTTP/2 SDK over TLS (the emulator's test CA reached through AWS_CA_BUNDLE), boto3 `invoke_endpoint`
and `invoke_endpoint_async` through moto S3 — all forwarding to the real offline engine. Endpoints and
credentials come from the standard AWS_* variables, the way a user's shell provides them.
"""

from __future__ import annotations

from protocol.catalog import FAMILY_NAMES

import asyncio
import io
import json
import os
import subprocess
import sys
import time
import wave
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from botocore.stub import Stubber
from PIL import Image

from protocol.errors import BackendUnreachable, ConfigError, ServerError, StreamError
from services.backend import create_backend
from services.history import History
from services.images import EditReference, ImageEditRequest, ImageRequest, record_edit
from protocol.limits import ASYNC_INLINE_LIMIT, REALTIME_PAYLOAD_MAX_BYTES
from services.sagemaker import resolve_targets
from services.settings import Settings
from services.speech import speech_config
from services.videos import VideoJobs, VideoRequest, check_mp4

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import EmulatorHandle, deploy_endpoint
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent

TEXT = "Hello from SageMaker. This answer crossed HTTP/2 and a WebSocket. Every sentence comes back as audio!"
VOICE_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"


def settings(**over: Any) -> Settings:
    base = {"backend": "sagemaker", "voice_endpoint": "sm-voice", "image_endpoint": "sm-image",
            "video_endpoint": "sm-video", "connect_timeout_s": 5.0, "request_timeout_s": 30.0,
            "state_file": "/nonexistent/state.json"}
    return Settings.model_validate({**base, **over})


def say(backend: Any, text: str = TEXT, voice: str | None = "default") -> Any:
    return asyncio.run(asyncio.wait_for(backend.client("voice").say(speech_config(voice, split_granularity="sentence"), text), 90))


def loud(pcm: bytes) -> bool:
    samples = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2")
    return samples.size > 0 and int(np.abs(samples).max()) > 1000


@pytest.fixture
def voice(emulator_env: EmulatorHandle) -> str:
    deploy_endpoint(emulator_env, "sm-voice", environment={"SM_VLLM_MODEL": VOICE_MODEL})
    return "sm-voice"


@pytest.fixture
def video(emulator_env: EmulatorHandle, bucket: str) -> str:
    deploy_endpoint(emulator_env, "sm-video", async_output=f"s3://{bucket}/outputs", async_failure=f"s3://{bucket}/failures",
                    environment={"SM_VLLM_MODEL": "Wan-AI/Wan2.1-VACE-1.3B-diffusers"})
    return "sm-video"


def keys(emulator: EmulatorHandle, bucket: str, prefix: str = "") -> list[str]:
    listed = emulator.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for o in listed.get("Contents", []))


def big_reference() -> bytes:
    """A noisy photo-sized PNG: its fitted JPEG keeps the multipart body over the 128 000-byte inline limit."""
    rng = np.random.default_rng(5)
    out = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (720, 1280, 3), dtype=np.uint8)).save(out, "PNG")
    return out.getvalue()


# -- speech ---------------------------------------------------------------------------------------
def test_speech_streams_several_sentences_over_http2(emulator_env: EmulatorHandle, voice: str) -> None:
    backend = create_backend(settings())
    voices, languages = backend.client("voice").voices(), backend.client("voice").languages()
    assert voices[0] == "default" and "vivian" in voices and "English" in languages  # from the endpoint's model
    u = say(backend)
    assert u.ok, u.error
    assert u.stats.sentences == 3 and u.stats.state == "done" and u.stats.ttfa_ms is not None
    assert len(u.pcm) > 2000 and loud(u.pcm)
    with wave.open(io.BytesIO(u.wav())) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24_000, 1, 2)
        assert w.getnframes() * 2 == len(u.pcm)
    health = backend.health()  # only the voice endpoint exists here
    assert not health.ok and health.detail.startswith("voice InService") and "image sm-image not found" in health.detail


def test_speech_invocation_path_is_normalised(emulator_env: EmulatorHandle, voice: str) -> None:
    from services.aws import AwsSession
    from services.speech.sagemaker_http2 import Http2SpeechTransport, invocation_path

    assert invocation_path("/v1/audio/speech/stream") == invocation_path("v1/audio/speech/stream") == "v1/audio/speech/stream"
    with pytest.raises(ConfigError):
        invocation_path(" / ")
    transport = Http2SpeechTransport(AwsSession(emulator_env.region), voice, path="/v1/audio/speech/stream")
    assert transport.path == "v1/audio/speech/stream"


def test_unknown_voice_is_the_servers_message_and_the_session_stays_usable(emulator_env: EmulatorHandle, voice: str) -> None:
    backend = create_backend(settings())

    async def scenario() -> tuple[Any, Any]:
        async with backend.client("voice").open(speech_config("nobody-by-that-name")) as session:
            bad = await session.say("One sentence.")
            await session.configure(speech_config("default"))
            good = await session.say("Now with the default voice.")
            return bad, good

    bad, good = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert isinstance(bad.error, ServerError) and "Invalid voice 'nobody-by-that-name'" in str(bad.error)
    assert good.ok and loud(good.pcm)


def test_unknown_endpoint_and_endpoint_not_in_service(emulator_env: EmulatorHandle) -> None:
    missing = say(create_backend(settings(voice_endpoint="never-created")))
    assert missing.error is not None and "never-created" in str(missing.error) and "not found" in str(missing.error)
    emulator_env.configure(delays={"create_s": 30})
    deploy_endpoint(emulator_env, "slow-voice", wait=False)
    creating = say(create_backend(settings(voice_endpoint="slow-voice")))
    assert creating.error is not None and "Creating" in str(creating.error) and "InService" in str(creating.error)


def test_missing_credentials_name_what_to_do(emulator_env: EmulatorHandle, voice: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key)
    backend = create_backend(settings())
    u = say(backend)
    assert isinstance(u.error, ConfigError) and "no AWS credentials" in str(u.error) and "aws sso login" in str(u.error)
    with pytest.raises(ConfigError, match="no AWS credentials"):
        backend.client("image").generate(ImageRequest("a lighthouse", size="128x96"))
    assert not backend.health().ok and "no AWS credentials" in backend.health().detail


def test_tls_failure_is_a_message_within_the_connect_timeout(emulator_env: EmulatorHandle, voice: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_CA_BUNDLE")  # the emulator's certificate is now untrusted
    backend = create_backend(settings(connect_timeout_s=3.0))
    u = say(backend)
    assert isinstance(u.error, BackendUnreachable) and "AWS_CA_BUNDLE" in str(u.error)
    # The bound that ended it is the connect timeout (the CRT alone takes ~20 s per attempt), named in the message;
    # no wall-clock figure, which a busy machine would stretch.
    assert "did not answer within 3 s" in str(u.error)


def test_credentials_expiring_mid_stream(emulator_env: EmulatorHandle, voice: str) -> None:
    emulator_env.set_faults(bidi_expire_after_frames=1)  # the session.config passes, the text does not
    u = say(create_backend(settings()))
    assert isinstance(u.error, StreamError | ServerError)
    assert "expired" in str(u.error) and "aws sso login" in str(u.error)


def test_stream_cut_mid_audio_keeps_the_audio(emulator_env: EmulatorHandle, voice: str) -> None:
    emulator_env.set_faults(bidi_cut_after_output_parts=4)  # audio.start + some PCM, then the stream is reset
    u = say(create_backend(settings()))
    assert isinstance(u.error, StreamError) and "kept" in str(u.error)
    assert len(u.pcm) > 0 and u.stats.state == "failed"
    assert len(u.wav()) == 44 + len(u.pcm)  # still a playable WAV


# -- images ---------------------------------------------------------------------------------------
def test_image_through_invoke_endpoint(emulator_env: EmulatorHandle) -> None:
    deploy_endpoint(emulator_env, "sm-image", environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    backend = create_backend(settings())
    result = backend.client("image").generate(ImageRequest("a lighthouse at dawn", size="128x96", seed=11))
    assert result.format == "png" and result.image.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(result.image)) as im:
        assert im.size == (128, 96)
    assert result.seed == 11 and result.model_s is not None and result.request_s > 0
    with pytest.raises(ServerError) as refused:  # the engine's own words, carried by ModelError
        backend.client("image").generate(ImageRequest("a lighthouse", size="128x96", model="not-the-model"))
    assert "Model mismatch" in str(refused.value) and refused.value.status == 400
    with pytest.raises(ConfigError, match="OMNI_STUDIO_IMAGE_ENDPOINT"):
        create_backend(settings(image_endpoint=None)).client("image").generate(ImageRequest("x", size="128x96"))


def solid(color: tuple[int, int, int], size: tuple[int, int] = (300, 200)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def noisy_png(w: int, h: int, seed: int) -> bytes:
    """An incompressible PNG of about w×h×3 bytes."""
    out = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)).save(out, "PNG")
    return out.getvalue()


def test_image_edit_through_invoke_endpoint(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "sm-image", environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    backend = create_backend(settings())
    refs = (EditReference(solid((230, 20, 20)), "red.png"), EditReference(solid((20, 30, 230)), "blue.png"))
    result = backend.client("image").edit(ImageEditRequest("make them friends", refs, size="256x128", seed=5))
    assert result.fitting is None and result.preview and result.seed == 5
    with Image.open(io.BytesIO(result.image)) as im:  # the multipart body crossed the emulator as it was
        assert im.size == (256, 128)
        px = np.asarray(im.convert("RGB"), dtype=int)
    assert px[:, :128, 0].mean() > 150 > px[:, :128, 2].mean() and px[:, 128:, 2].mean() > 150 > px[:, 128:, 0].mean()
    with pytest.raises(ServerError) as refused:  # the engine's own words, carried by ModelError
        backend.client("image").edit(ImageEditRequest("x", refs[:1], size="64x64", model="not-the-model"))
    assert "Model mismatch" in str(refused.value) and refused.value.status == 400
    with pytest.raises(ConfigError, match="OMNI_STUDIO_IMAGE_ENDPOINT"):
        create_backend(settings(image_endpoint=None)).client("image").edit(ImageEditRequest("x", refs[:1]))


def test_image_edit_over_6_mb_is_fitted_and_says_so(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "sm-image", environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    backend = create_backend(settings())
    refs = tuple(EditReference(noisy_png(2000, 1500, seed), f"photo-{seed}.png") for seed in range(3))
    unfitted = ImageEditRequest("one photo from three", refs, size="320x240", seed=2)
    from services.images import prepare_edit

    _, raw = prepare_edit(unfitted)  # what a vLLM-Omni URL gets: the files as they are
    assert len(raw) > REALTIME_PAYLOAD_MAX_BYTES
    with pytest.raises(ServerError) as too_large:  # SageMaker refuses it as it is
        backend.client("image").transport.edit(raw.body, raw.content_type)
    assert too_large.value.status == 413 and str(REALTIME_PAYLOAD_MAX_BYTES) in str(too_large.value)
    job = record_edit(backend.client("image"), History(tmp_path), unfitted)
    assert job.status == "succeeded", job.error
    fitting = job.meta["fitting"]
    assert fitting.startswith("3 references") and "sent as JPEG q" in fitting and "SageMaker's 6 MB limit" in fitting
    assert all(r["sent"]["type"] == "image/jpeg" for r in job.params["references"])
    assert job.params["body_bytes"] <= REALTIME_PAYLOAD_MAX_BYTES
    assert [job.input_file(f"reference-{i}.png") for i in (1, 2, 3)] == [r.data for r in refs]
    with Image.open(io.BytesIO(job.output_files()[0][1])) as im:
        assert im.size == (320, 240)


# -- video ----------------------------------------------------------------------------------------
def test_small_video_request_goes_inline(emulator_env: EmulatorHandle, bucket: str, video: str) -> None:
    backend = create_backend(settings(bucket=bucket))
    result = backend.client("video").generate(VideoRequest("waves on a beach", width=96, height=64, frames=5, fps=8, steps=4, seed=3),
                                     timeout_s=60)
    assert result.body_bytes <= ASYNC_INLINE_LIMIT
    assert result.info.frames == 5 and (result.info.width, result.info.height) == (96, 64)
    assert keys(emulator_env, bucket, "omni-studio/requests/") == []  # nothing uploaded
    assert len(keys(emulator_env, bucket, "outputs/")) == 1  # the endpoint's output object is kept


def test_large_video_request_goes_through_s3_and_is_cleaned_up(emulator_env: EmulatorHandle, bucket: str, video: str) -> None:
    backend = create_backend(settings(bucket=bucket, prefix="studio-x"))
    client = backend.client("video")
    request, body = client.prepare(VideoRequest("the camera pushes in", width=640, height=368, frames=5, steps=4,
                                                reference=big_reference(), seed=9))
    assert len(body) > ASYNC_INLINE_LIMIT
    handle = client.submit(body)
    upload = handle.data["input"]
    assert upload.startswith(f"s3://{bucket}/studio-x/requests/") and upload.endswith(".multipart")
    head = emulator_env.client("s3").head_object(Bucket=bucket, Key=upload.split("/", 3)[3])
    assert head["ServerSideEncryption"] == "AES256"
    state = client.wait(handle, timeout_s=60)
    assert state.state == "succeeded", state.error
    info = check_mp4(client.result(handle).mp4)
    assert info.frames == 5 and (info.width, info.height) == (640, 368)
    assert keys(emulator_env, bucket, "studio-x/requests/") == []  # the request object is removed afterwards


def test_large_request_without_a_bucket_says_what_to_set(emulator_env: EmulatorHandle, video: str) -> None:
    client = create_backend(settings()).client("video")
    _, body = client.prepare(VideoRequest("x", width=640, height=368, frames=5, steps=4, reference=big_reference()))
    with pytest.raises(ConfigError, match="OMNI_STUDIO_BUCKET"):
        client.submit(body)


def test_failure_object_text_is_recorded_on_the_job(emulator_env: EmulatorHandle, bucket: str, video: str, tmp_path: Path) -> None:
    history = History(tmp_path / "data")
    jobs = VideoJobs(create_backend(settings(bucket=bucket)).client("video"), history)
    job = jobs.start(VideoRequest("waves", width=96, height=64, frames=5, steps=4, model="not-the-video-model"))
    done = jobs.wait(job.id, timeout=60)
    assert done.status == "failed" and "Model mismatch" in (done.error or "") and "failures/" in (done.error or "")
    assert done.params["width"] == 96  # the settings are kept with the failure


CHILD = """
import os, sys, time
from services.backend import create_backend
from services.history import History
from services.settings import load_settings
from services.videos import VideoJobs, VideoRequest
history = History(sys.argv[1])
jobs = VideoJobs(create_backend(load_settings()).client("video"), history)
job = jobs.start(VideoRequest("a slow pan over hills", width=96, height=64, frames=9, steps=4, seed=4))
for _ in range(500):
    if history.jobs.get(job.id).handle:
        break
    time.sleep(0.02)
print(job.id, flush=True)
os._exit(0)  # the studio dies while the job runs on the endpoint
"""


def test_jobs_survive_a_restart_and_are_polled_again(emulator_env: EmulatorHandle, bucket: str, video: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    emulator_env.configure(delays={"async_s": 2.0})  # the job is still on the endpoint when the studio dies
    for key, value in {"OMNI_STUDIO_BACKEND": "sagemaker", "OMNI_STUDIO_VIDEO_ENDPOINT": video,
                       "OMNI_STUDIO_BUCKET": bucket, "OMNI_STUDIO_STATE_FILE": str(tmp_path / "none.json")}.items():
        monkeypatch.setenv(key, value)
    child = run_cli([sys.executable, "-c", CHILD, str(tmp_path / "data")], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    job_id = child.stdout.split()[-1]
    history = History(tmp_path / "data")
    assert history.jobs.get(job_id).status == "running"
    jobs = VideoJobs(create_backend(settings(bucket=bucket)).client("video"), history)
    assert jobs.resumed == [job_id]
    finished = jobs.wait(job_id, timeout=60)
    assert finished.status == "succeeded", finished.error
    assert finished.owner == history.owner
    with av.open(io.BytesIO(finished.output_files()[0][1])) as c:
        assert sum(1 for _ in c.decode(video=0)) == 9


def test_poll_timeout_marks_the_job_without_losing_it(emulator_env: EmulatorHandle, bucket: str, tmp_path: Path) -> None:
    # An async endpoint whose config points at a bucket that does not exist: the output never appears.
    deploy_endpoint(emulator_env, "sm-video", async_output=f"s3://{bucket}-gone/outputs")
    history = History(tmp_path / "data")
    jobs = VideoJobs(create_backend(settings(bucket=bucket)).client("video"), history, job_timeout_s=1.5)
    job = jobs.start(VideoRequest("waves", width=96, height=64, frames=5, steps=4))
    done = jobs.wait(job.id, timeout=30)
    assert done.status == "failed" and "no result" in (done.error or "") and "may still finish" in (done.error or "")
    assert done.handle and done.handle["data"]["output"].startswith(f"s3://{bucket}-gone/outputs/")


def test_s3_access_denied_is_named(emulator_env: EmulatorHandle, bucket: str, video: str) -> None:
    backend = create_backend(settings(bucket=bucket))
    transport = backend.client("video").transport
    s3 = transport.aws.client("s3")
    with Stubber(s3) as stub:
        stub.add_client_error("put_object", service_error_code="AccessDenied", service_message="Access Denied",
                              http_status_code=403)
        with pytest.raises(ServerError) as denied:
            transport.submit(b"x" * (ASYNC_INLINE_LIMIT + 1), "multipart/form-data; boundary=x")
    message = str(denied.value)
    assert "access denied" in message and f"s3://{bucket}/omni-studio/requests/" in message and "permission" in message


# -- settings from the infra state file -----------------------------------------------------------
def test_endpoint_names_come_from_the_state_file(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"region": "eu-west-1", "endpoint_names": {"voice": "v1", "image": "i1", "video": "x1"},
                                 "bucket": "b1", "prefix": "p1", "kms_key": None}))
    t = resolve_targets(Settings.model_validate({"backend": "sagemaker", "state_file": str(state)}))
    assert (t.region, t.endpoints, t.bucket, t.prefix, t.source) == (
        "eu-west-1", {**dict.fromkeys(FAMILY_NAMES), "voice": "v1", "image": "i1", "video": "x1"}, "b1", "p1",
        str(state))  # the opt-in families' endpoints: none named
    explicit = resolve_targets(Settings.model_validate({"backend": "sagemaker", "state_file": str(state),
                                                        "region": "us-west-2", "image_endpoint": "mine"}))
    assert explicit.region == "us-west-2" and explicit.endpoints["image"] == "mine" and explicit.endpoints["voice"] == "v1"
    state.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read"):
        resolve_targets(Settings.model_validate({"backend": "sagemaker", "state_file": str(state)}))


# -- the command line -----------------------------------------------------------------------------
def cli(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(tmp / "data"), "OMNI_STUDIO_CONFIG": ""}
    return run_cli([sys.executable, "-m", "services", *args, "--backend", "sagemaker", "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def test_cli_speak_image_video_on_sagemaker(emulator_env: EmulatorHandle, voice: str, bucket: str, video: str,
                                            tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "sm-image", environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    state = tmp_path / "state.json"  # the flat keys `python -m infra deploy` writes
    state.write_text(json.dumps({"region": emulator_env.region, "bucket": bucket, "prefix": "omni-studio",
                                 "endpoint_names": {"voice": voice, "image": "sm-image", "video": video}}))
    spoken = cli("speak", "--text", "Hello from the command line. Two sentences.", "--out", str(tmp_path / "s.wav"),
                 "--state-file", str(state), tmp=tmp_path)
    assert spoken.returncode == 0, spoken.stderr
    figures = json.loads(spoken.stdout)
    assert figures["backend"] == "sagemaker" and "sm-voice" in figures["target"]
    with wave.open(str(tmp_path / "s.wav")) as w:
        assert w.getframerate() == 24_000 and w.getnframes() > 1000
    image = cli("image", "--prompt", "a lighthouse", "--size", "128x96", "--out", str(tmp_path / "i.png"),
                "--state-file", str(state), tmp=tmp_path)
    assert image.returncode == 0, image.stderr
    assert Image.open(tmp_path / "i.png").size == (128, 96)
    ref = tmp_path / "ref.png"
    ref.write_bytes(big_reference())
    made = cli("video", "--prompt", "the camera pushes in", "--image", str(ref), "--width", "640", "--height", "368",
               "--frames", "5", "--steps", "4", "--out", str(tmp_path / "v.mp4"), "--state-file", str(state), tmp=tmp_path)
    assert made.returncode == 0, made.stderr
    assert check_mp4((tmp_path / "v.mp4").read_bytes()).frames == 5
    assert keys(emulator_env, bucket, "omni-studio/requests/") == []  # uploaded through S3, then removed


def test_cli_image_edit_on_sagemaker_reports_the_fitting(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "sm-image", environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"region": emulator_env.region, "endpoint_names": {"image": "sm-image"}}))
    ref = tmp_path / "photo.png"
    ref.write_bytes(noisy_png(2048, 1536, 7))
    assert ref.stat().st_size > REALTIME_PAYLOAD_MAX_BYTES
    r = cli("image", "--edit", str(ref), "--prompt", "warmer light", "--out", str(tmp_path / "e.png"),
            "--state-file", str(state), tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures["edit"] is True and "to fit SageMaker's 6 MB limit" in figures["fitting"]
    assert Image.open(tmp_path / "e.png").size == (1184, 880)  # 4:3 at about 1 MP


def test_cli_names_the_missing_endpoint(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    r = cli("image", "--prompt", "x", "--size", "128x96", "--out", str(tmp_path / "i.png"),
            "--state-file", str(tmp_path / "none.json"), tmp=tmp_path)
    assert r.returncode == 1 and "OMNI_STUDIO_IMAGE_ENDPOINT" in r.stderr and "python -m infra deploy" in r.stderr


# -- voices: what the voice endpoint can do, and saved voices through invoke_endpoint -----------------------------
BASE_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-Base"


def voice_reference(seconds: float = 5.0) -> bytes:
    from tests.test_reference_audio import encode, speech_like

    return encode(speech_like(seconds, 24_000), 24_000)


def test_a_cloning_endpoint_takes_a_voice_upload_and_speaks_with_it(emulator_env: EmulatorHandle, engine_url: str,
                                                                      tmp_path: Path) -> None:
    import uuid

    from protocol.errors import InvalidInput
    from services.speech import OmniVoices

    deploy_endpoint(emulator_env, "sm-clone", environment={"SM_VLLM_MODEL": BASE_MODEL})
    backend = create_backend(settings(voice_endpoint="sm-clone", data_dir=str(tmp_path)))
    assert backend.client("voice").task_types() == ("Base",)
    name = f"sm-{uuid.uuid4().hex[:6]}"
    saved = backend.client("voices").add(name, voice_reference(), "consent-sm-1", ref_text="What it says.", who="tester")
    assert (saved.name, saved.consent_id, saved.source) == (name, "consent-sm-1", "record")
    # it reached the container (the engine behind the emulator) through InvokeEndpoint
    assert name in {v.name for v in OmniVoices(engine_url, History(tmp_path / "other")).list()}
    (listed,) = backend.client("voices").list()  # the studio's own record: SageMaker cannot list
    assert (listed.name, listed.consent_id, listed.who) == (name, "consent-sm-1", "tester")
    assert backend.client("voices").notice and "cannot be deleted" in backend.client("voices").notice

    config = backend.client("voice").check(speech_config(name, task_type="Base", split_granularity="sentence"))
    u = asyncio.run(asyncio.wait_for(backend.client("voice").say(config, "A cloned voice over HTTP/2."), 90))
    assert u.ok, u.error
    assert loud(u.pcm)

    with pytest.raises(InvalidInput, match="already saved"):
        backend.client("voices").add(name.upper(), voice_reference(), "consent-sm-2")
    said = backend.client("voices").delete(name)
    assert "cannot delete" in said and "stays on SageMaker endpoint sm-clone" in said
    assert backend.client("voices").list() == []
    (kept,) = History(tmp_path).voices.list(include_removed=True)
    assert (kept.removal, kept.consent_id, kept.target) == ("forgotten", "consent-sm-1", f"sagemaker:{emulator_env.region}/sm-clone")
    assert name in {v.name for v in OmniVoices(engine_url, History(tmp_path / "other")).list()}  # still there
    with pytest.raises(InvalidInput, match="no record"):
        backend.client("voices").delete(name)


def test_a_refused_upload_is_the_containers_message_and_leaves_no_record(emulator_env: EmulatorHandle,
                                                                         tmp_path: Path) -> None:
    from urllib3 import encode_multipart_formdata

    from services.speech import SageMakerVoices

    deploy_endpoint(emulator_env, "sm-clone", environment={"SM_VLLM_MODEL": BASE_MODEL})
    voices = create_backend(settings(voice_endpoint="sm-clone", data_dir=str(tmp_path))).client("voices")
    assert isinstance(voices, SageMakerVoices)
    # a sample the container refuses (its MIME type), sent past the client's own checks
    body, content_type = encode_multipart_formdata(
        {"name": "x", "consent": "c", "audio_sample": ("x.txt", b"not audio", "text/plain")})
    with pytest.raises(ServerError, match="Unsupported MIME type: text/plain"):
        voices._upload(body, content_type)
    missing = create_backend(settings(voice_endpoint="never-created", data_dir=str(tmp_path))).client("voices")
    with pytest.raises(ServerError, match="never-created"):
        missing.add("someone", voice_reference(), "consent-x")
    assert History(tmp_path).voices.list(include_removed=True) == []  # nothing saved, nothing recorded


def test_a_task_type_the_voice_endpoint_lacks_names_the_deploy_command(emulator_env: EmulatorHandle, voice: str) -> None:
    from protocol.errors import InvalidInput

    backend = create_backend(settings())
    assert backend.client("voice").task_types() == ("CustomVoice",)
    with pytest.raises(InvalidInput) as err:
        backend.client("voice").check(speech_config(task_type="VoiceDesign", instructions="a calm voice"))
    message = str(err.value)
    assert f"serves {VOICE_MODEL}" in message and "not VoiceDesign" in message
    assert "python -m infra deploy --voice-model Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign" in message


def test_the_state_files_voice_model_says_what_the_endpoint_can_do(emulator_env: EmulatorHandle, voice: str,
                                                                   tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"region": emulator_env.region, "endpoint_names": {"voice": "sm-design"},
                                 "voice_model": "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"}))
    from_state = create_backend(settings(voice_endpoint=None, state_file=str(state)))
    assert from_state.client("voice").task_types() == ("VoiceDesign",)  # no such endpoint: read from the file, not SageMaker
    # an endpoint named in the settings is not the state file's: its own model counts
    assert create_backend(settings(state_file=str(state))).client("voice").task_types() == ("CustomVoice",)


def test_cli_voices_on_sagemaker(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    import uuid

    deploy_endpoint(emulator_env, "sm-clone", environment={"SM_VLLM_MODEL": BASE_MODEL})
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"region": emulator_env.region, "endpoint_names": {"voice": "sm-clone"},
                                 "voice_model": BASE_MODEL}))
    ref = tmp_path / "me.wav"
    ref.write_bytes(voice_reference())
    name = f"cli-{uuid.uuid4().hex[:6]}"
    added = cli("voices", "add", "--name", name, "--audio", str(ref), "--consent", "consent-cli",
                "--state-file", str(state), tmp=tmp_path)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["voice"]["consent_id"] == "consent-cli"
    listed = cli("voices", "list", "--state-file", str(state), tmp=tmp_path)
    body = json.loads(listed.stdout)
    assert [v["name"] for v in body["voices"]] == [name] and "cannot be deleted" in body["notice"]
    spoken = cli("speak", "--text", "Hello.", "--saved-voice", name, "--out", str(tmp_path / "s.wav"),
                 "--state-file", str(state), tmp=tmp_path)
    assert spoken.returncode == 0, spoken.stderr
    design = cli("speak", "--text", "Hello.", "--task-type", "VoiceDesign", "--instructions", "a calm voice",
                 "--out", str(tmp_path / "d.wav"), "--state-file", str(state), tmp=tmp_path)
    assert design.returncode == 1 and "--voice-model Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign" in design.stderr
    gone = cli("voices", "delete", "--name", name, "--state-file", str(state), tmp=tmp_path)
    assert gone.returncode == 0 and "stays on SageMaker endpoint sm-clone" in json.loads(gone.stdout)["result"]


def test_credentials_that_may_only_invoke_still_speak_with_vivian(emulator_env: EmulatorHandle, voice: str,
                                                                 tmp_path: Path) -> None:
    """A person whose IAM policy allows InvokeEndpoint* but no Describe* used to get "looking up the model behind
    endpoint …" and no speech. The model cannot be read, so every Qwen3-TTS voice is offered and sent as chosen,
    and one line says what could not be read; with voice_model in the settings nothing is looked up."""
    emulator_env.set_faults(deny_actions=["sagemaker:Describe*"])
    try:
        backend = create_backend(settings())
        try:
            assert "vivian" in backend.client("voice").voices()
            assert "could not read which model endpoint sm-voice serves" in backend.client("voice").note()
            assert "AccessDenied" in backend.client("voice").note() or "access denied" in backend.client("voice").note()
            utterance = say(backend, "Only allowed to invoke.", voice="vivian")
            assert utterance.ok and loud(utterance.pcm), utterance.error
        finally:
            backend.close()
        named = create_backend(settings(voice_model=VOICE_MODEL))
        try:
            assert named.client("voice").note() is None and "vivian" in named.client("voice").voices()
        finally:
            named.close()
        spoken = run_cli(
            [sys.executable, "-m", "services", "speak", "--text", "Hello.", "--voice", "vivian", "--backend", "sagemaker",
             "--out", str(tmp_path / "v.wav")], cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**os.environ, "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_CONFIG": "",
                 "OMNI_STUDIO_VOICE_ENDPOINT": voice, "OMNI_STUDIO_STATE_FILE": str(tmp_path / "none.json")})
        assert spoken.returncode == 0, spoken.stderr
        assert "note: could not read which model endpoint sm-voice serves" in spoken.stderr
        with wave.open(str(tmp_path / "v.wav")) as w:
            assert w.getnframes() > 1000
    finally:
        emulator_env.set_faults()
