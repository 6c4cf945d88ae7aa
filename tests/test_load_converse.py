"""`python -m services load converse` on the real offline engine (3 conversations at once over two short turns
spoken by the engine's voice; a reply target that is down) and on SageMaker listen and voice endpoints through the
local emulator (the summed price, the estimate and its confirmation); bad values exit 2 naming what to fix.

Nothing here asserts on time, and no verdict depends on how fast the machine answers: the sweeps run with an SLO
no answered turn can miss (above the cap a conversation is cut at), so every level holds it and the throughput is
priced on any machine under any load. The rule itself is checked on the same conversations at limits taken from
their own recorded turns: the count of conversations holding the SLO and the voice-to-voice percentiles are
recomputed here, independently (nearest-rank: the ceil(p/100 * n)-th smallest), and checked against what the report
says — for the SLO given, for one placed between the conversations' own p95s and for one below all of them (no level
holds it: nothing to price), so that both sides of the rule are exercised whatever the timings were."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol.listen import DEFAULT_LISTEN_MODEL
from services.cli import main
from services.cli.load import render
from tests.conftest import spoken_turn_files
from services.load import LoadReport, Slo
from services.load.converse import CONVERSATION_S_PER_TURN
from services.pricing import load_prices

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import EmulatorHandle, deploy_endpoint  # noqa: E402
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
TURNS = ("What time do you open?", "Thank you very much.")
SCRIPT = "time open => We open at nine.\nthank => You are welcome.\ndefault => Say that again?\n"
VOICE_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
# Ten minutes, in ms: above anything a turn can take here, since a conversation is cut at its speech (a few
# seconds) plus CONVERSATION_S_PER_TURN (60 s) per turn. Every conversation holds it under any load, so the sweep's
# verdict and its price never depend on how busy the machine was.
SLO_NO_TURN_MISSES_MS = 600_000
assert SLO_NO_TURN_MISSES_MS > 2 * 1000 * CONVERSATION_S_PER_TURN * len(TURNS)


@pytest.fixture(scope="module")
def turns(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return spoken_turn_files(engine_url, tmp_path_factory.mktemp("turns"), TURNS)


def load(*args: str, tmp: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "OMNI_STUDIO_DATA_DIR": str(tmp / "data"), "OMNI_STUDIO_CONFIG": "",
            "OMNI_STUDIO_STATE_FILE": str(tmp / "no-state.json"), **(env or {})}
    return run_cli([sys.executable, "-m", "services", "load", "converse", *args], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)


def nearest_rank(values: list[float], p: float) -> float | None:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1] if ordered else None


def holding(samples: list[dict[str, Any]], limit: float) -> int:
    """The rule, by hand: no failed turn, and the conversation's own p95 voice-to-voice within the limit."""
    return sum(1 for s in samples if s["ok"] and s["failed_turns"] == 0 and s["turn_v2v_ms"]
               and nearest_rank(s["turn_v2v_ms"], 95) <= limit)


