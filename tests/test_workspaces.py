"""Per-user workspaces in the history: every record is someone's (`user_id`), theirs alone until shared; a
History acts for one person, and the services check that person's role before anything is sent or written.

Alice and Bob are creators, Vic a viewer, Ada an admin, all signed in; LOCAL (no sign-in) sees everything, as
the single-user studio always did. Media runs on the real offline engine (or the loopback video server of
test_videos); a database made before workspaces is migrated in place; and many processes and threads write
to one database at once without losing a record.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import sqlite3
import sys
import threading
from pathlib import Path

import pytest

from protocol.errors import InvalidInput
from services.access import LOCAL, Forbidden, Principal
from services.compare import ImageVariant, compare_images, compare_voices
from services.eval import pairing
from services.eval.runner import run_items
from services.eval.spec import parse_spec
from services.eval.store import EvalStore
from services.history import History, HistoryError
from services.images import ImageClient, ImageRequest, OmniImageTransport, record_image
from services.load import LoadPlan, SweepRun, describe_target
from services.runtime import background_loop
from services.settings import Settings
from services.speech import load_reference
from services.videos import OmniVideoTransport, VideoClient, VideoJobs, VideoRequest
from tests.test_eval import spec_dict
from tests.test_history import FolderAsyncTransport
from tests.test_videos import fault_server, make_mp4  # noqa: F401  (fixture)
from tests.test_voices import backend_for, reference, unique
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
ALICE = Principal(id="alice@example.com", name="Alice", role="creator", signed_in=True)
BOB = Principal(id="bob@example.com", name="Bob", role="creator", signed_in=True)
VIC = Principal(id="vic@example.com", name="Vic", role="viewer", signed_in=True)
ADA = Principal(id="ada@example.com", name="Ada", role="admin", signed_in=True)
SMALL = dict(size="64x64", steps=2, seed=3)


class CountingTransport(OmniImageTransport):
    """The real engine's image routes, counting the requests that reach it."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.sent = 0

    def _post(self, url, **kwargs):
        self.sent += 1
        return super()._post(url, **kwargs)


# -- images: who may make them, who sees them ----------------------------------------------------------------
def test_a_viewer_is_refused_before_the_engine_and_a_creators_images_are_theirs_until_shared(
        engine_url: str, tmp_path: Path, history_url: str | None) -> None:
    history = History(tmp_path, database_url=history_url)
    client = ImageClient(CountingTransport(engine_url))
    with pytest.raises(Forbidden, match=r"Vic \(viewer\) may not generate .* a creator or an admin"):
        record_image(client, history.acting_as(VIC), ImageRequest("a lighthouse", **SMALL))
    assert client.transport.sent == 0 and history.jobs.list() == []  # nothing sent, nothing recorded

    alice, bob = history.acting_as(ALICE), history.acting_as(BOB)
    job = record_image(client, alice, ImageRequest("a lighthouse", **SMALL))
    assert client.transport.sent == 1 and job.status == "succeeded"
    assert (job.user_id, job.shared, job.owner) == (ALICE.id, False, history.owner)  # owner: still the process
    mine = record_image(client, bob, ImageRequest("bob's own", **SMALL))
    assert [j.id for j in alice.jobs.list()] == [job.id]
    assert [j.id for j in bob.jobs.list()] == [mine.id]
    with pytest.raises(InvalidInput, match=f"there is no job '{job.id}'"):  # refused like a missing one
        bob.jobs.get(job.id)
    with pytest.raises(InvalidInput, match="there is no job"):  # nor can he share what he cannot see
        bob.set_shared("job", job.id, True)
    assert [j.id for j in history.jobs.list()] == [mine.id, job.id]  # LOCAL, without sign-in: everything

    alice.set_shared("job", job.id, True)
    assert [j.id for j in bob.jobs.list("image")] == [mine.id, job.id]  # his own and the shared one, newest first
    assert bob.jobs.get(job.id).shared and history.acting_as(VIC).jobs.list() == [bob.jobs.get(job.id)]
    with pytest.raises(Forbidden, match="only the one who made it"):
        bob.set_shared("job", job.id, False)
    with pytest.raises(Forbidden, match="may not share with the team"):
        history.acting_as(VIC).set_shared("job", job.id, False)
    with pytest.raises(Forbidden, match="only their own runs"):
        bob.jobs.fail(job.id, "not his to change")
    history.acting_as(ADA).set_shared("job", job.id, False)  # an admin may
    assert bob.jobs.list() == [bob.jobs.get(mine.id)]


