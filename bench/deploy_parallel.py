"""Concurrent deploy: wall time of deploying all three endpoints vs the slowest one alone, same run.

    .venv/bin/python bench/deploy_parallel.py [--voice-s 2.0] [--image-s 2.5] [--video-s 3.0] [--runs 5]

Starts the offline engine, moto (S3) and the local SageMaker emulator on loopback; the emulator holds
each endpoint in Creating for its own time (`delays.create_s_by_endpoint`; real endpoints take ~10
minutes). Each run, in interleaved order:
  all three  — `infra.deploy.deploy()` of voice, image and video (created in threads, waited together)
  alone      — the same call for the slowest endpoint only (video by default: the longest Creating time,
               and it alone has the S3 bucket step)
  one by one — three single-endpoint deploys back to back, as the published samples do it
Every deployment is deleted (and verified gone) before the next. Wall time covers the whole library call:
credentials, quota pre-check, state file, creates, waiting. Target: all three ≤ 1.1 × alone.
Always exits 0; prints the medians and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulator.stack import sagemaker_stack  # noqa: E402
from infra.delete import delete_deployment  # noqa: E402
from infra.deploy import deploy  # noqa: E402
from infra.model import DeployOptions  # noqa: E402
from infra.progress import WaitSettings  # noqa: E402
from emulator.handle import ROLE_ARN  # noqa: E402

TARGET = 1.1
WAIT = WaitSettings(poll_s=0.05, timeout_s=120, delete_timeout_s=60)


def timed_deploy(roles: list[str], work: Path, tag: str) -> float:
    state = work / f"state-{tag}.json"
    t0 = time.perf_counter()
    result = deploy(DeployOptions(role_arn=ROLE_ARN, roles=roles), state_file=state, wait=WAIT)
    wall = time.perf_counter() - t0
    if not result.ok:
        raise SystemExit(f"deploy {roles} failed: {[o.summary() for o in result.outcomes.values()]}")
    report = delete_deployment(state, wait=WAIT)
    if not report.ok:
        raise SystemExit(f"delete after {roles} left {report.remaining}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--voice-s", type=float, default=2.0, help="seconds the voice endpoint stays Creating (2.0)")
    ap.add_argument("--image-s", type=float, default=2.5, help="seconds the image endpoint stays Creating (2.5)")
    ap.add_argument("--video-s", type=float, default=3.0, help="seconds the video endpoint stays Creating (3.0)")
    ap.add_argument("--runs", type=int, default=5, help="runs of each variant (default 5)")
    args = ap.parse_args()

    paces = {"voice": args.voice_s, "image": args.image_s, "video": args.video_s}
    slowest = max(paces, key=lambda r: paces[r])
    config = {"delays": {"create_s": 2.0, "delete_s": 0.2,
                         "create_s_by_endpoint": {f"-{role}-": s for role, s in paces.items()}}}
    # The stack points the AWS_* variables, which deploy() reads, at the emulator.
    with sagemaker_stack({}, config=config), tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp:
        work = Path(tmp)
        timed_deploy(["voice"], work, "warm-up")  # boto3 models loaded, engine warm
        walls: dict[str, list[float]] = {"all three": [], "alone": [], "one by one": []}
        for run in range(args.runs):
            order = ["all three", "alone", "one by one"] if run % 2 == 0 else ["one by one", "alone", "all three"]
            for variant in order:
                if variant == "all three":
                    walls[variant].append(timed_deploy(["voice", "image", "video"], work, f"all-{run}"))
                elif variant == "alone":
                    walls[variant].append(timed_deploy([slowest], work, f"alone-{run}"))
                else:
                    walls[variant].append(sum(timed_deploy([r], work, f"seq-{r}-{run}")
                                              for r in ("voice", "image", "video")))

    med = {k: statistics.median(v) for k, v in walls.items()}
    print("emulator Creating times: " + ", ".join(f"{r} {s:.1f} s" for r, s in paces.items())
          + f"; alone = {slowest}; {args.runs} runs per variant (median wall time)")
    for k, v in walls.items():
        print(f"  {k:<11} {med[k]:6.2f} s   runs: {', '.join(f'{x:.2f}' for x in v)}")
    ratio = med["all three"] / med["alone"]
    print(f"all three / alone      = {ratio:.3f}  (target ≤ {TARGET}: {'met' if ratio <= TARGET else 'NOT met'})")
    print(f"one by one / all three = {med['one by one'] / med['all three']:.2f}x  (what creating them in turn would cost)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
