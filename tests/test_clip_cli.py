"""`python -m services clip` end to end on the offline engine: a video the engine made, a narration its voice speaks
and a soundtrack its sound route generates, muxed — the video's packets byte for byte, an AAC track as long as the
video, what was generated (the seed) in --json, the clip kept in the history with its parts."""

from __future__ import annotations

import json
from pathlib import Path

import av
import pytest

from services.history import History
from tests.test_media_cli import cli


def packets(path: Path) -> list[tuple[bytes, int | None]]:
    with av.open(str(path)) as c:
        return [(bytes(p), p.pts) for p in c.demux(c.streams.video[0]) if p.size]


@pytest.fixture(scope="module")
def engine_video(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("clip") / "v.mp4"
    r = cli("video", "--url", engine_url, "--prompt", "waves at dawn", "--width", "160", "--height", "96",
            "--frames", "33", "--fps", "8", "--steps", "4", "--seed", "2", "--out", str(out), "--no-history",
            data=out.parent / "data")
    assert r.returncode == 0, r.stderr
    return out


def test_a_clip_from_the_engine_keeps_the_videos_packets_and_its_length(engine_url: str, engine_video: Path,
                                                                         tmp_path: Path) -> None:
    out, data = tmp_path / "clip.mp4", tmp_path / "data"
    r = cli("clip", "--url", engine_url, "--video", str(engine_video), "--narration", "Dawn over the harbour.",
            "--soundtrack", "calm strings", "--seed", "11", "--steps", "8", "--out", str(out), "--json", data=data)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["seed"] == 11 and got["generated"]["soundtrack"]["prompt"] == "calm strings"
    assert got["generated"]["narration"]["seconds"] > 0.5
    assert packets(out) == packets(engine_video)  # copied, not re-encoded
    with av.open(str(out)) as c:
        audio = c.streams.audio[0]
        assert (audio.codec_context.name, audio.rate, audio.channels) == ("aac", 48000, 2)
        video_s = float(c.streams.video[0].duration * c.streams.video[0].time_base)
        audio_s = sum(f.samples for f in c.decode(audio)) / 48000
    assert abs(audio_s - video_s) <= 2048 / 48000, (audio_s, video_s)
    job = History(data).jobs.get(got["job_id"])
    assert job.kind == "video" and job.meta["clip"]["seed"] == 11
    assert job.file("video.mp4") == out.read_bytes()
    assert {"narration.wav", "soundtrack.wav"} <= set(job.inputs or [])


def test_a_narration_longer_than_the_video_says_by_how_much_and_how_to_fit(engine_url: str, engine_video: Path,
                                                                            tmp_path: Path) -> None:
    long = ("This narration goes on for much longer than the short video it is meant to accompany, "
            "sentence after sentence, so that it cannot fit.")
    r = cli("clip", "--url", engine_url, "--video", str(engine_video), "--narration", long, "--no-history",
            "--out", str(tmp_path / "c.mp4"), data=tmp_path / "data")
    assert r.returncode == 2 and "trim" in r.stderr and "hold" in r.stderr, r.stderr
    r = cli("clip", "--url", engine_url, "--video", str(engine_video), "--narration", long, "--fit", "hold",
            "--no-history", "--out", str(tmp_path / "c.mp4"), "--json", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["fit"] == "hold" and got["clip_s"] > got["video_s"] and got["held_s"] > 0


def test_nothing_to_mux_and_a_missing_video_exit_2(tmp_path: Path) -> None:
    r = cli("clip", "--video", str(tmp_path / "none.mp4"), "--soundtrack", "x", data=tmp_path / "data")
    assert r.returncode == 2 and "does not exist" in r.stderr
    (tmp_path / "v.mp4").write_bytes(b"not a video")
    r = cli("clip", "--video", str(tmp_path / "v.mp4"), data=tmp_path / "data")
    assert r.returncode == 2 and "needs a narration" in r.stderr
