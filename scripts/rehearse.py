"""`make rehearse` — the dry run of a customer delivery, with no AWS account and no bill.

1. starts the local SageMaker emulator (its own offline engine, moto for S3) on loopback;
2. runs `python -m infra deploy` against it — quota pre-check, the endpoints' TTL (EventBridge Scheduler
   schedules and their role, before any endpoint), the three endpoints created concurrently with live
   progress, autoscaling (the video endpoint to zero when idle), the smoke test (WAV, PNG, MP4) — exactly as
   in the customer's account;
3. shows the lifecycle: `infra status` (time left, instances), then moves the emulated account's clock a
   quarter of an hour: the idle video endpoint scales to zero and `status` says it costs nothing;
4. starts the studio on the SageMaker backend pointing at that deployment (voice over HTTP/2, images
   through invoke_endpoint, video through async inference and S3), at http://127.0.0.1:8501 — a video asked
   for now waits, saying "starting an instance", while the endpoint scales out (here in seconds);
5. on exit (Ctrl-C) moves the clock past the TTL — the schedules delete the endpoints with nothing of ours
   running — then `python -m infra delete` removes the rest (configs, models, schedules, role) and the
   rehearsal lists what is left in the emulated account — nothing, or the exit code says otherwise.

Ctrl-C reaches only the rehearsal: the emulator, the studio and infra run in their own sessions, so the
clean-up above runs every time (a Ctrl-C during the deploy stops the deploy first); a second Ctrl-C during the
clean-up is answered with a message, not obeyed.

Every AWS variable the children see points at the emulator, with throw-away credentials and no shared
config files, so a real profile on this machine is never used. Options: `--no-deploy` leaves deploying
to the studio's Endpoints page; `--serve-seconds N` ends by itself (for automation); `--report FILE`
writes what was left as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulator.account import holdings  # noqa: E402
from emulator.launch import client_env, start_emulator  # noqa: E402
from infra.model import PROJECT  # noqa: E402
from offline.launch import spawn, wait_http_ok  # noqa: E402

ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-rehearsal"
BUCKET = "omni-studio-rehearsal"
# Seconds each endpoint stays Creating: long enough to watch the progress, short enough to rehearse often.
CREATE_S = {"-voice-": 3.0, "-image-": 4.0, "-video-": 5.0}
# An instance for a job at zero instances: seconds here (about 10 minutes on AWS), so the wait can be watched.
AUTOSCALING = {"alarm_delay_s": 5.0, "scale_out_s": 15.0}
IDLE_S = 17 * 60  # the video endpoint's idle time before it is at zero (15 min + 2 to release the instance)


def say(message: str) -> None:
    print(f"[rehearse] {message}", flush=True)


# Set by the SIGINT/SIGTERM handler in main(): the rehearsal ends (and cleans up) at the next step.
STOPPING = {"now": False}


def infra(args: list[str], env: dict[str, str], *, interruptible: bool = False) -> int:
    """`python -m infra ARGS` in its own session, so a terminal's Ctrl-C reaches only the rehearsal: a clean-up step
    always finishes; an `interruptible` one (the deploy) is handed the Ctrl-C by the rehearsal itself."""
    say("$ python -m infra " + " ".join(args))
    proc = subprocess.Popen([sys.executable, "-m", "infra", *args], cwd=ROOT, env=env, start_new_session=True)
    told = False
    while True:
        try:
            return proc.wait(0.2)
        except subprocess.TimeoutExpired:
            if interruptible and STOPPING["now"] and not told:
                proc.send_signal(signal.SIGINT)  # infra stops waiting, keeps its state file: the delete follows
                told = True


def _session(env: dict[str, str]):  # noqa: ANN202
    import boto3

    return boto3.Session(aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                         aws_session_token=env["AWS_SESSION_TOKEN"], region_name=env["AWS_DEFAULT_REGION"])


def leftovers(ready: dict) -> dict[str, list[str]]:
    """What the deployment could leave in the emulated account (emulator/account.py lists it), under the names
    the rehearsal reports; the bucket and its outputs are kept on purpose, as a delete keeps them."""
    left = holdings(ready, role_path=f"/{PROJECT}/")
    return {"endpoints": left["endpoints"], "endpoint configs": left["endpoint configs"], "models": left["models"],
            "schedule groups": left["schedule groups"], "scheduler roles": left["IAM roles"],
            "scalable targets": left["scalable targets"]}


def move_clock(ready: dict, seconds: float) -> list[dict]:
    """Move the emulated account's clock (POST /_emulator/clock); what ran because of it."""
    import httpx

    r = httpx.post(f"{ready['http']}/_emulator/clock", json={"advance_s": seconds}, timeout=30.0, trust_env=False)
    r.raise_for_status()
    return r.json()["events"]


