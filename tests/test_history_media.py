"""The history's records with their media in an S3 bucket (moto's real server on loopback), on SQLite and on
PostgreSQL: each kind's files are objects under the bucket's prefix, read back through the records, removed after
their record; a bucket that refuses a write leaves no record; `history copy --media-to s3://…` moves a one-host
history's media (and `--to` its rows) and can run again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.pg_cluster import Cluster
from services.eval.spec import parse_spec
from services.eval.store import EvalStore
from services.history import History, HistoryError
from services.settings import load_settings
pytest.register_assert_rewrite("tests.s3_support")  # a plugin of this module, imported first here
from tests.s3_support import keys, s3_environment  # noqa: E402
from tests.test_eval import spec_dict
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support", "tests.s3_support"]
ROOT = Path(__file__).resolve().parent.parent
WAV = (b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\xc0]\x00\x00\x80\xbb\x00\x00\x02\x00\x10\x00"
       b"data\x04\x00\x00\x00\x01\x00\x02\x00")


def _history(tmp_path: Path, media_url: str, database_url: str | None) -> History:
    env = {"OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_MEDIA_URL": media_url}
    return History.of(load_settings(env | ({"OMNI_STUDIO_DATABASE_URL": database_url} if database_url else {})))


def test_every_kind_keeps_its_files_in_the_bucket_and_they_go_after_their_record(
        s3_env: str, media_bucket: str, s3: Any, tmp_path: Path, history_url: str | None) -> None:
    h = _history(tmp_path, f"s3://{media_bucket}/team", history_url)
    take = h.takes.record("hello", WAV, target="t")
    job = h.jobs.create("video", "waves", {}, target="t", inputs={"reference.jpg": b"jpeg"})
    h.jobs.succeed(job.id, {"video.mp4": b"mp4 bytes"})
    heard = h.transcripts.record("hi there", source="a.wav", route="file", model="m", backend="offline", target="t",
                                 audio=b"recording", audio_name="a.wav")
    store = EvalStore(h)
    ev = store.create(parse_spec(spec_dict(prompts=["one"])))
    item = store.items(ev.id)[0]
    store.succeed(item, b"RIFF item", {"latency_s": 1.0}, "voice")

    assert keys(s3, media_bucket) == sorted([
        f"team/{take.id}/take.wav", f"team/{job.id}/reference.jpg", f"team/{job.id}/video.mp4",
        f"team/{heard.id}/recording.wav", f"team/eval-{ev.id}/{item.id}.wav"])
    assert not (tmp_path / "data" / "media").exists()  # nothing on this host's disk
    again = _history(tmp_path, f"s3://{media_bucket}/team", history_url)  # another replica, say
    assert again.takes.get(take.id).wav() == WAV and again.transcripts.get(heard.id).audio_bytes() == b"recording"
    done = again.jobs.get(job.id)
    assert done.read("video.mp4") == b"mp4 bytes" and done.input_file("reference.jpg") == b"jpeg"
    assert EvalStore(again).media(EvalStore(again).item(item.id)) == b"RIFF item"

    again.jobs.delete(job.id)  # the row, then its objects
    EvalStore(again).delete(ev.id)
    assert keys(s3, media_bucket) == sorted([f"team/{take.id}/take.wav", f"team/{heard.id}/recording.wav"])

    s3.delete_object(Bucket=media_bucket, Key=f"team/{take.id}/take.wav")  # gone behind the studio's back
    with pytest.raises(HistoryError, match=f"the recording of take {take.id} is missing from the studio's media"):
        again.takes.get(take.id).wav()


def test_a_bucket_that_refuses_the_files_leaves_no_record(s3_env: str, tmp_path: Path) -> None:
    h = _history(tmp_path, "s3://no-such-bucket-for-omni/team", None)
    with pytest.raises(HistoryError, match="no-such-bucket-for-omni"):
        h.takes.record("hello", WAV, target="t")
    with pytest.raises(HistoryError, match="no-such-bucket-for-omni"):
        h.jobs.create("video", "waves", {}, target="t", inputs={"reference.jpg": b"jpeg"})
    assert h.takes.list() == [] and h.jobs.list() == []  # the files first: no record names what is not there


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli([sys.executable, "-m", "services", "history", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_copy_moves_a_folder_history_to_a_bucket_and_postgresql_and_runs_again(
        s3_env: str, media_bucket: str, s3: Any, tmp_path: Path, pg_cluster: Cluster) -> None:
    data = tmp_path / "data"
    h = History(data)
    take = h.takes.record("hello", WAV, target="t")
    image = h.jobs.create("image", "a harbour", {}, target="t", inputs={"reference.png": b"png in"})
    h.jobs.succeed(image.id, {"image-0.png": b"png out"})
    env = {"PATH": "/usr/bin:/bin", "OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(data),
           **s3_environment(s3_env)}
    name = pg_cluster.database("template1")
    try:
        url = pg_cluster.url(name)
        first = _cli("copy", "--to", url, "--media-to", f"s3://{media_bucket}/moved", env=env)
        assert first.returncode == 0, first.stderr
        assert "media: 3 files copied, 0 there already" in first.stdout and "rows: 2 copied" in first.stdout
        assert keys(s3, media_bucket) == sorted([f"moved/{take.id}/take.wav", f"moved/{image.id}/image-0.png",
                                                 f"moved/{image.id}/reference.png"])
        assert (data / "media" / take.id / "take.wav").read_bytes() == WAV  # nothing deleted at the source
        second = _cli("copy", "--to", url, "--media-to", f"s3://{media_bucket}/moved", env=env)
        assert "media: 0 files copied, 3 there already" in second.stdout and "rows: 0 copied" in second.stdout

        moved = {**env, "OMNI_STUDIO_DATABASE_URL": url, "OMNI_STUDIO_MEDIA_URL": f"s3://{media_bucket}/moved"}
        listed = json.loads(_cli("list", "--json", env=moved).stdout)
        assert sorted(r["id"] for r in listed) == sorted([take.id, image.id])
        h2 = History.of(load_settings({k: v for k, v in moved.items() if k.startswith("OMNI_STUDIO_")}))
        assert h2.takes.get(take.id).wav() == WAV and h2.jobs.get(image.id).read("image-0.png") == b"png out"
    finally:
        pg_cluster.drop(name)

    nothing = _cli("copy", env=env)
    assert nothing.returncode == 2 and "say where to copy: --to postgresql://" in nothing.stderr
    own = _cli("copy", "--media-to", str(data / "media"), env=env)
    assert own.returncode == 2 and "--media-to names the history's own media" in own.stderr


def test_with_media_in_a_bucket_the_pages_hand_the_browser_presigned_urls(
        s3_env: str, media_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Image page's gallery and the Video page's player point the browser at the bucket (SigV4, 5 minutes, a
    download named for the file) instead of relaying the bytes; the URLs fetch the very bytes kept."""
    import httpx
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from services.media_store import URL_EXPIRES_DEFAULT_S
    from tests.test_videos import make_mp4, png

    h = _history(tmp_path, f"s3://{media_bucket}/team", None)
    image = h.jobs.create("image", "a harbour", {"size": "64x64", "seed": 1}, target="t")
    picture = png(64, 64)
    h.jobs.succeed(image.id, {"image-0.png": picture})
    video = h.jobs.create("video", "the boats rock", {"width": 64, "height": 64, "frames": 5, "fps": 4, "steps": 4,
                                                      "guidance": 5.0, "seed": 2}, target="t")
    clip = make_mp4(5, 64, 64, 4)
    h.jobs.succeed(video.id, {"video.mp4": clip})
    for key, value in {"OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_BACKEND": "omni", "OMNI_STUDIO_OMNI_URL": "http://127.0.0.1:9",
                       "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"),
                       "OMNI_STUDIO_MEDIA_URL": f"s3://{media_bucket}/team"}.items():
        monkeypatch.setenv(key, value)
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=30)
    at.switch_page("pages/image.py")
    at.run()
    assert not at.exception, at.exception
    [shown] = [img.url for element in at.get("image") for img in element.proto.imgs]
    assert shown.startswith(f"{s3_env}/{media_bucket}/team/{image.id}/image-0.png?")
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in shown and f"X-Amz-Expires={URL_EXPIRES_DEFAULT_S}" in shown
    assert httpx.get(shown).content == picture
    [download] = [b for b in at.get("link_button") if b.proto.label == "Download PNG"]
    got = httpx.get(download.proto.url)
    assert got.content == picture and f'filename="{image.id}-0.png"' in got.headers["content-disposition"]

    at.switch_page("pages/video.py")
    at.query_params["item"] = video.id
    at.run()
    assert not at.exception, at.exception
    [player] = [v.proto.url for v in at.get("video")]
    assert player.startswith(f"{s3_env}/{media_bucket}/team/{video.id}/video.mp4?") and httpx.get(player).content == clip
