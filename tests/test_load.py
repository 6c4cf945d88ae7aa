"""Load sweeps against real servers: the offline engine (voice sessions, image generations, video jobs, in process
and through `python -m services load`), a loopback proxy in front of it that throttles every other request, and
the local SageMaker emulator (HTTP/2 voice, invoke_endpoint images, async videos through S3).

Nothing here asserts on time: every check is on the report's structure and counts, and on its statistics
recomputed here, independently, from the samples it recorded (nearest-rank: the ceil(p/100 * n)-th smallest).
Each sweep is a few requests at levels of 1 to 3.
"""

from __future__ import annotations

import asyncio
import http.server
import itertools
import json
import math
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from protocol.errors import InvalidInput
from services.backend import server_backend
from services.history import History
from services.cli.load import render
from services.load import LoadPlan, LoadReport, describe_target, run_sweep
from services.settings import Settings

pytest.register_assert_rewrite("tests.emulator_support")
from tests.conftest import free_port  # noqa: E402  (after the assert rewrite)
from tests.emulator_support import EmulatorHandle, deploy_endpoint  # noqa: E402
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
TEXT = "Hello there. This is a short sentence for a load test."
SMALL_IMAGE = {"size": "128x96", "steps": 2}
SMALL_VIDEO = {"width": 64, "height": 64, "frames": 5, "fps": 8, "steps": 2}


# The SLOs below (600 s) are above every request timeout: a sweep holds them on any machine however busy, so the
# verdicts and prices do not depend on speed (the listen sweep's 1000 ms SLO is checked against its own figures).
def settings(**over: Any) -> Settings:
    return Settings.model_validate({"connect_timeout_s": 5.0, "request_timeout_s": 60.0, **over})


