"""Honest previews of Qwen3-TTS's style instructions, voice descriptions and voice clones, on the Piper voice.

The offline engine has no Qwen3-TTS: it speaks with one Piper voice (offline.voice). So that the studio's
style, design and cloning flows can be tried end to end, the engine turns what a request asks for into real,
audible signal processing of that voice — never noise, never a random choice — and says so (a REST answer
carries the `X-Offline-Preview` header; the engine's `/v1/models` card for the voice says it too):

- **rate**: Piper's `length_scale` (phoneme durations), on top of the request's `speed`;
- **pitch**: a resampling shift (soxr) whose duration change is undone by the same factor on `length_scale`,
  so pitch moves and tempo stays;
- **pauses**: silence added between the sentences Piper makes;
- **level**: a gain below the engine's usual one (nothing is ever made louder than usual).

A style request is synthesized deterministically (Piper's noise scales at 0): the same text with the same
instructions, description or reference gives the same bytes every time. A plain request keeps Piper's usual
natural variation.

Words → effects (`instructions` for CustomVoice and VoiceDesign; case and punctuation do not matter; each row
counts once however many of its words appear; a word right after "not", "no", "never", "without" or "don't"
is ignored (also "not too slow"); "very"/"extremely"/"really" before a word makes its row count one and a half times):

| words | rate (× duration) | pitch (semitones) | pause (s) | level |
|---|---|---|---|---|
| slow, slowly, slower, unhurried, leisurely, measured | × 1.35 | | | |
| fast, faster, quick, quickly, rapid, rapidly, hurried, brisk | × 0.75 | | | |
| deep, deeper, low, lower, bass, baritone, husky | | −4 | | |
| high, higher, squeaky, bright, shrill | | +4 | | |
| warm, warmly, rich | × 1.08 | −1 | +0.10 | |
| calm, calmly, relaxed, soothing, gentle, gently, serene | × 1.15 | | +0.25 | × 0.8 |
| excited, energetic, cheerful, enthusiastic, happy, lively, upbeat | × 0.85 | +2 | | |
| whisper, whispering, whispered, quiet, quietly, soft, softly, hushed | × 1.10 | | | × 0.4 |
| smiling, smile, smiles, friendly, playful | × 0.95 | +1 | | |
| sad, tired, sleepy, gloomy, melancholy, weary | × 1.20 | −2 | +0.20 | × 0.85 |
| angry, urgent, shouting, stern, furious | × 0.85 | +1 | | |
| dramatic, pauses, pausing, thoughtful, deliberate | × 1.05 | | +0.40 | |
| man, male, masculine, gentleman | | −3 | | |
| woman, female, feminine, lady, girl | | +5 | | |
| child, kid, boy, young, youthful | × 0.95 | +3 | | |
| old, elderly, aged, grandfather, grandmother | × 1.15 | −1 | | |

Rates multiply, semitones and pauses add, levels multiply; the sums are then held to a rate of 0.5–2.0, a
pitch of −8…+8 semitones, pauses up to 1 s and a level of 0.25–1.

Preset speakers (CustomVoice): Qwen3-TTS CustomVoice names nine speakers; the engine accepts each and renders it
as the Piper voice at its own fixed pitch and rate, so that two speakers never sound alike (the same table gives
the same speaker every time; style `instructions` then apply on top, their rates multiplying and semitones adding):

| speaker | rate (× duration) | pitch (semitones) |
|---|---|---|
| vivian | × 0.95 | +5 |
| serena | × 1.10 | +4 |
| uncle_fu | × 1.20 | −4 |
| dylan | × 0.90 | −1 |
| eric | × 1.05 | −2 |
| ryan | × 0.85 | 0 |
| aiden | × 1.00 | +2 |
| ono_anna | × 1.00 | +7 |
| sohee | × 1.12 | +6 |

`joe` (the Piper voice itself) and `default` are the voice unchanged. Every Qwen3-TTS language is accepted and
spoken with this one English voice (offline.voice.LANGUAGES): the text is read as English would be.

Cloning (Base): the reference recording's median pitch is measured (a YIN-style tracker over its voiced
frames, `median_f0`) and the Piper voice is shifted to it (at most an octave either way). A speaker embedding
cannot be heard offline: each distinct embedding gets its own fixed pitch from its numbers (its mean and
spread), so different embeddings at least sound different, and the same one always sounds the same.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

RATE_RANGE = (0.5, 2.0)
SEMITONE_RANGE = (-8.0, 8.0)
MAX_PAUSE_S = 1.0
LEVEL_RANGE = (0.25, 1.0)
MAX_CLONE_OCTAVES = 1.0  # a reference shifts the voice by at most this much either way

_NEGATIONS = frozenset({"not", "no", "never", "without", "don't", "dont", "nor"})
_INTENSIFIERS = frozenset({"very", "extremely", "really", "super", "quite"})
_INTENSITY = 1.5
_DEGREES = frozenset({"too", "so", "very", "overly", "that"})


@dataclass(frozen=True)
class _Effect:
    words: frozenset[str]
    rate: float = 1.0
    semitones: float = 0.0
    pause_s: float = 0.0
    level: float = 1.0


def _effect(words: str, **kw: float) -> _Effect:
    return _Effect(frozenset(words.split()), **kw)


# The table in the module docstring, in the same order.
EFFECTS: tuple[_Effect, ...] = (
    _effect("slow slowly slower unhurried leisurely measured", rate=1.35),
    _effect("fast faster quick quickly rapid rapidly hurried brisk", rate=0.75),
    _effect("deep deeper low lower bass baritone husky", semitones=-4),
    _effect("high higher squeaky bright shrill", semitones=4),
    _effect("warm warmly rich", rate=1.08, semitones=-1, pause_s=0.10),
    _effect("calm calmly relaxed soothing gentle gently serene", rate=1.15, pause_s=0.25, level=0.8),
    _effect("excited energetic cheerful enthusiastic happy lively upbeat", rate=0.85, semitones=2),
    _effect("whisper whispering whispered quiet quietly soft softly hushed", rate=1.10, level=0.4),
    _effect("smiling smile smiles friendly playful", rate=0.95, semitones=1),
    _effect("sad tired sleepy gloomy melancholy weary", rate=1.20, semitones=-2, pause_s=0.20, level=0.85),
    _effect("angry urgent shouting stern furious", rate=0.85, semitones=1),
    _effect("dramatic pauses pausing thoughtful deliberate", rate=1.05, pause_s=0.40),
    _effect("man male masculine gentleman", semitones=-3),
    _effect("woman female feminine lady girl", semitones=5),
    _effect("child kid boy young youthful", rate=0.95, semitones=3),
    _effect("old elderly aged grandfather grandmother", rate=1.15, semitones=-1),
)


@dataclass(frozen=True)
class Style:
    """How the Piper voice is changed for one request; the default changes nothing."""

    rate: float = 1.0  # × phoneme duration (> 1 slower)
    semitones: float = 0.0  # pitch shift
    pause_s: float = 0.0  # silence added between sentences
    level: float = 1.0  # × the engine's usual gain
    deterministic: bool = False  # Piper's noise off: same request, same bytes
    source: str = ""  # what the style came from, for the preview label

    @property
    def pitch_factor(self) -> float:
        return 2.0 ** (self.semitones / 12.0)

    def label(self) -> str:
        """A one-line ASCII description of what was done, e.g. for the X-Offline-Preview header."""
        parts = []
        if self.rate != 1.0:
            parts.append(f"rate x{1 / self.rate:.2f}")
        if self.semitones:
            parts.append(f"pitch {self.semitones:+.1f} semitones")
        if self.pause_s:
            parts.append(f"pauses +{self.pause_s:.2f} s")
        if self.level != 1.0:
            parts.append(f"level x{self.level:.2f}")
        done = ", ".join(parts) or "no audible change"
        source = f" from {self.source}" if self.source else ""
        return f"offline preview{source} on the Piper voice: {done}"


def _clamp(value: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, value))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower())


def _negated(words: list[str], i: int) -> bool:
    """`words[i]` follows a negation: "not slow", "not too slow"."""
    if i >= 1 and words[i - 1] in _NEGATIONS:
        return True
    return i >= 2 and words[i - 1] in _DEGREES and words[i - 2] in _NEGATIONS


def style_for_instructions(instructions: str | None, *, source: str = "instructions") -> Style:
    """The style the words of `instructions` ask for (see the table above); deterministic synthesis."""
    words = _words(instructions or "")
    strength: dict[int, float] = {}
    for i, word in enumerate(words):
        if _negated(words, i):
            continue
        for index, effect in enumerate(EFFECTS):
            if word in effect.words:
                weight = _INTENSITY if i > 0 and words[i - 1] in _INTENSIFIERS else 1.0
                strength[index] = max(strength.get(index, 0.0), weight)
    rate, semitones, pause, level = 1.0, 0.0, 0.0, 1.0
    for index in sorted(strength):  # a fixed order: the same words always give the same numbers
        effect, weight = EFFECTS[index], strength[index]
        rate *= effect.rate**weight
        semitones += effect.semitones * weight
        pause += effect.pause_s * weight
        level *= effect.level**weight
    return Style(
        rate=round(_clamp(rate, *RATE_RANGE), 4),
        semitones=round(_clamp(semitones, *SEMITONE_RANGE), 3),
        pause_s=round(min(pause, MAX_PAUSE_S), 3),
        level=round(_clamp(level, *LEVEL_RANGE), 4),
        deterministic=True,
        source=source,
    )


# The speaker table in the module docstring: name -> (rate, semitones).
SPEAKERS: dict[str, tuple[float, float]] = {
    "vivian": (0.95, 5.0),
    "serena": (1.10, 4.0),
    "uncle_fu": (1.20, -4.0),
    "dylan": (0.90, -1.0),
    "eric": (1.05, -2.0),
    "ryan": (0.85, 0.0),
    "aiden": (1.00, 2.0),
    "ono_anna": (1.00, 7.0),
    "sohee": (1.12, 6.0),
}


def style_for_speaker(name: str) -> Style | None:
    """The Piper rendering of a Qwen3-TTS preset speaker (lower-case name); None for any other voice."""
    found = SPEAKERS.get(name)
    if found is None:
        return None
    rate, semitones = found
    # Not deterministic: a preset speaker keeps Piper's natural variation, as the plain voice does.
    return Style(rate=rate, semitones=semitones, source=f"speaker '{name}'")


def combined(speaker: Style, style: Style) -> Style:
    """`style` (from instructions) spoken by `speaker`: rates and levels multiply, semitones and pauses add."""
    return Style(
        rate=round(_clamp(speaker.rate * style.rate, *RATE_RANGE), 4),
        semitones=round(_clamp(speaker.semitones + style.semitones, *SEMITONE_RANGE), 3),
        pause_s=round(min(speaker.pause_s + style.pause_s, MAX_PAUSE_S), 3),
        level=round(_clamp(speaker.level * style.level, *LEVEL_RANGE), 4),
        deterministic=speaker.deterministic or style.deterministic,
        source=f"{speaker.source} with {style.source}" if style.source else speaker.source,
    )


def style_for_pitch(target_f0: float, voice_f0: float, *, source: str) -> Style:
    """Shift a voice whose median pitch is `voice_f0` to `target_f0` (Hz), at most an octave either way."""
    semitones = 12.0 * math.log2(target_f0 / voice_f0)
    limit = 12.0 * MAX_CLONE_OCTAVES
    return Style(semitones=round(_clamp(semitones, -limit, limit), 3), deterministic=True, source=source)


def style_for_embedding(embedding: list[float]) -> Style:
    """A fixed pitch for a speaker embedding (it cannot be heard offline): from its mean and spread."""
    values = np.asarray(embedding, dtype=np.float64)
    mean, spread = float(values.mean()), float(values.std())
    # A smooth function of the numbers, in −6…+6 semitones: close embeddings sound close.
    semitones = 6.0 * math.tanh(8.0 * mean) * 0.5 + 6.0 * math.tanh(spread - 1.0) * 0.5
    return Style(semitones=round(semitones, 3), deterministic=True, source="speaker_embedding")


# ---------------------------------------------------------------------------------------------------------
# Pitch: a YIN-style tracker (de Cheveigné & Kawahara 2002) over voiced frames, in numpy
F0_MIN_HZ = 60.0
F0_MAX_HZ = 500.0
_ANALYSIS_RATE = 16_000
_FRAME_S = 0.040
_HOP_S = 0.010
_YIN_THRESHOLD = 0.15
_VOICED_MAX_DIP = 0.35  # a frame whose best dip stays above this is unvoiced
_SILENCE_DB = -35.0  # frames this far below the loudest frame are not analysed


def frame_pitches(samples: np.ndarray, rate: int) -> np.ndarray:
    """The pitch (Hz) of each voiced 40 ms frame (10 ms hop) of mono float `samples` at `rate`."""
    x = np.asarray(samples, dtype=np.float64)
    if rate != _ANALYSIS_RATE and x.size:
        import soxr

        x = soxr.resample(x.astype(np.float32), rate, _ANALYSIS_RATE).astype(np.float64)
    width = int(_FRAME_S * _ANALYSIS_RATE)
    hop = int(_HOP_S * _ANALYSIS_RATE)
    if x.size < width:
        return np.zeros(0)
    x = x - x.mean()
    count = 1 + (x.size - width) // hop
    frames = np.lib.stride_tricks.sliding_window_view(x, width)[::hop][:count]
    energy = np.sqrt(np.mean(frames**2, axis=1))
    loudest = float(energy.max())
    if loudest <= 1e-6:
        return np.zeros(0)
    frames = frames[energy >= loudest * 10 ** (_SILENCE_DB / 20)]
    if not len(frames):
        return np.zeros(0)
    max_lag = int(_ANALYSIS_RATE / F0_MIN_HZ)
    min_lag = int(_ANALYSIS_RATE / F0_MAX_HZ)
    window = width - max_lag  # the part of each frame compared with its shifted self
    # Difference function d(τ) = Σ (x_j − x_{j+τ})², through autocorrelation by FFT.
    n = 1 << (2 * width - 1).bit_length()
    spectrum = np.fft.rfft(frames, n)
    acf = np.fft.irfft(spectrum * np.conj(np.fft.rfft(frames[:, :window], n)), n)[:, : max_lag + 1]
    squares = np.cumsum(np.concatenate([np.zeros((len(frames), 1)), frames**2], axis=1), axis=1)
    energy_lag = squares[:, window : window + max_lag + 1] - squares[:, : max_lag + 1]
    diff = squares[:, window : window + 1] + energy_lag - 2 * acf
    diff[:, 0] = 0.0
    # Cumulative mean normalised difference.
    lags = np.arange(1, max_lag + 1)
    running = np.cumsum(diff[:, 1:], axis=1) / lags
    cmnd = np.ones_like(diff)
    cmnd[:, 1:] = diff[:, 1:] / np.where(running > 0, running, 1.0)
    pitches = []
    for row in cmnd:
        search = row[min_lag : max_lag + 1]
        below = np.flatnonzero(search < _YIN_THRESHOLD)
        if below.size:
            i = below[0]
            while i + 1 < search.size and search[i + 1] < search[i]:  # down to the bottom of that dip
                i += 1
        else:
            i = int(np.argmin(search))
            if search[i] > _VOICED_MAX_DIP:
                continue
        lag = i + min_lag
        if 0 < lag < max_lag:  # parabolic interpolation around the dip
            a, b, c = row[lag - 1], row[lag], row[lag + 1]
            denom = a - 2 * b + c
            lag = lag + (0.5 * (a - c) / denom if denom > 0 else 0.0)
        pitches.append(_ANALYSIS_RATE / lag)
    return np.asarray(pitches)


def median_f0(samples: np.ndarray, rate: int) -> float | None:
    """The median pitch (Hz) over the voiced frames, or None when fewer than 10 frames (0.1 s) are voiced."""
    pitches = frame_pitches(samples, rate)
    if pitches.size < 10:
        return None
    return float(np.median(pitches))
