"""`python -m emulator exec` — run any command, unchanged, against the emulated account.

    python -m emulator exec [--region R] [--config faults.json] -- COMMAND ARGS...
    python -m emulator exec --endpoint-urls [...] -- COMMAND ARGS...      # no namespaces here

The command runs in a private network and mount namespace (`unshare --net --mount`; as root, or with a user
namespace otherwise) whose only interface is loopback, so nothing it does can leave the machine. In it:

- the emulator runs on the standard ports: its TLS listener on 8443 (the HTTP/2 runtime's port) and, through a
  byte-for-byte relay, on 443; S3 (the emulator's moto) is served over TLS on 127.0.0.3:443;
- a private /etc/hosts (bind-mounted) maps AWS's host names for this region — SageMaker, its runtime, STS,
  Service Quotas, Scheduler, Application Auto Scaling, CloudWatch, IAM, Pricing — to 127.0.0.1 and S3's
  (path style, and virtual-host style for every bucket that exists, added as buckets are created) to 127.0.0.3;
- the system CA bundle (bind-mounted copy, also over certifi's) carries the emulator's test CA, and
  SSL_CERT_FILE, REQUESTS_CA_BUNDLE and AWS_CA_BUNDLE name it: clients that read only the system store (the
  HTTP/2 SDK's CRT) trust the emulator too;
- throw-away credentials and the region are the only AWS_* variables; AWS_CONFIG_FILE and
  AWS_SHARED_CREDENTIALS_FILE are temporary files and ~/.aws is hidden under an empty tmpfs, so no real
  profile is ever visible. The config file holds one setting, S3 path-style addressing: /etc/hosts has no
  wildcards, so a bucket's own host name can only exist once the bucket does (CreateBucket goes path style);
- OMNI_EMULATOR_URL is the emulator's plain admin URL (its clock, faults: `/_emulator/...`).

When the command ends, what the emulated account still holds is listed (emulator/account.py) and exec exits
with the command's code. A terminal's Ctrl-C reaches the command (exec and the emulator, in its own session,
wait for it), so a script's own Ctrl-C handling is rehearsed too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from emulator.account import holdings, holdings_text
from emulator.config import ConfigFileError, EmulatorConfig, describe_validation_error, load_config
from emulator.exec_network import BucketHosts, relays
from emulator.launch import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, FAKE_SESSION_TOKEN, client_env, start_emulator

HTTP2_PORT = 8443  # the HTTP/2 runtime's port on AWS; the emulator's TLS listener itself
SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HOSTS = Path("/etc/hosts")
# One setting and no profile: S3 path style, so a bucket being created needs no host name of its own.
AWS_CONFIG = "# written by python -m emulator exec: no credentials, no profile of yours\n[default]\ns3 =\n    addressing_style = path\n"


def say(message: str) -> None:
    print(f"[emulator exec] {message}", file=sys.stderr, flush=True)


# -- the command's environment --------------------------------------------------------------------
def command_env(ready: dict[str, Any], work: Path, bundle: Path, *, endpoint_urls: bool) -> dict[str, str]:
    """os.environ without any AWS_* of the caller's, plus throw-away credentials and the region; with
    `endpoint_urls`, the AWS_ENDPOINT_URL_* of the emulator as well."""
    config, credentials = work / "aws-config", work / "aws-credentials"
    config.write_text("" if endpoint_urls else AWS_CONFIG)
    credentials.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
        "AWS_SESSION_TOKEN": FAKE_SESSION_TOKEN, "AWS_REGION": ready["region"], "AWS_DEFAULT_REGION": ready["region"],
        "AWS_CONFIG_FILE": str(config), "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CA_BUNDLE": str(bundle), "SSL_CERT_FILE": str(bundle), "REQUESTS_CA_BUNDLE": str(bundle),
        "OMNI_EMULATOR_URL": ready["http"],
    }
    if endpoint_urls:
        urls = {k: v for k, v in client_env(ready).items() if k.startswith("AWS_ENDPOINT_URL")}
        env |= urls | {"AWS_ENDPOINT_URL_CLOUDWATCH": urls["AWS_ENDPOINT_URL"]}
    return env


def write_bundle(ca_file: Path, dest: Path) -> Path:
    """The system's CA bundle (if any) with the emulator's CA appended."""
    system = SYSTEM_BUNDLE.read_bytes() if SYSTEM_BUNDLE.is_file() else b""
    dest.write_bytes(system.rstrip(b"\n") + b"\n" + Path(ca_file).read_bytes())
    return dest


# -- the namespace --------------------------------------------------------------------------------
def unshare_argv() -> list[str]:
    """`unshare` for a network + mount namespace: plain as root, with a user namespace mapped to root otherwise."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--net", "--mount"]