def cli(*args: str, data: Path, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": "", "PYTHONPATH": str(ROOT),
            **(env or {})}
    return run_cli([sys.executable, "-m", "services", "load", *args], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


# ---- the figures, recomputed from the samples --------------------------------------------------------------
def nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def most_in_flight(samples: list[dict[str, Any]]) -> int:
    """The most requests whose [start, end) intervals overlap at any request's start."""
    return max(sum(1 for o in samples if o["start_s"] <= s["start_s"] < o["end_s"]) for s in samples)


def check_level(level: dict[str, Any], modality: str) -> None:
    samples = level["samples"]
    assert level["requests"] == len(samples) == level["planned"]
    assert sorted(s["index"] for s in samples) == list(range(len(samples)))
    assert level["ok"] == sum(s["ok"] for s in samples) and level["errors"] == level["requests"] - level["ok"]
    assert most_in_flight(samples) <= level["concurrency"]  # closed loop: never more than the level in flight
    good = [s for s in samples if s["ok"]]
    figures = [("latency_s", [s["end_s"] - s["start_s"] for s in good])]
    if modality == "voice":
        figures.append(("ttfa_ms", [s["ttfa_ms"] for s in good]))
    if modality == "listen":
        figures.append(("final_ms", [s["final_ms"] for s in good]))
        figures.append(("first_partial_ms", [s["first_partial_ms"] for s in good if "first_partial_ms" in s]))
    for key, values in figures:
        assert level[key]["n"] == len(values)
        if values:
            assert level[key]["p50"] == pytest.approx(nearest_rank(values, 50), abs=2e-4)
            assert level[key]["p95"] == pytest.approx(nearest_rank(values, 95), abs=2e-4)
            assert level[key]["max"] == pytest.approx(max(values), abs=2e-4)
    wall = max(s["end_s"] for s in samples) - min(s["start_s"] for s in samples)
    work = {"voice": lambda s: s["audio_s"], "image": lambda s: s["images"], "video": lambda s: s["video_s"],
            "listen": lambda s: s["audio_s"]}[modality]
    per = {"voice": 1.0, "image": 60.0, "video": 3600.0, "listen": 1.0}[modality]
    (key, value), = level["throughput"].items()
    assert key == {"voice": "audio_s_per_s", "image": "images_per_min", "video": "video_s_per_hour",
                   "listen": "audio_s_per_s"}[modality]
    assert value == pytest.approx(sum(work(s) for s in good) / wall * per, rel=1e-3)


def check_report(d: dict[str, Any], modality: str, levels: list[int], requests: int) -> None:
    assert d["modality"] == modality and d["percentiles"] == "nearest-rank"
    assert [lv["concurrency"] for lv in d["levels"]] == levels
    assert all(lv["planned"] == requests for lv in d["levels"])
    for lv in d["levels"]:
        check_level(lv, modality)
    assert len(d["warmup"]) == 1 and d["warmup"][0]["ok"]
    assert LoadReport.from_dict(d).to_dict() == d  # a saved report recomputes to the same figures


# ---- the offline engine ---------------------------------------------------------------------------------
def test_voice_sweep_on_the_engine_records_every_session(engine_url: str) -> None:
    s = settings()
    backend = server_backend(engine_url, s, name="server")
    plan = LoadPlan.build("voice", levels="1,2,3", requests=3, slo="ttfa 600s", work={"text": TEXT})
    target = describe_target(backend, s, "voice")
    assert target.kind == "offline engine" and "this machine" in target.machine and "not a GPU" in target.machine
    seen = []
    report = asyncio.run(run_sweep(backend, plan, target, on_progress=seen.append))
    d = report.to_dict()
    check_report(d, "voice", [1, 2, 3], 3)
    for lv in d["levels"]:
        assert lv["ok"] == 3 and lv["errors"] == 0
        for smp in lv["samples"]:
            assert smp["ttfa_ms"] > 0 and smp["audio_s"] > 0 and smp["rtf"] > 0
            assert smp["bytes"] / 48_000 == pytest.approx(smp["audio_s"], abs=1e-4)  # s16le mono 24 kHz
        assert lv["rtf_p50"] == pytest.approx(nearest_rank([x["rtf"] for x in lv["samples"]], 50))
    assert d["max_concurrency_within_slo"] == 3 and d["slo"]["limit"] == 600000.0
    # this machine has no instance price: no cost, and the report says why
    assert d["usd_per_hour"] is None and d["cost"]["usd_per_audio_minute"] is None
    assert "no instance price" in d["cost"]["note"] and d["machine"] == target.machine
    # progress: one report per finished request and one per level start, ending at 9 of 9
    assert seen[-1].done == seen[-1].total == 9 and seen[-1].fraction == 1.0
    assert sum(1 for p in seen if p.level_done == 0) == 3


def test_image_sweep_from_the_cli_prints_writes_and_keeps_the_report(engine_url: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"prompt": "a red kite over the sea", **SMALL_IMAGE}))
    out = tmp_path / "report.json"
    r = cli("image", "--url", engine_url, "--concurrency", "1,2", "--requests", "2", "--spec", str(spec),
            "--slo", "latency 600s", "--price-per-hour", "1.5", "--title", "engine images", "--json", "--out", str(out),
            data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert json.loads(out.read_text()) == d
    check_report(d, "image", [1, 2], 2)
    assert d["work"] == {"prompt": "a red kite over the sea", **SMALL_IMAGE}
    assert all(s["images"] == 1 and s["bytes"] > 0 for lv in d["levels"] for s in lv["samples"])
    assert "this machine" in d["machine"] and "this machine" in r.stderr
    # cost at the best throughput within the SLO: $1.5/h over (images per minute x 60)
    best = max((lv for lv in d["levels"] if lv["within_slo"]), key=lambda lv: lv["throughput"]["images_per_min"])
    assert d["cost"]["at_concurrency"] == best["concurrency"]
    assert d["cost"]["usd_per_image"] == pytest.approx(1.5 / (best["throughput"]["images_per_min"] * 60), rel=1e-3)
    assert d["price_source"].startswith("given by hand")
    saved = History(tmp_path / "data").load_reports.list()
    assert [(x.id, x.title, x.modality) for x in saved] == [(d["id"], "engine images", "image")]
    assert saved[0].report == d


def test_video_sweep_runs_whole_jobs(engine_url: str) -> None:
    s = settings()
    backend = server_backend(engine_url, s, name="server")
    plan = LoadPlan.build("video", levels=[1, 2], requests=2, work=SMALL_VIDEO)
    report = asyncio.run(run_sweep(backend, plan, describe_target(backend, s, "video")))
    d = report.to_dict()
    check_report(d, "video", [1, 2], 2)
    for smp in (x for lv in d["levels"] for x in lv["samples"]):
        assert smp["ok"] and smp["video_s"] == pytest.approx(5 / 8) and smp["bytes"] > 1000
    assert d["slo"] is None and d["max_concurrency_within_slo"] is None


def test_listen_sweep_from_the_cli_streams_live_and_prices_an_audio_hour(engine_url: str, tmp_path: Path) -> None:
    r = cli("listen", "--url", engine_url, "--concurrency", "1,2", "--requests", "2", "--price-per-hour", "1.5",
            "--json", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_report(d, "listen", [1, 2], 2)
    # the default work: the offline voice's sentence, made once, its length in the report
    assert d["work"]["text"].startswith("Please call me back") and d["work"]["audio"] == "the offline voice's sentence"
    audio_s = d["work"]["audio_s"]
    assert audio_s > 1
    assert d["slo"]["metric"] == "final_ms" and d["slo"]["limit"] == 1000.0 and d["slo"]["percentile"] == 95
    for lv in d["levels"]:
        assert set(lv) >= {"final_ms", "first_partial_ms", "latency_s", "throughput", "within_slo"}
        assert "ttfa_ms" not in lv and "rtf_p50" not in lv
        assert (lv["ok"], lv["errors"], lv["final_ms"]["n"]) == (2, 0, 2)
        for key in ("final_ms", "first_partial_ms", "latency_s"):
            assert lv[key]["p50"] <= lv[key]["p95"] <= lv[key]["max"]
        for smp in lv["samples"]:  # every stream sent the whole recording: 16 kHz mono PCM16
            assert smp["audio_s"] == pytest.approx(audio_s, abs=1e-3)
            assert smp["bytes"] / 32_000 == pytest.approx(smp["audio_s"], abs=1e-4)
            assert smp["final_ms"] > 0 and smp["latency_s"] >= audio_s * 0.9 and smp["partials"] >= 0
        # within the SLO, recomputed from the samples: no error and the p95 of the final text ≤ 1000 ms
        finals = [smp["final_ms"] for smp in lv["samples"]]
        assert lv["within_slo"] == (lv["errors"] == 0 and nearest_rank(finals, 95) <= 1000.0)
    held = list(itertools.takewhile(lambda lv: lv["within_slo"], d["levels"]))
    assert d["max_concurrency_within_slo"] == (held[-1]["concurrency"] if held else None)
    # cost per audio hour: $1.5/h over the audio hours transcribed per hour at the best level within the SLO
    cost = d["cost"]
    if held:
        best = max(held, key=lambda lv: (lv["throughput"]["audio_s_per_s"], -lv["concurrency"]))
        hours_per_hour = best["throughput"]["audio_s_per_s"] * 3600 / 3600
        assert cost["at_concurrency"] == best["concurrency"]
        assert cost["usd_per_audio_hour"] == pytest.approx(1.5 / hours_per_hour, rel=1e-3)
    else:
        assert cost["usd_per_audio_hour"] is None and "no level ran within the SLO" in cost["note"]
    saved = History(tmp_path / "data").load_reports.list()
    assert [(x.id, x.modality) for x in saved] == [(d["id"], "listen")]
    text = render(LoadReport.from_dict(d))
    assert "final text ms p50/p95/max" in text and "SLO p95 final text ≤ 1000 ms" in text


def test_listen_sweep_sends_a_given_recording(engine_url: str, tmp_path: Path) -> None:
    from services.listen import load_audio
    from services.listen.sample import spoken_sample_at

    wav = spoken_sample_at(engine_url, "Turn left at the next corner.", seed=3)
    s = settings()
    backend = server_backend(engine_url, s, name="server")
    audio = load_audio(wav, "corner.wav")
    plan = LoadPlan.build("listen", levels="1", requests=1, slo="latency 60s", recording=audio)
    d = asyncio.run(run_sweep(backend, plan, describe_target(backend, s, "listen", usd_per_hour=2.0))).to_dict()
    check_report(d, "listen", [1], 1)
    assert d["work"] == {"audio": "corner.wav", "audio_s": round(audio.seconds, 3)}
    smp = d["levels"][0]["samples"][0]
    assert smp["ok"] and smp["bytes"] == len(audio.pcm) and d["slo"]["metric"] == "latency_s"
    with pytest.raises(InvalidInput, match="not both"):
        LoadPlan.build("listen", levels="1", requests=1, recording=audio, work={"text": "hello"})


def test_the_cli_text_report_names_whose_figures_they_are(engine_url: str, tmp_path: Path) -> None:
    r = cli("voice", "--url", engine_url, "--concurrency", "1", "--requests", "1", "--text", TEXT,
            "--slo-ttfa-ms", "600000", "--no-history", data=tmp_path / "data")
    assert r.returncode == 0, r.stderr
    assert "voice sweep on " + engine_url in r.stdout and "figures of this machine" in r.stdout
    assert "SLO p95 first audio ≤ 600000 ms: held up to concurrency 1" in r.stdout
    assert "cost: none — the offline engine runs on this machine" in r.stdout
    assert "nearest-rank" in r.stdout and "saved as load report" not in r.stdout  # --no-history


# ---- throttling: counted per level, never fatal ------------------------------------------------------------
class ThrottlingProxy(http.server.ThreadingHTTPServer):
    """The engine behind a proxy that answers every other image request (2nd, 4th, …) with HTTP 429."""

    daemon_threads = True

    def __init__(self, engine_url: str) -> None:
        self.engine_url = engine_url
        self.counter = itertools.count(1)
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ProxyHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: ThrottlingProxy

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        resp = httpx.get(self.server.engine_url + self.path, timeout=30)
        self._send(resp.status_code, resp.content, resp.headers.get("content-type", "application/json"))

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            n = next(self.server.counter)
        if n % 2 == 0:
            self._send(429, json.dumps({"error": {"message": "Too Many Requests", "code": 429}}).encode())
            return
        resp = httpx.post(self.server.engine_url + self.path, content=body, timeout=60,
                          headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
        self._send(resp.status_code, resp.content, resp.headers.get("content-type", "application/json"))


@pytest.fixture
def throttling_proxy(engine_url: str) -> Iterator[ThrottlingProxy]:
    proxy = ThrottlingProxy(engine_url)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_throttled_requests_are_counted_per_level_and_the_sweep_goes_on(throttling_proxy: ThrottlingProxy) -> None:
    s = settings()
    backend = server_backend(throttling_proxy.url, s, name="server")
    plan = LoadPlan.build("image", levels="1,2", requests=4, slo="latency 60s", work=SMALL_IMAGE)
    report = asyncio.run(run_sweep(backend, plan, describe_target(backend, s, "image", usd_per_hour=2.0)))
    d = report.to_dict()
    check_report(d, "image", [1, 2], 4)
    # request 1 is the warm-up (passes); then 2..5 and 6..9: every even one is refused, two per level
    for lv in d["levels"]:
        assert (lv["ok"], lv["errors"], lv["throttled"]) == (2, 2, 2)
        assert lv["within_slo"] is False  # a level that was throttled did not hold the load
        assert all("HTTP 429" in s["error"] and s["throttled"] for s in lv["samples"] if not s["ok"])
    assert d["max_concurrency_within_slo"] is None
    assert d["cost"]["usd_per_image"] is None and "no level ran within the SLO" in d["cost"]["note"]


# ---- the wall-clock cap and a stop keep what ran -------------------------------------------------------
def test_wall_clock_cap_stops_sending_and_the_report_keeps_what_ran(engine_url: str) -> None:
    s = settings()
    backend = server_backend(engine_url, s, name="server")
    plan = LoadPlan.build("image", levels="1,2", requests=4, max_wall_s=10, work=SMALL_IMAGE, warmup=0)
    ticks = itertools.count()
    report = asyncio.run(run_sweep(backend, plan, describe_target(backend, s, "image"),
                                   clock=lambda: next(ticks) * 1.0))  # a clock that moves 1 s per reading
    d = report.to_dict()
    assert "wall-clock cap of 10 s" in d["stopped"]
    sent = sum(lv["requests"] for lv in d["levels"])
    assert 0 < sent < plan.total_requests
    assert d["levels"][-1]["requests"] < d["levels"][-1]["planned"]
    assert all(s["ok"] for lv in d["levels"] for s in lv["samples"])


def test_a_stopped_sweep_sends_no_level(engine_url: str) -> None:
    s = settings()
    backend = server_backend(engine_url, s, name="server")
    stop = threading.Event()
    stop.set()
    plan = LoadPlan.build("voice", levels="1", requests=1, work={"text": TEXT})
    d = asyncio.run(run_sweep(backend, plan, describe_target(backend, s, "voice"), stop=stop)).to_dict()
    assert d["stopped"] == "stopped by request" and d["levels"] == [] and len(d["warmup"]) == 1


def test_a_sweep_stopped_before_its_first_level_says_no_level_ran(engine_url: str) -> None:
    from services.cli.load import render

    s = settings()
    backend = server_backend(engine_url, s, name="server")
    plan = LoadPlan.build("voice", levels="1", requests=1, slo="ttfa 300ms", work={"text": TEXT}, warmup=1)
    stop = threading.Event()
    stop.set()  # as after Ctrl-C during the warm-up request: it finishes, and no level starts
    report = asyncio.run(run_sweep(backend, plan, describe_target(backend, s, "voice"), stop=stop))
    d = report.to_dict()
    assert d["levels"] == [] and len(d["warmup"]) == 1
    note = d["cost"]["note"]
    assert note == ("no level ran (the sweep ended before its first level: stopped by request), so there is no "
                    "throughput to price")
    text = render(report)
    assert "not measured: no level ran" in text and "not held even at the lowest level" not in text
    assert "ended early: stopped by request; no level ran" in text and "levels above" not in text
    # no SLO: the same, not "no level ran without errors"
    report.slo = None
    assert "without errors" not in report.cost()["note"] and "no level ran (" in report.cost()["note"]


def test_a_failing_warmup_stops_before_any_level(engine_url: str) -> None:
    from services.load.runner import WarmupFailed

    s = settings()
    backend = server_backend(engine_url, s, name="server")
    plan = LoadPlan.build("voice", levels="1,2", requests=2, work={"text": TEXT, "voice": "no-such-voice"})
    with pytest.raises(WarmupFailed, match="no sweep was run.*no-such-voice"):
        asyncio.run(run_sweep(backend, plan, describe_target(backend, s, "voice")))


# ---- bad input and a target that is down: refused before any load ------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["audio"], "invalid choice: 'audio'"),
    (["voice", "--concurrency", "1,4,2"], "2 follows 4"),
    (["voice", "--concurrency", "0,1"], "positive whole numbers"),
    (["image", "--concurrency", "1,8", "--requests", "4"], "4 requests per level are fewer than the highest "
                                                          "concurrency level 8"),
    (["voice", "--concurrency", "1,128", "--requests", "200"], "from 1 to 64"),
    (["voice", "--requests", "2001"], "from 1 to 2000"),
    (["voice", "--slo", "300"], "the SLO '300' has no unit: write 300ms or 300s"),
    (["image", "--slo-ttfa-ms", "300"], "first audio (TTFA) is a voice figure"),
    (["image", "--text", "hello"], "--text is for voice and listen"),
    (["voice", "--audio", "talk.wav"], "--audio is for listen"),
    (["listen", "--audio", "/no/such/talk.wav"], "--audio"),
    (["listen", "--prompt", "a cat"], "--prompt is for image, video and sound; a listen sweep takes --text"),
    (["image", "--slo-final-ms", "300"], "final text is a listen figure"),
    (["listen", "--slo", "ttfa 300ms"], "first audio (TTFA) is a voice figure; give a listen sweep an SLO on final "
                                        "text or first partial or latency"),
    (["listen", "--slo-final-ms", "0"], "argument --slo-final-ms: the final-text SLO must be a number of "
                                        "milliseconds above zero"),
    (["voice", "--max-minutes", "0.01"], "wall-clock cap"),
    # a bad flag value exits 2 naming the flag, in the flag's own unit
    (["voice", "--max-minutes", "0"], "argument --max-minutes: the wall-clock cap must be a number of minutes from "
                                      "0.1667 to 240; got '0'"),
    (["voice", "--max-minutes", "-5"], "argument --max-minutes:"),
    (["voice", "--max-minutes", "100000"], "argument --max-minutes:"),
    (["voice", "--max-minutes", "nan"], "argument --max-minutes:"),
    (["voice", "--price-per-hour", "-3"], "argument --price-per-hour: the price per hour must be a number of USD "
                                          "from 0.0001 to 1000; got '-3'"),
    (["voice", "--price-per-hour", "inf"], "argument --price-per-hour:"),
    (["voice", "--slo-ttfa-ms", "inf"], "argument --slo-ttfa-ms: the first-audio SLO must be a number of "
                                        "milliseconds above zero"),
    (["voice", "--slo-latency-s", "nan"], "argument --slo-latency-s:"),
    (["voice", "--endpoint", "x", "--backend", "server"], "--endpoint names a SageMaker endpoint"),
    (["voice", "--endpoint", "x", "--backend", "omni"], "--endpoint names a SageMaker endpoint"),  # its former name
])
def test_bad_input_is_refused_before_anything_starts(args: list[str], words: str, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nobody listens: reaching it would say "is down" instead
    r = cli(*args, *([] if "--backend" in args else ["--url", dead]), data=tmp_path / "data")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert words in r.stderr and "is down" not in r.stderr


def test_a_target_that_is_down_is_named_before_any_load(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    r = cli("voice", "--url", dead, "--concurrency", "1,2", "--requests", "2", data=tmp_path / "data")
    assert r.returncode == 1
    assert f"the target {dead} is down" in r.stderr and "no load was sent" in r.stderr
    assert "level 1/" not in r.stderr and not History(tmp_path / "data").load_reports.list()


def test_a_load_report_kept_as_backend_omni_reads_as_server(tmp_path: Path) -> None:
    """A report an older studio kept with backend "omni" (a vLLM-Omni server's former name) lists and reopens as
    "server"."""
    history = History(tmp_path / "data")
    history.load_reports.save({"id": "lr-old", "modality": "image", "backend": "omni", "target": "http://gpu-box:8091",
                               "created_at": 5.0, "levels": []})
    kept, = history.load_reports.list()
    assert kept.report["backend"] == "omni"  # (the row really says omni)
    assert kept.backend == "server" and LoadReport.from_dict(kept.report).backend == "server"


# ---- SageMaker, through the local emulator ------------------------------------------------------------
def sm_env(emulator: EmulatorHandle, tmp_path: Path, **endpoints: str) -> dict[str, str]:
    env = {"OMNI_STUDIO_BACKEND": "sagemaker", "OMNI_STUDIO_REGION": emulator.region,
           "OMNI_STUDIO_STATE_FILE": str(tmp_path / "no-state.json")}
    env.update({f"OMNI_STUDIO_{role.upper()}_ENDPOINT": name for role, name in endpoints.items()})
    return env


def test_sagemaker_voice_sweep_prices_the_instance_in_use(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "load-voice", environment={"SM_VLLM_MODEL": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"})
    r = cli("voice", "--concurrency", "1,2", "--requests", "2", "--text", TEXT, "--slo", "ttfa 600s", "--yes", "--json",
            data=tmp_path / "data", env=sm_env(emulator_env, tmp_path, voice="load-voice"))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_report(d, "voice", [1, 2], 2)
    assert d["backend"] == "sagemaker" and d["target"] == f"SageMaker endpoint load-voice ({emulator_env.region})"
    assert d["instance_type"] == "ml.g6.xlarge" and d["usd_per_hour"] == pytest.approx(1.1267)  # the pool's first
    assert d["machine"] is None and all(lv["ok"] == 2 for lv in d["levels"])
    # the estimate came first: what is sent, and at most the cap's worth of the instance's price
    assert "The sweep sends 4 voice sessions (2 at each concurrency level 1,2, after 1 warm-up request)" in r.stderr
    assert "$1.1267/h" in r.stderr and "at most $0.563" in r.stderr and "of endpoint time" in r.stderr  # 30 min x $1.1267/h
    minutes = d["cost"]["throughput"]["audio_s_per_s"] * 60  # audio minutes per hour
    assert d["cost"]["usd_per_audio_minute"] == pytest.approx(1.1267 / minutes, rel=1e-3)
    # the emulator (on loopback) is named beside every dollar figure: before the sweep, in the report, in its text
    assert "this is the local SageMaker emulator: nothing is billed" in r.stderr
    report = LoadReport.from_dict(d)
    assert d["emulated"] is True and report.emulated and "(emulated)" in report.label()
    text = render(report)
    assert "measured on the local SageMaker emulator" in text.split("cost: ", 1)[1].split("\n")[1], text


def test_only_sagemaker_on_loopback_counts_as_the_emulator() -> None:
    from services.load.target import on_loopback

    assert on_loopback("https://127.0.0.1:4566") and on_loopback("http://localhost:8080") and on_loopback("https://[::1]:1")
    assert not on_loopback("https://10.1.2.3") and not on_loopback(None) and not on_loopback("")


def test_sagemaker_image_sweep_by_endpoint_name_and_an_unpriced_instance(emulator_env: EmulatorHandle,
                                                                        tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "load-image-big", instance_type="ml.g5.4xlarge",
                    environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SMALL_IMAGE))
    r = cli("image", "--backend", "sagemaker", "--endpoint", "load-image-big", "--concurrency", "1,2", "--requests", "2",
            "--spec", str(spec), "--yes", "--json", data=tmp_path / "data", env=sm_env(emulator_env, tmp_path))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_report(d, "image", [1, 2], 2)
    assert d["instance_type"] == "ml.g5.4xlarge" and d["usd_per_hour"] is None
    assert "no price is known for ml.g5.4xlarge" in d["price_note"]
    assert d["cost"]["usd_per_image"] is None and "no price is known for ml.g5.4xlarge" in d["cost"]["note"]
    assert "Its cost cannot be shown: no price is known for ml.g5.4xlarge" in r.stderr


def test_sagemaker_video_sweep_runs_async_jobs_through_s3(emulator_env: EmulatorHandle, bucket: str,
                                                         tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "load-video", async_output=f"s3://{bucket}/outputs",
                    async_failure=f"s3://{bucket}/failures",
                    environment={"SM_VLLM_MODEL": "Wan-AI/Wan2.1-VACE-1.3B-diffusers"})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SMALL_VIDEO))
    env = sm_env(emulator_env, tmp_path, video="load-video") | {"OMNI_STUDIO_BUCKET": bucket}
    r = cli("video", "--concurrency", "1,2", "--requests", "2", "--spec", str(spec), "--yes", "--json",
            data=tmp_path / "data", env=env)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    check_report(d, "video", [1, 2], 2)
    assert all(s["video_s"] == pytest.approx(5 / 8) for lv in d["levels"] for s in lv["samples"])
    assert "S3 requests for each video come on top" in r.stderr


def test_sagemaker_sweep_is_not_run_without_confirmation(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "load-image", environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    before = sum(emulator_env.state()["calls"].values())
    r = cli("image", "--concurrency", "1,2", "--requests", "4", data=tmp_path / "data",
            env=sm_env(emulator_env, tmp_path, image="load-image"))
    assert r.returncode == 1
    assert "The sweep sends 8 image generations" in r.stderr and "add --yes" in r.stderr
    assert "not confirmed; no load was sent" in r.stderr
    # only the endpoint was described (resolve + describe); no warm-up, no level: fewer calls than requests
    assert sum(emulator_env.state()["calls"].values()) - before <= 2
    assert not History(tmp_path / "data").load_reports.list()


def test_an_endpoint_not_in_service_is_refused_and_left_alone(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    emulator_env.configure(delays={"create_s": 120})
    deploy_endpoint(emulator_env, "load-slow", wait=False, environment={"SM_VLLM_MODEL": "black-forest-labs/FLUX.2-klein-4B"})
    r = cli("image", "--requests", "8", "--yes", data=tmp_path / "data",
            env=sm_env(emulator_env, tmp_path, image="load-slow"))
    assert r.returncode == 1
    assert "the image endpoint load-slow is Creating, not InService; no load was sent" in r.stderr
    assert "never starts or waits for endpoints" in r.stderr
    assert emulator_env.state()["endpoints"]["load-slow"] == "Creating"


def test_a_missing_endpoint_says_so(emulator_env: EmulatorHandle, tmp_path: Path) -> None:
    r = cli("voice", "--requests", "8", "--yes", data=tmp_path / "data",
            env=sm_env(emulator_env, tmp_path, voice="load-nowhere"))
    assert r.returncode == 1
    assert "the voice endpoint load-nowhere does not exist" in r.stderr and "never creates endpoints" in r.stderr