def wait_for(check, timeout_s: float = 60.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def scale_to_zero(ready: dict, env: dict[str, str], state_file: Path) -> None:
    """A quarter of an hour without a video job: the video endpoint gives its instance back."""
    name = json.loads(state_file.read_text()).get("endpoint_names", {}).get("video")
    if not name:
        return
    say(f"moving the emulated account's clock {IDLE_S // 60} minutes ahead: no video job meanwhile ...")
    for event in move_clock(ready, IDLE_S):
        if event.get("kind") == "scaling":
            say(f"  autoscaling: {event['endpoint']} {event['from']} -> {event['to']} instance(s) ({event['phase']})")
    sm = _session(env).client("sagemaker", endpoint_url=env["AWS_ENDPOINT_URL_SAGEMAKER"])
    wait_for(lambda: sm.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService", 30)
    infra(["status", "--state-file", str(state_file)], env)
    say("the video endpoint runs 0 instances and costs nothing; a video asked for in the studio waits ('starting an "
        f"instance') while one starts — {AUTOSCALING['alarm_delay_s'] + AUTOSCALING['scale_out_s']:.0f} s here, "
        "about 10 minutes on AWS")


def expire(ready: dict, env: dict[str, str], state_file: Path) -> None:
    """Past the TTL: the schedules delete the endpoints by themselves (EventBridge Scheduler, in the account)."""
    ttl = json.loads(state_file.read_text()).get("ttl") or {}
    if not ttl.get("enabled") or not ttl.get("expires_at"):
        return
    from datetime import UTC, datetime

    ends = datetime.fromisoformat(ttl["expires_at"].replace("Z", "+00:00"))
    left = max(0.0, (ends - datetime.now(UTC)).total_seconds()) + 60
    say(f"moving the clock past the TTL ({ttl['expires_at']}): nothing of ours runs, the schedules act ...")
    for event in move_clock(ready, left):
        if event.get("kind") == "schedule":
            say(f"  schedule {event['schedule']}: {event['outcome']}")
    sm = _session(env).client("sagemaker", endpoint_url=env["AWS_ENDPOINT_URL_SAGEMAKER"])
    if wait_for(lambda: not sm.list_endpoints()["Endpoints"], 60):
        say("the endpoints deleted themselves; their configs and models cost nothing and go with `infra delete`")


class _Interrupted(Exception):
    """Ctrl-C before the studio started: straight to the clean-up."""


def _studio_env(ready: dict, work: Path, state_file: Path) -> dict[str, str]:
    """The studio's environment: none of the caller's AWS or studio settings, the emulator's client ones,
    SageMaker as the backend, and state and data under the rehearsal's folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OMNI_STUDIO_"))}
    env |= client_env(ready) | {
        "PYTHONUNBUFFERED": "1",
        "SAGEMAKER_EXECUTION_ROLE_ARN": ROLE_ARN,
        "OMNI_STUDIO_CONFIG": "",  # set empty: no studio.toml at all
        "OMNI_STUDIO_BACKEND": "sagemaker",
        "OMNI_STUDIO_STATE_FILE": str(state_file),
        "OMNI_STUDIO_DATA_DIR": str(work / "data"),
        "OMNI_STUDIO_REGION": ready["region"],
        "OMNI_STUDIO_INFRA_POLL_S": "0.5",
    }
    return env


def _deploy(ready: dict, env: dict[str, str], work: Path, state_file: Path) -> int:
    """`infra deploy` to the emulator (then its status, and the schedule to zero); its exit code."""
    code = infra(["deploy", "--state-file", str(state_file), "--bucket", BUCKET, "--smoke-dir",
                  str(work / "smoke"), "--poll-seconds", "0.5"], env, interruptible=True)
    if code != 0 and not STOPPING["now"]:
        say(f"deploy ended with exit code {code}; the studio starts anyway, so you can look around")
    elif code == 0 and not STOPPING["now"]:
        infra(["status", "--state-file", str(state_file)], env)
        scale_to_zero(ready, env, state_file)
    return code


def _clean_up(ready: dict, env: dict[str, str], state_file: Path, report: Path | None, code: int) -> bool:
    """Delete what the deployment created, say what is left (written to `report` too); True: nothing is."""
    say("ending the rehearsal: deleting what the deployment created ...")
    if state_file.exists():
        expire(ready, env, state_file)
        infra(["delete", "--state-file", str(state_file), "--poll-seconds", "0.5"], env)
    left = leftovers(ready)
    clean = not any(left.values())
    if clean:
        say("left in the emulated account: 0 endpoints, endpoint configs, models, schedule groups, scheduler "
            "roles, scalable targets — nothing is left")
    else:
        say("STILL THERE: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in left.items() if v))
    if report:
        report.write_text(json.dumps({"left": left, "clean": clean, "deploy_exit": code}))
    return clean


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8501, help="the studio's port on 127.0.0.1 (default 8501)")
    ap.add_argument("--dir", type=Path, default=ROOT / ".rehearsal", help="state file, history, smoke outputs")
    ap.add_argument("--no-deploy", action="store_true", help="deploy from the studio's Endpoints page instead")
    ap.add_argument("--serve-seconds", type=float, help="stop by itself after this long (default: at Ctrl-C)")
    ap.add_argument("--report", type=Path, help="write {'left': {...}, 'clean': bool} here at the end")
    args = ap.parse_args()

    work = args.dir
    shutil.rmtree(work, ignore_errors=True)  # every rehearsal starts from an empty account
    work.mkdir(parents=True)
    state_file = work / "state.json"
    stopping = STOPPING

    def stop(*_: object) -> None:
        if stopping["now"]:  # a second Ctrl-C: the clean-up goes on (os.write: print may be mid-line here)
            os.write(sys.stdout.fileno(), b"\n[rehearse] still cleaning up: the endpoints are being deleted, this ends "
                                          b"by itself in a few seconds (nothing may be left running)\n")
        stopping["now"] = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    config = {"delays": {"create_s": 3.0, "delete_s": 1.0, "create_s_by_endpoint": CREATE_S},
              "autoscaling": AUTOSCALING}
    say("starting the local SageMaker emulator (offline engine + moto S3) ...")
    # The emulator and the studio run in their own sessions: a terminal's Ctrl-C must not stop them before the
    # rehearsal has deleted what it deployed (the rehearsal stops them itself, last).
    with start_emulator(work / "emulator", config=config, log_level="warning", new_session=True) as ready:
        env = _studio_env(ready, work, state_file)
        say(f"emulator ready: {ready['http']} (HTTP/2 bidi {ready['https']}), account {ready['account_id']}")
        code = 0
        studio = None
        try:
            if not args.no_deploy:
                code = _deploy(ready, env, work, state_file)
            if stopping["now"]:
                raise _Interrupted
            url = f"http://127.0.0.1:{args.port}"
            with open(work / "studio.log", "wb") as studio_log:  # a child that dies with the rehearsal
                studio = spawn("streamlit", ["run", "serve.py", "--server.address", "127.0.0.1", "--server.port",
                                             str(args.port), "--server.headless", "true",
                                             "--browser.gatherUsageStats", "false"],
                               name="the studio", env=env, stdout=studio_log, new_session=True)
            wait_http_ok(f"{url}/_stcore/health", studio, timeout=90, what="the studio",
                         log_tail=lambda: (work / "studio.log").read_text(errors="replace")[-3000:])
            say(f"the studio runs on the emulated SageMaker deployment: {url}  (Ctrl-C ends the rehearsal)")
            deadline = time.monotonic() + args.serve_seconds if args.serve_seconds is not None else None
            while not stopping["now"] and studio.poll() is None:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
        except _Interrupted:
            pass
        finally:
            if studio is not None and studio.poll() is None:
                studio.terminate()
                try:
                    studio.wait(10)
                except subprocess.TimeoutExpired:
                    studio.kill()
            clean = _clean_up(ready, env, state_file, args.report, code)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
