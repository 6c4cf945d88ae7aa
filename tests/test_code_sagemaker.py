"""`python -m services code` for items made on SageMaker (services/code/sagemaker.py, sagemaker_shell.py).

The proof runs ONE session on the emulated account (`python -m emulator exec`, tests/code_sagemaker_session.py):
the endpoints deployed with `python -m infra deploy`, the items made the studio's way on `--backend sagemaker`, and
each item's code run unchanged in a folder of its own, the studio on no PYTHONPATH — boto3 and the HTTP/2 SDK at
AWS's own host names, curl signing with --aws-sigv4. The outputs are compared here with what the studio made: the
same PNG and WAV bytes for a seed, a video of as many frames (its request through S3: over the inline limit), a take
of the same length and format, the same transcript. The fast tests read the kept targets and look for secrets.
"""

from __future__ import annotations

import io
import json
import shlex
import sys
import time
import wave
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from protocol.limits import ASYNC_INLINE_LIMIT
from services.cli import build_parser
from services.code import generate, generate_all
from services.code.items import sagemaker_target
from services.code.sagemaker_shell import ENDPOINT_FLAG
from services.history import History
from emulator.exec import namespace_problem
from tests.test_emulator_exec import run_exec
from tests.test_videos import png
from tests import code_sagemaker_session as session

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "tests" / "code_sagemaker_session.py"
RUNS = [("image", "python"), ("image", "curl"), ("image", "cli"), ("edit", "python"), ("edit", "curl"),
        ("sound", "python"), ("sound", "curl"), ("video", "python"), ("video", "curl"), ("take", "python"),
        ("take", "curl"), ("transcript", "python"), ("transcript", "curl"), ("conversation", "python"),
        ("native", "python"), ("clip", "python")]


def frames(mp4: Path) -> int:
    with av.open(str(mp4)) as box:
        return sum(1 for _ in box.decode(video=0))


def shape(wav: bytes) -> tuple[int, int, int, int]:
    with wave.open(io.BytesIO(wav)) as w:
        return w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()


