"""Converse, pipeline mode: where the silence after a person stops speaking goes, on the offline engine.

Ten turns (the first ten of bench/listen_accuracy.py's sentences, in the engine's own seeded voice) are played as a
microphone would — at real time to `/v1/realtime`, then the silence window — into one conversation whose reply is
a scripted one (`default => …`, the same short answer every turn) and whose speech is the offline voice. Per turn,
on the conversation's clock (services/converse/timeline.py): the person's speech end, the final transcript, the
reply's first token, the first agent audio received (the client has no playback: "heard" is "received").

    python bench/converse_latency.py [--silence-ms 500] [--barge-ins 5] [--json]

Each turn detector in turn on the same audio (hearing/turn_end.py: learned, the default, and the silence window).
Reported per detector: voice-to-voice p50/p95 (speech end → first agent audio, the end-of-turn wait included) with
n, the same minus each turn's end-of-turn wait (the studio's own part: the recognizer's final, the reply, the first
speech chunk), and each stage's median, so the slowest stage shows; then learned / silence. Percentiles: services/stats.py's one
method. Goal on this 2-core machine: the studio's own part ≤ 300 ms p50.

Then the barge-in stop, live (services/converse/live.py, as the Converse page talks): a microphone fed at real
time in 20 ms pieces, the agent played through streamlit-webrtc's real PCM track (frames taken at real time, as
aiortc's sender takes them); `--barge-ins` times a turn is answered and the next turn is spoken over the answer
0.5 s after it starts playing. Reported: the person's speech onset → the studio decides (the energy VAD's 100 ms
minimum included) and → the first silent frame the track sends, p50/p95 with n; goal ≤ 200 ms. The browser's
jitter buffer (tens of ms) comes after the track and is not in this figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from listen_accuracy import synthesize  # noqa: E402  (the fixed set, one definition)

TURNS = 10
GOAL_OWN_MS = 300.0
GOAL_STOP_MS = 200.0
REPLY = "Thank you. I will look into that right away."


def stages(turns: list) -> dict[str, float]:
    """Median milliseconds of each stage over the turns that reached it."""
    def med(pairs: list[tuple[float | None, float | None]]) -> float:
        ms = [(b - a) * 1000 for a, b in pairs if a is not None and b is not None]
        return round(statistics.median(ms), 1) if ms else float("nan")

    waits = [t.eot_wait_ms for t in turns if t.eot_wait_ms is not None]
    return {
        "speech end → turn decided": round(statistics.median(waits), 1) if waits else float("nan"),
        "turn decided → final transcript": med([(None if t.eot_wait_ms is None else
                                                 t.user_speech_end_s + t.eot_wait_ms / 1000, t.transcript_final_s)
                                                for t in turns]),
        "final transcript → first reply token": med([(t.transcript_final_s, t.reply_first_token_s) for t in turns]),
        "first reply token → first audio": med([(t.reply_first_token_s, t.first_audio_s) for t in turns]),
    }


async def converse(url: str, wavs: list[bytes], silence_ms: int, detector: str):  # noqa: ANN201
    from hearing.turn_end import TurnDetection
    from services.converse.pipeline import Pipeline
    from services.converse.reply import ScriptedReply
    from services.converse.script import parse_script
    from services.listen import load_audio

    script = parse_script(f"default => {REPLY}\n", "the bench's script")
    pipeline = Pipeline(url, url, ScriptedReply(script), silence_ms=silence_ms,
                        turn_detection=TurnDetection(detector, silence_ms=silence_ms))  # type: ignore[arg-type]
    return await pipeline.run([load_audio(w, f"turn {i}") for i, w in enumerate(wavs)])


def barge_ins(url: str, wavs: list[bytes], count: int) -> dict:
    """`count` barge-ins in one live conversation (see the module's doc): onset → decided, onset → track silent."""
    import time

    from streamlit_webrtc.pcm_source import PcmAudioSource

    from services.converse.live import LiveConversation, LivePipeline
    from services.converse.reply import ScriptedReply
    from services.converse.script import parse_script
    from services.listen import load_audio
    from services.stats import percentile
    from services.playback import Playback
    from services.runtime import BackgroundLoop

    loop, source, playback = BackgroundLoop("bench-bargein"), PcmAudioSource(sample_rate=24_000), Playback()
    playback.attach(source)
    silent: list[float] = []  # perf_counter of each all-zero frame the track sent

    async def take() -> None:
        while True:
            frame = await source.track.recv()
            if not frame.to_ndarray().any():
                silent.append(time.perf_counter())

    taking = loop.submit(take())
    script = parse_script(f"default => {REPLY} {REPLY} {REPLY}\n", "the bench's script")  # long enough to cut
    live = LiveConversation(LivePipeline(url, url, ScriptedReply(script), playback=playback), loop)
    piece = 640  # 20 ms at 16 kHz, PCM16

    def speak(pcm: bytes) -> None:
        start = time.perf_counter()
        for i, at in enumerate(range(0, len(pcm), piece)):
            live.feed_pcm(pcm[at:at + piece])
            time.sleep(max(0.0, start + (i + 1) * 0.02 - time.perf_counter()))

    def quiet_until(done, limit: float = 30.0) -> None:  # noqa: ANN001
        deadline = time.monotonic() + limit
        while not done() and time.monotonic() < deadline:
            speak(bytes(piece * 5))

    turns = [load_audio(w).pcm for w in wavs[: count + 1]]
    speak(turns[0])
    for pcm in turns[1:]:
        quiet_until(lambda: live.view()["status"] == "agent")
        speak(bytes(piece * 25))  # 0.5 s of the answer heard
        speak(pcm)
    quiet_until(lambda: live.view()["status"] == "listening" and playback.queued_seconds() == 0)
    live.stop()
    conv = live.result(120)
    taking.cancel()
    time.sleep(0.1)  # the loop runs the cancellation before it stops
    loop.stop()
    t0 = live.runner._t0
    decided, at_track = [], []
    for turn in conv.turns:
        if turn.interrupted and turn.agent_stop_s is not None:
            decided.append(turn.barge_in_stop_ms)
            onset = turn.agent_stop_s - turn.barge_in_stop_ms / 1000
            stop = next((t for t in silent if t >= t0 + turn.agent_stop_s), None)
            if stop is not None:
                at_track.append((stop - (t0 + onset)) * 1000)
    stat = lambda xs: {"n": len(xs), "p50": percentile(xs, 50), "p95": percentile(xs, 95)}  # noqa: E731
    return {"asked": count, "decided_ms": stat(decided), "track_silent_ms": stat(at_track)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--silence-ms", type=int, default=500)
    ap.add_argument("--barge-ins", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from offline.launch import shared_engine
    from services.stats import percentile

    url = shared_engine().url
    wavs = synthesize(url)[:TURNS]
    out: dict = {"silence_ms": args.silence_ms, "detectors": {}}
    for detector in ("learned", "silence"):  # the same turns, one detector after the other
        conv = asyncio.run(converse(url, wavs, args.silence_ms, detector))
        answered = [t for t in conv.turns if t.voice_to_voice_ms is not None]
        v2v = [t.voice_to_voice_ms for t in answered]
        own = [t.voice_to_voice_ms - (t.eot_wait_ms or 0.0) for t in answered]  # minus the end-of-turn wait
        out["detectors"][detector] = {
            "turns": len(conv.turns), "answered": len(answered), "errors": [t.error for t in conv.turns if t.error],
            "voice_to_voice_ms": {"n": len(v2v), "p50": percentile(v2v, 50), "p95": percentile(v2v, 95)},
            "own_ms": {"n": len(own), "p50": percentile(own, 50), "p95": percentile(own, 95)},
            "stages_median_ms": stages(answered)}
    out["barge_in"] = barge_ins(url, wavs, args.barge_ins) if args.barge_ins > 0 else None
    if args.json:
        print(json.dumps(out))
        return
    for detector, d in out["detectors"].items():
        v = d["voice_to_voice_ms"]
        print(f"converse, pipeline, offline at {url}, turn detector {detector} (silence window {args.silence_ms} ms), "
              f"scripted reply: {d['answered']} answered of {d['turns']} turns from {TURNS} inputs")
        print(f"  voice-to-voice  p50 {v['p50']:.0f} ms  p95 {v['p95']:.0f} ms  (n {v['n']})")
        p50 = d["own_ms"]["p50"]
        print(f"  the studio's own part (minus the end-of-turn wait)  p50 {p50:.0f} ms  p95 {d['own_ms']['p95']:.0f} ms"
              f"  → {'met' if p50 <= GOAL_OWN_MS else 'NOT met'} (goal ≤ {GOAL_OWN_MS:.0f} ms p50)")
        for name, ms in d["stages_median_ms"].items():
            print(f"  {name:<40} median {ms:.0f} ms")
        for e in d["errors"]:
            print(f"  a turn failed: {e}")
    learned, silence = (out["detectors"][k]["voice_to_voice_ms"]["p50"] for k in ("learned", "silence"))
    print(f"learned / silence, voice-to-voice p50: {learned / silence:.2f}x")
    if (b := out["barge_in"]) is not None:
        track = b["track_silent_ms"]
        print(f"  barge-in, live ({track['n']} of {b['asked']} stopped the agent): onset → decided "
              f"p50 {b['decided_ms']['p50']:.0f} ms; onset → the track silent p50 {track['p50']:.0f} ms "
              f"p95 {track['p95']:.0f} ms → {'met' if track['p95'] <= GOAL_STOP_MS else 'NOT met'} "
              f"(goal ≤ {GOAL_STOP_MS:.0f} ms)")


if __name__ == "__main__":
    main()
