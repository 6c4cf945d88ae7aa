"""Waiting on a Streamlit page in a browser scenario (bench/browser.py runs them): on what the page shows, never
on a fixed sleep — the machine may be loaded, so time is no measure of anything.

- `poll(read, until, timeout, what="…")` for a value read from the page;
- after an action that reruns the script (a click, a committed text box), `with rerun(page, "…"): action()`,
  which waits until a script run has begun since the action and is over; `settled(page)` when a rerun may or
  may not follow (both need `watch_script_runs` on the browser context: the scenario's own context has it);
- `choose(page, selectbox, option)` picks a selectbox's option through the reruns that redraw it, and
  `metrics(page, *labels)` reads the page's figures once every one is drawn.

Timeouts only bound a failure; every failure names what it waited for.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# How long Streamlit's script state must stay "notRunning" for `studio.settled()` to call the page settled when no
# rerun is known to have begun (a quiet moment; with `rerun()` a run is counted instead, so no guess is made).
SETTLED_QUIET_MS = 500

# Counts Streamlit's script runs as the page shows them: the app root's data-test-script-state attribute
# ("running", "notRunning", ...); `count` rises each time a run begins, `changedAt` is when the state last changed.
_WATCH_SCRIPT_RUNS = """
(() => {
  if (window.__scriptRuns || window.top !== window) return;
  const runs = window.__scriptRuns = {count: 0, state: null, changedAt: performance.now()};
  const look = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app ? app.getAttribute('data-test-script-state') : null;
    if (state === runs.state) return;
    if (state === 'running') runs.count += 1;
    runs.state = state;
    runs.changedAt = performance.now();
  };
  new MutationObserver(look).observe(document, {subtree: true, childList: true, attributes: true,
                                                attributeFilter: ['data-test-script-state']});
})();
"""

_SCRIPT_RUNS = "() => window.__scriptRuns ? {...window.__scriptRuns, now: performance.now()} : null"  # for messages

# Once the app is connected and its script is not running, since `quiet` ms and after a run beyond `after`: the
# run count then (read in the same turn, so no run can begin between the check and the count); until then null.
_SETTLED = """
([quiet, after]) => {
  const runs = window.__scriptRuns;
  const app = document.querySelector('[data-testid="stApp"]');
  if (!runs || !app || app.getAttribute('data-test-connection-state') !== 'CONNECTED') return null;
  const settled = runs.state === 'notRunning' && runs.count > after && performance.now() - runs.changedAt >= quiet;
  return settled ? {count: runs.count} : null;
}
"""


def watch_script_runs(context: Any) -> None:
    """Let `settled` and `rerun` see Streamlit's script runs in every page of this Playwright browser context (the
    scenario's own context has it; a scenario that opens another context calls this on it)."""
    context.add_init_script(_WATCH_SCRIPT_RUNS)


def settled(page: Any, what: str = "the script's run to be over", *, after: int = -1,
            quiet_ms: int = SETTLED_QUIET_MS, timeout_s: float = 90) -> int:
    """Wait until Streamlit's script is not running in `page` (for `quiet_ms`, connected) — and, with `after` (a
    run count), until a run beyond that one has begun and ended. The run count then; fails naming `what`."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        handle = page.wait_for_function(_SETTLED, arg=[quiet_ms, after], polling=100, timeout=timeout_s * 1000)
        return int(handle.json_value()["count"])
    except PlaywrightTimeout:
        raise AssertionError(f"waited {timeout_s:.0f} s for {what}; Streamlit's script runs: "
                             f"{page.evaluate(_SCRIPT_RUNS)}") from None


@contextmanager
def rerun(page: Any, what: str = "the script's rerun", timeout_s: float = 90) -> Iterator[None]:
    """`with rerun(page, "…"): box.press("Tab")`: after the action, wait until a script run has begun since it and
    is over (the action must rerun the script: a click, a changed and committed widget). The run in flight, if
    any, is waited out first: a rerun asked for while the script runs restarts it unseen."""
    before = settled(page, f"the script's run before {what}", timeout_s=timeout_s)
    yield
    settled(page, what, after=before, quiet_ms=0, timeout_s=timeout_s)


def choose(page: Any, selectbox: Any, option: str, attempts: int = 4) -> None:
    """Open a Streamlit selectbox and click its option `option`. A rerun that redraws the box closes its open list
    (the click then lands on nothing), so the box is opened again, up to `attempts` times, each after the script
    run is over; the failure names the option and the box."""
    for attempt in range(attempts):
        settled(page, f"the script run before opening the choice for {option!r}")
        selectbox.click()
        choice = page.get_by_role("option").filter(has_text=option).first
        try:
            choice.wait_for(state="visible", timeout=10_000)
            choice.click(timeout=10_000)
            return
        except Exception:
            page.keyboard.press("Escape")
            if attempt == attempts - 1:
                raise AssertionError(f"the option {option!r} was not offered after opening the choice "
                                     f"{attempts} times") from None


def metrics(page: Any, *labels: str, timeout: float = 60) -> dict[str, str]:
    """The page's figures (Streamlit metrics), label → value, once every one of `labels` is drawn. A panel that
    refreshes (a fragment) redraws its metrics: one being redrawn is read again at the next poll, never half."""

    def read() -> dict[str, str]:
        out: dict[str, str] = {}
        for m in page.locator('[data-testid="stMetric"]').all():
            try:
                label = m.locator('[data-testid="stMetricLabel"]').inner_text(timeout=2_000).strip()
                out.setdefault(label, m.locator('[data-testid="stMetricValue"]').inner_text(timeout=2_000).strip())
            except Exception:  # detached by a redraw between the listing and the read
                continue
        return out

    return poll(read, lambda m: set(labels) <= m.keys(), timeout, what=f"the figures {', '.join(labels)}")


def poll(read: Any, until: Any, timeout: float, step: float = 0.2, *, what: str = "") -> Any:
    """Call `read()` until `until(value)` (`step` s apart: the polling interval, never a wait on the page's
    state); after `timeout` seconds an AssertionError naming `what` was awaited and the last value read."""
    deadline = time.monotonic() + timeout
    value = read()
    while not until(value):
        if time.monotonic() > deadline:
            awaited = what or _described(until)
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {awaited}; "
                                 f"last value: {str(value)[-1500:]!r}")
        time.sleep(step)
        value = read()
    return value


def _described(until: Any) -> str:
    """A poll's condition named by its source line (for a poll given no `what`)."""
    try:
        return inspect.getsource(until).strip()[:300]
    except (OSError, TypeError):
        return repr(until)


def is_settled(page: Any, quiet_ms: int = SETTLED_QUIET_MS) -> bool:
    """Whether Streamlit's script has not been running in `page` for `quiet_ms` (looked at once, no wait)."""
    return page.evaluate(_SETTLED, [quiet_ms, -1]) is not None
