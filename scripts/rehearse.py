"""`make rehearse` — the dry run of a customer delivery, with no AWS account and no bill.

1. starts the local SageMaker emulator (its own offline engine, moto for S3) on loopback;
2. runs `python -m infra deploy` against it — quota pre-check, the three endpoints created concurrently with
   live progress, the smoke test (WAV, PNG, MP4) — exactly as in the customer's account;
3. starts the studio on the SageMaker backend pointing at that deployment (voice over HTTP/2, images
   through invoke_endpoint, video through async inference and S3), at http://127.0.0.1:8501;
4. on exit (Ctrl-C) runs `python -m infra delete` and lists what is left in the emulated account —
   nothing, or the exit code says otherwise.

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

from emulator.launch import client_env, start_emulator  # noqa: E402
from offline.launch import spawn, wait_http_ok  # noqa: E402

ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-rehearsal"
BUCKET = "omni-studio-rehearsal"
# Seconds each endpoint stays Creating: long enough to watch the progress, short enough to rehearse often.
CREATE_S = {"-voice-": 3.0, "-image-": 4.0, "-video-": 5.0}


def say(message: str) -> None:
    print(f"[rehearse] {message}", flush=True)


def infra(args: list[str], env: dict[str, str]) -> int:
    say("$ python -m infra " + " ".join(args))
    return subprocess.run([sys.executable, "-m", "infra", *args], cwd=ROOT, env=env).returncode


def leftovers(env: dict[str, str]) -> dict[str, list[str]]:
    """What the emulated account still holds (listed the way a person would check the console)."""
    import boto3

    session = boto3.Session(aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                            aws_session_token=env["AWS_SESSION_TOKEN"], region_name=env["AWS_DEFAULT_REGION"])
    sm = session.client("sagemaker", endpoint_url=env["AWS_ENDPOINT_URL_SAGEMAKER"])
    return {
        "endpoints": [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]],
        "endpoint configs": [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]],
        "models": [m["ModelName"] for m in sm.list_models()["Models"]],
    }


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
    stopping = {"now": False}

    def stop(*_: object) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    config = {"delays": {"create_s": 3.0, "delete_s": 1.0, "create_s_by_endpoint": CREATE_S}}
    say("starting the local SageMaker emulator (offline engine + moto S3) ...")
    with start_emulator(work / "emulator", config=config, log_level="warning") as ready:
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
        say(f"emulator ready: {ready['http']} (HTTP/2 bidi {ready['https']}), account {ready['account_id']}")
        code = 0
        studio = None
        try:
            if not args.no_deploy:
                code = infra(["deploy", "--state-file", str(state_file), "--bucket", BUCKET, "--smoke-dir",
                              str(work / "smoke"), "--poll-seconds", "0.5"], env)
                if code != 0:
                    say(f"deploy ended with exit code {code}; the studio starts anyway, so you can look around")
            url = f"http://127.0.0.1:{args.port}"
            with open(work / "studio.log", "wb") as studio_log:  # a child that dies with the rehearsal
                studio = spawn("streamlit", ["run", "app.py", "--server.address", "127.0.0.1", "--server.port",
                                             str(args.port), "--server.headless", "true",
                                             "--browser.gatherUsageStats", "false"],
                               name="the studio", env=env, stdout=studio_log)
            wait_http_ok(f"{url}/_stcore/health", studio, timeout=90, what="the studio",
                         log_tail=lambda: (work / "studio.log").read_text(errors="replace")[-3000:])
            say(f"the studio runs on the emulated SageMaker deployment: {url}  (Ctrl-C ends the rehearsal)")
            deadline = time.monotonic() + args.serve_seconds if args.serve_seconds is not None else None
            while not stopping["now"] and studio.poll() is None:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
        finally:
            if studio is not None and studio.poll() is None:
                studio.terminate()
                try:
                    studio.wait(10)
                except subprocess.TimeoutExpired:
                    studio.kill()
            say("ending the rehearsal: deleting what the deployment created ...")
            if state_file.exists():
                infra(["delete", "--state-file", str(state_file), "--poll-seconds", "0.5"], env)
            left = leftovers(env)
            clean = not any(left.values())
            if clean:
                say("left in the emulated account: 0 endpoints, 0 endpoint configs, 0 models — nothing is left")
            else:
                say("STILL THERE: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in left.items() if v))
            if args.report:
                args.report.write_text(json.dumps({"left": left, "clean": clean, "deploy_exit": code}))
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