def noise_png(width: int, height: int) -> bytes:
    """A reference whose fitted JPEG makes the video request larger than an inline async body may be."""
    pixels = np.random.default_rng(1).integers(0, 255, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return out.getvalue()


def test_items_made_on_sagemaker_again_from_their_code_unchanged(tmp_path: Path) -> None:
    if (problem := namespace_problem()) is not None:
        pytest.skip(f"needs a private network and mount namespace (root and unshare, as in CI): {problem}")
    work = tmp_path / "work"
    work.mkdir()
    (work / "cat.png").write_bytes(png(160, 120))
    (work / "ref.png").write_bytes(noise_png(512, 384))
    started = time.monotonic()
    done = run_exec(tmp_path, [sys.executable, str(SESSION), str(work), json.dumps(RUNS)], env={"PYTHONPATH": str(ROOT)},
                    timeout=400)
    print(f"one exec session: {time.monotonic() - started:.1f} s, {done.stdout.strip().splitlines()[-1:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    made = json.loads((work / "made.json").read_text())
    out = {(r["what"], r["lang"]): Path(r["folder"]) for r in json.loads((work / "ran.json").read_text())["runs"]}
    said = {(r["what"], r["lang"]): r["stdout"] for r in json.loads((work / "ran.json").read_text())["runs"]}

    fox = (work / "fox.png").read_bytes()
    assert made["image"]["target"].startswith("SageMaker endpoint omni-studio-image-")
    for lang in ("python", "curl", "cli"):  # the seeded image, byte for byte
        assert (out["image", lang] / "image.png").read_bytes() == fox, lang
    code = (out["image", "python"] / "code.py").read_text()
    assert 'CustomAttributes="route=/v1/images/generations"' in code and "AKIA" not in code
    assert "--aws-sigv4" in (out["image", "curl"] / "code.sh").read_text()
    assert "--backend sagemaker" in (out["image", "cli"] / "code.sh").read_text()
    for lang in ("python", "curl"):  # the edit: the reference written beside the code, sent as multipart
        assert (out["edit", lang] / "reference-1.png").is_file()
        assert (out["edit", lang] / "image.png").read_bytes() == (work / "blue.png").read_bytes(), lang
        assert (out["sound", lang] / "sound.wav").read_bytes() == (work / "rain.wav").read_bytes(), lang

    assert made["video"]["params"]["body_bytes"] > ASYNC_INLINE_LIMIT  # the studio's request went through S3 …
    for lang in ("python", "curl"):  # … and so did the script's
        assert "through s3://omni-studio-123456789012-us-east-1/omni-studio/requests/" in said["video", lang], lang
        assert frames(out["video", lang] / "video.mp4") == frames(work / "waves.mp4") == 9, lang

    take = (work / "take.wav").read_bytes()
    assert shape((out["take", "python"] / "speech.wav").read_bytes()) == shape(take)  # the same stream, as PCM
    assert shape((out["take", "curl"] / "speech.wav").read_bytes())[:3] == shape(take)[:3]  # REST: one unit
    assert "model_invocation_path=PATH" in (out["take", "python"] / "code.py").read_text()
    for lang in ("python", "curl"):
        assert (out["transcript", lang] / "transcript.txt").read_text() == made["transcript"]["text"], lang
    # The conversation held on the endpoints (`converse --keep`, the take as its turn): its one-turn Python hears the
    # words the studio heard from the turn cut out of the kept recording, and speaks the chat endpoint's reply.
    talk = made["conversation"]
    assert "lights came on" in talk["heard"].lower() and talk["replied"] == session.ANSWER
    lines = said["conversation", "python"].splitlines()
    assert lines[-3:] == [f"you: {talk['heard']}", f"agent: {session.ANSWER}", "reply.wav"]
    channels, width, rate, n = shape((out["conversation", "python"] / "reply.wav").read_bytes())
    assert (channels, width, rate) == (1, 2, 24000) and n > rate // 2  # a spoken sentence, not an empty WAV
    code = (out["conversation", "python"] / "code.py").read_text()
    assert f'REPLY_ENDPOINT = os.environ.get("REPLY_ENDPOINT", "{session.CHAT_ENDPOINT}")' in code
    assert "invoke_endpoint_with_response_stream(" in code and "from services" not in code and "import services" not in code
    # The conversation held in native mode in the omni endpoint's duplex session: its Python holds the turn in that
    # session over the HTTP/2 stream again, hears what the studio heard and writes the spoken reply.
    native = made["native"]
    assert "lights came on" in native["heard"].lower() and native["replied"].strip()
    lines = said["native", "python"].splitlines()
    assert lines[0] == f"you: {native['heard']}" and lines[-1] == "reply.wav", lines
    assert lines[-2].startswith("agent: ") and lines[-2] != "agent: "
    channels, width, rate, n = shape((out["native", "python"] / "reply.wav").read_bytes())
    assert (channels, width) == (1, 2) and n > rate // 2
    code = (out["native", "python"] / "code.py").read_text()
    assert 'PATH = "v1/realtime"' in code and 'QUERY = "duplex=1"' in code and "from services" not in code
    # The clip made on the endpoints (narration by the voice endpoint, soundtrack by the sound endpoint): its Python
    # asks both again through invoke_endpoint and muxes them under the same frames.
    from tests.test_clip_cli import packets
    from tests.test_code_clip import audio_track
    again = out["clip", "python"] / "clip.mp4"
    assert packets(again) == packets(work / "waves.mp4") == packets(work / "clip.mp4")
    (codec, rate, channels), samples = audio_track(again)
    assert (codec, rate, channels) == ("aac", 48000, 2) and float(np.abs(samples).max()) > 0.05
    assert abs(samples.shape[1] - audio_track(work / "clip.mp4")[1].shape[1]) <= 2048
    assert 'VOICE_ENDPOINT = os.environ.get("VOICE_ENDPOINT", "omni-studio-voice-' in (
        out["clip", "python"] / "code.py").read_text()
    assert "the emulated account" in done.stderr


# -- fast: no emulator ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("target", "family", "expected"), [
    ("SageMaker endpoint img-1 (eu-west-1)", None, ("img-1", "eu-west-1")),
    ("SageMaker endpoint v-2 (us-west-2, HTTP/2 v1/audio/speech/stream?duplex=1)", None, ("v-2", "us-west-2")),
    ("sagemaker://ap-south-1/vid-3", None, ("vid-3", "ap-south-1")),
    ("sagemaker:us-east-2/voice-4", None, ("voice-4", "us-east-2")),
    ("sagemaker:chat-5", None, ("chat-5", None)),
    ("SageMaker eu-central-1: voice=v-6, image=i-6, listen=l-6", "listen", ("l-6", "eu-central-1")),
    ("SageMaker eu-central-1: voice=v-6, image=i-6", "sound", (None, "eu-central-1")),
    ("SageMaker (no image endpoint)", "image", (None, None)),
])
def test_every_kept_form_of_a_sagemaker_target_names_its_endpoint_and_region(
        target: str, family: str | None, expected: tuple) -> None:
    assert sagemaker_target(target, family) == expected


def wav_of(seconds: float, rate: int = 24000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * int(seconds * rate))
    return out.getvalue()


