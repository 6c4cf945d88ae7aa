"""Security defaults, checked for real: the studio listens on loopback only, nothing offers a public share
or phones home, credentials never reach logs, the state file or the history, user text is never HTML,
and uploads are limited in size and type."""

from __future__ import annotations

import ast
import json
import os
import sqlite3
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from offline.launch import free_port, spawn, wait_http_ok
from protocol.errors import InvalidInput
from services.imaging import ACCEPTED_SUFFIXES, MAX_UPLOAD_BYTES, check_image

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import ROLE_ARN, EmulatorHandle
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())


def _listeners(port: int) -> list[str]:
    """Local addresses of the LISTEN sockets on `port`, from /proc/net/tcp and tcp6."""
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.append(address if len(address) == width else "?")
    return found


def test_the_studio_listens_on_loopback_only(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp_path)}
    proc = spawn("streamlit", ["run", "app.py", "--server.port", str(port)], name="the studio", env=env,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/_stcore/health", proc, timeout=60, what="the studio")
        listeners = _listeners(port)
        assert listeners == ["0100007F"], listeners  # 127.0.0.1 only: no 0.0.0.0, no :: (all interfaces)
    finally:
        proc.terminate()
        proc.wait(10)
    makefile = (ROOT / "Makefile").read_text()
    assert "HOST ?= 127.0.0.1" in makefile and "--server.address $(HOST)" in makefile
    assert '"--server.address", "127.0.0.1"' in (ROOT / "scripts" / "rehearse.py").read_text()


def test_no_public_share_and_no_telemetry() -> None:
    assert CONFIG["server"]["address"] == "127.0.0.1"
    assert CONFIG["client"]["toolbarMode"] == "minimal"  # no Deploy/share entry in the toolbar
    assert CONFIG["browser"]["gatherUsageStats"] is False
    assert CONFIG["server"].get("enableXsrfProtection", True) is True and CONFIG["server"].get("enableCORS", True) is True


def test_user_text_is_never_rendered_as_html() -> None:
    """No page or UI helper may switch off Streamlit's HTML escaping (user prompts and file names go through
    ui.text.plain / st.text; the AppTests check prompts like 'a red <b>fox</b> **not bold**')."""
    from ui.text import code, plain

    offenders = []
    for path in [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "unsafe_allow_html":
                offenders.append(f"{path.name}:{node.value.lineno}")
            if isinstance(node, ast.Attribute) and node.attr == "html" and getattr(node.value, "id", "") == "st":
                offenders.append(f"{path.name}:{node.lineno} st.html")
    assert offenders == []
    assert plain("<img src=x onerror=alert(1)> **b** [l](javascript:x)") == \
        "\\<img src=x onerror=alert\\(1\\)\\> \\*\\*b\\*\\* \\[l\\]\\(javascript:x\\)"
    assert code("a`b") == "`a'b`"


def test_uploads_are_limited_in_size_and_type() -> None:
    assert CONFIG["server"]["maxUploadSize"] * 1024 * 1024 == MAX_UPLOAD_BYTES  # the browser and the service agree
    with pytest.raises(InvalidInput, match="up to 25 MB"):
        check_image(b"\x89PNG" + b"\0" * MAX_UPLOAD_BYTES, "huge.png")
    with pytest.raises(InvalidInput, match="not an image"):
        check_image(b"#!/bin/sh\nrm -rf /\n", "script.png")
    assert set(ACCEPTED_SUFFIXES) <= {"png", "jpg", "jpeg", "webp", "bmp", "gif"}
    uploader = (ROOT / "ui" / "video_views.py").read_text()  # the video page's reference picker
    assert "type=list(ACCEPTED_SUFFIXES)" in uploader and "max_upload_size=MAX_UPLOAD_BYTES" in uploader


def test_credentials_never_reach_logs_the_state_file_or_the_history(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    secret, token = f"secret-{uuid.uuid4().hex}", f"token-{uuid.uuid4().hex}"
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token,
           "OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"),
           "OMNI_STUDIO_STATE_FILE": str(tmp_path / "state.json"), "OMNI_STUDIO_BACKEND": "sagemaker"}

    def run(*argv: str) -> str:
        p = run_cli([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        return p.stdout + p.stderr

    out = run("-m", "infra", "deploy", "--state-file", str(tmp_path / "state.json"), "--role-arn", ROLE_ARN,
              "--smoke-dir", str(tmp_path / "smoke"), "--poll-seconds", "0.05", "--json")
    out += run("-m", "services", "speak", "--text", "Secrets stay secret.", "--out", str(tmp_path / "s.wav"))
    out += run("-m", "services", "image", "--prompt", "a vault", "--size", "128x96", "--out", str(tmp_path / "i.png"))
    out += run("-m", "services", "video", "--prompt", "a vault door", "--width", "96", "--height", "64", "--frames", "5",
               "--steps", "4", "--out", str(tmp_path / "v.mp4"))
    state_text = (tmp_path / "state.json").read_text()
    db = sqlite3.connect(tmp_path / "data" / "history.sqlite3")
    rows = json.dumps(db.execute("SELECT * FROM jobs").fetchall())
    db.close()
    assert len(json.loads(rows)) == 2  # the image and the video were recorded
    for where, text in (("command output", out), ("state file", state_text), ("history", rows)):
        for value in (secret, token, emulator_env.access_key_id):
            assert value not in text, f"a credential reached the {where}"
    files = [p for p in (tmp_path / "data").rglob("*") if p.is_file()]
    assert files and not any(secret.encode() in p.read_bytes() or token.encode() in p.read_bytes() for p in files)
    run("-m", "infra", "delete", "--state-file", str(tmp_path / "state.json"), "--poll-seconds", "0.05")
