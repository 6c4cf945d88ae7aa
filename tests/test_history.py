"""The history: records survive a restart (a new History on the same folder, a new process), orphans of
a dead process are marked `interrupted` or resumed, and concurrent writers never lose a record.

"A restart" here is real: the job is created by a child Python process that then exits, so its owner
is a process that no longer exists, exactly as after the studio stopped.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from protocol.errors import InvalidInput
from services.history import History, HistoryError, current_owner, owner_alive
from services.videos import (
    JobHandle,
    JobState,
    OmniVideoTransport,
    VideoClient,
    VideoJobs,
    VideoPayload,
)
from tests.test_videos import fault_server, make_mp4  # noqa: F401  (fixture)
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent


def _in_child(code: str, *args: str) -> str:
    """Run `code` in a fresh Python process (the 'previous run of the studio') and return its stdout."""
    out = run_cli([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_jobs_survive_a_new_history_object_newest_first(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    a = h.jobs.create("image", "first", {"size": "64x64"}, target="http://x")
    b = h.jobs.create("video", "second", {"frames": 17}, target="http://x", inputs={"reference.jpg": b"jpeg"})
    h.jobs.succeed(a.id, {"image-0.png": b"png"}, timings={"total_s": 0.1}, meta={"seed": 1})
    h.jobs.fail(b.id, "the server said no")
    h.close()

    again = History(tmp_path, database_url=history_url)
    assert [j.prompt for j in again.jobs.list()] == ["second", "first"]
    assert [j.prompt for j in again.jobs.list("image")] == ["first"]
    img = again.jobs.get(a.id)
    assert img.status == "succeeded" and img.timings == {"total_s": 0.1} and img.meta == {"seed": 1}
    assert img.output_files()[0][1] == b"png" and img.finished_at is not None
    vid = again.jobs.get(b.id)
    assert vid.status == "failed" and vid.error == "the server said no"
    assert vid.input_file("reference.jpg") == b"jpeg"  # the failure lost nothing
    if history_url is None:  # SQLite: in WAL mode (readers never wait for the writer)
        assert sqlite3.connect(again.db_path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_finished_jobs_are_not_changed_by_late_failures(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    job = h.jobs.create("image", "p", {}, target="t", status="running")
    h.jobs.succeed(job.id, {"image-0.png": b"x"})
    assert h.jobs.fail(job.id, "too late").status == "succeeded"


def test_unsafe_file_names_and_unknown_jobs_are_refused(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    with pytest.raises(InvalidInput):
        h.jobs.create("image", "p", {}, target="t", inputs={"../escape.png": b"x"})
    with pytest.raises(InvalidInput, match="no job"):
        h.jobs.get("nope")


def test_a_data_dir_that_cannot_be_used_is_named(tmp_path: Path, history_url: str | None) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(HistoryError) as err:
        History(blocker / "data")
    assert str(blocker / "data") in str(err.value) and "OMNI_STUDIO_DATA_DIR" in str(err.value)


def test_concurrent_writers_lose_nothing(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for i in range(15):
                job = h.jobs.create("image", f"{k}-{i}", {"i": i}, target="t", status="running")
                h.jobs.succeed(job.id, {"image-0.png": bytes([k, i])})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    jobs = History(tmp_path, database_url=history_url).jobs.list(limit=None)
    assert len(jobs) == 90 and all(j.status == "succeeded" for j in jobs)
    # another process writing at the same time as this one
    code = ("import sys; from services.history import History; h = History(sys.argv[1], database_url=sys.argv[-1] or None);"
            "[h.jobs.create('video', f'child-{i}', {}, target='t') for i in range(20)]")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), history_url or ""], cwd=ROOT)
    for i in range(20):
        h.jobs.create("video", f"parent-{i}", {}, target="t")
    assert child.wait(60) == 0
    assert len(History(tmp_path, database_url=history_url).jobs.list("video", limit=None)) == 40


def test_owner_liveness() -> None:
    assert owner_alive(current_owner())
    dead = run_cli([sys.executable, "-c", "from services.history import current_owner; print(current_owner())"],
                          cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert not owner_alive(dead)


_LEAVE_UNFINISHED = """
import sys
from services.history import History
h = History(sys.argv[1], database_url=sys.argv[-1] or None)
q = h.jobs.create("video", "never sent", {"frames": 17}, target="http://127.0.0.1:1/v1/videos/sync")
r = h.jobs.create("video", "was running", {"frames": 17}, target="http://127.0.0.1:1/v1/videos/sync")
h.jobs.mark_running(r.id, {"transport": "omni-sync", "target": r.target, "id": "abc", "resumable": False, "data": {}})
i = h.jobs.create("image", "image in flight", {}, target="http://127.0.0.1:1", status="running")
print(q.id, r.id, i.id)
"""


def test_jobs_of_a_stopped_app_are_marked_interrupted_with_a_message(tmp_path: Path, history_url: str | None) -> None:
    queued, running, image = _in_child(_LEAVE_UNFINISHED, str(tmp_path), history_url or "").split()
    h = History(tmp_path, database_url=history_url)  # "the app starts again"
    assert h.jobs.get(running).status == "running"  # nothing is touched until recover() decides
    assert h.jobs.recover() == []
    q, r, i = h.jobs.get(queued), h.jobs.get(running), h.jobs.get(image)
    assert q.status == r.status == i.status == "interrupted"
    assert "before this job was sent" in q.error
    assert "cannot be picked up again" in r.error and "generate it again" in r.error
    assert r.params == {"frames": 17} and r.handle["id"] == "abc"  # settings kept for "generate again"


def test_jobs_of_a_live_process_are_left_alone(tmp_path: Path, history_url: str | None) -> None:
    code = ("import sys, time; from services.history import History; h = History(sys.argv[1], database_url=sys.argv[-1] or None);"
            "j = h.jobs.create('video', 'busy', {}, target='t', status='running'); print(j.id, flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), history_url or ""], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        job_id = child.stdout.readline().strip()
        assert History(tmp_path, database_url=history_url).jobs.recover() == []
        assert History(tmp_path, database_url=history_url).jobs.get(job_id).status == "running"
    finally:
        child.kill()
        child.wait()


# ---------------------------------------------------------------------------------------------------------
# A resumable transport, shaped like SageMaker async: the request goes to a folder ("S3"), a worker
# writes an output or failure object there, poll() checks those objects — so any process can poll again.
class FolderAsyncTransport:
    kind = "folder-async"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.target = f"folder://{root}"

    def submit(self, body: bytes, content_type: str) -> JobHandle:
        job = f"{time.time_ns()}"
        (self.root / f"{job}.request").write_bytes(body)
        return JobHandle(self.kind, self.target, job, resumable=True,
                         data={"output": str(self.root / f"{job}.out"), "failure": str(self.root / f"{job}.failure")})

    def poll(self, handle: JobHandle, wait_s: float = 0.0) -> JobState:
        if Path(handle.data["output"]).exists():
            return JobState("succeeded")
        if Path(handle.data["failure"]).exists():
            return JobState("failed", error=Path(handle.data["failure"]).read_text())
        time.sleep(min(wait_s, 0.05))
        return JobState("running", detail="waiting for the output object")

    def fetch(self, handle: JobHandle) -> VideoPayload:
        return VideoPayload(Path(handle.data["output"]).read_bytes(), model_s=0.1, request_id=handle.id)

    def can_resume(self, handle: JobHandle) -> bool:
        return handle.transport == self.kind and handle.target == self.target


def test_a_resumable_job_is_picked_up_again_by_the_next_process(tmp_path: Path, history_url: str | None) -> None:
    data, inbox = tmp_path / "data", tmp_path / "inbox"
    inbox.mkdir()
    code = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from services.history import History
from tests.test_history import FolderAsyncTransport
t = FolderAsyncTransport(Path(sys.argv[2]))
h = History(sys.argv[1], database_url=sys.argv[-1] or None)
job = h.jobs.create("video", "resume me", {{"frames": 17}}, target=t.target)
h.jobs.mark_running(job.id, t.submit(b"body", "multipart/form-data; boundary=x").to_dict())
print(job.id)
"""
    job_id = _in_child(code, str(data), str(inbox), history_url or "")
    failing = _in_child(code, str(data), str(inbox), history_url or "")
    transport = FolderAsyncTransport(inbox)
    h = History(data, database_url=history_url)
    # the server finishes both while no studio runs
    handle = JobHandle.from_dict(h.jobs.get(job_id).handle)
    Path(handle.data["output"]).write_bytes(make_mp4(9, 64, 48, 8))
    Path(JobHandle.from_dict(h.jobs.get(failing).handle).data["failure"]).write_text("ModelError: out of memory")

    jobs = VideoJobs(VideoClient(transport), h)  # "the app starts again"
    assert sorted(jobs.resumed) == sorted([job_id, failing])
    done = jobs.wait(job_id, 30)
    assert done.status == "succeeded" and done.meta["frames"] == 9 and done.meta["request_id"] == handle.id
    assert done.read("video.mp4")[4:8] == b"ftyp"
    assert done.owner == h.owner  # claimed by this process
    bad = jobs.wait(failing, 30)
    assert bad.status == "failed" and bad.error == "ModelError: out of memory"


