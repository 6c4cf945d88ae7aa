"""`python -m emulator exec`: any command, unchanged, against the emulated account (emulator/exec.py).

The namespace tests need root and unshare (CI runs as root) and skip, saying so, elsewhere. The sample tests
run trimmed copies of the published AWS samples' calls (tests/samples/, in this project's words): they know
AWS's host names only, so they pass only when the emulator answers for those names exactly as AWS would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import wave
from pathlib import Path

import av
import pytest

from emulator.exec import namespace_problem
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "samples"
FAST = {"delays": {"create_s": 2.0, "delete_s": 0.5}}


@pytest.fixture(scope="module")
def namespace() -> None:
    problem = namespace_problem()
    if problem is not None:
        pytest.skip(f"needs a private network and mount namespace (root and unshare, as in CI): {problem}")


def exec_argv(tmp_path: Path, command: list[str], *options: str) -> list[str]:
    config = tmp_path / "emulator-config.json"
    config.write_text(json.dumps(FAST))
    return [sys.executable, "-m", "emulator", "exec", "--config", str(config), *options, "--", *command]


def run_exec(tmp_path: Path, command: list[str], *options: str, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = run_cli(exec_argv(tmp_path, command, *options), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    sys.stdout.write(done.stdout[-5000:])
    sys.stderr.write(done.stderr[-5000:])
    return done


def python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def a_real_looking_profile(tmp_path: Path) -> dict[str, str]:
    """A HOME with ~/.aws holding a profile, and the caller's AWS_* naming it: none of it may reach the command."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("[default]\naws_access_key_id = AKIAREALPROFILE00001\n"
                                               "aws_secret_access_key = real-secret\n")
    (home / ".aws" / "config").write_text("[default]\nregion = eu-west-3\n")
    return {"HOME": str(home), "AWS_PROFILE": "default", "AWS_ACCESS_KEY_ID": "AKIAREALCALLER000001",
            "AWS_SECRET_ACCESS_KEY": "real-caller-secret", "AWS_ENDPOINT_URL": "https://example.com"}


# -- without namespaces ------------------------------------------------------------------------------
def test_without_namespaces_exec_says_so_and_offers_the_endpoint_url_mode(tmp_path: Path) -> None:
    no_tools = tmp_path / "bin"
    no_tools.mkdir()
    done = run_exec(tmp_path, ["true"], env={"PATH": str(no_tools)})
    assert done.returncode == 2
    assert "no private namespace" in done.stderr and "unshare" in done.stderr
    assert "python -m emulator exec --endpoint-urls -- true" in done.stderr


def test_endpoint_url_mode_gives_only_throwaway_credentials_and_lists_what_is_left(tmp_path: Path) -> None:
    command = python("""
        import os, sys, boto3
        creds = boto3.Session().get_credentials()
        print("key", creds.access_key, "region", boto3.Session().region_name, flush=True)
        assert "AWS_PROFILE" not in os.environ
        sm = boto3.client("sagemaker")
        sm.create_model(ModelName="left-behind", ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
                        PrimaryContainer={"Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:x"})
        sys.exit(3)
    """)
    done = run_exec(tmp_path, command, "--endpoint-urls", "--region", "us-west-2", env=a_real_looking_profile(tmp_path))
    assert done.returncode == 3, done.stderr[-3000:]  # the command's code
    assert "key AKIAEMULATORTEST0001 region us-west-2" in done.stdout
    assert "models (1): left-behind" in done.stderr


