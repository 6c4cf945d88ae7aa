"""`python -m services code` for a finished clip (a video the studio muxed a narration and a soundtrack into): the
generated Python, run unchanged against the offline engine, makes the parts again and muxes them — the source's
video packets byte for byte, an AAC 48 kHz stereo track as long as the video, the same soundtrack (its seed); curl
makes the parts; the CLI line makes the clip again in the studio."""

from __future__ import annotations

import wave
from pathlib import Path

import av
import numpy as np

from services.history import History
from tests.code_support import code_for, made, run_code
from tests.test_clip_cli import engine_video, packets  # noqa: F401 (a fixture)
from tests.test_code_media import studio_env


def audio_track(path: Path) -> tuple[tuple[str, int, int], np.ndarray]:
    with av.open(str(path)) as c:
        stream = c.streams.audio[0]
        shape = (stream.codec_context.name, stream.rate, stream.channels)
        samples = np.concatenate([f.to_ndarray() for f in c.decode(stream)], axis=1)
    return shape, samples


def test_a_clip_again_from_python_curl_and_the_cli(engine_url: str, engine_video: Path, tmp_path: Path) -> None:  # noqa: F811
    data = tmp_path / "data"
    got = made("clip", "--url", engine_url, "--video", str(engine_video), "--narration", "Dawn over the harbour.",
               "--soundtrack", "calm strings", "--seed", "11", "--steps", "8", "--duck-db", "9", "--out", "clip.mp4",
               data=data, cwd=tmp_path)
    studio_clip = tmp_path / "clip.mp4"
    _, studio_audio = audio_track(studio_clip)

    script = code_for(got["job_id"], tmp_path / "py", data=data)
    text = script.read_text()
    assert '"seed": 11' in text and '"num_inference_steps": 8' in text and "DUCK_DB = 9.0" in text
    assert (tmp_path / "py" / "source.mp4").is_file()  # the clip's own video track: the CLI kept no source job
    run_code(script, engine_url)
    again = tmp_path / "py" / "clip.mp4"
    assert packets(again) == packets(engine_video)  # the frames copied, not re-encoded
    shape, samples = audio_track(again)
    assert shape == ("aac", 48000, 2)
    assert abs(samples.shape[1] - studio_audio.shape[1]) <= 2048, (samples.shape, studio_audio.shape)
    assert float(np.abs(samples).max()) > 0.05  # sound, not silence

    shell = code_for(got["job_id"], tmp_path / "curl", data=data, lang="curl")
    run_code(shell, engine_url)
    for part in ("narration.wav", "soundtrack.wav"):
        with wave.open(str(tmp_path / "curl" / part)) as w:
            assert w.getnframes() > 0, part
    sound = made("sound", "--url", engine_url, "--prompt", "calm strings", "--seconds",
                 str(got["generated"]["soundtrack"]["seconds"]), "--seed", "11", "--steps", "8", "--out", "s.wav",
                 data=data, cwd=tmp_path)
    assert (tmp_path / "curl" / "soundtrack.wav").read_bytes() == (tmp_path / "s.wav").read_bytes(), sound

    line = code_for(got["job_id"], tmp_path / "cli", data=data, lang="cli")
    assert "python -m services clip --url \"$BASE_URL\" --video \"$SOURCE\"" in line.read_text()
    run_code(line, engine_url, env=studio_env(data))
    assert packets(tmp_path / "cli" / "clip.mp4") == packets(engine_video)
    _, cli_audio = audio_track(tmp_path / "cli" / "clip.mp4")
    assert cli_audio.shape == studio_audio.shape  # the studio's own mix again

    job = History(data).jobs.get(got["job_id"])
    (data / "media" / job.id / "narration.wav").unlink()  # a part given as text is made again: nothing needed
    assert code_for(job.id, tmp_path / "again", data=data).is_file()


def test_a_clip_made_on_sagemaker_asks_its_parts_of_the_voice_and_sound_endpoints(tmp_path: Path) -> None:
    from services.code import LANGS, generate_all
    from services.code.packages import needs

    history = History(tmp_path / "data")
    try:
        clip = {"of": None, "fit": None, "generated": {
            "duck_db": 12.0, "narration": {"text": "Dawn over the harbour.", "voice": "vivian", "seconds": 1.9},
            "soundtrack": {"prompt": "calm strings", "seed": 11, "seconds": 4.1, "steps": 8}}}
        job = history.jobs.create("video", "clip: dawn", {"duck_db": 12.0}, status="running",
                                  target="SageMaker eu-west-1: voice=omni-voice, image=omni-image, sound=omni-sound",
                                  inputs={"narration.wav": b"RIFF", "soundtrack.wav": b"RIFF"}, meta={"clip": clip})
        history.jobs.succeed(job.id, {"video.mp4": b"\x00\x00\x00\x18ftypmp42"}, meta={"clip": clip})
        codes = generate_all(history, job.id)
    finally:
        history.close()
    python, curl, cli = (codes[lang].text for lang in LANGS)
    compile(python, "code.py", "exec")
    assert 'VOICE_ENDPOINT = os.environ.get("VOICE_ENDPOINT", "omni-voice")' in python
    assert 'SOUND_ENDPOINT = os.environ.get("SOUND_ENDPOINT", "omni-sound")' in python
    assert 'REGION = os.environ.get("REGION", "eu-west-1")' in python and "invoke_endpoint(" in python
    assert '"seed": 11' in python and "AWS_SECRET" not in python
    assert set(needs(python)) == {"av==19.0.2", "boto3==1.44.5", "numpy==2.5.5"}
    assert "--aws-sigv4" in curl and "$SOUND_ENDPOINT/invocations" in curl and "route=/v1/audio/speech" in curl
    assert ('OMNI_STUDIO_VOICE_ENDPOINT="$VOICE_ENDPOINT" OMNI_STUDIO_SOUND_ENDPOINT="$SOUND_ENDPOINT" python -m '
            'services clip --backend sagemaker --region "$REGION" --video "$SOURCE"') in cli
