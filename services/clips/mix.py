"""The clip's audio track: the narration over the soundtrack, ducked, faded and kept under full scale.

Everything here is numpy on (frames, 2) float32 at 48 kHz (audio.py makes it so) and takes the track's length in
frames, which the video decides:

- `fit_soundtrack` loops a short soundtrack or cuts a long one, then fades it out over the last 0.5 s so the clip
  does not end mid-note. Each repetition starts 30 ms before the previous one ends and the two are crossfaded
  with gains that add to one: no click where a file's end does not meet its start, and the peak never rises
  (the price: each repeat comes 30 ms early, which a loop cut to the bar would feel).
- `trim_narration` cuts a narration at the video's end with a 50 ms fade (fit="trim").
- `duck_gain` is the soundtrack's gain under the narration: from the narration's short-time energy (10 ms
  hops), a soft knee turns its level into how far to duck (0 below, `duck_db` from 10 dB above the knee's foot),
  which is held 150 ms after the voice stops (the gaps between words do not pump), looked 50 ms ahead (the first
  syllable is not masked by a soundtrack still at full level) and smoothed with a 50 ms attack and a 300 ms
  release (one-pole time constants, in dB). A gain curve, not a gate: no clicks where the voice starts.
- `mix` adds them and, when the sum would reach above -1 dBFS, turns the whole track down by one gain computed
  from its peak — the balance the ducking set stays as it is, and the AAC encoder keeps 1 dB of headroom for the
  overshoot its filters add.
"""

from __future__ import annotations

import math

import numpy as np

from services.clips.audio import TRACK_RATE

FADE_OUT_S = 0.5  # the soundtrack's fade at the clip's end
TRIM_FADE_S = 0.05  # the narration's fade where fit="trim" cuts it
LOOP_CROSSFADE_S = 0.03
HOP_S = 0.01  # short-time energy windows
DUCK_ATTACK_S = 0.05
DUCK_RELEASE_S = 0.30
DUCK_HOLD_S = 0.15
DUCK_LOOKAHEAD_S = 0.05
# The knee: hops quieter than the narration's loud level (its 95th percentile) by more than KNEE_FOOT_DB are not
# voice (breaths, room tone, a fade); the duck deepens over the next KNEE_WIDTH_DB and is whole above them.
KNEE_FOOT_DB = 36.0
KNEE_WIDTH_DB = 10.0
SILENCE_DBFS = -70.0  # hops below this are silence, whatever the narration's level
CEILING_DBFS = -1.0


def _fade(n: int) -> np.ndarray:
    """A raised-cosine ramp from 1 to 0 over n frames, as a column to multiply (frames, channels) by."""
    return (0.5 + 0.5 * np.cos(np.linspace(0.0, math.pi, n, dtype=np.float32))).reshape(-1, 1)