def test_a_viewer_cannot_compare_and_no_target_is_built(engine_url: str, tmp_path: Path, history_url: str | None) -> None:
    from services.compare import Target

    settings = Settings(data_dir=tmp_path, backend="server", server_url=engine_url)
    default = backend_for(engine_url, tmp_path)
    built = []
    variants = [ImageVariant("A", ImageRequest("p", **SMALL)),
                ImageVariant("B", ImageRequest("p", **SMALL), Target("server", url=engine_url))]
    with pytest.raises(Forbidden):
        compare_images(variants, settings=settings, history=History(tmp_path, actor=VIC, database_url=history_url), default=default,
                       build=lambda s: built.append(s))
    assert built == [] and History(tmp_path, database_url=history_url).jobs.list() == []
    outcomes = compare_images(variants, settings=settings, history=History(tmp_path, actor=ALICE, database_url=history_url), default=default)
    assert [o.job.user_id for o in outcomes] == [ALICE.id, ALICE.id]
    assert History(tmp_path, actor=BOB, database_url=history_url).jobs.list() == []


def test_a_viewer_cannot_compare_voices_and_no_target_is_built(engine_url: str, tmp_path: Path) -> None:
    from services.compare import Target, VoiceVariant

    settings = Settings(data_dir=tmp_path, backend="server", server_url=engine_url)
    built = []
    variants = [VoiceVariant("A", "Hello there.", {"voice": "joe"}),
                VoiceVariant("B", "Hello there.", {"voice": "joe"}, Target("server", url=engine_url))]
    with pytest.raises(Forbidden, match="Vic \\(viewer\\) may not generate"):
        compare_voices(variants, settings=settings, default=backend_for(engine_url, tmp_path), actor=VIC,
                       build=lambda s: built.append(s))
    assert built == []


# -- video jobs: one runner for everyone, each job for its maker, resumed for its maker -----------------------
def test_video_jobs_run_for_the_person_who_started_them(fault_server: str, tmp_path: Path, history_url: str | None) -> None:  # noqa: F811
    history = History(tmp_path, database_url=history_url)
    jobs = VideoJobs(VideoClient(OmniVideoTransport(fault_server)), history, recover=False)  # the process's runner
    request = VideoRequest("waves", frames=5, width=64, height=64)
    with pytest.raises(Forbidden):
        jobs.start(request, history=history.acting_as(VIC))
    assert history.jobs.list() == [] and jobs.running() == []
    alice = history.acting_as(ALICE)
    job = jobs.wait(jobs.start(request, history=alice).id, 30, history=alice)
    assert job.status == "succeeded" and job.user_id == ALICE.id and job.has("video.mp4")
    assert history.acting_as(BOB).jobs.list("video") == []


def test_a_resumed_job_is_carried_on_for_whoever_made_it(tmp_path: Path, history_url: str | None) -> None:
    data, inbox = tmp_path / "data", tmp_path / "inbox"
    inbox.mkdir()
    code = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from services.access import Principal
from services.history import History
from tests.test_history import FolderAsyncTransport
t = FolderAsyncTransport(Path(sys.argv[2]))
h = History(sys.argv[1], actor=Principal(id="alice@example.com", name="Alice", role="creator", signed_in=True),
            database_url=sys.argv[3] or None)
