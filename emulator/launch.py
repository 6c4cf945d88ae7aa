"""Start `python -m emulator` as a child process (one that never outlives its parent) and hand out the environment that points AWS clients
at it: the tests, the benchmarks and the rehearsal (`make rehearse`) all start the emulator this way.

    with start_emulator(work_dir, config={"delays": {"create_s": 3}}) as ready:   # own engine and moto
        env = client_env(ready)        # AWS_ENDPOINT_URL_* , AWS_CA_BUNDLE, fake credentials, region
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from offline.launch import free_port, spawn, stop

# Credentials the emulator accepts; they are not AWS credentials and open nothing anywhere else.
FAKE_ACCESS_KEY_ID = "AKIAEMULATORTEST0001"
FAKE_SECRET_ACCESS_KEY = "emulator-secret-key-not-a-real-one"
FAKE_SESSION_TOKEN = "emulator-session-token"


@contextlib.contextmanager
def start_moto() -> Iterator[str]:
    """moto's server (S3, STS) in this process on a free loopback port; yields its URL."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        raise SystemExit(
            "moto is not installed, so the emulator cannot start its own S3: install requirements-dev.txt "
            "or pass --s3-endpoint http://127.0.0.1:PORT of a running moto server"
        ) from exc

    # werkzeug logs every request at INFO on stderr by itself; benchmarks print only their figures
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    keep_put_bodies_verbatim()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def keep_put_bodies_verbatim() -> None:
    """Make moto store a PUT's body byte for byte, whatever its Content-Type.

    moto 5.2 reads a request through werkzeug, which form-parses any body sent as `multipart/form-data` or
    `application/x-www-form-urlencoded` and leaves nothing behind: a PutObject (or UploadPart) with such a
    ContentType was stored as 0 bytes, where S3 keeps the body as it came and the type as a label. A PUT is
    never a form in the AWS APIs moto serves here (S3's browser-form upload is a POST, the query APIs are
    POSTs), so PUT bodies are no longer form-parsed. Idempotent; in-process moto only."""
    from moto.core.request import Request

    if getattr(Request, "_omni_verbatim_put", False):
        return
    parse_form = Request.want_form_data_parsed

    def want_form_data_parsed(self: Request) -> bool:
        return self.method != "PUT" and parse_form.__get__(self)  # type: ignore[attr-defined]

    Request.want_form_data_parsed = property(want_form_data_parsed)  # type: ignore[assignment,method-assign]
    Request._omni_verbatim_put = True  # type: ignore[attr-defined]


def client_env(ready: dict[str, Any], *, tls: bool = False, access_key_id: str = FAKE_ACCESS_KEY_ID) -> dict[str, str]:
    """AWS_* variables for clients of the emulator described by its ready line.

    Every service endpoint points at the emulator (S3 at its moto), `AWS_ENDPOINT_URL` too, so a service
    nobody listed still cannot reach AWS; shared config and credential files are turned off, so no real
    profile is ever picked up; `tls=True` sends boto3's calls through the TLS listener as well."""
    base = ready["https"] if tls else ready["http"]
    env = {
        "AWS_ENDPOINT_URL": base,
        "AWS_ENDPOINT_URL_SAGEMAKER": base,
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": base,
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": ready["https"],
        "AWS_ENDPOINT_URL_SERVICE_QUOTAS": base,
        "AWS_ENDPOINT_URL_PRICING": base,  # the Price List stand-in (emulator/pricing.py)
        "AWS_ENDPOINT_URL_STS": base,
        # The lifecycle's services: the emulator passes them on to moto and acts on them (emulator/lifecycle.py)
        "AWS_ENDPOINT_URL_SCHEDULER": base,
        "AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING": base,
        "AWS_ENDPOINT_URL_IAM": base,
        "AWS_CA_BUNDLE": str(ready["ca_file"]),
        "AWS_ACCESS_KEY_ID": access_key_id,
        "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
        "AWS_SESSION_TOKEN": FAKE_SESSION_TOKEN,
        "AWS_DEFAULT_REGION": ready["region"],
        "AWS_REGION": ready["region"],
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    if ready.get("s3"):
        env["AWS_ENDPOINT_URL_S3"] = ready["s3"]
    return env


@contextlib.contextmanager
def start_emulator(work_dir: Path, *, engine_url: str | None = None, s3_url: str | None = None,
                   config: dict[str, Any] | None = None, timeout_s: float = 60.0,
                   log_level: str = "info", tls_port: int = 0, new_session: bool = False) -> Iterator[dict[str, Any]]:
    """The emulator on free loopback ports (its own offline engine and moto unless given); yields its ready line.

    `tls_port`: a fixed TLS port (8443, AWS's HTTP/2 runtime port, inside `python -m emulator exec`'s namespace);
    `new_session`: out of the terminal's process group, so a Ctrl-C leaves it running for the caller's clean-up."""
    work_dir.mkdir(parents=True, exist_ok=True)
    argv = ["--port", "0", "--tls-port", str(tls_port),
            "--state-dir", str(work_dir / "tls"), "--log-level", log_level]
    if config is not None:
        config_file = work_dir / "emulator-config.json"
        config_file.write_text(json.dumps(config))
        argv += ["--config", str(config_file)]
    if engine_url:
        argv += ["--engine-url", engine_url]
    if s3_url:
        argv += ["--s3-endpoint", s3_url]
    log_file = work_dir / "emulator.log"
    with open(log_file, "wb") as log:
        proc = spawn("emulator", argv, name="the SageMaker emulator", stdout=subprocess.PIPE, stderr=log,
                     new_session=new_session)
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        yield _wait_ready(proc, lines, log_file, timeout_s)
    finally:
        stop(proc)


def _wait_ready(proc: subprocess.Popen[bytes], lines: queue.Queue[bytes], log_file: Path, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("emulator") == "ready":
            return message
    tail = log_file.read_text(errors="replace")[-3000:]
    state = f"exited with {proc.returncode}" if proc.poll() is not None else f"not ready after {timeout_s:.0f} s"
    raise RuntimeError(f"the SageMaker emulator {state}; its log ends with:\n{tail}")