def fade_out(x: np.ndarray, seconds: float, rate: int = TRACK_RATE) -> np.ndarray:
    """`x` with its last `seconds` (at most half of it) faded to silence; a new array."""
    n = min(int(round(seconds * rate)), x.shape[0] // 2)
    out = x.copy()
    if n > 0:
        out[-n:] *= _fade(n)
    return out


def fit_soundtrack(x: np.ndarray, frames: int, rate: int = TRACK_RATE) -> np.ndarray:
    """The soundtrack looped or cut to exactly `frames`, its end faded out over FADE_OUT_S."""
    if x.shape[0] == 0:
        return np.zeros((frames, x.shape[1]), dtype=np.float32)
    if x.shape[0] >= frames:
        return fade_out(x[:frames], FADE_OUT_S, rate)
    length = x.shape[0]
    xfade = min(int(LOOP_CROSSFADE_S * rate), length // 4)
    step = length - xfade
    repeats = 1 + -(-(frames - length) // step)  # the last repetition reaches `frames`
    out = np.zeros((step * (repeats - 1) + length, x.shape[1]), dtype=np.float32)
    ramp = 1.0 - np.linspace(0.0, 1.0, xfade, endpoint=False, dtype=np.float32).reshape(-1, 1)  # 1 → 0, linear
    for r in range(repeats):
        piece = x.copy()
        if xfade and r > 0:  # fade in under the previous repetition's fade out: the two gains add to one
            piece[:xfade] *= 1.0 - ramp
        if xfade and r < repeats - 1:
            piece[-xfade:] *= ramp
        out[r * step: r * step + length] += piece
    out = out[:frames]
    return fade_out(out, FADE_OUT_S, rate)


def trim_narration(x: np.ndarray, frames: int, rate: int = TRACK_RATE) -> np.ndarray:
    """The narration cut at `frames` with a TRIM_FADE_S fade (fit="trim"), so it stops without a click."""
    return fade_out(x[:frames], TRIM_FADE_S, rate) if x.shape[0] > frames else x


def _held(depth: np.ndarray, behind: int, ahead: int) -> np.ndarray:
    """Each hop's depth replaced by the deepest within `behind` hops before it and `ahead` hops after it."""
    padded = np.pad(depth, (behind, ahead))
    return np.lib.stride_tricks.sliding_window_view(padded, behind + ahead + 1).max(axis=1)


def duck_gain(narration: np.ndarray, frames: int, duck_db: float, rate: int = TRACK_RATE) -> np.ndarray:
    """The soundtrack's gain for each of `frames` frames (1.0: untouched; 10^(-duck_db/20) under the voice), from
    the narration's short-time energy; see the module's docstring for the shape of the curve."""
    hop = max(1, int(round(HOP_S * rate)))
    hops = -(-frames // hop)
    if duck_db <= 0 or narration.shape[0] == 0 or hops == 0:
        return np.ones(frames, dtype=np.float32)
    power = np.zeros(hops * hop, dtype=np.float64)
    used = min(frames, narration.shape[0])
    power[:used] = np.square(narration[:used], dtype=np.float64).mean(axis=1)
    level = 10.0 * np.log10(power.reshape(hops, hop).mean(axis=1) + 1e-12)
    sounding = level[level > SILENCE_DBFS]
    if sounding.size == 0:
        return np.ones(frames, dtype=np.float32)
    foot = max(float(np.percentile(sounding, 95)) - KNEE_FOOT_DB, SILENCE_DBFS)
    depth = np.clip((level - foot) / KNEE_WIDTH_DB, 0.0, 1.0) * duck_db
    depth = _held(depth, int(round(DUCK_HOLD_S / HOP_S)), int(round(DUCK_LOOKAHEAD_S / HOP_S)))
    attack = 1.0 - math.exp(-HOP_S / DUCK_ATTACK_S)
    release = 1.0 - math.exp(-HOP_S / DUCK_RELEASE_S)
    smooth = np.empty(hops, dtype=np.float64)
    now = 0.0
    for i, want in enumerate(depth.tolist()):  # a few hundred hops a clip: a plain loop is fast enough
        now += (want - now) * (attack if want > now else release)
        smooth[i] = now
    centres = (np.arange(hops) + 0.5) * hop
    gain = np.power(10.0, -smooth / 20.0)
    return np.interp(np.arange(frames), centres, gain).astype(np.float32)


def place(x: np.ndarray | None, frames: int) -> np.ndarray | None:
    """`x` padded with silence (or cut) to exactly `frames`."""
    if x is None or x.shape[0] == frames:
        return x
    if x.shape[0] > frames:
        return x[:frames]
    return np.concatenate([x, np.zeros((frames - x.shape[0], x.shape[1]), dtype=np.float32)])


def mix(narration: np.ndarray | None, soundtrack: np.ndarray | None, frames: int,
        duck_db: float, rate: int = TRACK_RATE) -> tuple[np.ndarray, float]:
    """The track, exactly `frames` long: the narration plus the soundtrack ducked under it, then turned down (the
    second value, in dB, 0.0 when not needed) so its peak is at most CEILING_DBFS."""
    voice = place(narration, frames)
    music = place(soundtrack, frames)
    track = np.zeros((frames, 2), dtype=np.float32)
    if music is not None:
        track += music if voice is None else music * duck_gain(voice, frames, duck_db, rate).reshape(-1, 1)
    if voice is not None:
        track += voice
    peak = float(np.max(np.abs(track))) if frames else 0.0
    ceiling = 10.0 ** (CEILING_DBFS / 20.0)
    if peak <= ceiling:
        return track, 0.0
    track *= ceiling / peak
    return track, 20.0 * math.log10(ceiling / peak)