job = h.jobs.create("video", "resume me", {{"frames": 17}}, target=t.target)
h.jobs.mark_running(job.id, t.submit(b"body", "multipart/form-data; boundary=x").to_dict())
print(job.id)
"""
    out = run_cli([sys.executable, "-c", code, str(data), str(inbox), history_url or ""], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    transport = FolderAsyncTransport(inbox)
    alice = History(data, actor=ALICE, database_url=history_url)
    from services.videos import JobHandle

    Path(JobHandle.from_dict(alice.jobs.get(job_id).handle).data["output"]).write_bytes(make_mp4(9, 64, 48, 8))
    bobs = History(data, actor=BOB, database_url=history_url)  # whoever's session starts the runner: the job stays Alice's
    jobs = VideoJobs(VideoClient(transport), bobs)
    assert jobs.resumed == [job_id]
    jobs.wait(job_id, 30, history=alice)
    done = alice.jobs.get(job_id)
    assert done.status == "succeeded" and done.user_id == ALICE.id and done.owner == bobs.owner
    with pytest.raises(InvalidInput, match="there is no job"):
        bobs.jobs.get(job_id)


# -- voices: saved with consent, as someone ------------------------------------------------------------------
def test_saved_voices_are_their_savers_until_shared(engine_url: str, tmp_path: Path, history_url: str | None) -> None:
    library = backend_for(engine_url, tmp_path).client("voices")
    history = History(tmp_path / "data", database_url=history_url)
    name = unique("Alice")
    before = {v.name for v in library.list()}
    with pytest.raises(Forbidden, match="may not save a cloned voice"):
        library.acting(history.acting_as(VIC)).add(name, reference(), "consent-v")
    assert {v.name for v in library.list()} == before and history.voices.list(include_removed=True) == []

    alices, bobs = library.acting(history.acting_as(ALICE)), library.acting(history.acting_as(BOB))
    saved = alices.add(name, load_reference(reference(6.0)), "consent-a")
    assert (saved.who, saved.user_id, saved.shared) == ("Alice", ALICE.id, False)  # who: the signed-in person
    assert name in {v.name for v in alices.list()} and name not in {v.name for v in bobs.list()}
    assert bobs.records() == [] and [r.name for r in alices.records()] == [name]
    with pytest.raises(InvalidInput, match="already"):  # one set of names per target, whoever saved them
        bobs.add(name, reference(), "consent-b")

    history.acting_as(ALICE).set_shared("voice", saved.record_id, True)
    (seen,) = [v for v in bobs.list() if v.name == name]
    assert (seen.user_id, seen.shared, seen.consent_id) == (ALICE.id, True, "consent-a")
    with pytest.raises(Forbidden, match="only they \\(or an admin\\) may remove it"):
        bobs.delete(name)
    assert name in {v.name for v in library.list()}  # the server was not asked
    alices.delete(name)
    assert name not in {v.name for v in library.list()}


# -- load reports and evaluations ----------------------------------------------------------------------------
def test_load_reports_need_the_role_and_stay_their_makers(engine_url: str, tmp_path: Path, history_url: str | None) -> None:
    from tests.test_capacity_page import _report

    history = History(tmp_path, database_url=history_url)
    settings = Settings(data_dir=tmp_path, backend="server", server_url=engine_url)
    backend = backend_for(engine_url, tmp_path)
    plan = LoadPlan.build("image", levels="1", requests=1, work={"prompt": "p", "size": "64x64", "steps": 1})
    loop = background_loop()
    with pytest.raises(Forbidden, match="may not run load sweeps"):
        SweepRun(loop, backend, plan, describe_target(backend, settings, "image"), history=history.acting_as(VIC))
    report = _report("g6", "ml.g6.xlarge", 200, 1.0).to_dict()
    with pytest.raises(Forbidden):
        history.acting_as(VIC).load_reports.save(report)
    alice, bob = history.acting_as(ALICE), history.acting_as(BOB)
    alice.load_reports.save(report)
    assert bob.load_reports.list() == [] and [r.user_id for r in alice.load_reports.list()] == [ALICE.id]
    with pytest.raises(InvalidInput, match="no load report"):
        bob.load_reports.get(report["id"])
    with pytest.raises(Forbidden, match="it is alice@example.com's"):  # no overwriting another's report by id
        bob.load_reports.save(report | {"title": "mine now"})
    alice.set_shared("load_report", report["id"], True)
    alice.load_reports.save(report | {"title": "renamed"})  # saved again: still shared
    (seen,) = bob.load_reports.list()
    assert (seen.title, seen.user_id, seen.shared) == ("renamed", ALICE.id, True)


def test_evaluations_are_made_and_run_by_their_owner_and_rated_by_the_team(tmp_path: Path, history_url: str | None) -> None:
    history = History(tmp_path, database_url=history_url)
    spec = parse_spec(spec_dict())
    with pytest.raises(Forbidden, match="may not run or rate evaluations"):
        EvalStore(history.acting_as(VIC)).create(spec)
    alice, bob = EvalStore(history.acting_as(ALICE)), EvalStore(history.acting_as(BOB))
    ev = alice.create(spec)
    assert (ev.user_id, ev.shared) == (ALICE.id, False)
    assert bob.list() == [] and [e["id"] for e in alice.list()] == [ev.id]
    with pytest.raises(InvalidInput, match="there is no evaluation"):
        bob.get(ev.id)
    a, b = alice.items(ev.id)[:2]
    with pytest.raises(InvalidInput, match="there is no evaluation"):
        bob.add_ratings(ev.id, [(a.id, b.id, "a", "Bob")])
    with pytest.raises(InvalidInput, match="there is no evaluation"):
        bob.set_shared(ev.id, True)

    alice.set_shared(ev.id, True)
    (listed,) = bob.list()
    assert (listed["id"], listed["user_id"], listed["shared"]) == (ev.id, ALICE.id, True)
    assert [e["id"] for e in EvalStore(history.acting_as(VIC)).list()] == [ev.id]  # a viewer sees what is shared
    for item in alice.items(ev.id):
        alice.succeed(item, b"RIFF-not-really-a-wav", {"latency_s": 0.1}, "voice")
    pair = pairing.next_pair(bob, ev.id, "Bob")
    pairing.record_rating(bob, ev.id, pair.item_a, pair.item_b, "a", "Bob")
    with pytest.raises(Forbidden):
        pairing.record_rating(EvalStore(history.acting_as(VIC)), ev.id, pair.item_a, pair.item_b, "b", "Vic")
    assert [(r.rater, r.user_id) for r in alice.ratings(ev.id)] == [("Bob", BOB.id)]
    with pytest.raises(Forbidden, match="only the one who made it runs its items"):
        run_items(bob, ev.id, base=Settings(data_dir=tmp_path), backend_factory=lambda s: pytest.fail("built"))
    with pytest.raises(Forbidden, match="only the one who made it"):
        bob.set_shared(ev.id, False)


# -- a database made before workspaces -----------------------------------------------------------------------
OLD_SCHEMA = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('image', 'video')),
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'interrupted')),
    prompt TEXT NOT NULL, params TEXT NOT NULL, target TEXT NOT NULL, owner TEXT NOT NULL, handle TEXT,
    inputs TEXT NOT NULL DEFAULT '[]', outputs TEXT NOT NULL DEFAULT '[]', timings TEXT NOT NULL DEFAULT '{}',
    meta TEXT NOT NULL DEFAULT '{}', error TEXT, created_at REAL NOT NULL, started_at REAL, finished_at REAL,
    updated_at REAL NOT NULL
);
CREATE INDEX jobs_kind_created ON jobs (kind, created_at DESC);
CREATE INDEX jobs_status ON jobs (status);
CREATE TABLE voices (
    id INTEGER PRIMARY KEY AUTOINCREMENT, target TEXT NOT NULL, name TEXT NOT NULL,
    consent_id TEXT NOT NULL CHECK (length(trim(consent_id)) > 0), who TEXT NOT NULL, ref_text TEXT,
    speaker_description TEXT, created_at REAL NOT NULL, removed_at REAL, removal TEXT
);
CREATE INDEX voices_target_name ON voices (target, name);
CREATE TABLE load_reports (
    id TEXT PRIMARY KEY, modality TEXT NOT NULL, backend TEXT NOT NULL, target TEXT NOT NULL, instance_type TEXT,
    title TEXT, report TEXT NOT NULL, created_at REAL NOT NULL
);
CREATE INDEX load_reports_created ON load_reports (created_at DESC);
CREATE TABLE evaluations (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, modality TEXT NOT NULL, spec TEXT NOT NULL, created_at REAL NOT NULL
);
CREATE TABLE eval_items (
    id TEXT PRIMARY KEY, evaluation_id TEXT NOT NULL, variant TEXT NOT NULL, prompt_index INTEGER NOT NULL,
    repeat INTEGER NOT NULL, prompt TEXT NOT NULL, settings TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')), media TEXT,
    figures TEXT NOT NULL DEFAULT '{}', error TEXT, updated_at REAL NOT NULL,
    UNIQUE (evaluation_id, variant, prompt_index, repeat)
);
CREATE INDEX eval_items_eval ON eval_items (evaluation_id);
CREATE TABLE eval_ratings (
    id INTEGER PRIMARY KEY AUTOINCREMENT, evaluation_id TEXT NOT NULL, item_a TEXT NOT NULL, item_b TEXT NOT NULL,
    winner TEXT NOT NULL CHECK (winner IN ('a', 'b', 'tie')), rater TEXT NOT NULL, created_at REAL NOT NULL
);
CREATE INDEX eval_ratings_eval ON eval_ratings (evaluation_id);
INSERT INTO jobs (id, kind, status, prompt, params, target, owner, outputs, created_at, finished_at, updated_at)
    VALUES ('20240101-000000-aaaa', 'image', 'succeeded', 'an old lighthouse', '{"size": "64x64"}', 'http://x',
            'host:1:1', '["image-0.png"]', 1704067200, 1704067201, 1704067201);
INSERT INTO voices (target, name, consent_id, who, created_at) VALUES ('offline engine', 'anna', 'consent-1', 'me',
    1704067300);
INSERT INTO load_reports (id, modality, backend, target, report, created_at)
    VALUES ('lr-old', 'voice', 'omni', 'http://x', '{"id": "lr-old", "title": null}', 1704067400);
INSERT INTO eval_ratings (evaluation_id, item_a, item_b, winner, rater, created_at)
    VALUES ('ev-old', 'i1', 'i2', 'a', 'Ann', 1704067500);
"""


