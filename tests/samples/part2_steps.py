"""Part 2's steps in the order a person runs them, with a Ctrl-C in the middle (the test's command).

deploy, interrupted (SIGINT, as a terminal's Ctrl-C) while the endpoints are Creating; deploy --resume;
generate; cleanup. Each step is its own process, as when typed; this stops at the first that fails.

    python -m emulator exec -- python tests/samples/part2_steps.py --out DIR
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def step(args: list[str]) -> None:
    print(f"$ python {' '.join(args)}", flush=True)
    code = subprocess.run([sys.executable, *args], cwd=HERE).returncode
    if code != 0:
        sys.exit(f"{args[0]} exited with {code}")


def interrupted_deploy() -> None:
    print("$ python part2_deploy.py   (Ctrl-C while Creating)", flush=True)
    proc = subprocess.Popen([sys.executable, "part2_deploy.py"], cwd=HERE, stdout=subprocess.PIPE, text=True)
    creating: set[str] = set()
    for line in proc.stdout:  # type: ignore[union-attr]
        print(line, end="", flush=True)
        if line.rstrip().endswith(": Creating"):
            creating.add(line.split(":")[0])
        # Once every endpoint has said Creating, the script sleeps a second before asking again: the Ctrl-C
        # lands there, as a person's would. (One landing inside a request can surface as botocore's CRT
        # signer's AwsCrtError instead of KeyboardInterrupt — botocore's behaviour, the same against AWS.)
        if len(creating) == 2:
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.communicate()[0]
    print(rest, end="", flush=True)
    if proc.returncode != 130 or "--resume" not in rest:
        sys.exit(f"the interrupted deploy exited with {proc.returncode}, not 130 with a word about --resume")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    out = ap.parse_args().out.resolve()
    interrupted_deploy()
    step(["part2_deploy.py", "--resume"])
    step(["part2_generate.py", "--out", str(out)])
    step(["part2_cleanup.py"])


if __name__ == "__main__":
    main()
