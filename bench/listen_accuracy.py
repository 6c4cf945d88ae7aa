"""Listen: the offline engine's recognizers side by side — word error rate per kind of speech, speed, final latency.

Two engines run at once, one per recognizer (Whisper tiny.en, the default, and pocketsphinx: OMNI_ENGINE_RECOGNIZER),
and hear the same audio, in turn, through the studio's listen client:
- **the engine's own voice**: its Piper voice says 12 sentences (seeded: the same audio every run);
- **read human speech**: the LibriVox lines (Jane Austen, read by a person) that Debian's `pocketsphinx-testdata`
  package ships with their transcripts (BSD-2; `.ci/run` installs it). Skipped, and said, when it is not installed.
No package on this machine ships *spontaneous* human speech with transcripts, so that kind is not measured here.

Figures per recognizer and set: pooled WER (all word errors over all reference words, after services/listen/wer.py's
stated normalisation), with the word count; the file route's RTF (request time over audio time); and for the
engine's sentences streamed at real time (`/v1/realtime`), each followed by 0.5 s of silence as a microphone sends
it before a turn is over, the first partial (from the first audio sent) and the final text (from the last audio
sent: the end of the turn) as medians, with n.

    python bench/listen_accuracy.py [--no-stream] [--recognizers whisper,pocketsphinx]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
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
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")


def synthesize(url: str) -> list[bytes]:
    import httpx

    out = []
    for i, text in enumerate(SENTENCES):
        r = httpx.post(f"{url}/v1/audio/speech", json={"input": text, "voice": "joe", "seed": i}, timeout=120,
                       trust_env=False)
        r.raise_for_status()
        out.append(r.content)
    return out


def read_speech() -> list[tuple[str, bytes]]:
    """(transcript, WAV) of each LibriVox line, or [] when the package is not installed."""
    listing = LIBRIVOX / "transcription"
    if not listing.is_file():
        return []
    out = []
    for line in listing.read_text(encoding="utf-8").splitlines():
        if "(" not in line:
            continue
        text, _, name = line.rpartition("(")
        wav = LIBRIVOX / f"{name.strip(' )')}.wav"
        if wav.is_file():
            out.append((text.strip(), wav.read_bytes()))
    return out


async def measure(url: str, refs: list[str], wavs: list[bytes], stream: bool) -> dict:
    from protocol.listen import LISTEN_BYTES_PER_S
    from services.listen import OmniListen, load_audio, wer_counts

    listener = OmniListen(url)
    audios = [load_audio(w, f"clip {i}") for i, w in enumerate(wavs)]
    files = [await listener.transcribe_file(a) for a in audios]
    counts = [wer_counts(r, t.text) for r, t in zip(refs, files, strict=True)]
    audio_s = sum(a.seconds for a in audios)
    words = sum(c.reference_words for c in counts)
    figures = {"clips": len(audios), "words": words, "audio_s": round(audio_s, 2),
               "file_wer": round(sum(c.errors for c in counts) / words, 4),
               "file_rtf": round(sum(t.elapsed_s for t in files) / audio_s, 4)}
    if stream:  # each clip and then half a second of silence, as a microphone sends it before the turn is over
        pause = bytes(int(0.5 * LISTEN_BYTES_PER_S) // 2 * 2)
        streams = [await listener.stream(dataclasses.replace(a, pcm=a.pcm + pause)) for a in audios]
        counts = [wer_counts(r, t.text) for r, t in zip(refs, streams, strict=True)]
        figures |= {
            "stream_wer": round(sum(c.errors for c in counts) / words, 4),
            "first_partial_ms_median": round(statistics.median(t.first_partial_ms or 0 for t in streams), 1),
            "final_ms_median": round(statistics.median(t.final_ms or 0 for t in streams), 1),
            "final_ms_max": round(max(t.final_ms or 0 for t in streams), 1),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-stream", action="store_true", help="the file route only (the stream takes real time)")
    parser.add_argument("--recognizers", default="whisper,pocketsphinx")
    args = parser.parse_args()
    from offline.launch import start_engine

    recognizers = [r.strip() for r in args.recognizers.split(",") if r.strip()]
    engines = {r: start_engine(env={"OMNI_ENGINE_RECOGNIZER": r}) for r in recognizers}
    try:
        sets = {"engine voice": (list(SENTENCES), synthesize(next(iter(engines.values())).url))}
        read = read_speech()
        if read:
            sets["read human speech (LibriVox)"] = ([t for t, _ in read], [w for _, w in read])
        else:
            print(f"read human speech: skipped ({LIBRIVOX} is missing: apt-get install pocketsphinx-testdata)")
        rows = []
        for name, (refs, wavs) in sets.items():
            for recognizer, engine in engines.items():  # in turn, on the same audio
                figures = asyncio.run(measure(engine.url, refs, wavs, not args.no_stream and name == "engine voice"))
                rows.append({"set": name, "recognizer": recognizer, **figures})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        for engine in engines.values():
            engine.stop()
    print()
    for row in rows:
        stream = (f", stream WER {row['stream_wer']:.1%}, first partial {row['first_partial_ms_median']:.0f} ms, final "
                  f"{row['final_ms_median']:.0f} ms (median, max {row['final_ms_max']:.0f})") if "stream_wer" in row else ""
        print(f"{row['set']:30} {row['recognizer']:13} WER {row['file_wer']:6.1%} of {row['words']} words in "
              f"{row['clips']} clips ({row['audio_s']:.0f} s), RTF {row['file_rtf']:.3f}{stream}")


if __name__ == "__main__":
    main()