def test_a_database_from_before_workspaces_is_migrated_in_place_and_its_rows_are_locals(tmp_path: Path) -> None:
    spec = parse_spec(spec_dict())
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO evaluations VALUES ('ev-old', 'old one', 'voice', ?, 1704067450)", (spec.model_dump_json(),))
    db.commit()
    db.close()

    history = History(tmp_path)  # LOCAL: the single-user studio that made these rows
    store = EvalStore(history)
    (job,) = history.jobs.list()
    assert (job.id, job.prompt, job.params, job.outputs, job.owner) == (
        "20240101-000000-aaaa", "an old lighthouse", {"size": "64x64"}, ["image-0.png"], "host:1:1")
    assert (job.user_id, job.shared) == (LOCAL.id, False)
    (voice,) = history.voices.list()
    assert (voice.name, voice.consent_id, voice.who, voice.user_id, voice.shared) == ("anna", "consent-1", "me",
                                                                                      "local", False)
    (report,) = history.load_reports.list()
    assert (report.id, report.report, report.user_id) == ("lr-old", {"id": "lr-old", "title": None}, "local")
    (ev,) = store.list()
    assert (ev["id"], ev["name"], ev["ratings"], ev["user_id"], ev["shared"]) == ("ev-old", "old one", 1, "local",
                                                                                  False)
    assert [(r.rater, r.user_id) for r in store.ratings("ev-old")] == [("Ann", "local")]
    # local's: once sign-in is on, a signed-in creator sees none of it, an admin sees it and may share it
    assert History(tmp_path, actor=ALICE).jobs.list() == [] and EvalStore(History(tmp_path, actor=ALICE)).list() == []
    ada = History(tmp_path, actor=ADA)
    assert [j.id for j in ada.jobs.list()] == [job.id] and [e["id"] for e in EvalStore(ada).list()] == ["ev-old"]
    assert [v.name for v in ada.voices.list()] == ["anna"] and ada.voices.unseen_names("offline engine") == set()
    assert History(tmp_path, actor=ALICE).voices.unseen_names("offline engine") == {"anna"}
    ada.set_shared("job", job.id, True)
    assert [j.id for j in History(tmp_path, actor=ALICE).jobs.list()] == [job.id]

    # opened again (another process, a later start): nothing to do, nothing changed; new rows work as usual
    columns = [r[1] for r in sqlite3.connect(tmp_path / "history.sqlite3").execute("PRAGMA table_info(jobs)")]
    assert columns.count("user_id") == 1 and columns.count("shared") == 1
    again = History(tmp_path, actor=ALICE)
    EvalStore(again)
    new = again.jobs.create("image", "new", {}, target="t")
    assert [j.id for j in History(tmp_path).jobs.list()] == [new.id, job.id]


