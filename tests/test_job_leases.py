"""Jobs that outlive a replica (services/history/jobs.py leases, services/videos/jobs.py's keeper), on SQLite and
on PostgreSQL: a replica renews the lease of the jobs it runs; when it stops (it died, on whatever host), another
replica takes its jobs over once the lease lapses — one replica of any that try — and the one that lost a job stops
polling it. End to end on the SageMaker emulator: replica A dies during an async video job, replica B finishes it
and its MP4 lands in the shared bucket."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from emulator.handle import deploy_endpoint
from services.backend import create_backend
from services.history import History
from services.history.base import REPLICA_ENV, replica
from services.settings import Settings
from services.videos import VideoJobs
from tests.emulator_support import EmulatorHandle
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]
ROOT = Path(__file__).resolve().parent.parent
RESUMABLE = {"transport": "sagemaker-async", "target": "sm-video", "id": "inf-1", "resumable": True, "data": {}}


def _replica(tmp_path: Path, url: str | None, name: str, lease_s: float = 30.0) -> History:
    """The team's history as replica `name` sees it: its jobs are owned by `name:<pid>:<start>`, a process this
    test's host cannot look for (another replica's), so only the lease tells whether it still runs."""
    h = History(tmp_path, database_url=url, job_lease_s=lease_s)
    h.owner = f"{name}:4242:1"
    return h


def _lapse(h: History, job_id: str) -> None:
    with h.transaction() as db:  # the lease ran out (no sleeping: the test sets the clock's verdict)
        db.execute("UPDATE jobs SET lease_until = ? WHERE id = ?", (time.time() - 1, job_id))


def test_a_replica_that_stops_renewing_loses_its_jobs_to_exactly_one_other(tmp_path: Path,
                                                                           history_url: str | None) -> None:
    a, b, c = (_replica(tmp_path, history_url, n) for n in ("replica-a", "replica-b", "replica-c"))
    polled = a.jobs.create("video", "waves", {}, target="sm-video")
    a.jobs.mark_running(polled.id, RESUMABLE)
    waiting = a.jobs.create("video", "never sent", {}, target="sm-video")
    assert a.jobs.get(polled.id).lease_until > time.time() + 20  # held for job_lease_s from now
    assert b.jobs.recover() == [] and a.jobs.renew(polled.id)  # a holds its lease: nobody takes anything

    _lapse(a, polled.id)
    _lapse(a, waiting.id)
    [orphan] = b.jobs.recover()
    assert orphan.id == polled.id  # resumable: for a runner of its target to claim
    gone = b.jobs.get(waiting.id)
    assert gone.status == "interrupted" and "before this job was sent" in (gone.error or "")
    assert [c.jobs.claim(orphan), b.jobs.claim(orphan)] == [True, False]  # one of two replicas wins
    held = b.jobs.get(polled.id)
    assert held.owner == c.owner and held.lease_until > time.time() + 20
    assert not a.jobs.renew(polled.id)  # a, come back to life, finds it taken: it stops polling
    assert c.jobs.renew(polled.id) and b.jobs.recover() == []


def test_this_replicas_name_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(REPLICA_ENV, "task:abc")
    assert replica() == "task-abc" and History(tmp_path).owner.startswith("task-abc:")
    monkeypatch.delenv(REPLICA_ENV)
    assert History(tmp_path).owner.split(":")[0] == replica() == os.uname().nodename


_REPLICA_A = """
import os, sys, time
from services.backend import create_backend
from services.history import History
from services.settings import load_settings
from services.videos import VideoJobs, VideoRequest
settings = load_settings()
history = History.of(settings)
jobs = VideoJobs(create_backend(settings).client("video"), history)
job = jobs.start(VideoRequest("a slow pan over hills", width=96, height=64, frames=9, steps=4, seed=4))
for _ in range(500):
    if history.jobs.get(job.id).handle:
        break
    time.sleep(0.02)
print(job.id, history.owner, flush=True)
os._exit(0)  # replica A dies while the job runs on the endpoint
"""


def test_replica_b_finishes_the_video_job_replica_a_left_and_its_mp4_is_in_the_bucket(
        emulator_env: EmulatorHandle, bucket: str, tmp_path: Path, pg_cluster) -> None:  # type: ignore[no-untyped-def]
    deploy_endpoint(emulator_env, "sm-video", async_output=f"s3://{bucket}/outputs",
                    environment={"SM_VLLM_MODEL": "Wan-AI/Wan2.1-VACE-1.3B-diffusers"})
    emulator_env.configure(delays={"async_s": 3.0})  # the job is still on the endpoint when A dies
    name = pg_cluster.database()
    team = {"OMNI_STUDIO_BACKEND": "sagemaker", "OMNI_STUDIO_VIDEO_ENDPOINT": "sm-video", "OMNI_STUDIO_BUCKET": bucket,
            "OMNI_STUDIO_STATE_FILE": str(tmp_path / "none.json"), "OMNI_STUDIO_DATABASE_URL": pg_cluster.url(name),
            "OMNI_STUDIO_MEDIA_URL": f"s3://{bucket}/team-media", "OMNI_STUDIO_JOB_LEASE_S": "2",
            "OMNI_STUDIO_CONFIG": ""}
    try:
        a = run_cli([sys.executable, "-c", _REPLICA_A], cwd=ROOT, capture_output=True, text=True, timeout=60,
                           env={**os.environ, **team, REPLICA_ENV: "replica-a",
                                "OMNI_STUDIO_DATA_DIR": str(tmp_path / "a")})
        assert a.returncode == 0, a.stderr
        job_id, a_owner = a.stdout.split()
        settings = Settings.model_validate({"backend": "sagemaker", "video_endpoint": "sm-video", "bucket": bucket,
                                            "state_file": str(tmp_path / "none.json"), "data_dir": tmp_path / "b",
                                            "database_url": pg_cluster.url(name),
                                            "media_url": f"s3://{bucket}/team-media", "job_lease_s": 2.0})
        b_history = History.of(settings)
        assert b_history.jobs.get(job_id).status == "running" and a_owner.startswith("replica-a:")
        jobs = VideoJobs(create_backend(settings).client("video"), b_history)
        try:  # at once, or when A's lease lapses (how soon depends on how long B took to start)
            deadline = time.monotonic() + 60
            while job_id not in jobs.resumed and time.monotonic() < deadline:
                time.sleep(0.1)  # B's keeper looks every third of the lease
            assert job_id in jobs.resumed, "replica B never took the job over"
            done = jobs.wait(job_id, timeout=60)
        finally:
            jobs.close()
        assert done.status == "succeeded", done.error
        assert done.owner == b_history.owner
        objects = emulator_env.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"team-media/{job_id}/")
        [mp4] = [o["Key"] for o in objects.get("Contents", [])]
        assert mp4 == f"team-media/{job_id}/video.mp4"
        body = emulator_env.client("s3").get_object(Bucket=bucket, Key=mp4)["Body"].read()
        assert body[4:8] == b"ftyp" and body == done.read("video.mp4")
    finally:
        pg_cluster.drop(name)
