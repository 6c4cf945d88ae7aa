"""Helpers for tests that need a real browser or real WebRTC: a loopback-only network namespace.

WebRTC on one machine needs a private network namespace (docs/testing.md): aioice drops exactly 127.0.0.1 from
its ICE candidates, so the namespace's loopback gets 127.0.0.2/8 as well, and nothing in it can reach
any other network. pytest itself keeps its network: the test body runs in a subprocess inside the
namespace.

From a test:

    from tests.browser_support import require_netns, require_browser, run_in_netns, run_browser_scenario

    def test_something_in_webrtc():
        require_netns()                                   # fails (never skips) naming what is missing
        out = run_in_netns([sys.executable, "-m", "tests.my_body"], timeout=30)   # CompletedProcess

    def test_page_in_chromium(tmp_path):
        require_browser()
        result = run_browser_scenario("tests.test_browser_image:scenario", timeout=60, env={...})
        # `scenario(studio: BrowserStudio) -> dict` ran inside the namespace: Streamlit (`app.py`,
        # offline backend unless env says otherwise) and Debian Chromium driven by Playwright.

Inside a scenario, `studio.page` is a Playwright page already on the studio's home page,
`studio.url` its base URL, `studio.goto("voice")` opens a page by url path, `studio.frame("webrtc")`
returns the component iframe whose title contains that text, and `studio.stats(frame)` reads the
inbound-rtp audio statistics of every RTCPeerConnection in that frame (recorded by an init script); their
`totalSamplesDuration` (seconds of audio played out) is a media clock that load does not stretch.
The scenario returns a JSON-able dict; anything it prints goes to the test's output.

A scenario waits on what the page shows, never on a fixed sleep (the suite runs beside other heavy tests, so
time is no measure of anything): Playwright's auto-waiting locators and `expect` (its timeout is set to
EXPECT_TIMEOUT_MS here), `poll(read, until, timeout, what="…")` for a value read from the page, and, after an
action that reruns the script (a click, a committed text box), `with studio.rerun("…"): action()` — which waits
until a script run has begun since the action and is over — or `studio.settled()` when a rerun may or may not
follow. Timeouts only bound a failure; every failure names what it waited for, and a screenshot of the page is
kept in a file named after the scenario (`failure_screenshot(target)`).

A scenario that needs more of the browser says so in attributes of its function, read before Chromium starts:
`scenario.chromium_args = f` (f(temp_dir) -> extra flags, e.g. a fake microphone fed from a WAV it writes there)
and `scenario.permissions = ["microphone"]`; `scenario.first_url_path = "capacity"` makes that page the fresh
studio's very first request instead of the home page (a deep link right after a start).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from offline.launch import free_port, spawn, wait_http_ok

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
RESULT_MARK = "@@BROWSER-RESULT@@ "
FAILURE_SCREENSHOT_DIR = Path("/tmp")  # one file per scenario: parallel workers never overwrite each other's
# How long Playwright's `expect` and actions wait by default: generous, since the machine may be loaded; a timeout
# only bounds a failure, it never decides a pass.
EXPECT_TIMEOUT_MS = 60_000
# How long Streamlit's script state must stay "notRunning" for `studio.settled()` to call the page settled when no
# rerun is known to have begun (a quiet moment; with `rerun()` a run is counted instead, so no guess is made).
SETTLED_QUIET_MS = 500
CONSOLE_KEPT = 200  # the browser console's latest messages, printed when a scenario fails
SERVER_ENV = "OMNI_BROWSER_SERVER"  # "rehearsal": run scripts/rehearse.py instead of a bare studio
REHEARSAL_REPORT_ENV = "OMNI_REHEARSAL_REPORT"  # where the rehearsal writes what was left
REHEARSAL_DIR_ENV = "OMNI_REHEARSAL_DIR"
# Flags that work here (docs/testing.md); loopback ICE needs --allow-loopback-in-peer-connection.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--use-fake-ui-for-media-stream",
    "--autoplay-policy=no-user-gesture-required", "--allow-loopback-in-peer-connection",
]
_NETNS_PRELUDE = 'ip link set lo up && ip addr add 127.0.0.2/8 dev lo && exec "$@"'


# -------------------------------------------------------------------------------------------------
# pytest side
def _fail(message: str) -> None:
    import pytest

    pytest.fail(message, pytrace=False)


def require_netns() -> None:
    """Fail (not skip: CI has these) unless a loopback-only network namespace can be made here."""
    missing = [tool for tool in ("unshare", "ip") if shutil.which(tool) is None]
    if missing:
        _fail(f"this test needs {' and '.join(missing)} (apt-get install util-linux iproute2)")
    if os.geteuid() != 0:
        _fail("this test needs root to create a network namespace (unshare -n); run it as root, as CI does")
    probe = subprocess.run(["unshare", "-n", "sh", "-c", _NETNS_PRELUDE, "sh", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        _fail(f"cannot create a loopback-only network namespace: {probe.stderr.strip() or probe.returncode}")


def require_browser() -> None:
    """Fail unless Debian's Chromium and the playwright package are present (never `playwright install`)."""
    require_netns()
    if not os.access(CHROMIUM, os.X_OK):
        _fail(f"this test needs Debian's Chromium at {CHROMIUM} (apt-get install chromium); .ci/run installs it")
    try:
        importlib.import_module("playwright.sync_api")
    except ImportError:
        _fail("this test needs the playwright package (pip install -r requirements-dev.txt)")