def test_the_migration_is_one_transaction(tmp_path: Path) -> None:
    """A migration that fails part-way leaves the database as it was: here the last table's owner index cannot
    be made (a table already has its name), after the jobs and voices tables were given their columns."""
    db = sqlite3.connect(tmp_path / "history.sqlite3")
    db.executescript(OLD_SCHEMA)
    db.execute("CREATE TABLE load_reports_user (x)")
    db.commit()
    db.close()
    with pytest.raises(HistoryError, match="cannot open the history .* already a table named load_reports_user"):
        History(tmp_path)
    check = sqlite3.connect(tmp_path / "history.sqlite3")
    for table in ("jobs", "voices", "load_reports"):
        assert "user_id" not in [r[1] for r in check.execute(f"PRAGMA table_info({table})")], table
    assert check.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1
    check.execute("DROP TABLE load_reports_user")
    check.commit()
    assert History(tmp_path).jobs.list()[0].user_id == "local"  # the name freed: the migration goes through


# -- many writers at once --------------------------------------------------------------------------------------
WRITES = 12


def write_many(data_dir: str, who: str, eval_id: str, pair: tuple[str, str], url: str | None) -> int:
    """A writer process (or thread): WRITES image jobs made and finished, and as many ratings, as `who`."""
    actor = Principal(id=who, name=who, role="creator", signed_in=True)
    history = History(data_dir, actor=actor, database_url=url)
    store = EvalStore(history)
    for i in range(WRITES):
        job = history.jobs.create("image", f"{who} {i}", {"i": i}, target="t", status="running")
        history.jobs.succeed(job.id, {"image-0.png": f"{who} {i}".encode()}, timings={"total_s": 0.1})
        store.add_ratings(eval_id, [(pair[0], pair[1], "a", who)])
    history.close()
    return WRITES


