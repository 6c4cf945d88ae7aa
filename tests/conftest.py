"""Shared fixtures: real local servers on free loopback ports, started once per test session."""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from bench.pg_cluster import Cluster
from offline.launch import Engine, free_port, start_engine
from services.listen.sample import spoken_sample_at

__all__ = ["free_port", "spoken_turn_files"]  # the tests import them from here


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background (`make test &`, a CI runner without a terminal) inherits SIGINT *ignored*,
    and an ignored signal stays ignored across exec: every child a test starts would then be deaf to the Ctrl-C the
    Ctrl-C tests send it. Handled again here (in the controller and in each xdist worker), SIGINT reaches children
    with its default action, as it does from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def offline_engine() -> Iterator[Engine]:
    """The offline engine as a real subprocess (`python -m offline`) on a free 127.0.0.1 port (its log and
    process are there for the tests that check what the engine did)."""
    engine = start_engine()
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="session")
def engine_url(offline_engine: Engine) -> str:
    return offline_engine.url


def spoken_turn_files(url: str, folder: Path, texts: Iterable[str]) -> list[Path]:
    """Each text spoken by the offline engine at `url` (its seeded voice), written to folder/turnN.wav: the
    recorded turns the converse tests play."""
    paths = []
    for i, text in enumerate(texts):
        path = folder / f"turn{i + 1}.wav"
        path.write_bytes(spoken_sample_at(url, text))
        paths.append(path)
    return paths


# -- the history's two databases (bench/pg_cluster.py) --------------------------------------------------------
@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """This test process's throwaway PostgreSQL cluster, its template database migrated to the newest revision."""
    from services.history import History

    cluster = Cluster()
    try:
        with tempfile.TemporaryDirectory() as media:
            History(media, database_url=cluster.url("history_template")).close()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The database_url a history test runs on, each test twice: None (SQLite in its data folder, the default)
    and a fresh PostgreSQL database of this process's cluster, migrated (dropped after the test)."""
    yield from _database(request, "history_template")


@pytest.fixture(params=["sqlite", "postgresql"])
def new_history_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """As history_url, but the PostgreSQL database is empty: never migrated."""
    yield from _database(request, "template1")


def _database(request: pytest.FixtureRequest, template: str) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    name = cluster.database(template)
    try:
        yield cluster.url(name)
    finally:
        cluster.drop(name)


@pytest.fixture(autouse=True)
def _runners_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The video job runners and evaluation runners a test makes stop when it ends. Their lease keepers
    (services/videos/jobs.py, services/eval/runs.py) would otherwise go on looking for lapsed work in a database
    the test has dropped, and say so in the run's output."""
    from services.eval import runs as eval_runs
    from services.videos import jobs as video_jobs

    made: list[video_jobs.VideoJobs | eval_runs.EvalRuns] = []
    for cls in (video_jobs.VideoJobs, eval_runs.EvalRuns):
        def tracked(self: object, *args: object, __init=cls.__init__, **kwargs: object) -> None:
            __init(self, *args, **kwargs)  # type: ignore[arg-type]
            made.append(self)  # type: ignore[arg-type]

        monkeypatch.setattr(cls, "__init__", tracked)
    yield
    for runner in made:
        runner.close()