def run_in_netns(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
                 cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run `argv` in a fresh network namespace whose only interface is lo (127.0.0.1 and 127.0.0.2)."""
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", _NETNS_PRELUDE, "sh", *argv],
        cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        capture_output=True, text=True, timeout=timeout,
    )


def run_browser_scenario(target: str, *, timeout: float = 60, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `scenario(studio)` (target "package.module:function") in the namespace; its returned dict."""
    proc = run_in_netns([sys.executable, "-m", "tests.browser_support", target], timeout=timeout, env=env)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr[-20_000:])
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            result = json.loads(line[len(RESULT_MARK):])
            if "error" in result:
                _fail(f"browser scenario {target} failed: {result['error']}\n"
                      f"(the page when it failed: {failure_screenshot(target)})")
            return result
    _fail(f"browser scenario {target} exited with {proc.returncode} and no result; stderr ends with:\n{proc.stderr[-3000:]}")
    raise AssertionError  # unreachable: _fail raises


# -------------------------------------------------------------------------------------------------
# namespace side
_RECORD_PEER_CONNECTIONS = """
(() => {
  const Native = window.RTCPeerConnection;
  if (!Native || Native.__recorded) return;
  window.__pcs = [];
  const Recorded = function (...args) {
    const pc = new Native(...args);
    window.__pcs.push(pc);
    const n = window.__pcs.length;  // its state changes, for a failure's console (browser_support._main)
    pc.addEventListener("connectionstatechange", () => console.log(`[pc ${n}] connection ${pc.connectionState}`));
    pc.addEventListener("iceconnectionstatechange", () => console.log(`[pc ${n}] ice ${pc.iceConnectionState}`));
    return pc;
  };
  Recorded.prototype = Native.prototype;
  Object.setPrototypeOf(Recorded, Native);
  Recorded.__recorded = true;
  window.RTCPeerConnection = Recorded;
})();
"""

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

_INBOUND_AUDIO_STATS = """
async () => {
  const out = [];
  for (const pc of (window.__pcs || [])) {
    const report = await pc.getStats();
    report.forEach((r) => {
      if (r.type === 'inbound-rtp' && r.kind === 'audio') {
        out.push({packetsReceived: r.packetsReceived || 0, totalAudioEnergy: r.totalAudioEnergy || 0,
                  totalSamplesReceived: r.totalSamplesReceived || 0,
                  totalSamplesDuration: r.totalSamplesDuration || 0, connectionState: pc.connectionState});
      }
    });
  }
  return out;
}
"""