def test_many_processes_and_threads_write_to_one_database_and_nothing_is_lost(tmp_path: Path, history_url: str | None) -> None:
    history = History(tmp_path, database_url=history_url)
    store = EvalStore(history)
    ev = store.create(parse_spec(spec_dict()))
    store.set_shared(ev.id, True)  # the team rates it
    a, b = store.items(ev.id)[:2]
    processes, threads = 4, 3
    with concurrent.futures.ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(write_many, str(tmp_path), f"p{k}@example.com", ev.id, (a.id, b.id), history_url)
                   for k in range(processes)]
        errors: list[BaseException] = []

        def thread(k: int) -> None:
            try:
                write_many(str(tmp_path), f"t{k}@example.com", ev.id, (a.id, b.id), history_url)
            except BaseException as exc:  # "database is locked" would land here
                errors.append(exc)

        running = [threading.Thread(target=thread, args=(k,)) for k in range(threads)]
        for t in running:
            t.start()
        for t in running:
            t.join()
        assert [f.result(timeout=120) for f in futures] == [WRITES] * processes  # a child's error is raised here
    assert errors == []
    writers = processes + threads
    jobs = History(tmp_path, database_url=history_url).jobs.list(limit=None)
    assert len(jobs) == writers * WRITES and all(j.status == "succeeded" for j in jobs)
    assert all(j.output_files()[0][1] == j.prompt.encode() for j in jobs)
    ratings = store.ratings(ev.id)
    assert len(ratings) == writers * WRITES
    assert {r.user_id for r in ratings} == {f"p{k}@example.com" for k in range(processes)} | \
        {f"t{k}@example.com" for k in range(threads)}


