"""`make rehearse` survives its own Ctrl-C: a terminal sends SIGINT to the whole foreground process group, and the
rehearsal (scripts/rehearse.py) still moves the clock past the TTL, deletes, lists nothing left and exits 0.
Its children (the emulator, the studio, infra) run in their own sessions, so only the rehearsal gets the signal.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

from offline.launch import free_port

ROOT = Path(__file__).resolve().parent.parent


def test_ctrl_c_twice_still_cleans_up_everything(tmp_path: Path) -> None:
    work, report = tmp_path / "rehearsal", tmp_path / "report.json"
    proc = subprocess.Popen(
        [sys.executable, "scripts/rehearse.py", "--port", str(free_port()), "--dir", str(work), "--report", str(report)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def until(text: str, timeout: float = 240) -> None:
        while True:
            line = lines.get(timeout=timeout)
            seen.append(line)
            sys.stdout.write(line)
            if text in line:
                return

    try:
        until("the studio runs on the emulated SageMaker deployment")
        assert json.loads((work / "state.json").read_text())["phase"] == "deployed"
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        until("ending the rehearsal")
        os.killpg(proc.pid, signal.SIGINT)  # an impatient second Ctrl-C, during the clean-up
        code = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    while not lines.empty():
        seen.append(lines.get())
    text = "".join(seen)
    assert "Traceback" not in text, text[-4000:]
    assert code == 0, text[-4000:]
    assert "moving the clock past the TTL" in text and "nothing is left" in text
    assert "still cleaning up" in text  # the second Ctrl-C was answered, not obeyed
    assert json.loads(report.read_text())["clean"] is True
    assert not (work / "state.json").exists()  # infra delete removed it: nothing says deployed