@contextmanager
def _serve_studio(argv: list[str], port: int, log: Path, *, what: str, timeout: float, stop: int,
                  stop_wait: float) -> Iterator[subprocess.Popen]:
    """Run `argv` (a module or script and its arguments, serving the studio on `port`) as a child that dies with
    this process, wait until it answers; stop it with `stop`."""
    with open(log, "wb") as out:
        proc = spawn(argv[0], argv[1:], name=what, stdout=out)
        try:
            wait_http_ok(f"http://127.0.0.1:{port}/_stcore/health", proc, timeout=timeout, what=what,
                         log_tail=lambda: log.read_text(errors="replace")[-3000:])
            yield proc
        finally:
            proc.send_signal(stop)
            try:
                proc.wait(stop_wait)
            except subprocess.TimeoutExpired:
                proc.kill()


def _streamlit(port: int, log: Path, module: str = "streamlit") -> Any:
    argv = [module, "run", "serve.py", "--server.address", "127.0.0.1",
            "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none", "--global.developmentMode", "false"]
    return _serve_studio(argv, port, log, what="streamlit", timeout=60, stop=signal.SIGTERM, stop_wait=10)


@contextmanager
def _rehearsal(port: int, log: Path) -> Iterator[subprocess.Popen]:
    """`scripts/rehearse.py --no-deploy` instead of a bare studio: the emulated SageMaker, the studio on it.
    Ended with SIGINT like a person's Ctrl-C, so its teardown (delete, listing, report) runs."""
    argv = ["scripts/rehearse.py", "--no-deploy", "--port", str(port),
            "--dir", os.environ.get(REHEARSAL_DIR_ENV, str(log.parent / "rehearsal")),
            "--report", os.environ[REHEARSAL_REPORT_ENV]]
    try:
        with _serve_studio(argv, port, log, what="the rehearsal", timeout=120, stop=signal.SIGINT, stop_wait=60) as p:
            yield p
    finally:
        sys.stderr.write("---- rehearsal output ----\n" + log.read_text(errors="replace")[-4000:])


class BrowserStudio:
    """What a scenario gets: the studio's URL and a Playwright page on it."""

    def __init__(self, url: str, page: Any, log: Path) -> None:
        self.url = url
        self.page = page
        self.log = log

    def goto(self, url_path: str = "") -> None:
        self.page.goto(f"{self.url}/{url_path}")
        self.page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)

    def open_page(self, link: str, url_path: str, attempts: int = 4) -> None:
        """Click the sidebar link `link` and wait for `/url_path`. On a cold start or a loaded machine the
        link can be drawn before the app handles clicks: the click is repeated, up to `attempts` times."""
        for attempt in range(attempts):
            self.page.get_by_role("link", name=link).first.click()
            try:
                self.page.wait_for_url(f"**/{url_path}", timeout=20_000)
                return
            except Exception:
                if attempt == attempts - 1:
                    raise

    def frame(self, title_contains: str, timeout_s: float = 20) -> Any:
        """The iframe (a Playwright Frame) whose title contains `title_contains`."""
        handle = self.page.wait_for_selector(f'iframe[title*="{title_contains}"]', timeout=timeout_s * 1000)
        frame = handle.content_frame()
        frame.wait_for_load_state()
        return frame

    def settled(self, what: str = "the script's run to be over", **kwargs: Any) -> int:
        """`settled(self.page, what, ...)`: Streamlit's script run is over."""
        return settled(self.page, what, **kwargs)

    def rerun(self, what: str = "the script's rerun", timeout_s: float = 90) -> Any:
        """`with studio.rerun("…"): action()`, as `rerun(self.page, …)`."""
        return rerun(self.page, what, timeout_s)

    def is_settled(self, quiet_ms: int = SETTLED_QUIET_MS) -> bool:
        """Whether Streamlit's script has not been running for `quiet_ms` (looked at once, no wait)."""
        return self.page.evaluate(_SETTLED, [quiet_ms, -1]) is not None

    def stats(self, frame: Any) -> list[dict[str, Any]]:
        """inbound-rtp audio stats of every RTCPeerConnection the frame created."""
        return frame.evaluate(_INBOUND_AUDIO_STATS)

    def server_log(self) -> str:
        if not self.log.exists():  # a scenario's own server (studio_server) may keep its logs elsewhere
            return f"(no {self.log.name})"
        return self.log.read_text(errors="replace")[-5000:]


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


def failure_screenshot(target: str) -> Path:
    """Where the failing page of scenario `target` ("package.module:function") is kept: one file per scenario."""
    return FAILURE_SCREENSHOT_DIR / f"omni-studio-failure-{target.replace(':', '-').replace('.', '-')}.png"


def _main(target: str) -> dict[str, Any]:
    from playwright.sync_api import expect, sync_playwright

    module_name, func_name = target.split(":")
    scenario = getattr(importlib.import_module(module_name), func_name)
    extra_args = getattr(scenario, "chromium_args", None)  # this scenario's own flags only
    port = free_port()
    # A scenario's `studio_module`: another `python -m` entry serving the studio (tests/late_run_ends.py)
    module = getattr(scenario, "studio_module", "streamlit")
    server = _rehearsal if os.environ.get(SERVER_ENV) == "rehearsal" else partial(_streamlit, module=module)
    # A scenario's `studio_server(port, log)`: a context manager serving a studio of its own making on `port`
    # (tests/test_browser_replicas.py: two replicas behind a proxy)
    server = getattr(scenario, "studio_server", None) or server
    with tempfile.TemporaryDirectory(prefix="omni-browser-") as tmp:
        log = Path(tmp) / "streamlit.log"
        with server(port, log), sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                str(Path(tmp) / "profile"), executable_path=CHROMIUM, headless=True,
                args=CHROMIUM_ARGS + (extra_args(Path(tmp)) if extra_args else []),
                viewport={"width": 1400, "height": 1000},
                # only when asked: an explicit empty list is not the default (it broke the player's ICE)
                **({"permissions": scenario.permissions} if getattr(scenario, "permissions", None) else {}),
            )
            try:
                context.set_default_timeout(EXPECT_TIMEOUT_MS)
                expect.set_options(timeout=EXPECT_TIMEOUT_MS)
                context.add_init_script(_RECORD_PEER_CONNECTIONS)
                watch_script_runs(context)
                page = context.pages[0] if context.pages else context.new_page()
                console: deque[str] = deque(maxlen=CONSOLE_KEPT)  # the page's and its frames', for a failure
                page.on("console", lambda m: console.append(f"{time.monotonic():.2f} {m.type}: {m.text[:300]}"))
                studio = BrowserStudio(f"http://127.0.0.1:{port}", page, log)
                studio.goto(getattr(scenario, "first_url_path", ""))
                try:
                    return scenario(studio)
                except Exception:
                    print("---- streamlit log ----\n" + studio.server_log(), file=sys.stderr)
                    print("---- browser console (latest) ----\n" + "\n".join(console), file=sys.stderr)
                    try:
                        print("---- page text ----\n" + page.inner_text("body")[:4000], file=sys.stderr)
                        shot = failure_screenshot(target)
                        page.screenshot(path=str(shot), full_page=True)
                        print(f"---- screenshot of the failure: {shot}", file=sys.stderr)
                    except Exception:
                        pass
                    raise
            finally:
                context.close()


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    try:
        result = _main(sys.argv[1])
    except Exception as exc:  # report, so the test fails with the reason rather than a bare exit code
        import traceback

        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(RESULT_MARK + json.dumps(result), flush=True)
