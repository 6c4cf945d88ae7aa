"""Listen: the offline recognizer's word error rate and speed, on the engine's own synthetic speech.

The engine's Piper voice says each sentence (seeded, so the audio is the same every run); the studio's listen
client sends it back as a file (`POST /v1/audio/transcriptions`) and as a real-time paced stream (`/v1/realtime`).
Figures: pooled WER (all word errors over all reference words, after services/listen/wer.py's normalisation),
the file route's RTF (request time over audio time), and the stream's first partial (from the first audio sent)
and final text (from the last audio sent) as medians. The sample size is printed with them.

    python bench/listen_accuracy.py [--url URL] [--no-stream]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Please call me back when you get home tonight.",
    "We will meet at the station at seven o'clock.",
    "The weather is cold and the wind is strong today.",
    "She bought three apples and a loaf of bread.",
    "Turn left at the next corner and walk for two minutes.",
    "My brother works in a hospital near the river.",
    "Open the window, it is too warm in this room.",
    "The children played in the garden after school.",
    "I would like a cup of coffee with milk please.",
    "The meeting has been moved to Thursday afternoon.",
    "Can you send me the report before the end of the day?",
)


def synthesize(url: str) -> list[bytes]:
    import httpx

    out = []
    for i, text in enumerate(SENTENCES):
        r = httpx.post(f"{url}/v1/audio/speech", json={"input": text, "voice": "joe", "seed": i}, timeout=120,
                       trust_env=False)
        r.raise_for_status()
        out.append(r.content)
    return out


async def measure(url: str, wavs: list[bytes], stream: bool) -> dict:
    import jiwer

    from services.listen import OmniListen, load_audio, normalise

    listener = OmniListen(url)
    refs = [normalise(s) for s in SENTENCES]
    audios = [load_audio(w, f"sentence {i}") for i, w in enumerate(wavs)]
    files = [await listener.transcribe_file(a) for a in audios]
    audio_s = sum(a.seconds for a in audios)
    figures = {
        "sentences": len(SENTENCES), "words": sum(len(r.split()) for r in refs), "audio_s": round(audio_s, 2),
        "file_wer": round(jiwer.wer(refs, [normalise(t.text) for t in files]), 4),
        "file_rtf": round(sum(t.elapsed_s for t in files) / audio_s, 4),
    }
    if stream:
        streams = [await listener.stream(a) for a in audios]
        figures |= {
            "stream_wer": round(jiwer.wer(refs, [normalise(t.text) for t in streams]), 4),
            "first_partial_ms_median": round(statistics.median(t.first_partial_ms or 0 for t in streams), 1),
            "final_ms_median": round(statistics.median(t.final_ms or 0 for t in streams), 1),
            "final_ms_max": round(max(t.final_ms or 0 for t in streams), 1),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running engine or vLLM server (default: start the offline engine)")
    parser.add_argument("--no-stream", action="store_true", help="the file route only (the stream takes real time)")
    args = parser.parse_args()
    engine = None
    if args.url is None:
        from offline.launch import start_engine

        engine = start_engine()
    url = args.url or engine.url  # type: ignore[union-attr]
    try:
        figures = asyncio.run(measure(url, synthesize(url), not args.no_stream))
    finally:
        if engine is not None:
            engine.stop()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
