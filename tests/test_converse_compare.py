"""Compare two setups on the same recorded turns (services/converse/compare.py and `converse --compare`), on the real
offline engine: two short turns spoken by the engine's voice, a script answering. Checked: both setups heard the
same inputs (the PCM each sent), each side's figures are what `Conversation.voice_to_voice()` gives and the stage
medians recomputed here (nearest-rank) from the turns, B/A, the table's rows; bad --compare values exit 2.
No timing assertion: which setup is faster is not asserted."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import InvalidInput
from services.converse.compare import compare, render
from services.converse.setup import Setup, parse_change
from services.listen import ListenAudio, load_audio
from tests.conftest import spoken_turn_files
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parent.parent
TURNS = ("What time do you open?", "Thank you very much.")
SCRIPT = "time open => We open at nine.\nthank => You are welcome.\ndefault => Say that again?\n"
REPLIES = ["We open at nine.", "You are welcome."]
STAGE_FIELDS = {"transcript_final": "transcript_final_s", "first_token": "reply_first_token_s",
                "first_audio": "first_audio_s"}


@pytest.fixture(scope="module")
def wavs(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return spoken_turn_files(engine_url, tmp_path_factory.mktemp("turns"), TURNS)


@pytest.fixture(scope="module")
def inputs(wavs: list[Path]) -> list[ListenAudio]:
    return [load_audio(p.read_bytes(), name=p.name) for p in wavs]


def nearest_rank(values: list[float], p: float) -> float | None:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1] if ordered else None


def expected_side(timeline: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(voice-to-voice, stage medians) recomputed from a conversation's JSON turns."""
    v2v = [t["voice_to_voice_ms"] for t in timeline["turns"] if t["voice_to_voice_ms"] is not None]
    stages = {}
    for key, field in STAGE_FIELDS.items():
        values = [(t[field] - t["user_speech_end_s"]) * 1000 for t in timeline["turns"] if t[field] is not None]
        stages[key] = (len(values), nearest_rank(values, 50))
    return {"n": len(v2v), "p50": nearest_rank(v2v, 50), "p95": nearest_rank(v2v, 95)}, stages


def check_side(side: dict[str, Any], silence_ms: int) -> None:
    timeline = side["conversation"]
    assert [t["reply_text"] for t in timeline["turns"]] == REPLIES
    assert side["setup"]["silence_ms"] == silence_ms and side["failed_turns"] == 0
    v2v, stages = expected_side(timeline)
    # the JSON's turns are rounded (0.1 ms, 0.1 ms of a second's 4 decimals): the figures within that
    assert side["voice_to_voice_ms"]["n"] == v2v["n"] == 2
    assert side["voice_to_voice_ms"]["p50"] == pytest.approx(v2v["p50"], abs=0.11)
    assert side["voice_to_voice_ms"]["p95"] == pytest.approx(v2v["p95"], abs=0.11)
    for key, (n, p50) in stages.items():
        assert side["stages_ms"][key]["n"] == n == 2
        assert side["stages_ms"][key]["p50"] == pytest.approx(p50, abs=0.25)


def test_two_setups_hear_the_same_turns_and_are_set_side_by_side(engine_url: str, inputs: list[ListenAudio]) -> None:
    a = Setup(listen=engine_url, speak=engine_url, script=SCRIPT, script_name="shop", silence_ms=300)
    b = a.changed(silence_ms=700)
    assert (b.silence_ms, b.script, b.listen) == (700, SCRIPT, engine_url)
    result = asyncio.run(compare(inputs, a, b))
    for conv in (result.conv_a, result.conv_b):  # the same recordings, sent in the same order (each up to its
        # turn's end as the detector decided it: its speech and the silence waited, the input's own)
        sent = [pcm for _, pcm in conv.person]
        assert len(sent) == len(inputs)
        for pcm, x in zip(sent, inputs, strict=True):  # the input's bytes, then (past its end) only silence
            assert pcm[:len(x.pcm)] == x.pcm[:len(pcm)] and not any(pcm[len(x.pcm):])
        assert [t.reply_text for t in conv.turns] == REPLIES
    d = result.as_json()
    assert set(d) == {"a", "b", "ratio_p50"}
    assert d["a"]["inputs"] == d["b"]["inputs"] == ["turn1.wav", "turn2.wav"]
    assert d["a"]["voice_to_voice_ms"] == result.conv_a.voice_to_voice()  # exactly the conversation's own figure
    assert d["b"]["voice_to_voice_ms"] == result.conv_b.voice_to_voice()
    check_side(d["a"], 300)
    check_side(d["b"], 700)
    for side, conv in (("a", result.conv_a), ("b", result.conv_b)):  # unrounded: the medians exactly
        for key, field in STAGE_FIELDS.items():
            values = [(getattr(t, field) - t.user_speech_end_s) * 1000 for t in conv.turns]
            assert d[side]["stages_ms"][key]["p50"] == round(nearest_rank(values, 50), 1)
    pa, pb = d["a"]["voice_to_voice_ms"]["p50"], d["b"]["voice_to_voice_ms"]["p50"]
    assert d["ratio_p50"] == round(pb / pa, 3)

    rows = result.rows()
    assert [r["figure"] for r in rows] == ["voice-to-voice p50", "voice-to-voice p95",
                                           "final transcript, median from speech end",
                                           "first reply token, median from speech end",
                                           "first audio received, median from speech end"]
    assert rows[0] == {"figure": "voice-to-voice p50", "A (ms)": pa, "n A": 2, "B (ms)": pb, "n B": 2,
                       "B/A": d["ratio_p50"]}
    assert rows[1]["A (ms)"] == d["a"]["voice_to_voice_ms"]["p95"] and rows[1]["B (ms)"] == d["b"]["voice_to_voice_ms"]["p95"]
    assert [r["A (ms)"] for r in rows[2:]] == [d["a"]["stages_ms"][k]["p50"] for k in STAGE_FIELDS]
    assert [r["B (ms)"] for r in rows[2:]] == [d["b"]["stages_ms"][k]["p50"] for k in STAGE_FIELDS]
    text = render(result)
    assert "setup A: pipeline" in text and "silence window 300 ms" in text and "silence window 700 ms" in text
    assert f"B/A of voice-to-voice p50: {d['ratio_p50']:g}" in text


