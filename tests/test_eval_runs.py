"""Evaluation runs off the page (services/eval/runs.py), on SQLite and PostgreSQL, against the real offline engine:
a run goes on by itself and says how it ended; a second start is refused naming where it runs; Stop pressed on
another replica reaches it; a process killed mid-run (on this replica, or on another whose lease then lapses)
is carried on by the next runner to the last item, keeping what the dead one made."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from services.backend import create_backend
from services.eval.runs import EvalRuns, RunBusy
from services.eval.spec import parse_spec
from services.eval.store import EvalStore
from services.history import History
from services.history.base import replica
from services.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
LEASE_S = 1.0  # short, so a dead replica's claim lapses within the test


def image_spec(prompts: int) -> Any:
    return parse_spec({"name": "runs", "modality": "image", "prompts": [f"a lighthouse, take {i}" for i in range(prompts)],
                       "variants": [{"label": "four", "size": "64x64", "steps": 4, "seed": 1},
                                    {"label": "six", "size": "64x64", "steps": 6, "seed": 1}]})


def until(check, what: str, timeout_s: float = 90.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen in {timeout_s:.0f} s"
        time.sleep(0.05)


class _GatedImages:
    """The real image client, each generation waiting for the test's go (so a run can be caught in the middle)."""

    def __init__(self, images: Any, gate: threading.Semaphore) -> None:
        self.images, self.gate = images, gate

    def generate(self, request: Any) -> Any:
        assert self.gate.acquire(timeout=60), "the test never let the item through"
        return self.images.generate(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.images, name)


def gated_factory(gate: threading.Semaphore):  # noqa: ANN201
    def factory(settings: Settings) -> Any:
        backend = create_backend(settings)
        backend._made["image"] = _GatedImages(backend.client("image"), gate)
        return backend
    return factory


def test_a_run_goes_on_by_itself_refuses_a_second_start_and_stops_from_another_replica(
        engine_url: str, tmp_path: Path, history_url: str | None) -> None:
    base = Settings(data_dir=tmp_path, backend="server", server_url=engine_url)
    history = History(tmp_path, database_url=history_url, job_lease_s=LEASE_S)
    store = EvalStore(history)
    ev = store.create(image_spec(3))
    gate = threading.Semaphore(0)
    runs = EvalRuns(history, base, backend_factory=gated_factory(gate))
    runs.start(store, ev.id)
    state = runs.state(store, ev.id)
    assert state.running and state.replica == replica() and not state.stop_asked

    gate.release(2)
    until(lambda: len(store.items(ev.id, status="succeeded")) == 2, "two items made")
    with pytest.raises(RunBusy, match=f"being run already \\(on {replica()}\\)"):
        runs.start(store, ev.id)
    with pytest.raises(RunBusy):  # the command line asks the same claim
        EvalRuns(history, base, recover=False).run_here(store, ev.id)

    # Stop pressed on another replica's page: a flag on the row, read by the runner before its next item
    other = EvalStore(History(tmp_path, database_url=history_url))
    assert EvalRuns(other.history, base, recover=False).stop(other, ev.id)
    assert runs.state(other, ev.id).stop_asked
    gate.release(1)  # the item in flight (if the runner began a third before the flag) finishes; no other starts
    runs.wait(ev.id, 30)
    state = runs.state(store, ev.id)
    made = state.note["generated"]
    assert not state.running and state.note["stopped"] and made in (2, 3) and not state.note["failed"]
    assert len(store.items(ev.id, status="pending")) == 6 - made

    gate.release(10)
    runs.start(store, ev.id)  # Continue
    runs.wait(ev.id, 60)
    assert {i.status for i in store.items(ev.id)} == {"succeeded"}
    note = runs.state(store, ev.id).note
    assert (note["generated"], note["stopped"], note["failed"]) == (6 - made, False, 0)
    for item in store.items(ev.id):
        assert store.media(item)[:8] == b"\x89PNG\r\n\x1a\n"
    assert not EvalRuns(history, base, recover=False).stop(store, ev.id)  # nothing runs it now


CHILD = """
import sys, time
from services.eval.runs import EvalRuns
from services.eval.store import EvalStore
from services.history import History
from services.settings import Settings
data, url, eval_id, db = sys.argv[1:5]
history = History(data, database_url=db or None, job_lease_s=float(sys.argv[5]))
store = EvalStore(history)
made = []
def hang_after_two(p):
    made.append(p["item"])
    print(p["item"], flush=True)
    if len(made) == 2:
        time.sleep(600)  # the test kills this process here
EvalRuns(history, Settings(data_dir=data, backend="server", server_url=url), recover=False).run_here(
    store, eval_id, on_progress=hang_after_two)
"""


@pytest.mark.parametrize("where", ["this replica", "another replica"])
def test_a_run_whose_process_is_killed_is_carried_on_to_the_end(engine_url: str, tmp_path: Path,
                                                                history_url: str | None, where: str) -> None:
    """On this replica the dead process's pid tells at once; on another, its lease lapses (LEASE_S)."""
    history = History(tmp_path, database_url=history_url, job_lease_s=LEASE_S)
    store = EvalStore(history)
    ev = store.create(image_spec(3))
    env = {**os.environ, "OMNI_STUDIO_REPLICA": "replica-a"} if where == "another replica" else dict(os.environ)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), engine_url, ev.id, history_url or "",
                              str(LEASE_S)], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env)
    try:
        made = [child.stdout.readline().strip(), child.stdout.readline().strip()]
    finally:
        child.kill()  # SIGKILL: nothing of the dead process's runs again, as when a replica's machine dies
        child.wait()
    assert all(made), "the child made no items"
    kept = {i.id: store.media(i) for i in store.items(ev.id, status="succeeded")}
    assert set(kept) == set(made)
    dead = "replica-a" if where == "another replica" else replica()
    assert EvalRuns(history, Settings(data_dir=tmp_path), recover=False).state(store, ev.id).replica == dead

    runs = EvalRuns(history, Settings(data_dir=tmp_path, backend="server", server_url=engine_url))  # the survivor
    until(lambda: ev.id in runs.taken_over, "the takeover", timeout_s=30)
    runs.wait(ev.id, 90)
    state = runs.state(store, ev.id)
    assert not state.running
    assert state.note["taken_over_from"] == dead and state.note["replica"] == replica()
    assert state.note["generated"] == 4 and not state.note["failed"]
    items = store.items(ev.id)
    assert {i.status for i in items} == {"succeeded"}
    for item in items:
        data = store.media(item)
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        if item.id in kept:
            assert data == kept[item.id]  # what the dead process made is kept, not made again
