"""The sound family end to end: `python -m services sound` against the offline engine (real WAV/FLAC/MP3 bytes,
the seed that makes the same sound again, the history), against a strict vLLM-Omni peer that validates every
request with vLLM-Omni's own request model, and its refusals (bad input exits 2 before anything is sent; a target
that fails exits 1 with its message)."""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import av
import pytest

from protocol.errors import InvalidInput, ServerError
from services.history import History
from services.sound import SoundClient, SoundRequest, decode_shape, record_sound
from services.sound.transports import OmniSoundTransport
from tests.loopback_support import serving_asgi
from tests.sound_peer import peer_app
from tests.test_media_cli import cli


def test_sound_json_writes_the_wav_keeps_it_and_the_seed_makes_it_again(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    runs = []
    for name in ("a.wav", "b.wav"):
        r = cli("sound", "--url", engine_url, "--prompt", "rain on a tin roof", "--seconds", "2.5", "--steps", "8",
                "--seed", "1234", "--out", str(tmp_path / name), "--json", data=data)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout))
    first = runs[0]
    assert first["ok"] and first["seed"] == 1234 and first["params"]["seconds"] == 2.5 and first["preview"]
    with wave.open(str(tmp_path / "a.wav")) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (44100, 2, int(2.5 * 44100))
    assert (tmp_path / "a.wav").read_bytes() == (tmp_path / "b.wav").read_bytes()  # same seed, same sound
    job = History(data).jobs.get(first["job_id"])
    assert job.kind == "sound" and job.status == "succeeded" and job.meta["seed"] == 1234
    assert job.output_files()[0][1] == (tmp_path / "a.wav").read_bytes()


def test_sound_without_a_seed_prints_the_one_it_drew_and_flac_mp3_decode(engine_url: str, tmp_path: Path) -> None:
    for fmt in ("flac", "mp3"):
        out = tmp_path / f"s.{fmt}"
        r = cli("sound", "--url", engine_url, "--prompt", "a slow piano chord", "--seconds", "1.5", "--format", fmt,
                "--out", str(out), "--json", "--no-history", data=tmp_path / "data")
        assert r.returncode == 0, r.stderr
        seed = json.loads(r.stdout)["seed"]
        assert isinstance(seed, int) and json.loads(r.stdout)["job_id"] is None
        rate, channels, frames = decode_shape(out.read_bytes(), fmt)
        assert (rate, channels) == (44100, 2) and abs(frames - 1.5 * 44100) <= 4096
    assert not History(tmp_path / "data").jobs.count("sound")


@pytest.mark.parametrize(("args", "words"), [
    (["--seconds", "0"], "more than 0"),
    (["--seconds", "60"], "at most 47.55"),
    (["--steps", "0"], "steps"),
])
def test_bad_input_exits_2_naming_what_to_fix(tmp_path: Path, args: list[str], words: str) -> None:
    r = cli("sound", "--url", "http://127.0.0.1:9", "--prompt", "wind", *args, data=tmp_path / "data")
    assert r.returncode == 2 and words in r.stderr, r.stderr
    r = cli("sound", "--url", "http://127.0.0.1:9", "--prompt", "   ", data=tmp_path / "data")
    assert r.returncode == 2 and "prompt is empty" in r.stderr


def test_an_unreachable_target_exits_1_and_the_attempt_is_kept(tmp_path: Path) -> None:
    r = cli("sound", "--url", "http://127.0.0.1:9", "--prompt", "wind in pines", "--seconds", "1", "--seed", "3",
            data=tmp_path / "data")
    assert r.returncode == 1 and "cannot reach the sound server" in r.stderr
    (job,) = History(tmp_path / "data").jobs.list("sound")
    assert job.status == "failed" and job.params["seed"] == 3  # the settings survive to try again


def test_the_client_speaks_vllm_omnis_request_model(tmp_path: Path) -> None:
    """The strict peer refuses any field vLLM-Omni's request model does not have, and answers as it does."""
    app = peer_app()
    with serving_asgi(app) as url:
        client = SoundClient(OmniSoundTransport(url))
        result = client.generate(SoundRequest("thunder rolling", seconds=3.0, steps=20, guidance=5.5, seed=9,
                                              negative_prompt="hiss", format="flac"))
        assert (result.sample_rate, result.channels, round(result.seconds, 2)) == (44100, 2, 3.0)
        assert result.preview is None  # a model's answer: nothing says it is a preview
        (sent,) = app.state.seen
        assert {k: sent[k] for k in ("input", "response_format", "audio_length", "num_inference_steps",
                                     "guidance_scale", "seed", "negative_prompt")} == {
            "input": "thunder rolling", "response_format": "flac", "audio_length": 3.0, "num_inference_steps": 20,
            "guidance_scale": 5.5, "seed": 9, "negative_prompt": "hiss"}
        with pytest.raises(ServerError, match="`not/this-model` does not exist"):  # the peer's words
            client.generate(SoundRequest("x", seconds=1.0, model="not/this-model"))
        with pytest.raises(InvalidInput, match="num_inference_steps"):  # the peer's refusal names the field
            client.transport.generate(SoundRequest("x", seconds=1.0).validated().wire().model_copy(
                update={"num_inference_steps": 0}))
        job = record_sound(client, History(tmp_path), SoundRequest("a door creaks", seconds=1.0, format="wav"))
        assert job.status == "succeeded" and isinstance(job.meta["seed"], int)
        with av.open(io.BytesIO(job.file(job.outputs[0]))) as c:
            assert c.streams.audio[0].rate == 44100


def test_load_sound_sweeps_clips_and_prices_a_generated_minute(engine_url: str, tmp_path: Path) -> None:
    """`python -m services load sound`: through the family's load part — clips per minute beside the catalog's
    throughput (audio seconds per minute) and the cost per generated minute at a given price."""
    r = cli("load", "sound", "--url", engine_url, "--concurrency", "1,2", "--requests", "2", "--warmup", "0", "--prompt", "a kettle",
            "--price-per-hour", "1.2", "--json", data=tmp_path / "data", timeout=180)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["modality"] == "sound"
    levels = report["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2] and all(lv["ok"] == lv["requests"] for lv in levels)
    best = levels[-1]
    per_min = best["throughput"]["audio_s_per_min"]
    assert per_min > 0 and best["clips_per_min"] > 0
    # every clip is 5 s (the part's default): audio seconds per minute = 5 × clips per minute
    assert abs(per_min - 5 * best["clips_per_min"]) <= 0.01 * per_min
    # $1.20 an hour over (audio s per minute × 60 minutes ÷ 60 s) generated minutes an hour, at the best level
    cost = report["cost"]
    assert cost["at_concurrency"] in (1, 2)
    expected = 1.2 / (cost["throughput"]["audio_s_per_min"] * 60 / 60)
    assert abs(cost["usd_per_generated_minute"] - expected) <= 0.0005 * expected + 1e-9
