"""Turn-taking: the learned end-of-turn detector against the 500 ms silence window, side by side in one run.

Two kinds of turn in the offline engine's own voice (seeded):
- **complete**: six whole sentences;
- **paused**: six sentences that stop after a word that cannot end them ("I was wondering if"), then 800 ms of
  silence, then the rest ("you could help me with my booking."). The two halves are spoken apart and joined, so the
  first half ends with the voice's own sentence-final fall — harder for a detector that hears intonation than a
  person pausing mid-sentence would be.
Each turn is one recorded input of a pipeline conversation on the offline engine (services/converse/pipeline.py, as
`converse` holds it: at real time, a scripted reply, the offline voice), once per detector, detectors in turn per
input so drift hits both alike. A paused input the detector cut in two is a **false cut-off** (the agent answered
half a sentence); a complete input cut in two is one too.

Reported per detector: false cut-offs (n of 6 paused, n of 6 complete), voice-to-voice p50/p95 over the complete
turns (speech end → first agent audio received; nearest rank, services/stats.py) with n, and the end-of-turn
wait (speech end → turn decided) p50 with n; then learned / silence of voice-to-voice p50. Goals (#34): learned
cuts at most 1 of 6 paused turns where silence cuts most, voice-to-voice p50 ≤ 0.85× the silence detector's.

    python bench/turn_taking.py [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PAUSE_S = 0.8
PAUSED = (
    ("I was wondering if", "you could help me with my booking."),
    ("I would like to book a table for", "four people tonight."),
    ("My name is", "Anna Smith, and I am calling about my order."),
    ("Can you tell me about the", "opening hours on Sunday?"),
    ("We need to leave at", "seven in the morning."),
    ("Could you send the report to", "my office by Friday?"),
)
COMPLETE = (
    "What time do you open on Saturday?",
    "Thank you very much for your help.",
    "I would like to book a table for four people tonight.",
    "Please call me back when you get home.",
    "The meeting has been moved to Thursday afternoon.",
    "Can you send me the report before the end of the day?",
)
SCRIPT = "default => All right."
DETECTORS = ("learned", "silence")


def speak(url: str, text: str, seed: int) -> bytes:
    import httpx

    from services.listen import load_audio

    r = httpx.post(f"{url}/v1/audio/speech", json={"input": text, "voice": "joe", "seed": seed}, timeout=120,
                   trust_env=False)
    r.raise_for_status()
    return load_audio(r.content, text).pcm


async def hold(url: str, detector: str, pcm: bytes, name: str) -> list:
    from services.converse.setup import Setup
    from services.listen import ListenAudio

    setup = Setup(listen=url, speak=url, script=SCRIPT, script_name="bench", turn_detector=detector).check()
    conv = await setup.runner().run([ListenAudio(name=name, data=b"", pcm=pcm)])
    return conv.turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from offline.launch import start_engine
    from services.stats import percentile

    engine = start_engine()
    try:
        inputs = [("paused", h + " … " + t, speak(engine.url, h, i) + bytes(int(PAUSE_S * 16_000) * 2)
                   + speak(engine.url, t, 100 + i)) for i, (h, t) in enumerate(PAUSED)]
        inputs += [("complete", text, speak(engine.url, text, 200 + i)) for i, text in enumerate(COMPLETE)]
        rows: dict[str, list[dict]] = {d: [] for d in DETECTORS}
        for kind, text, pcm in inputs:
            for detector in DETECTORS:  # in turn, on the same audio
                turns = asyncio.run(hold(engine.url, detector, pcm, text))
                rows[detector].append({"kind": kind, "text": text, "turns": len(turns),
                                       "v2v_ms": turns[-1].voice_to_voice_ms if turns else None,
                                       "eot_wait_ms": [t.eot_wait_ms for t in turns],
                                       "rules": [t.eot_rule for t in turns],
                                       "p": [None if t.eot_probability is None else round(t.eot_probability, 3)
                                             for t in turns]})
                print(json.dumps({"detector": detector, **rows[detector][-1]}), file=sys.stderr, flush=True)
    finally:
        engine.stop()
    summary = {}
    for detector, done in rows.items():
        complete = [r for r in done if r["kind"] == "complete"]
        v2v = [r["v2v_ms"] for r in complete if r["turns"] == 1 and r["v2v_ms"] is not None]
        waits = [w for r in complete if r["turns"] == 1 for w in r["eot_wait_ms"] if w is not None]
        summary[detector] = {
            "paused_cut": sum(r["turns"] > 1 for r in done if r["kind"] == "paused"), "paused_n": len(PAUSED),
            "complete_cut": sum(r["turns"] > 1 for r in complete), "complete_n": len(COMPLETE),
            "v2v_p50_ms": percentile(v2v, 50), "v2v_p95_ms": percentile(v2v, 95), "v2v_n": len(v2v),
            "eot_wait_p50_ms": percentile(waits, 50), "eot_wait_n": len(waits)}
    learned, silence = summary["learned"], summary["silence"]
    ratio = (learned["v2v_p50_ms"] / silence["v2v_p50_ms"]) if learned["v2v_p50_ms"] and silence["v2v_p50_ms"] else None
    if args.json:
        print(json.dumps({"summary": summary, "learned_over_silence_v2v_p50": ratio, "rows": rows}))
        return
    for detector, s in summary.items():
        print(f"{detector:8} false cut-offs: {s['paused_cut']} of {s['paused_n']} paused, {s['complete_cut']} of "
              f"{s['complete_n']} complete; voice-to-voice p50 {s['v2v_p50_ms']:.0f} ms, p95 {s['v2v_p95_ms']:.0f} ms "
              f"(n = {s['v2v_n']}); end-of-turn wait p50 {s['eot_wait_p50_ms']:.0f} ms (n = {s['eot_wait_n']})")
    if ratio is not None:
        print(f"learned / silence, voice-to-voice p50: {ratio:.2f}x (goal ≤ 0.85x)")


if __name__ == "__main__":
    main()