def test_what_b_changes_is_checked() -> None:
    a = Setup(listen="http://127.0.0.1:9", speak="http://127.0.0.1:9", silence_ms=500)
    with pytest.raises(InvalidInput, match="setup B is the same as A"):
        a.changed(silence_ms=500)
    with pytest.raises(InvalidInput, match=r"silence window \(ms\) must be a whole number from 200 to 2000"):
        a.changed(silence_ms=100)
    with pytest.raises(InvalidInput, match="a script has neither"):
        a.changed(system_prompt="be brief")
    with pytest.raises(InvalidInput, match="reply URL is missing or not http"):
        a.changed(reply_url="gpu-box:8000")
    model = a.changed(reply_url="http://gpu-box:8000", system_prompt="be brief")
    assert model.script is None and model.settings()["reply"] == "the served model at http://gpu-box:8000"
    native = a.changed(mode="native")
    assert native.url == "http://127.0.0.1:9" and native.settings()["mode"] == "native"
    assert parse_change("silence-ms=700") == ("silence_ms", 700)
    assert parse_change("reply-url=http://x:1") == ("reply_url", "http://x:1")
    for bad, words in (("silence=700", "KEY one of silence-ms, mode"), ("mode=duplex", "pipeline or native"),
                       ("silence-ms=fast", "whole number"), ("voice=", "has no value")):
        with pytest.raises(InvalidInput, match=words):
            parse_change(bad)



def test_a_reply_endpoint_and_a_session_endpoint_in_a_setup() -> None:
    """SageMaker targets (nothing is sent: a reply stage and a session opener only hold what they will reach)."""
    from services.aws import AwsSession
    from services.converse.sagemaker import EndpointSession

    aws = AwsSession("us-east-1")
    a = Setup(listen="http://127.0.0.1:9", speak="http://127.0.0.1:9", script=None, reply_endpoint="sm-chat", aws=aws,
              system_prompt="be brief")
    assert a.check().settings()["reply"] == "the served model on SageMaker endpoint sm-chat (us-east-1)"
    for name, words in (("", "the reply endpoint's name is empty"), ("  ", "the reply endpoint's name is empty"),
                        ("chat endpoint", "'chat endpoint' is not a SageMaker endpoint name"),
                        ("-chat", "is not a SageMaker endpoint name"), ("c" * 64, "is not a SageMaker endpoint name")):
        with pytest.raises(InvalidInput, match=words):
            a.changed(reply_endpoint=name)
    with pytest.raises(InvalidInput, match="choose SageMaker in the sidebar"):
        a.changed(aws=None)
    scripted = a.changed(script=SCRIPT, system_prompt=None)  # a script replaces the endpoint's model
    assert scripted.reply_endpoint is None and scripted.settings()["reply"] == "a scripted reply (B's script), not a model"
    by_url = a.changed(reply_url="http://gpu-box:8000")
    assert by_url.reply_endpoint is None and by_url.settings()["reply"] == "the served model at http://gpu-box:8000"
    back = by_url.changed(reply_endpoint="sm-chat-2")
    assert back.reply_url is None and back.reply().label.endswith("endpoint sm-chat-2 (us-east-1)")

    session = EndpointSession(aws, "sm-omni")
    native = Setup(mode="native", url=session, script=SCRIPT, script_name="shop").check()
    settings = native.settings()
    assert settings["url"] == "SageMaker endpoint sm-omni (us-east-1, HTTP/2 v1/realtime?duplex=1)"
    assert settings["reply"] == f"the session at {settings['url']}, instructed with shop"
    assert json.loads(json.dumps(settings)) == settings  # kept in the history as JSON
    assert native.runner().url == settings["url"]
    assert native.changed(silence_ms=700).url is session


