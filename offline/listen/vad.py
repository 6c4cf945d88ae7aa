"""Where the speech is in a recording: the Silero VAD (hearing/vad.py) scores each 32 ms window of 16 kHz audio, and
`speech_regions` turns the scores into regions of speech with start and end seconds.

Silence, for the engine, is audio where no window reaches SPEECH_PROB: a file or a stream like that has no speech
region, and its transcript is empty (a client says "no speech found").
"""

from __future__ import annotations

import numpy as np

from hearing.vad import SPEECH_PROB, WINDOW_S

SILENCE_PROB = 0.35  # inside a region, windows below this count towards its end (hysteresis)
MIN_SILENCE_S = 0.5  # a region ends after this much silence
MIN_SPEECH_S = 0.25  # shorter regions are clicks, breaths or noise: dropped
PAD_S = 0.2  # each region is widened by this much on both sides, so word edges are not cut
MAX_REGION_S = 8.0  # longer regions are cut at their quietest moment: each is one utterance of the recognizer


def speech_regions(probs: np.ndarray, duration_s: float) -> list[tuple[float, float]]:
    """Regions of speech as (start, end) seconds, padded, merged where they touch, clamped to the audio and cut
    to at most MAX_REGION_S each."""
    min_silence = int(round(MIN_SILENCE_S / WINDOW_S))
    raw: list[tuple[int, int]] = []
    start: int | None = None
    quiet = 0
    for i, p in enumerate(probs):
        if start is None:
            if p >= SPEECH_PROB:
                start, quiet = i, 0
            continue
        quiet = quiet + 1 if p < SILENCE_PROB else 0
        if quiet >= min_silence:
            raw.append((start, i - quiet + 1))
            start = None
    if start is not None:
        raw.append((start, len(probs) - quiet))
    regions: list[tuple[float, float]] = []
    for a, b in raw:
        if (b - a) * WINDOW_S < MIN_SPEECH_S:
            continue
        lo, hi = max(0.0, a * WINDOW_S - PAD_S), min(duration_s, b * WINDOW_S + PAD_S)
        if regions and lo <= regions[-1][1]:
            regions[-1] = (regions[-1][0], hi)
        else:
            regions.append((lo, hi))
    return [piece for region in regions for piece in _cut(region, probs)]


def _cut(region: tuple[float, float], probs: np.ndarray) -> list[tuple[float, float]]:
    """`region` in pieces of at most MAX_REGION_S, each cut where the speech is least likely in the second
    half of the piece's span (a pause between words, most likely)."""
    pieces = []
    start, end = region
    while end - start > MAX_REGION_S:
        lo, hi = int((start + MAX_REGION_S / 2) / WINDOW_S), int((start + MAX_REGION_S) / WINDOW_S)
        cut = round((lo + int(np.argmin(probs[lo:hi]))) * WINDOW_S, 3) if hi > lo else start + MAX_REGION_S
        pieces.append((start, cut))
        start = cut
    return pieces + [(start, end)]