def namespace_problem() -> str | None:
    """Why no private namespace can be made here (None: it can)."""
    missing = [tool for tool in ("unshare", "ip", "mount") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found (apt-get install util-linux iproute2)"
    try:
        probe = subprocess.run([*unshare_argv(), "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare did not run: {exc}"
    if probe.returncode != 0:
        who = "" if os.geteuid() == 0 else " (not root, and user namespaces are not available)"
        return f"unshare cannot make a network and mount namespace here{who}: {probe.stderr.strip() or probe.returncode}"
    return None


def namespaces() -> str:
    """This process's network and mount namespaces ("net:[…] mnt:[…]")."""
    return " ".join(os.readlink(f"/proc/self/ns/{kind}") for kind in ("net", "mnt"))


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"python -m emulator exec: `{' '.join(argv)}` failed inside the namespace: {done.stderr.strip()}")


def _bind(source: Path, target: Path) -> None:
    _run(["mount", "--bind", str(source), str(target)])


def _hide_aws_profile() -> None:
    """An empty tmpfs over ~/.aws (nothing to hide if there is none)."""
    home = Path(os.path.expanduser("~"))
    if (home / ".aws").is_dir():
        _run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(home / ".aws")])


def _trust(bundle: Path) -> None:
    """The bundle bind-mounted over the system's and certifi's, so clients that ignore the variables trust it too."""
    targets = [SYSTEM_BUNDLE] if SYSTEM_BUNDLE.is_file() else []
    with contextlib.suppress(ImportError):
        import certifi

        targets.append(Path(certifi.where()))
    for target in targets:
        _bind(bundle, target)


# -- running the command --------------------------------------------------------------------------
def run_command(command: list[str], env: dict[str, str]) -> int:
    """COMMAND in the foreground process group (a terminal's Ctrl-C is its own to handle); its exit code
    (128 + the signal when a signal ended it, as a shell says)."""
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        say(f"cannot run {command[0]!r}: {exc.strerror or exc}")
        return 127
    previous = signal.signal(signal.SIGINT, lambda *_: None)  # the command gets it; exec waits for the command

    def terminate(*_: object) -> None:
        child.terminate()

    previous_term = signal.signal(signal.SIGTERM, terminate)
    try:
        code = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
    return 128 - code if code < 0 else code


def _emulator_config(args: argparse.Namespace) -> dict[str, Any]:
    """--config's JSON (checked by the emulator's own rules, for a clear message) with --region on top."""
    try:
        data = load_config(args.config).model_dump(mode="json") if args.config else {}
    except ConfigFileError as exc:
        raise SystemExit(f"python -m emulator exec: {exc}") from exc
    if args.region:
        data["region"] = args.region
        try:
            EmulatorConfig.model_validate(data)
        except ValidationError as exc:
            raise SystemExit(f"python -m emulator exec: --region {args.region!r}: {describe_validation_error(exc)}") from exc
    return data


def _finish(ready: dict[str, Any], code: int) -> int:
    try:
        say(holdings_text(holdings(ready)))
    except Exception as exc:  # the listing must never hide the command's outcome
        say(f"could not list what the emulated account holds: {exc}")
    say(f"the command exited with {code}")
    return code


