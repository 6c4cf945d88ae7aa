"""offline.launch: the offline engine is started once per process, survives the thread that started it,
and never outlives the studio (normal exit, or the studio killed with SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from offline.launch import EngineStartError, start_engine

ROOT = Path(__file__).resolve().parent.parent

# A small "studio": starts the engine from a short-lived thread (as Streamlit's script runs do), checks
# it is shared, reports its pid and URL, then waits to be told how to die.
STUDIO = textwrap.dedent("""
    import json, os, sys, threading, time
    import httpx
    from offline.launch import shared_engine

    box = {}
    t = threading.Thread(target=lambda: box.update(engine=shared_engine()))
    t.start(); t.join()
    time.sleep(0.5)  # the starting thread is gone: the engine must still be there
    engine = box["engine"]
    assert shared_engine() is engine  # once per process
    ok = httpx.get(engine.url + "/health", timeout=5).status_code == 200
    voices = httpx.get(engine.url + "/v1/audio/voices", timeout=5).json()["voices"]
    print(json.dumps({"url": engine.url, "pid": engine.process.pid, "healthy": ok, "voices": voices}), flush=True)
    if sys.argv[1] == "exit":
        sys.exit(0)
    time.sleep(60)  # to be SIGKILLed
""")


def _gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie whose parent died is reaped by init quickly; check its state too
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def _start_studio(how: str) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen([sys.executable, "-c", STUDIO, how], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line, f"the studio process exited with {proc.wait()} before reporting"
    return proc, json.loads(line)


def test_engine_is_shared_survives_its_starting_thread_and_stops_at_exit() -> None:
    proc, info = _start_studio("exit")
    assert info["healthy"] and info["url"].startswith("http://127.0.0.1:")
    assert "joe" in info["voices"]
    assert proc.wait(30) == 0
    assert _gone(info["pid"]), "the engine outlived the studio's normal exit"
    with pytest.raises(httpx.HTTPError):
        httpx.get(info["url"] + "/health", timeout=1)


def test_engine_dies_with_a_killed_studio() -> None:
    proc, info = _start_studio("kill")
    assert info["healthy"]
    proc.send_signal(signal.SIGKILL)  # no atexit: only PR_SET_PDEATHSIG can stop the engine now
    proc.wait(10)
    assert _gone(info["pid"]), "the engine outlived a SIGKILLed studio"


def test_an_engine_that_cannot_start_says_why() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EngineStartError) as info:
            start_engine(port=port, timeout=60)
    msg = str(info.value)
    assert "exited with code" in msg and f"127.0.0.1:{port}" in msg
    assert "address already in use" in msg.lower()  # the tail of the engine's own log
    assert ".log" in msg


# ---------------------------------------------------------------------------------------------------------
# Every server a test, a benchmark or the rehearsal starts dies with its parent, however the parent ends.
EMULATOR_PARENT = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from emulator.launch import start_emulator

    with start_emulator(Path(sys.argv[1])) as ready:   # its own engine and moto, like `make rehearse`
        print(json.dumps({"ready": True}), flush=True)
        time.sleep(120)  # to be killed
""")


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        todo += children
    return found


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_the_emulator_and_its_engine_die_with_the_process_that_started_them(tmp_path, how):
    parent = subprocess.Popen([sys.executable, "-c", EMULATOR_PARENT, str(tmp_path)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()  # type: ignore[union-attr]
        assert json.loads(line) == {"ready": True}
        servers = _descendants(parent.pid)
        assert len(servers) >= 2, servers  # the emulator and the engine it started
        parent.send_signal(how)  # SIGTERM: Python's default action, no clean-up code runs
        parent.wait(10)
        alive = [pid for pid in servers if not _gone(pid, timeout=20)]
        assert not alive, f"still running after their parent died: {alive}"
    finally:
        if parent.poll() is None:
            parent.kill()