def test_an_orphan_is_claimed_by_one_process_only(tmp_path: Path, history_url: str | None) -> None:
    code = ("import sys; from services.history import History; h = History(sys.argv[1], database_url=sys.argv[-1] or None);"
            "j = h.jobs.create('video', 'x', {}, target='folder://x'); "
            "h.jobs.mark_running(j.id, {'transport': 'folder-async', 'target': 'folder://x', 'id': '1', 'resumable': True}); print(j.id)")
    job_id = _in_child(code, str(tmp_path), history_url or "")
    a, b = History(tmp_path, database_url=history_url), History(tmp_path, database_url=history_url)
    orphans_a, orphans_b = a.jobs.recover(), b.jobs.recover()
    assert [j.id for j in orphans_a] == [j.id for j in orphans_b] == [job_id]
    assert a.jobs.claim(orphans_a[0]) and not b.jobs.claim(orphans_b[0])
    assert History(tmp_path, database_url=history_url).jobs.get(job_id).status == "running"  # resumable: never marked interrupted
    assert json.loads(json.dumps(a.jobs.get(job_id).handle))["resumable"] is True


def test_a_studio_killed_mid_job_leaves_a_clear_record(fault_server: str, tmp_path: Path, history_url: str | None) -> None:
    """A real job in a real process, killed while the server is still working on it."""
    code = ("import sys, time; from services.history import History; from services.videos import *;"
            "jobs = VideoJobs(VideoClient(OmniVideoTransport(sys.argv[2])), History(sys.argv[1], database_url=sys.argv[-1] or None));"
            "job = jobs.start(VideoRequest('slow:20', frames=5, width=64, height=64));"
            "print(job.id, flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), fault_server, history_url or ""], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        job_id = child.stdout.readline().strip()
        deadline = time.monotonic() + 20
        while History(tmp_path, database_url=history_url).jobs.get(job_id).status != "running":
            assert time.monotonic() < deadline, "the job never started running"
            time.sleep(0.05)
    finally:
        child.kill()  # SIGKILL: no cleanup code runs, as when the machine or the app dies
        child.wait()
    h = History(tmp_path, database_url=history_url)
    assert h.jobs.get(job_id).status == "running"  # as the dead process left it
    jobs = VideoJobs(VideoClient(OmniVideoTransport(fault_server)), h)  # the studio starts again
    assert jobs.resumed == []
    job = h.jobs.get(job_id)
    assert job.status == "interrupted" and "cannot be picked up again" in job.error
    assert job.params["prompt"] == "slow:20" and job.handle["transport"] == "omni-sync"


# ---------------------------------------------------------------------------------------------------------
# A damaged database: one line naming the file and what to do, never sqlite3's traceback.
def _filled_history(data: Path, jobs: int = 150) -> Path:
    """A real history with enough rows to span many pages, checkpointed into its one file and closed."""
    history = History(data)
    for i in range(jobs):
        history.jobs.create("image", f"prompt {i} " + "words " * 40, {"size": "64x64", "seed": i}, target="t")
    history.reader().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    history.close()
    return history.db_path


def _damaged(db: Path) -> str:
    return f"the history database {db} is damaged"


def test_garbage_in_the_middle_of_the_database_is_named_in_one_line(tmp_path: Path) -> None:
    db = _filled_history(tmp_path)
    middle = (db.stat().st_size // 4096 // 2) * 4096  # a whole page in the middle: rows of the jobs table
    with db.open("r+b") as f:
        f.seek(middle)
        f.write(bytes(range(256)) * 16)
    with pytest.raises(HistoryError) as caught:
        History(tmp_path).jobs.recover()  # what the studio does first; it used to raise sqlite3.DatabaseError
    message = str(caught.value)
    assert message.startswith(_damaged(db)) and "move it aside — the studio starts a new one" in message
    assert "\n" not in message
    db.rename(db.with_name("history.sqlite3.damaged"))  # doing what it says: a new, empty history
    assert History(tmp_path).jobs.list() == []


@pytest.mark.parametrize("keep", [0.5, 50 / (150 * 4096)], ids=["half", "not-even-a-header"])
def test_a_truncated_database_is_named_in_one_line(tmp_path: Path, keep: float) -> None:
    db = _filled_history(tmp_path)
    with db.open("r+b") as f:
        f.truncate(max(1, int(db.stat().st_size * keep)))
    with pytest.raises(HistoryError) as caught:
        History(tmp_path).jobs.list()
    assert str(caught.value).startswith(_damaged(db)), caught.value
    assert "move it aside" in str(caught.value) and "writable folder" not in str(caught.value)


# -- a gallery's pages, search, rename and delete ---------------------------------------------------------
def test_jobs_page_through_and_search_by_prompt_with_wildcards_taken_literally(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    for n in range(30):
        h.jobs.create("image", f"picture {n:02d}", {}, target="t")
    h.jobs.create("image", "100% cotton_shirt", {}, target="t")
    h.jobs.create("image", "1000 cottonXshirt", {}, target="t")
    h.jobs.create("video", "picture in motion", {}, target="t")
    assert h.jobs.count("image") == 32
    first, second = h.jobs.list("image", limit=24), h.jobs.list("image", limit=24, offset=24)
    assert len(first) == 24 and len(second) == 8 and not {j.id for j in first} & {j.id for j in second}
    assert second[-1].prompt == "picture 00"  # the oldest is reachable
    assert [j.prompt for j in h.jobs.list("image", search="PICTURE 0", limit=3)] == ["picture 09", "picture 08", "picture 07"]
    assert h.jobs.count("image", search="picture 0") == 10
    assert [j.prompt for j in h.jobs.list("image", search="0% cotton_")] == ["100% cotton_shirt"]  # not a wildcard
    assert h.jobs.count("image", search="%") == 1 and h.jobs.count("image", search="_") == 1
    assert h.jobs.count(search="picture") == 31  # both kinds


def test_a_title_is_shown_instead_of_the_prompt_and_found_by_search(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    job = h.jobs.create("image", "a long prompt about a harbour", {}, target="t")
    assert h.jobs.get(job.id).name == "a long prompt about a harbour"
    renamed = h.jobs.rename(job.id, "  Harbour,\n take 2 ")
    assert renamed.title == "Harbour, take 2" and renamed.name == "Harbour, take 2"
    assert renamed.prompt == "a long prompt about a harbour"  # kept
    assert [j.id for j in History(tmp_path, database_url=history_url).jobs.list(search="take 2")] == [job.id]
    assert h.jobs.rename(job.id, " ").title is None
    with pytest.raises(InvalidInput, match="at most 200 characters"):
        h.jobs.rename(job.id, "x" * 201)


def test_delete_removes_the_record_and_its_media_and_refuses_a_running_job(tmp_path: Path, history_url: str | None) -> None:
    h = History(tmp_path, database_url=history_url)
    job = h.jobs.create("video", "waves", {}, target="t", inputs={"reference.png": b"png"})
    with pytest.raises(InvalidInput, match="still queued: wait until it ends"):
        h.jobs.delete(job.id)
    h.jobs.succeed(job.id, {"video.mp4": b"mp4"})
    assert h.media.list_record(job.id) == ["reference.png", "video.mp4"]
    h.jobs.delete(job.id)
    assert h.media.list_record(job.id) == [] and h.jobs.list() == []
    with pytest.raises(InvalidInput, match="there is no job"):
        h.jobs.delete(job.id)


def test_an_older_database_gets_the_title_column(tmp_path: Path) -> None:
    h = History(tmp_path)
    job = h.jobs.create("image", "old", {}, target="t")
    h.close()
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    db.execute("ALTER TABLE jobs DROP COLUMN title")  # as a database made before titles (and before Alembic)
    db.execute("DROP TABLE alembic_version")
    db.commit()
    db.close()
    again = History(tmp_path)
    assert again.jobs.get(job.id).title is None and again.jobs.rename(job.id, "named").name == "named"


# -- the jobs table of a release whose SQL listed the kinds --------------------------------------------------------
CHECKED_JOBS = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('image', 'video')),
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'interrupted')),
    prompt TEXT NOT NULL, params TEXT NOT NULL, target TEXT NOT NULL, owner TEXT NOT NULL, handle TEXT,
    inputs TEXT NOT NULL DEFAULT '[]', outputs TEXT NOT NULL DEFAULT '[]', timings TEXT NOT NULL DEFAULT '{}',
    meta TEXT NOT NULL DEFAULT '{}', error TEXT, created_at REAL NOT NULL, started_at REAL, finished_at REAL,
    updated_at REAL NOT NULL, user_id TEXT NOT NULL DEFAULT 'local', shared INTEGER NOT NULL DEFAULT 0, title TEXT
);
CREATE INDEX jobs_kind_created ON jobs (kind, created_at DESC);
CREATE INDEX jobs_status ON jobs (status);
CREATE INDEX jobs_user ON jobs (user_id);
INSERT INTO jobs (id, kind, status, prompt, params, target, owner, outputs, timings, created_at, finished_at,
                  updated_at, user_id, shared, title)
    VALUES ('old-image', 'image', 'succeeded', 'an old lighthouse', '{"size": "64x64"}', 'http://x', 'host:1:1',
            '["image-0.png"]', '{"total_s": 0.5}', 1704067200, 1704067201, 1704067201, 'alice@example.com', 1,
            'Lighthouse');