def _inside(args: argparse.Namespace, config: dict[str, Any]) -> int:
    """In the fresh namespaces: loopback up, the emulator, the mounts, the relays, then the command."""
    _run(["ip", "link", "set", "lo", "up"])
    work = Path(tempfile.mkdtemp(prefix="omni-emulator-exec-"))
    try:
        say("starting the local SageMaker emulator (offline engine + moto S3) ...")
        with start_emulator(work / "emulator", config=config, tls_port=HTTP2_PORT, log_level="warning",
                            new_session=True) as ready:
            bundle = write_bundle(Path(ready["ca_file"]), work / "ca-certificates.crt")
            base = HOSTS.read_text() if HOSTS.is_file() else "127.0.0.1 localhost\n"
            with BucketHosts(work / "hosts", base, ready) as hosts, relays(ready, work / "emulator" / "tls"):
                _bind(hosts.hosts, HOSTS)
                _trust(bundle)
                _hide_aws_profile()
                env = command_env(ready, work, bundle, endpoint_urls=False)
                say(f"emulated account {ready['account_id']} in {ready['region']}: AWS's host names resolve to it "
                    f"inside this namespace (HTTPS 443, HTTP/2 runtime {HTTP2_PORT}); log {work / 'emulator' / 'emulator.log'}")
                code = run_command(args.command, env)
            return _finish(ready, code)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _with_endpoint_urls(args: argparse.Namespace, config: dict[str, Any]) -> int:
    work = Path(tempfile.mkdtemp(prefix="omni-emulator-exec-"))
    try:
        say("starting the local SageMaker emulator (offline engine + moto S3) ...")
        with start_emulator(work / "emulator", config=config, log_level="warning", new_session=True) as ready:
            bundle = write_bundle(Path(ready["ca_file"]), work / "ca-certificates.crt")
            env = command_env(ready, work, bundle, endpoint_urls=True)
            say(f"AWS_ENDPOINT_URL_* point at the emulator ({ready['http']}; HTTP/2 runtime {ready['https']}). "
                "Clients that ignore these variables (the HTTP/2 SDK takes its endpoint_uri from the script) "
                "or that use AWS's host names would reach AWS: without a namespace nothing stops them")
            code = run_command(args.command, env)
            return _finish(ready, code)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m emulator exec", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--region", help="the emulated account's region (default: the config's, else us-east-1)")
    p.add_argument("--config", type=Path, help="the emulator's JSON config: delays, quotas, faults")
    p.add_argument("--endpoint-urls", action="store_true",
                   help="no namespace: point the command at the emulator with AWS_ENDPOINT_URL_* variables")
    # exec's own second stage, given the namespaces it must not be in (the caller's): never mounts over the host's
    p.add_argument("--in-namespace", metavar="OUTER", help=argparse.SUPPRESS)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser().error("give the command to run after --, e.g. python -m emulator exec -- python deploy.py")
    config = _emulator_config(args)  # a bad file fails before anything is started
    # Neither exec's own listing nor the emulator (a child) may use the caller's profile or endpoints either.
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        del os.environ[name]
    os.environ |= {"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                   "AWS_EC2_METADATA_DISABLED": "true"}
    if args.endpoint_urls:
        return _with_endpoint_urls(args, config)
    if args.in_namespace:
        if args.in_namespace != namespaces():
            return _inside(args, config)
        raise SystemExit("python -m emulator exec --in-namespace is exec's own second stage: it only runs inside the "
                         "namespace exec makes (it would mount over this machine's /etc/hosts)")
    problem = namespace_problem()
    if problem is not None:
        say(f"no private namespace: {problem}.\n  Run as root (CI does), or use the AWS_ENDPOINT_URL_* mode instead:\n"
            f"    python -m emulator exec --endpoint-urls -- {' '.join(args.command)}\n"
            "  (clients that build AWS's URLs themselves, like the HTTP/2 SDK, must then be given the emulator's)")
        return 2
    options = [*(["--region", args.region] if args.region else []),
               *(["--config", str(args.config.resolve())] if args.config else [])]
    sys.stdout.flush()
    sys.stderr.flush()
    # unshare execs in place (no fork needed for these namespaces): same process, same signals, same exit code.
    os.execvp("unshare", [*unshare_argv(), "--", sys.executable, "-m", "emulator", "exec", "--in-namespace",
                          namespaces(), *options, "--", *args.command])
    return 0  # not reached
