"""Is the studio in this container up? The image's HEALTHCHECK (docs/hosting.md).

    python scripts/healthcheck.py                      # http://127.0.0.1:8501/_stcore/health
    python scripts/healthcheck.py --port 8600
    python scripts/healthcheck.py --url http://127.0.0.1:8501/studio/_stcore/health
    python scripts/healthcheck.py --storage            # also the history's database and media, as the settings say

With --storage (a team studio's replicas: the image's HEALTHCHECK passes it), the check also opens the history the
settings name — its database answers a read, its media store takes a probe written, read back and removed — and
names the one that does not ("the history's database at postgresql://…", "the media at s3://…"). Without it, the
standard library only.

Exit 0 when Streamlit's health route answers 200 (its runtime is ready for a browser), else 1 with one line
saying what answered or failed. Never 2: Docker reserves that code. The port and base path default to
Streamlit's own variables (STREAMLIT_SERVER_PORT, STREAMLIT_SERVER_BASE_URL_PATH) when they are set, so a
container started with another port or behind a path prefix needs no change here. Proxy variables are
ignored: the check is always of this machine.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
import urllib.error
import urllib.request

DEFAULT_PORT = 8501
ROUTE = "_stcore/health"
TIMEOUT_S = 4.0  # under the HEALTHCHECK's --timeout, so the reason is printed rather than the check killed


def health_url(port: int | None = None, base_path: str | None = None) -> str:
    port = port or int(os.environ.get("STREAMLIT_SERVER_PORT") or DEFAULT_PORT)
    base = (base_path if base_path is not None else os.environ.get("STREAMLIT_SERVER_BASE_URL_PATH", "")).strip("/")
    return f"http://127.0.0.1:{port}/{base + '/' if base else ''}{ROUTE}"


def check(url: str, timeout: float = TIMEOUT_S) -> tuple[bool, str]:
    """(healthy, one line about it)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as response:
            body = response.read(200).decode("utf-8", "replace").strip()
            return response.status == 200, f"{url} answered {response.status} {body!r}"
    except urllib.error.HTTPError as exc:  # 503 while the runtime starts or stops
        body = exc.read(200).decode("utf-8", "replace").strip()
        return False, f"{url} answered {exc.code} {body!r}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"{url} did not answer ({reason})"


def storage_problem() -> str | None:
    """What is wrong with the history's database or media, as the settings name them; None when both answer
    (services/storage_health.py: the same check the studio's own health route makes)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from protocol.errors import StudioError
    from services.settings import load_settings
    from services.storage_health import storage_problem as problem

    try:
        settings = load_settings()
    except StudioError as exc:
        return f"the settings: {exc}"
    return problem(settings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--port", type=int, help=f"the studio's port on 127.0.0.1 (default {DEFAULT_PORT})")
    where.add_argument("--url", help="the full health URL instead")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds to wait for the answer")
    parser.add_argument("--storage", action="store_true",
                        help="also check the history's database and media store (a team studio's replicas)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 1  # argparse's usage error is 2, which Docker reserves
    healthy, line = check(args.url or health_url(args.port), args.timeout)
    if healthy and args.storage:
        problem = storage_problem()
        if problem is not None:
            healthy, line = False, problem
        else:
            line += "; the history's database and media answer"
    print(("healthy: " if healthy else "unhealthy: ") + line, file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
