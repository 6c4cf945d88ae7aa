"""End of turn (hearing/turn_end.py) on the engine's own voice: a sentence with an 800 ms pause after a word
that cannot end it ("I was wondering if … you could help me with my booking") — the silence rule cuts it in two
(two turns from one input), the learned model keeps it whole; the same through `converse --json`; a model that is
missing leaves every pause to the silence rule, counted; a threshold outside 0–1 is refused; a turn longer than the
model's window is scored on its last 8 s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hearing import turn_end
from hearing.turn_end import EndOfTurn, EndOfTurnModel, TurnDetection, TurnModelMissing
from protocol.audio import wav_bytes
from services.converse.turn_split import split_turns
from services.listen import load_audio
from services.listen.sample import spoken_sample_at
from tests.cli_support import run_cli

ROOT = Path(__file__).resolve().parents[1]
HEAD, TAIL = "I was wondering if", "you could help me with my booking."
PAUSE_S = 0.8


@pytest.fixture(scope="module")
def paused(engine_url: str) -> bytes:
    """16 kHz PCM16: the sentence's first words, 800 ms of silence, the rest."""
    head, tail = (load_audio(spoken_sample_at(engine_url, text)).pcm for text in (HEAD, TAIL))
    return head + bytes(int(PAUSE_S * 16_000) * 2) + tail


def test_the_silence_rule_cuts_a_paused_sentence_and_the_learned_model_keeps_it_whole(paused: bytes) -> None:
    silence = split_turns(paused, TurnDetection("silence"), vad_threshold=0.5, min_speech_ms=100)
    assert len(silence) == 2 and [p.decision.rule for p in silence] == ["silence", "silence"]
    learned = split_turns(paused, TurnDetection("learned"), vad_threshold=0.5, min_speech_ms=100)
    assert len(learned) == 1, [p.decision for p in learned]
    [whole] = learned
    assert whole.decision.rule in ("learned", "cap") and whole.decision.wait_ms >= 200
    assert len(whole.pcm) >= len(paused) - 2 * 16_000  # the whole sentence is in the one turn


def test_converse_json_shows_the_cut_off_as_more_turns_than_inputs(engine_url: str, paused: bytes,
                                                                   tmp_path: Path) -> None:
    wav = tmp_path / "paused.wav"
    wav.write_bytes(wav_bytes(paused, 16_000, 1))

    def turns(detector: str) -> list[dict]:
        p = run_cli([sys.executable, "-m", "services", "converse", "--input", str(wav), "--listen-url", engine_url,
                     "--speak-url", engine_url, "--json", "--turn-detector", detector], capture_output=True,
                    text=True, timeout=120, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)["turns"]

    cut, whole = turns("silence"), turns("learned")
    assert len(cut) == 2 and "wondering" in cut[0]["user_text"].lower()
    assert len(whole) == 1 and "booking" in whole[0]["user_text"].lower(), whole
    assert whole[0]["eot_rule"] in ("learned", "cap") and whole[0]["eot_wait_ms"] >= 200