INSERT INTO jobs (id, kind, status, prompt, params, target, owner, created_at, updated_at, error)
    VALUES ('old-video', 'video', 'failed', 'waves', '{"frames": 17}', 'http://x', 'host:1:1', 1704067200,
            1704067300, 'the server said no');
"""


def test_a_database_whose_jobs_table_checked_the_kinds_is_migrated_and_its_rows_survive(tmp_path: Path) -> None:
    """The kinds are the catalog's now, checked in Python: an older database's CHECK (kind IN ('image', 'video'))
    is dropped when it is opened (the table rebuilt in one transaction), every row and its order kept."""
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    db.executescript(CHECKED_JOBS)
    db.commit()
    db.close()

    h = History(tmp_path)
    check = sqlite3.connect(tmp_path / "history.sqlite3")
    (sql,) = check.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone()
    assert "'image'" not in sql and check.execute("PRAGMA user_version").fetchone()[0] >= 1
    indexes = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'")}
    assert {"jobs_kind_created", "jobs_status", "jobs_user"} <= indexes
    assert [j.id for j in h.jobs.list()] == ["old-video", "old-image"]  # equal times: the later row first, as before
    image = h.jobs.get("old-image")
    assert (image.kind, image.status, image.title, image.user_id, image.shared) == \
        ("image", "succeeded", "Lighthouse", "alice@example.com", True)
    assert image.params == {"size": "64x64"} and image.outputs == ["image-0.png"] and image.timings == {"total_s": 0.5}
    video = h.jobs.get("old-video")
    assert (video.kind, video.status, video.error, video.user_id) == ("video", "failed", "the server said no", "local")

    with pytest.raises(InvalidInput, match=r"'voice' is not a kind of job the history keeps: one of image, video"):
        h.jobs.create("voice", "spoken", {}, target="t")  # type: ignore[arg-type]
    new = h.jobs.create("image", "new", {}, target="t")
    h.close()
    assert [j.id for j in History(tmp_path).jobs.list(limit=None)][0] == new.id  # opened again: nothing migrated twice