def test_a_bad_config_file_is_named_before_anything_starts(tmp_path: Path) -> None:
    bad = tmp_path / "faults.json"
    bad.write_text("{not json")
    done = run_cli([sys.executable, "-m", "emulator", "exec", "--config", str(bad), "--", "true"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert str(bad) in done.stderr and "not valid JSON" in done.stderr and "Traceback" not in done.stderr


def test_the_second_stage_never_mounts_over_this_machines_files(tmp_path: Path) -> None:
    from emulator.exec import namespaces

    hosts = Path("/etc/hosts").read_bytes()
    done = run_cli([sys.executable, "-m", "emulator", "exec", "--in-namespace", namespaces(), "--", "true"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "only runs inside the namespace exec makes" in done.stderr
    assert Path("/etc/hosts").read_bytes() == hosts


# -- in the namespace --------------------------------------------------------------------------------
def test_in_the_namespace_aws_names_lead_to_loopback_and_no_profile_is_visible(tmp_path: Path, namespace: None) -> None:
    command = python("""
        import os, socket, sys
        from pathlib import Path
        for name in ("api.sagemaker.us-east-1.amazonaws.com", "runtime.sagemaker.us-east-1.amazonaws.com",
                     "sts.us-east-1.amazonaws.com", "servicequotas.us-east-1.amazonaws.com",
                     "scheduler.us-east-1.amazonaws.com", "application-autoscaling.us-east-1.amazonaws.com",
                     "monitoring.us-east-1.amazonaws.com", "iam.amazonaws.com", "api.pricing.us-east-1.amazonaws.com",
                     "s3.amazonaws.com", "s3.us-east-1.amazonaws.com"):
            print(name, socket.gethostbyname(name))
        for port in (443, 8443):  # the standard ports answer
            socket.create_connection(("runtime.sagemaker.us-east-1.amazonaws.com", port), timeout=5).close()
        try:
            socket.create_connection(("192.0.2.1", 443), timeout=5)
            print("outside: reachable")
        except OSError as exc:
            print("outside:", exc.strerror)
        print("aws dir:", sorted(p.name for p in (Path.home() / ".aws").iterdir()))
        print("profile files:", Path(os.environ["AWS_CONFIG_FILE"]).read_text().count("aws_access_key_id"),
              Path(os.environ["AWS_SHARED_CREDENTIALS_FILE"]).read_text() == "")
        ca = Path(os.environ["AWS_CA_BUNDLE"]).read_bytes()
        system = Path("/etc/ssl/certs/ca-certificates.crt").read_bytes()
        print("system bundle is ours:", system == ca, os.environ["SSL_CERT_FILE"] == os.environ["REQUESTS_CA_BUNDLE"]
              == os.environ["AWS_CA_BUNDLE"])
        print("env:", sorted(k for k in os.environ if k.startswith("AWS_")))
        sys.exit(5)
    """)
    done = run_exec(tmp_path, command, env=a_real_looking_profile(tmp_path))
    assert done.returncode == 5, done.stderr[-3000:]
    out = done.stdout
    assert "runtime.sagemaker.us-east-1.amazonaws.com 127.0.0.1" in out
    assert "s3.us-east-1.amazonaws.com 127.0.0.3" in out and "iam.amazonaws.com 127.0.0.1" in out
    assert "outside: Network is unreachable" in out
    assert "aws dir: []" in out  # the tmpfs over ~/.aws
    assert "profile files: 0 True" in out
    assert "system bundle is ours: True True" in out
    env_line = next(line for line in out.splitlines() if line.startswith("env:"))
    assert "AWS_PROFILE" not in env_line and "AWS_ENDPOINT_URL" not in env_line
    assert "the emulated account holds nothing" in done.stderr


def test_ctrl_c_reaches_the_command_and_the_listing_still_runs(tmp_path: Path, namespace: None) -> None:
    """A terminal's Ctrl-C (SIGINT to the whole process group): the command gets it, the emulator does not."""
    command = python("""
        import os, time, boto3
        sm = boto3.client("sagemaker", endpoint_url=os.environ["OMNI_EMULATOR_URL"])
        sm.create_model(ModelName="interrupted", ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
                        PrimaryContainer={"Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:x"})
        print("ready", flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen(exec_argv(tmp_path, command), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    sys.stderr.write(err[-3000:])
    assert "KeyboardInterrupt" in err  # the command's own
    assert proc.returncode == 130  # 128 + SIGINT, as a shell says
    assert "models (1): interrupted" in err


def test_real_names_over_tls_s3_both_styles_and_sts(tmp_path: Path, namespace: None) -> None:
    """Needs the emulator's certificate to name AWS's hosts (emulator/tls.py, branch h-fidelity)."""
    command = python("""
        import time, boto3
        from botocore.config import Config
        print("caller", boto3.client("sts").get_caller_identity()["Account"])
        print("endpoints", boto3.client("sagemaker").list_endpoints()["Endpoints"])
        s3 = boto3.client("s3")  # path style: the only setting in exec's AWS config file
        s3.create_bucket(Bucket="exec-bucket")
        s3.put_object(Bucket="exec-bucket", Key="k", Body=b"exact bytes")
        virtual = boto3.client("s3", config=Config(s3={"addressing_style": "virtual"}))
        for _ in range(50):  # exec names a new bucket's own host within moments
            try:
                print("virtual", virtual.get_object(Bucket="exec-bucket", Key="k")["Body"].read())
                break
            except Exception as exc:
                last = exc
                time.sleep(0.2)
        else:
            raise last
    """)
    done = run_exec(tmp_path, command)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "caller 123456789012" in done.stdout and "endpoints []" in done.stdout
    assert "virtual b'exact bytes'" in done.stdout
    assert "buckets (1): exec-bucket" in done.stderr and "objects (1): exec-bucket/k" in done.stderr


# -- the published samples' steps ----------------------------------------------------------------------
def test_part1_deploy_validate_over_http2_vivian_and_delete(tmp_path: Path, namespace: None) -> None:
    """Needs the certificate's AWS names (the HTTP/2 SDK reads only the system store) and the voice `vivian`."""
    out = tmp_path / "out"
    out.mkdir()
    done = run_exec(tmp_path, [sys.executable, str(SAMPLES / "part1_voice.py"), "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    for events in (summary["validation_events"], summary["vivian_events"]):
        assert "audio.start" in events and "audio.done" in events
    for name in ("validation-output.wav", "vivian.wav"):
        wav = out / name
        assert wav.stat().st_size > 2000
        with wave.open(str(wav)) as w:
            assert w.getnframes() > 0
    assert "the emulated account holds nothing" in done.stderr


def test_part2_deploy_ctrl_c_resume_generate_and_cleanup(tmp_path: Path, namespace: None) -> None:
    """Needs the certificate's AWS names and S3 keeping a multipart/form-data body byte for byte."""
    out = tmp_path / "out"
    out.mkdir()
    done = run_exec(tmp_path, [sys.executable, str(SAMPLES / "part2_steps.py"), "--out", str(out)])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "interrupted: the endpoints keep creating" in done.stdout and "deployed: sample-image" in done.stdout
    png = (out / "image.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with av.open(str(out / "video.mp4")) as container:
        assert sum(1 for _ in container.decode(container.streams.video[0])) == 17
    assert "the emulated account holds nothing" in done.stderr
