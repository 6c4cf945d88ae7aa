"""Helpers of tests/test_code_*.py: run the studio's CLI against a data folder, generate an item's code with
`python -m services code`, and run that code unchanged (BASE_URL from the environment, in its own folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from services.code.packages import needs
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent


def studio(*args: str, data: Path, cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m services ARGS` with the history in `data`."""
    env = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": "", "PYTHONPATH": str(ROOT)}
    p = run_cli([sys.executable, "-m", "services", *args], cwd=cwd, env=env, capture_output=True, timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(errors="replace"),
                                       p.stderr.decode(errors="replace"))


def made(*args: str, data: Path, cwd: Path) -> dict:
    """Make an item with the studio's CLI (--json): its figures."""
    r = studio(*args, "--json", data=data, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def code_for(item_id: str, folder: Path, *, data: Path, lang: str = "python") -> Path:
    """The item's code written to folder/code.<py|sh> (its reference files beside it) by the CLI."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("code.py" if lang == "python" else "code.sh")
    r = studio("code", item_id, "--lang", lang, "--out", str(path), data=data)
    assert r.returncode == 0, r.stderr
    if lang == "python":
        needs(path.read_text())  # UnpinnedImport: it imports a package the studio does not pin
    return path


def run_code(path: Path, engine_url: str, *, env: dict[str, str] | None = None) -> str:
    """Run the generated code as a reader would: `python code.py` (`sh code.sh`) in its folder, BASE_URL set, not
    in the studio's folder nor on its PYTHONPATH; its stdout (the file it wrote)."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OMNI_STUDIO_DATA_DIR")}
    program = [sys.executable] if path.suffix == ".py" else ["sh"]
    r = subprocess.run([*program, path.name], cwd=path.parent, capture_output=True, text=True, timeout=300,
                       env={**base, "BASE_URL": engine_url, **(env or {})})
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout
