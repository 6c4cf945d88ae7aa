"""Chromium driving the studio in a loopback-only network namespace: for the browser tests (tests/browser_support.py
adds pytest's failures) and the benches that measure in a real browser (bench/voice_heard.py, bench/listen_mic.py).

WebRTC on one machine needs a private network namespace (docs/testing.md): aioice drops exactly 127.0.0.1 from
its ICE candidates, so the namespace's loopback gets 127.0.0.2/8 as well, and nothing in it can reach
any other network. The caller keeps its network: the scenario runs in a subprocess inside the namespace.

    problem = netns_problem()                             # None, or why no namespace can be made here
    out = run_in_netns([sys.executable, "-m", "tests.my_body"], timeout=30)   # CompletedProcess
    result = run_browser_scenario("bench.voice_heard:scenario", timeout=180, env={...})   # ScenarioFailed
    # `scenario(studio: BrowserStudio) -> dict` ran inside the namespace (`python -m bench.browser TARGET`):
    # Streamlit (`serve.py`, offline backend unless env says otherwise) and Debian Chromium driven by Playwright.

Inside a scenario, `studio.page` is a Playwright page already on the studio's home page,
`studio.url` its base URL, `studio.goto("voice")` opens a page by url path, `studio.frame("webrtc")`
returns the component iframe whose title contains that text, and `studio.stats(frame)` reads the
inbound-rtp audio statistics of every RTCPeerConnection in that frame (recorded by an init script); their
`totalSamplesDuration` (seconds of audio played out) is a media clock that load does not stretch.
The scenario returns a JSON-able dict; anything it prints goes to the caller's output. It waits on what the page
shows, never on a fixed sleep (bench/page_waits.py: `poll`, `rerun`, `settled`, `choose`, `metrics`; Playwright's
`expect`, its timeout set to EXPECT_TIMEOUT_MS here); a failure keeps a screenshot of the page in a file named
after the scenario (`failure_screenshot(target)`).

A scenario that needs more of the browser says so in attributes of its function, read before Chromium starts:
`scenario.chromium_args = f` (f(temp_dir) -> extra flags, e.g. a fake microphone fed from a WAV it writes there)
and `scenario.permissions = ["microphone"]`; `scenario.first_url_path = "capacity"` makes that page the fresh
studio's very first request instead of the home page (a deep link right after a start); `scenario.studio_module`
serves the studio with another `python -m` entry, `scenario.studio_server(port, log)` with a server of its own.
"""

from __future__ import annotations

import importlib
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

from bench.page_waits import SETTLED_QUIET_MS, is_settled, rerun, settled, watch_script_runs
from offline.launch import free_port, spawn, wait_http_ok

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
RESULT_MARK = "@@BROWSER-RESULT@@ "
FAILURE_SCREENSHOT_DIR = Path("/tmp")  # one file per scenario: parallel workers never overwrite each other's
# How long Playwright's `expect` and actions wait by default: generous, since the machine may be loaded; a timeout
# only bounds a failure, it never decides a pass.
EXPECT_TIMEOUT_MS = 60_000
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


class ScenarioFailed(Exception):
    """A browser scenario failed, or ended without a result: the message says why and where its page is kept."""


def netns_problem() -> str | None:
    """Why no loopback-only network namespace can be made here, as "needs …" or "cannot …"; None: it can."""
    missing = [tool for tool in ("unshare", "ip") if shutil.which(tool) is None]
    if missing:
        return f"needs {' and '.join(missing)} (apt-get install util-linux iproute2)"
    if os.geteuid() != 0:
        return "needs root to create a network namespace (unshare -n); run it as root, as CI does"
    probe = subprocess.run(["unshare", "-n", "sh", "-c", _NETNS_PRELUDE, "sh", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create a loopback-only network namespace: {probe.stderr.strip() or probe.returncode}"
    return None


def run_in_netns(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
                 cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run `argv` in a fresh network namespace whose only interface is lo (127.0.0.1 and 127.0.0.2)."""
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", _NETNS_PRELUDE, "sh", *argv],
        cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        capture_output=True, text=True, timeout=timeout,
    )


def run_browser_scenario(target: str, *, timeout: float = 60, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `scenario(studio)` (target "package.module:function") in the namespace; its returned dict.
    ScenarioFailed when it failed or gave no result."""
    proc = run_in_netns([sys.executable, "-m", "bench.browser", target], timeout=timeout, env=env)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr[-20_000:])
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            result = json.loads(line[len(RESULT_MARK):])
            if "error" in result:
                raise ScenarioFailed(f"browser scenario {target} failed: {result['error']}\n"
                                     f"(the page when it failed: {failure_screenshot(target)})")
            return result
    raise ScenarioFailed(f"browser scenario {target} exited with {proc.returncode} and no result; stderr ends "
                         f"with:\n{proc.stderr[-3000:]}")


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
    const n = window.__pcs.length;  // its state changes, for a failure's console (browser._main)
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
        return is_settled(self.page, quiet_ms)

    def stats(self, frame: Any) -> list[dict[str, Any]]:
        """inbound-rtp audio stats of every RTCPeerConnection the frame created."""
        return frame.evaluate(_INBOUND_AUDIO_STATS)

    def server_log(self) -> str:
        if not self.log.exists():  # a scenario's own server (studio_server) may keep its logs elsewhere
            return f"(no {self.log.name})"
        return self.log.read_text(errors="replace")[-5000:]

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