def _items(history: History) -> dict[str, str]:
    """One item of each kind, kept with the targets the SageMaker transports record."""
    jobs = history.jobs
    image = jobs.create("image", "a fox", {"prompt": "a fox", "size": "64x64", "steps": 4, "seed": 3},
                        target="SageMaker endpoint img-ep (eu-west-1)", status="running")
    edit = jobs.create("image", "blue", {"prompt": "blue", "size": "64x64", "steps": 4, "seed": 4, "n": 1,
                                         "output_format": "png"}, target="SageMaker endpoint img-ep (eu-west-1)",
                       status="running", inputs={"reference-1.png": png(64, 64)}, meta={"edit": True,
                       "fitting": "1 reference sent as JPEG q90 to fit SageMaker's 6 MB limit"})
    sound = jobs.create("sound", "rain", {"prompt": "rain", "seconds": 2.0, "seed": 5},
                        target="SageMaker endpoint snd-ep (eu-west-1)", status="running")
    video = jobs.create("video", "waves", {"prompt": "waves", "width": 256, "height": 192, "frames": 9, "seed": 6},
                        target="sagemaker://eu-west-1/vid-ep", status="running")
    jobs.mark_running(video.id, {"data": {"output": "s3://my-bucket/studio/outputs/x.out"}})
    for job in (image, edit, sound, video):
        jobs.succeed(job.id, {"out.bin": b"x"})
    take = history.takes.record("Hello there.", wav_of(0.5), target="SageMaker eu-west-1: voice=voice-ep, image=img-ep",
                                config={"language": "English", "seed": 7})
    heard = history.transcripts.record("hello there", source="a.wav", route="file", model="whisper",
                                       backend="sagemaker", target="SageMaker endpoint listen-ep (eu-west-1)",
                                       audio=wav_of(0.5, 16000), audio_name="a.wav")
    return {"image": image.id, "edit": edit.id, "sound": sound.id, "video": video.id, "take": take.id,
            "transcript": heard.id}