def test_a_missing_model_leaves_every_pause_to_the_silence_rule(monkeypatch: pytest.MonkeyPatch, paused: bytes) -> None:
    def gone(relative: str) -> Path:
        raise TurnModelMissing(f"the end-of-turn model's file {relative} is missing: reinstall pipecat-ai")

    monkeypatch.setattr(turn_end, "_installed", gone)
    monkeypatch.setattr(EndOfTurnModel, "_shared", None)
    parts = split_turns(paused, TurnDetection("learned"), vad_threshold=0.5, min_speech_ms=100)
    assert [p.decision.rule for p in parts] == ["fallback", "fallback"]  # as the silence rule would: cut in two
    ender = EndOfTurn(TurnDetection("learned"), blocking=True)
    ender.speech()
    assert ender.pause(200, paused) is None and ender.fallbacks == 1 and "reinstall pipecat-ai" in ender.problem


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_a_threshold_outside_0_to_1_is_refused(threshold: float, tmp_path: Path) -> None:
    from protocol.errors import InvalidInput

    with pytest.raises(InvalidInput, match="a probability from 0 to 1"):
        TurnDetection("learned", threshold=threshold).check()
    wav = tmp_path / "x.wav"
    wav.write_bytes(wav_bytes(bytes(32_000), 16_000, 1))
    p = subprocess.run([sys.executable, "-m", "services", "converse", "--input", str(wav), "--eot-threshold",
                        str(threshold)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2 and f"--eot-threshold {threshold}: give a probability from 0 to 1" in p.stderr


def test_a_turn_longer_than_the_window_is_scored_on_its_last_8_s(paused: bytes) -> None:
    model = EndOfTurnModel.shared()
    long = bytes(int(9.5 * 16_000) * 2) + paused  # 9.5 s of silence, then the sentence: more than 8 s in all
    last = long[-int(8 * 16_000) * 2:]
    assert model.probability(long) == pytest.approx(model.probability(last), abs=1e-6)
    assert 0.0 <= model.probability(np.zeros(100, "<i2").tobytes()) <= 1.0  # shorter than the window: padded


def test_the_engine_s_duplex_session_takes_turns_by_the_learned_rule(engine_url: str, paused: bytes) -> None:
    """Native mode's server: the engine's duplex session with `semantic_vad` (the learned rule) hears the paused
    sentence, sent at real time as a microphone would, as one turn; with `server_vad` (500 ms) as two."""
    import asyncio
    import base64
    import time

    from websockets.asyncio.client import connect

    url = engine_url.replace("http://", "ws://").rstrip("/") + "/v1/realtime?duplex=1"
    chunk = 3200  # 100 ms

    async def stops(detection: dict) -> int:
        async with connect(url, max_size=None) as ws:
            await ws.send(json.dumps({"type": "session.update", "session": {"turn_detection": detection}}))
            stopped = 0

            async def read() -> None:
                nonlocal stopped
                while True:
                    event = json.loads(await ws.recv())
                    stopped += event["type"] == "input_audio_buffer.speech_stopped"

            reader = asyncio.create_task(read())
            audio = paused + bytes(16_000 * 2 * 2)  # then 2 s of silence: the last turn ends too
            t0 = time.perf_counter()
            for i, at in enumerate(range(0, len(audio), chunk)):
                await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                          "audio": base64.b64encode(audio[at:at + chunk]).decode()}))
                await asyncio.sleep(max(0.0, t0 + (i + 1) * 0.1 - time.perf_counter()))  # real time
            await asyncio.sleep(0.5)
            reader.cancel()
            return stopped

    assert asyncio.run(stops({"type": "server_vad", "silence_duration_ms": 500})) == 2
    assert asyncio.run(stops({"type": "semantic_vad", "silence_duration_ms": 500, "eot_threshold": 0.5})) == 1


def test_a_server_without_the_learned_rule_is_asked_again_for_its_silence_window() -> None:
    """vLLM-Omni 0.30 knows server_vad only and refuses the rest: native mode then opens with the silence window
    and says so; server_vad never carries the engine's own eot_threshold key."""
    import asyncio

    from services.converse.native import Native

    sent: list[dict] = []

    class Refusing:  # a SessionOpener's channel that refuses semantic_vad, as a strict server would
        target = "ws://strict"

        async def open(self):  # type: ignore[no-untyped-def]
            return self

        async def send(self, text: str) -> None:
            sent.append(json.loads(text))

        async def recv(self) -> str:
            detection = sent[-1]["session"]["turn_detection"]
            if detection["type"] != "server_vad":
                return json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                              "code": "invalid_event", "message": "unknown type"}})
            return json.dumps({"type": "session.updated", "session": {}})

        async def close(self) -> None:
            pass

    native = Native(Refusing(), silence_ms=600, end_of_turn=0.5)

    async def open_() -> None:
        channel = await native._connect()
        await native._open(channel)

    asyncio.run(open_())
    assert [m["session"]["turn_detection"]["type"] for m in sent] == ["semantic_vad", "server_vad"]
    assert "eot_threshold" not in sent[-1]["session"]["turn_detection"]
    assert "refused the learned end of turn" in native.turn_note and "600 ms of silence" in native.turn_note