# -- renaming and deleting: one's own; an admin anyone's -------------------------------------------------------
def test_only_the_owner_or_an_admin_renames_or_deletes_a_job_and_a_viewer_neither(tmp_path: Path, history_url: str | None) -> None:
    history = History(tmp_path, database_url=history_url)
    alice, bob, vic, ada = (history.acting_as(p) for p in (ALICE, BOB, VIC, ADA))
    job = alice.jobs.create("image", "alice's harbour", {}, target="t", status="running")
    alice.jobs.succeed(job.id, {"image-0.png": b"png"})
    alice.set_shared("job", job.id, True)
    with pytest.raises(Forbidden, match=r"Bob \(creator\) may not rename alice@example.com's image"):
        bob.jobs.rename(job.id, "mine now")
    with pytest.raises(Forbidden, match=r"Bob \(creator\) may not delete alice@example.com's image"):
        bob.jobs.delete(job.id)
    with pytest.raises(Forbidden, match=r"Vic \(viewer\) may not generate"):
        vic.jobs.delete(job.id)
    assert alice.jobs.rename(job.id, "Harbour").title == "Harbour"
    ada.jobs.delete(job.id)  # an admin may delete anyone's (that they see)
    assert history.jobs.list() == [] and history.media.list_record(job.id) == []


def test_an_evaluation_is_edited_or_deleted_by_its_owner_or_an_admin_only(tmp_path: Path, history_url: str | None) -> None:
    history = History(tmp_path, database_url=history_url)
    alice, bob, vic, ada = (EvalStore(history.acting_as(p)) for p in (ALICE, BOB, VIC, ADA))
    ev = alice.create(parse_spec(spec_dict(name="hers")))
    alice.set_shared(ev.id, True)
    with pytest.raises(Forbidden, match=r"Bob \(creator\) may not edit alice@example.com's evaluation"):
        bob.update(ev.id, parse_spec(spec_dict(name="his")))
    with pytest.raises(Forbidden, match=r"Bob \(creator\) may not delete alice@example.com's evaluation"):
        bob.delete(ev.id)
    with pytest.raises(Forbidden, match=r"Vic \(viewer\) may not run or rate evaluations"):
        vic.delete(ev.id)
    assert alice.update(ev.id, parse_spec(spec_dict(name="renamed"))).name == "renamed"
    ada.delete(ev.id)
    assert alice.list() == []


def test_a_streamed_transcripts_subtitle_times_are_kept_by_its_owner_or_an_admin_only(
        tmp_path: Path, history_url: str | None) -> None:
    history = History(tmp_path, database_url=history_url)
    alice, bob = history.acting_as(ALICE), history.acting_as(BOB)
    kept = alice.transcripts.record("call me back", source="microphone", route="stream", model="m", backend="server",
                                    target="t", audio=b"RIFF....", audio_name="microphone.wav")
    alice.set_shared("transcript", kept.id, True)
    cues = [{"start": 0.2, "end": 1.4, "text": "Call me back."}]
    with pytest.raises(Forbidden, match="only the one who made it"):
        bob.transcripts.time_segments(kept.id, cues)
    with pytest.raises(InvalidInput, match="no speech was timed"):
        alice.transcripts.time_segments(kept.id, [])
    assert bob.transcripts.get(kept.id).segments == []  # nothing changed
    timed = alice.transcripts.time_segments(kept.id, cues)
    assert timed.segments == cues and timed.figures["segments_from"] == "file" and timed.text == "call me back"
    assert history.acting_as(ADA).transcripts.time_segments(kept.id, cues).segments == cues  # an admin may