def converse(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMNI_STUDIO_CONFIG": ""}
    return run_cli([sys.executable, "-m", "services", "converse", *args], capture_output=True, text=True,
                          timeout=180, cwd=ROOT, env=env)


def test_the_cli_compares_a_pipeline_with_the_native_session(engine_url: str, wavs: list[Path],
                                                             tmp_path: Path) -> None:
    script = tmp_path / "shop.txt"
    script.write_text(SCRIPT)
    p = converse("--input", str(wavs[0]), "--listen-url", engine_url, "--speak-url", engine_url, "--script",
                 str(script), "--silence-ms", "300", "--compare", "mode=native", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert set(d) == {"a", "b", "ratio_p50"}
    assert d["a"]["setup"]["mode"] == "pipeline" and d["b"]["setup"]["mode"] == "native"
    assert d["b"]["setup"]["url"] == engine_url and d["b"]["setup"]["silence_ms"] == 300
    for side in ("a", "b"):
        timeline = d[side]["conversation"]
        assert [t["reply_text"].strip() for t in timeline["turns"]] == REPLIES[:1]
        v2v, stages = expected_side(timeline)
        assert d[side]["voice_to_voice_ms"]["n"] == 1
        assert d[side]["voice_to_voice_ms"]["p50"] == pytest.approx(v2v["p50"], abs=0.11)
        assert d[side]["stages_ms"]["first_token"]["p50"] == pytest.approx(stages["first_token"][1], abs=0.25)
    assert d["ratio_p50"] == round(d["b"]["voice_to_voice_ms"]["p50"] / d["a"]["voice_to_voice_ms"]["p50"], 3)


def test_the_cli_text_shows_both_and_the_ratio(engine_url: str, wavs: list[Path]) -> None:
    p = converse("--input", str(wavs[1]), "--listen-url", engine_url, "--speak-url", engine_url, "--silence-ms",
                 "300", "--compare", "silence-ms=700")
    assert p.returncode == 0, p.stderr
    assert "setup A: pipeline" in p.stdout and "silence window 300 ms" in p.stdout
    assert "setup B: pipeline" in p.stdout and "silence window 700 ms" in p.stdout
    assert p.stdout.count("turn 1: you:") == 2 and "voice-to-voice p50" in p.stdout
    assert "B/A of voice-to-voice p50: " in p.stdout


@pytest.mark.parametrize(("args", "words"), [
    (["--compare", "silence-ms=300"], "setup B is the same as A"),
    (["--compare", "silence-ms=9000"], "must be a whole number from 200 to 2000"),
    (["--compare", "colour=red"], "KEY one of silence-ms"),
    (["--compare", "silence-ms=700", "--keep"], "leave out --barge-in-at, --keep"),
])
def test_bad_compare_values_exit_2(engine_url: str, wavs: list[Path], args: list[str], words: str) -> None:
    p = converse("--input", str(wavs[0]), "--listen-url", engine_url, "--speak-url", engine_url, "--silence-ms",
                 "300", *args)
    assert p.returncode == 2, p.stderr
    assert words in p.stderr and p.stdout == ""


def test_the_voice_detectors_settings_reach_every_runner_and_bad_ones_are_named() -> None:
    from services.converse.live import LivePipeline
    from services.converse.live_native import LiveNative
    from services.converse.native import Native
    from services.playback import Playback

    url = "http://127.0.0.1:9"  # never reached: runners are only built
    setup = Setup(listen=url, speak=url, url=url, vad_threshold=0.7, min_speech_ms=240).check()
    pipeline, live = setup.runner(), setup.live_runner(Playback())
    assert isinstance(live, LivePipeline)
    assert (pipeline.vad_threshold, pipeline.min_speech_ms) == (live.vad_threshold, live.min_speech_ms) == (0.7, 240)
    native = replace(setup, mode="native")
    for runner in (native.runner(), native.live_runner(Playback())):
        assert isinstance(runner, Native | LiveNative)
        assert runner.update.session.turn_detection.threshold == 0.7
    with pytest.raises(InvalidInput, match="threshold 1.5: give a number between 0 and 1"):
        replace(setup, vad_threshold=1.5).check()
    with pytest.raises(InvalidInput, match="the minimum speech \\(ms\\) must be a whole number from 20 to 2000"):
        replace(setup, min_speech_ms=5).check()
