"""The pytest side of the browser tests: a missing namespace, Chromium or Playwright fails the test (never skips it:
CI has them), and a failed scenario fails it with the scenario's reason.

The harness itself is product code, shared with the benches that measure in a browser: bench/browser.py runs a
scenario in a loopback-only network namespace with the studio and Debian Chromium (`run_in_netns`,
`BrowserStudio`, CHROMIUM …), and bench/page_waits.py holds what a scenario waits with (`poll`, `rerun`,
`settled`, `choose`, `metrics`). From a test:

    from tests.browser_support import require_netns, require_browser, run_browser_scenario

    def test_page_in_chromium(tmp_path):
        require_browser()
        result = run_browser_scenario("tests.test_browser_image:scenario", timeout=60, env={...})
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from bench import browser


def _fail(message: str) -> None:
    import pytest

    pytest.fail(message, pytrace=False)


def require_netns() -> None:
    """Fail (not skip: CI has these) unless a loopback-only network namespace can be made here."""
    problem = browser.netns_problem()
    if problem:
        _fail(f"this test {problem}")


def require_browser() -> None:
    """Fail unless Debian's Chromium and the playwright package are present (never `playwright install`)."""
    require_netns()
    if not os.access(browser.CHROMIUM, os.X_OK):
        _fail(f"this test needs Debian's Chromium at {browser.CHROMIUM} (apt-get install chromium); .ci/run installs it")
    try:
        importlib.import_module("playwright.sync_api")
    except ImportError:
        _fail("this test needs the playwright package (pip install -r requirements-dev.txt)")


def run_browser_scenario(target: str, *, timeout: float = 60, env: dict[str, str] | None = None) -> dict[str, Any]:
    """bench/browser.py's `run_browser_scenario`, its ScenarioFailed a test failure."""
    try:
        return browser.run_browser_scenario(target, timeout=timeout, env=env)
    except browser.ScenarioFailed as exc:
        _fail(str(exc))
        raise AssertionError from None  # unreachable: _fail raises