def test_sagemaker_code_names_its_target_at_the_top_and_holds_no_secret(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {"AWS_ACCESS_KEY_ID": "AKIAWOULDBEREAL00042", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-would-be-secret",
               "AWS_SESSION_TOKEN": "FwoGZXIvYXdzE-would-be-token"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    history = History(tmp_path / "data")
    try:
        items = _items(history)
        endpoints = {"image": "img-ep", "edit": "img-ep", "sound": "snd-ep", "video": "vid-ep", "take": "voice-ep",
                     "transcript": "listen-ep"}
        for what, item_id in items.items():
            codes = generate_all(history, item_id)
            for lang, code in codes.items():
                text = code.text
                assert not any(v in text for v in secrets.values()), (what, lang)
                if lang == "python":
                    assert f'ENDPOINT_NAME = os.environ.get("ENDPOINT_NAME", "{endpoints[what]}")' in text, what
                    assert 'REGION = os.environ.get("REGION", "eu-west-1")' in text and "boto3" in text, what
                    compile(text, f"{what}.py", "exec")
                else:
                    assert f'ENDPOINT_NAME="${{ENDPOINT_NAME:-{endpoints[what]}}}"' in text, (what, lang)
                    assert 'REGION="${REGION:-eu-west-1}"' in text, (what, lang)
        video = generate(history, items["video"])
        assert 'BUCKET = os.environ.get("BUCKET", "my-bucket")' in video.text and '"studio")' in video.text
        assert "invoke_endpoint_async(" in video.text and "INLINE_LIMIT = 128000" in video.text
        edit = generate(history, items["edit"])
        assert any("fitted the references" in n for n in edit.notes) and "LIMIT = 6291456" in edit.text
        assert "AsyncSageMakerRuntimeHTTP2Client" in generate(history, items["take"]).text
        assert '--endpoint "$ENDPOINT_NAME"' in generate(history, items["sound"], "cli").text
        assert 'OMNI_STUDIO_VIDEO_ENDPOINT="$ENDPOINT_NAME" OMNI_STUDIO_BUCKET="$BUCKET"' in generate(
            history, items["video"], "cli").text
        nameless = history.takes.record("Hi.", wav_of(0.2), target="SageMaker eu-west-1: image=img-ep", config={})
        code = generate(history, nameless.id)
        assert any("names no endpoint: set ENDPOINT_NAME" in n for n in code.notes)
        assert '"ENDPOINT_NAME", "ENDPOINT-NAME")' in code.text
    finally:
        history.close()


def test_the_commands_that_take_endpoint_are_the_ones_the_cli_form_gives_it_to() -> None:
    from services.cli import build_parser
    from services.code.server import _FLAGS
    from services.code.items import SPEECH_PATH
    from protocol.images import IMAGES_PATH
    from protocol.listen import TRANSCRIPTIONS_PATH
    from protocol.sound import SOUND_PATH
    from protocol.videos import VIDEO_SYNC_PATH

    commands = {IMAGES_PATH: "image", SOUND_PATH: "sound", VIDEO_SYNC_PATH: "video", SPEECH_PATH: "speak",
                TRANSCRIPTIONS_PATH: "listen"}
    assert set(commands) | {"/v1/images/edits"} == set(_FLAGS)
    for route, command in commands.items():
        parser = build_parser([command])
        sub = next(a for a in parser._actions if a.dest == "command")
        assert ("--endpoint" in sub.choices[command]._option_string_actions) == (route in ENDPOINT_FLAG), command


def test_a_conversation_on_sagemaker_names_its_endpoints_and_region_and_holds_no_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "wJalrXUtnFEMI-would-be-secret"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWOULDBEREAL00042")
    history = History(tmp_path / "data")
    turn = {"user_text": "hello", "reply_text": "Hi.", "user_speech_end_s": 1.0, "transcript_final_s": 1.5}
    try:
        piped = history.conversations.record({"mode": "pipeline", "turns": [turn]}, settings={
            "mode": "pipeline", "listen": "SageMaker endpoint l-ep (eu-west-1)", "speak": "SageMaker endpoint v-ep (eu-west-1)",
            "reply_endpoint": "chat-ep", "reply": "qwen/omni on SageMaker endpoint chat-ep (eu-west-1)",
            "system_prompt": "Be brief.", "voice": "joe", "silence_ms": 700})
        codes = generate_all(history, piped.id)
        assert codes["python"].settings == ("LISTEN_ENDPOINT", "REPLY_ENDPOINT", "VOICE_ENDPOINT", "REGION")
        for lang, code in codes.items():
            assert secret not in code.text and "AKIA" not in code.text, lang
        compile(codes["python"].text, "conversation.py", "exec")
        py, sh, cli = (codes[lang].text for lang in ("python", "curl", "cli"))
        for const, name in (("LISTEN_ENDPOINT", "l-ep"), ("REPLY_ENDPOINT", "chat-ep"), ("VOICE_ENDPOINT", "v-ep")):
            assert f'{const} = os.environ.get("{const}", "{name}")' in py and f'{const}="${{{const}:-{name}}}"' in sh
        assert 'REGION = os.environ.get("REGION", "eu-west-1")' in py and 'REGION="${REGION:-eu-west-1}"' in cli
        assert 'REPLY_MODEL = os.environ.get("REPLY_MODEL", "qwen/omni")' in py and '"voice": "joe"' in py
        assert 'CustomAttributes="route=/v1/chat/completions"' in py and "model_invocation_path=PATH" in py
        assert "--aws-sigv4" in sh and "route=/v1/audio/speech" in sh and "import boto3" not in sh
        words = build_parser(["converse"]).parse_args(shlex.split(cli.splitlines()[-1])[3:])
        assert (words.listen_endpoint, words.reply_endpoint, words.voice_endpoint, words.region, words.silence_ms) == (
            "$LISTEN_ENDPOINT", "$REPLY_ENDPOINT", "$VOICE_ENDPOINT", "$REGION", 700)
        # Kept without a region (an older `converse --keep`): the default region, with a note; native: one endpoint,
        # no REST form, and its Python holds the turn in the duplex session over the HTTP/2 stream, opened with the
        # kept session settings — the silence window ending the turn, as the studio asks an endpoint (no learned end).
        native = history.conversations.record({"mode": "native", "turns": [turn]}, settings={
            "mode": "native", "listen": "SageMaker endpoint o-ep", "voice": "joe", "silence_ms": 800,
            "turn_detector": "learned", "system_prompt": "Be brief."})
        codes = generate_all(history, native.id)
        py = codes["python"].text
        assert codes["python"].settings == ("ENDPOINT_NAME", "REGION")
        assert any("name no region: the code says us-east-1" in n for n in codes["python"].notes)
        assert '"ENDPOINT_NAME", "o-ep")' in py and 'REGION = os.environ.get("REGION", "us-east-1")' in py
        assert 'PATH = "v1/realtime"' in py and 'QUERY = "duplex=1"' in py and "open_stream(self.endpoint, QUERY)" in py
        session_line = next(line for line in py.splitlines() if line.startswith("SESSION = "))
        assert '"voice": "joe"' in session_line and '"silence_duration_ms": 800' in session_line
        assert '"type": "server_vad"' in session_line and "eot_threshold" not in session_line
        assert 'INSTRUCTIONS = "Be brief."' in py
        assert "sys.exit" not in py and "import boto3" in py and "websockets" not in py
        assert secret not in py and "AKIA" not in py
        compile(py, "native.py", "exec")
        assert "exit 2" in codes["curl"].text and '--endpoint "$ENDPOINT_NAME"' in codes["cli"].text
    finally:
        history.close()