def test_three_conversations_at_once_and_who_holds_the_slo(engine_url: str, turns: list[Path], tmp_path: Path) -> None:
    script, out = tmp_path / "shop.txt", tmp_path / "report.json"
    script.write_text(SCRIPT)
    p = load("--input", str(turns[0]), "--input", str(turns[1]), "--listen-url", engine_url, "--speak-url",
             engine_url, "--script", str(script), "--silence-ms", "300", "--concurrency", "3", "--warmup", "0",
             "--slo-v2v-ms", str(SLO_NO_TURN_MISSES_MS), "--json", "--out", str(out), tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert json.loads(out.read_text()) == d
    assert d["modality"] == "converse" and d["backend"] == "offline" and "this machine" in d["machine"]
    assert d["target"] == f"listen {engine_url} · reply a scripted reply ({script}), not a model · speak {engine_url}"
    assert d["slo"]["metric"] == "v2v_ms" and d["slo"]["limit"] == SLO_NO_TURN_MISSES_MS
    assert d["work"]["inputs"] == [str(t) for t in turns] and d["work"]["silence_ms"] == 300
    assert d["requests_per_level"] == 3 and d["percentiles"] == "nearest-rank"
    [level] = d["levels"]
    samples = level["samples"]
    assert (level["concurrency"], level["requests"], level["ok"], level["errors"]) == (3, 3, 3, 0)
    assert max(s["start_s"] for s in samples) < min(s["end_s"] for s in samples)  # all three were held at once
    for s in samples:
        assert s["turns"] == 2 and s["failed_turns"] == 0 and len(s["turn_v2v_ms"]) == 2
        assert all(v > 0 for v in s["turn_v2v_ms"]) and s["v2v_p95_ms"] == nearest_rank(s["turn_v2v_ms"], 95)
    assert level["turns"] == 6 and level["failed_turns"] == 0
    every_turn = [v for s in samples for v in s["turn_v2v_ms"]]
    assert level["v2v_ms"] == {"n": 6, "p50": nearest_rank(every_turn, 50), "p95": nearest_rank(every_turn, 95),
                               "max": max(every_turn)}
    assert level["conversations_within_slo"] == holding(samples, SLO_NO_TURN_MISSES_MS) == 3
    assert level["within_slo"] is True and d["max_concurrency_within_slo"] == 3
    # Held, so the level's throughput is what is priced; the offline engine has no instance price.
    assert d["cost"]["at_concurrency"] == 3 and d["cost"]["throughput"]["turns_per_min"] > 0
    assert d["cost"]["usd_per_conversation_turn"] is None and "no instance price" in d["cost"]["note"]

    # The rule on the same conversations at a limit between their own p95s: some hold, some do not.
    report = LoadReport.from_dict(d)
    own = sorted(nearest_rank(s["turn_v2v_ms"], 95) for s in samples)
    middle = Slo("v2v_ms", own[1])
    assert report.levels[0].within_slo(middle) == holding(samples, own[1]) >= 2
    assert report.levels[0].meets(middle) == (holding(samples, own[1]) == 3)
    # Below every conversation's own p95: none holds it, no level is within it, and there is nothing to price.
    below = Slo("v2v_ms", own[0] - 0.1)
    assert report.levels[0].within_slo(below) == holding(samples, own[0] - 0.1) == 0
    report.slo, report.usd_per_hour = below, 1.0
    missed = report.to_dict()
    assert missed["levels"][0]["within_slo"] is False and missed["max_concurrency_within_slo"] is None
    assert missed["cost"]["usd_per_conversation_turn"] is None
    assert missed["cost"]["note"] == "no level ran within the SLO, so there is no throughput to price"
    text = render(LoadReport.from_dict(d))
    assert "converse sweep on listen" in text and "3 of 3" in text
    assert f"SLO each conversation's p95 voice-to-voice ≤ {SLO_NO_TURN_MISSES_MS} ms" in text
    assert "voice-to-voice percentiles are nearest-rank over every answered turn" in text
    assert "not kept in the history" in p.stderr


def test_a_reply_target_that_is_down_fails_every_conversation(engine_url: str, turns: list[Path],
                                                               tmp_path: Path) -> None:
    p = load("--input", str(turns[0]), "--listen-url", engine_url, "--speak-url", engine_url, "--reply-url",
             "http://127.0.0.1:9", "--concurrency", "2", "--warmup", "0", "--json", tmp=tmp_path)
    assert p.returncode == 0, p.stderr  # the sweep ran; its failures are in the report
    [level] = json.loads(p.stdout)["levels"]
    assert (level["ok"], level["errors"], level["turns"], level["failed_turns"]) == (0, 2, 2, 2)
    assert level["conversations_within_slo"] == 0 and level["within_slo"] is False
    assert level["v2v_ms"]["n"] == 0 and level["v2v_ms"]["p50"] is None
    [error] = level["first_errors"]
    assert error.startswith("turn 1: cannot reach the reply server at http://127.0.0.1:9")


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        code = main(["load", "converse", *args])
    except SystemExit as exc:  # argparse's own type errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("args", "words"), [
    (["--slo-v2v-ms", "0"], "the voice-to-voice SLO must be a number of milliseconds above zero; got '0'"),
    (["--slo-v2v-ms", "fast"], "the voice-to-voice SLO must be a number of milliseconds above zero"),
    (["--slo", "latency 2s"], "a converse sweep's SLO is on voice-to-voice"),
    (["--slo-ttfa-ms", "300"], "--slo-ttfa-ms is not for load converse: its SLO is voice-to-voice"),
    (["--concurrency", "0"], "'0' in '0' is not one"),
    (["--concurrency", "65"], "a concurrency level must be a whole number from 1 to 64"),
    (["--concurrency", "2,1"], "concurrency levels must increase"),
    (["--concurrency", "3", "--requests", "2"], "fewer than the highest concurrency level 3"),
    (["--silence-ms", "100"], "the silence window (ms) must be a whole number from 200 to 2000"),
    (["--text", "hello"], "--text is not for load converse"),
])
def test_bad_values_exit_2_before_anything_runs(args: list[str], words: str, turns: list[Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main(capsys, "--input", str(turns[0]), "--listen-url", "http://127.0.0.1:9", "--speak-url",
                         "http://127.0.0.1:9", *args)
    assert code == 2, err
    assert words in err


def test_converse_flags_and_missing_turns_are_named(turns: list[Path], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main(capsys, "--listen-url", "http://127.0.0.1:9")
    assert code == 2 and "load converse needs the recorded turns every conversation plays: --input" in err
    bad = tmp_path / "bad.txt"
    bad.write_text("thank => fine\nno arrow here\n")
    code, err = run_main(capsys, "--input", str(turns[0]), "--script", str(bad))
    assert code == 2 and f"{bad} line 2" in err
    code = main(["load", "voice", "--input", str(turns[0])])
    assert code == 2 and "--input is for load converse; a voice sweep does not hold conversations" in \
        capsys.readouterr().err


def test_sagemaker_endpoints_are_priced_summed_and_confirmed(emulator_env: EmulatorHandle, engine_url: str,
                                                             turns: list[Path], tmp_path: Path) -> None:
    deploy_endpoint(emulator_env, "conv-listen", environment={"SM_VLLM_MODEL": DEFAULT_LISTEN_MODEL})
    deploy_endpoint(emulator_env, "conv-voice", instance_type="ml.g5.xlarge",
                    environment={"SM_VLLM_MODEL": VOICE_MODEL})
    prices = load_prices()
    hourly = [prices.hourly(t, emulator_env.region).usd_per_hour for t in ("ml.g6.xlarge", "ml.g5.xlarge")]
    args = ("--input", str(turns[0]), "--listen-endpoint", "conv-listen", "--voice-endpoint", "conv-voice",
            "--concurrency", "1", "--warmup", "0", "--slo-v2v-ms", str(SLO_NO_TURN_MISSES_MS), "--json")
    before = sum(emulator_env.state()["calls"].values())
    refused = load(*args, tmp=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "The sweep sends 1 conversations (1 at each concurrency level 1) to SageMaker endpoints" in refused.stderr
    assert "Each is a conversation of 1 recorded turn" in refused.stderr
    assert f"${sum(hourly):.4f}/h" in refused.stderr and "nothing is billed" in refused.stderr
    assert "add --yes" in refused.stderr and "not confirmed; no load was sent" in refused.stderr
    assert refused.stdout == ""
    assert sum(emulator_env.state()["calls"].values()) - before <= 4  # the endpoints described, nothing invoked

    p = load(*args, "--yes", tmp=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["backend"] == "sagemaker" and d["emulated"] is True
    assert d["instance_type"] == "ml.g6.xlarge + ml.g5.xlarge"
    assert d["usd_per_hour"] == pytest.approx(sum(hourly), abs=1e-6)
    [level] = d["levels"]
    assert level["ok"] == 1 and level["turns"] == 1 and len(level["samples"][0]["turn_v2v_ms"]) == 1
    assert level["within_slo"] is True and d["cost"]["at_concurrency"] == 1  # the SLO no turn misses: priced
    per_hour = level["throughput"]["turns_per_min"] * 60  # turns answered per hour at that throughput
    assert d["cost"]["usd_per_conversation_turn"] == pytest.approx(sum(hourly) / per_hour, rel=1e-3)
    assert "measured on the local SageMaker emulator" in render(LoadReport.from_dict(d))
