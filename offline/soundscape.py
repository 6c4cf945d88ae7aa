"""The offline engine's labelled sound preview: a procedural 44.1 kHz stereo sound made from the prompt's words.

Not Stable Audio Open, and never called it: what a creative asked for, recognisably, so the studio's sound page,
history and playback can be used without a GPU. The prompt's words choose layers (`plan`):
- textures, each filtered noise shaped in the frequency domain: rain (hiss and droplets), wind (gusts and a
  whistle), ocean (swelling waves), water (a gurgling stream), fire (crackles over a low roar), thunder (distant
  rumbles), birds (chirps), city (traffic rumble and murmur);
- rhythm (drum, beat, techno, …): kick, snare and hats on a 16-step grid at a tempo ("128 bpm" in the prompt,
  else the genre's, else one from the seed), with a bass on the chord roots;
- an instrument (piano, bell, synth, pluck, strings) playing a chord progression in a key the seed picks, minor
  for sad/dark words and major for happy/bright ones;
- otherwise a gentle pad. Words after "no"/"without"/"not" and words of the negative prompt are left out.
The request's knobs change the sound as they would a model's: fewer steps leave more residual noise, more
guidance drives it harder, `speed` plays it faster at the same pitch. Everything comes from one generator seeded
by (prompt, negative prompt, seed), so the same request makes the same bytes. numpy only: the noise is shaped
with one inverse FFT per channel, notes are rendered once per pitch and copied into place.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass

import numpy as np

from offline.guards import Cancelled
from protocol.limits import SOUND_SAMPLE_RATE

SR = SOUND_SAMPLE_RATE
TEXTURES: dict[str, tuple[str, ...]] = {
    "rain": ("rain", "rainy", "raining", "drizzle", "downpour", "rainfall", "raindrops"),
    "wind": ("wind", "windy", "breeze", "gust", "gusts", "gale", "howling", "blizzard"),
    "ocean": ("ocean", "sea", "waves", "wave", "surf", "beach", "shore", "tide", "seaside"),
    "water": ("water", "stream", "river", "brook", "creek", "waterfall", "fountain", "babbling", "dripping"),
    "fire": ("fire", "crackle", "crackling", "campfire", "fireplace", "bonfire", "flames", "embers"),
    "thunder": ("thunder", "thunderstorm", "storm", "lightning", "rumble"),
    "birds": ("bird", "birds", "birdsong", "chirp", "chirping", "tweet", "songbird", "forest", "dawn"),
    "city": ("city", "traffic", "street", "crowd", "cafe", "market", "urban", "people", "chatter"),
}
RHYTHM = ("drum", "drums", "beat", "beats", "percussion", "kick", "snare", "groove", "techno", "house", "hip",
          "hiphop", "trap", "dnb", "jungle", "breakbeat", "rock", "funk", "disco", "edm", "dance", "lofi", "bpm",
          "loop", "drumming")
GENRE_TEMPO = {"lofi": 80, "hip": 90, "hiphop": 90, "trap": 140, "house": 124, "disco": 120, "techno": 130,
               "edm": 128, "dance": 124, "dnb": 172, "jungle": 172, "rock": 112, "funk": 104}
INSTRUMENTS: dict[str, tuple[str, ...]] = {
    "piano": ("piano", "keys", "rhodes", "keyboard"),
    "bell": ("bell", "bells", "chime", "chimes", "glockenspiel", "music box", "celesta", "xylophone", "marimba"),
    "synth": ("synth", "synthesizer", "synths", "arp", "arpeggio", "electronic", "chiptune", "8-bit", "retro"),
    "pluck": ("guitar", "harp", "pluck", "plucked", "ukulele", "banjo", "acoustic", "lute"),
    "strings": ("strings", "violin", "cello", "orchestra", "orchestral", "choir", "cinematic", "epic"),
}
PAD_WORDS = ("pad", "ambient", "drone", "calm", "meditation", "relaxing", "soft")
MINOR = ("sad", "dark", "melancholic", "melancholy", "minor", "eerie", "horror", "tense", "ominous", "somber",
         "haunting", "spooky", "moody", "lonely", "mysterious")
MAJOR = ("happy", "bright", "uplifting", "cheerful", "major", "sunny", "joyful", "upbeat", "playful", "hopeful")
NEGATIONS = ("no", "without", "not", "non", "minus")
NOTE_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
MAJOR_STEPS, MINOR_STEPS = (0, 2, 4, 5, 7, 9, 11), (0, 2, 3, 5, 7, 8, 10)
PROGRESSIONS = {False: (0, 4, 5, 3), True: (0, 5, 2, 6)}  # I-V-vi-IV; i-VI-III-VII (scale degrees)


@dataclass(frozen=True)
class Scene:
    """What the prompt asked for, as the preview will play it."""

    textures: tuple[str, ...]
    tempo: float | None  # beats per minute when there are drums
    instrument: str | None
    pad: bool
    root: int  # MIDI note of the key
    minor: bool

    def label(self, seed: int) -> str:
        """One ASCII line for the X-Offline-Preview header: what this is, and what it is not."""
        parts = list(self.textures)
        if self.tempo is not None:
            parts.append(f"drums at {self.tempo:g} BPM")
        key = f"{NOTE_NAMES[self.root % 12]} {'minor' if self.minor else 'major'}"
        if self.instrument:
            parts.append(f"{self.instrument} in {key}")
        if self.pad:
            parts.append(f"pad in {key}")
        return (f"offline preview, not Stable Audio Open: a procedural sound from the prompt's words "
                f"({', '.join(parts)}), seed {seed}")


def _words(text: str) -> tuple[set[str], set[str]]:
    """(words asked for, words negated by a preceding no/without/not within two words)."""
    wanted, negated, left = set(), set(), 0
    for w in re.findall(r"[a-z0-9][a-z0-9'-]*", text.lower()):
        if w in NEGATIONS:
            left = 2
            continue
        (negated if left else wanted).add(w)
        left = max(0, left - 1)
    return wanted, negated


def _has(words: set[str], vocabulary: tuple[str, ...], text: str) -> bool:
    return any((v in text) if " " in v else (v in words) for v in vocabulary)


def _generator(prompt: str, negative: str, seed: int) -> np.random.Generator:
    digest = hashlib.sha256(f"{prompt}\x00{negative}\x00{seed}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


def plan(prompt: str, negative_prompt: str | None, seed: int) -> Scene:
    """The layers the prompt's words ask for (module docstring); the seed picks the key and any free tempo."""
    rng = _generator(prompt, negative_prompt or "", seed)
    text = " ".join(re.findall(r"[a-z0-9'-]+", prompt.lower()))
    wanted, negated = _words(prompt)
    excluded = negated | _words(negative_prompt or "")[0]
    words = wanted - excluded
    textures = tuple(name for name, vocab in TEXTURES.items() if _has(words, vocab, text) and name not in excluded)
    tempo = None
    if _has(words, RHYTHM, text):
        stated = re.search(r"\b(\d{2,3})\s*bpm\b", text)
        genre = next((GENRE_TEMPO[w] for w in GENRE_TEMPO if w in words), None)
        tempo = float(np.clip(int(stated.group(1)), 40, 220)) if stated else float(genre or rng.integers(88, 125))
    instrument = next((name for name, vocab in INSTRUMENTS.items() if _has(words, vocab, text)), None)
    minor = True if _has(words, MINOR, text) else False if _has(words, MAJOR, text) else bool(rng.integers(2))
    pad = _has(words, PAD_WORDS, text) or not (textures or tempo or instrument)
    root = 57 + int(rng.integers(0, 12))  # A3 .. G#4
    return Scene(textures, tempo, instrument, pad, root, minor)


# ---------------------------------------------------------------------------------------------------------
# building blocks
def _shaped_noise(rng: np.random.Generator, n: int, gain: np.ndarray | float) -> np.ndarray:
    """(n, 2) noise whose spectrum is `gain(f)`, each channel its own: random spectrum, one inverse FFT each."""
    f = np.fft.rfftfreq(n, 1 / SR)
    out = np.empty((n, 2))
    for ch in range(2):
        spec = (rng.standard_normal(f.size) + 1j * rng.standard_normal(f.size)) * gain
        spec[0] = 0
        out[:, ch] = np.fft.irfft(spec, n)
    return out / (np.sqrt(np.mean(out**2)) + 1e-12)


def _bands(n: int, low: float, high: float, slope: float = 1.0) -> np.ndarray:
    """A band-pass magnitude over rfft bins: rises above `low`, falls above `high`, tilted by f^-slope/2."""
    f = np.fft.rfftfreq(n, 1 / SR) + 1.0
    return (f / (f + low)) ** 2 / (1 + (f / high) ** 4) * f ** (-slope / 2) * np.sqrt(high)


def _drift(rng: np.random.Generator, n: int, rate: float, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    """A smooth random envelope between lo and hi that changes about `rate` times a second."""
    points = max(2, int(n / SR * rate) + 2)
    x = np.linspace(0, n, points)
    return np.interp(np.arange(n), x, rng.uniform(lo, hi, points))


def _impulses(rng: np.random.Generator, n: int, per_second: float, spread: float = 1.0) -> np.ndarray:
    """Sparse clicks at random places with heavy-tailed loudness (droplets, crackles)."""
    out = np.zeros(n)
    count = rng.poisson(per_second * n / SR)
    out[rng.integers(0, max(n, 1), count)] = rng.pareto(2.5, count) * rng.choice((-1, 1), count) * spread
    return out


def _filter(x: np.ndarray, gain: np.ndarray) -> np.ndarray:
    return np.fft.irfft(np.fft.rfft(x) * gain, x.size)


def _midi_hz(m: float) -> float:
    return 440.0 * 2 ** ((m - 69) / 12)


def _place(track: np.ndarray, sample: np.ndarray, at: int, gain: float, pan: float) -> None:
    """Add a mono `sample` at frame `at`, `pan` from -1 (left) to 1 (right), cut at the track's end."""
    if at >= len(track):
        return
    piece = sample[: len(track) - at] * gain
    track[at:at + len(piece), 0] += piece * np.sqrt((1 - pan) / 2)
    track[at:at + len(piece), 1] += piece * np.sqrt((1 + pan) / 2)


# ---------------------------------------------------------------------------------------------------------
# textures
def _texture(name: str, rng: np.random.Generator, n: int, pace: float) -> np.ndarray:
    if name == "rain":
        hiss = _shaped_noise(rng, n, _bands(n, 1500, 9000, 0.5)) * _drift(rng, n, 0.3, 0.7, 1.0)[:, None]
        drops = np.stack([_filter(_impulses(rng, n, 40 * pace), _bands(n, 2500, 12000, 0)) for _ in range(2)], 1)
        return 0.6 * hiss + 0.5 * drops / (np.abs(drops).max() + 1e-9)
    if name == "wind":
        gusts = _drift(rng, n, 0.25 * pace, 0.15, 1.0) ** 2
        rush = _shaped_noise(rng, n, _bands(n, 60, 500, 1.0)) * gusts[:, None]
        whistle = _shaped_noise(rng, n, _bands(n, 700, 900, 0)) * (gusts**2)[:, None]
        return rush + 0.25 * whistle
    if name == "ocean":
        t = np.arange(n) / SR * pace
        period = rng.uniform(6, 10)
        swell = (0.5 - 0.5 * np.cos(2 * np.pi * t / period)) ** 2 * _drift(rng, n, 0.1, 0.6, 1.0) + 0.12
        return _shaped_noise(rng, n, _bands(n, 40, 1200, 1.0)) * np.stack([swell, np.roll(swell, SR // 5)], 1)
    if name == "water":
        gurgle = _drift(rng, n, 9 * pace, 0.3, 1.0)
        return _shaped_noise(rng, n, _bands(n, 400, 3000, 0.3)) * gurgle[:, None]
    if name == "fire":
        roar = _shaped_noise(rng, n, _bands(n, 30, 300, 1.0)) * _drift(rng, n, 1.5, 0.5, 1.0)[:, None]
        cracks = np.stack([_filter(_impulses(rng, n, 9 * pace), _bands(n, 1500, 8000, 0)) for _ in range(2)], 1)
        return 0.5 * roar + 0.8 * cracks / (np.abs(cracks).max() + 1e-9)
    if name == "thunder":
        env = np.full(n, 0.05)
        gaps = np.concatenate([rng.uniform(0.2, 1.5, 1), rng.uniform(5, 12, int(n / SR / 5) + 1)])
        for at in np.cumsum(gaps / pace * SR).astype(int):
            if at >= n:
                break
            t = np.arange(min(n - at, 5 * SR)) / SR
            env[at:at + t.size] += rng.uniform(0.5, 1.0) * np.exp(-t / 1.6) * (1 - np.exp(-t / 0.08))
        return _shaped_noise(rng, n, _bands(n, 20, 180, 1.5)) * env[:, None]
    if name == "birds":
        out = np.zeros((n, 2))
        for at in np.cumsum(rng.exponential(0.35 / pace, int(n / SR * 4 * pace) + 4) * SR).astype(int):
            size = int(rng.uniform(0.05, 0.14) * SR)
            t = np.arange(size) / SR
            f0, f1 = rng.uniform(2500, 5500, 2)
            phase = 2 * np.pi * np.cumsum(f0 + (f1 - f0) * t / t[-1] + 300 * np.sin(2 * np.pi * 30 * t)) / SR
            _place(out, np.sin(phase) * np.sin(np.pi * t / t[-1]) ** 2, at, rng.uniform(0.3, 1), rng.uniform(-.8, .8))
        return out
    # city: traffic rumble under a murmur of voices
    rumble = _shaped_noise(rng, n, _bands(n, 30, 350, 1.2)) * _drift(rng, n, 0.2, 0.5, 1.0)[:, None]
    murmur = _shaped_noise(rng, n, _bands(n, 300, 1400, 0.5)) * _drift(rng, n, 5, 0.4, 1.0)[:, None]
    return rumble + 0.4 * murmur


# ---------------------------------------------------------------------------------------------------------
# rhythm and notes
def _drum_kit(rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(int(0.45 * SR)) / SR
    sweep = 45 + 80 * np.exp(-t / 0.03)
    kick = np.sin(2 * np.pi * np.cumsum(sweep) / SR) * np.exp(-t / 0.18)
    noise = rng.standard_normal(t.size)
    snare = np.diff(noise, prepend=0) * np.exp(-t / 0.07) * 0.5 + np.sin(2 * np.pi * 185 * t) * np.exp(-t / 0.04)
    hat = np.diff(np.diff(noise, prepend=0), prepend=0)[: int(0.08 * SR)] * np.exp(-t[: int(0.08 * SR)] / 0.015)
    return {"kick": kick, "snare": snare, "hat": hat / (np.abs(hat).max() + 1e-9)}


def _drums(rng: np.random.Generator, n: int, tempo: float) -> np.ndarray:
    out, kit = np.zeros((n, 2)), _drum_kit(rng)
    step = 60 / tempo / 4 * SR  # a 16th note, in frames
    kicks = {0, 8} | ({int(rng.choice((6, 10, 11, 14)))} if rng.random() < 0.7 else set())
    hats = set(range(0, 16, 2)) if tempo < 118 else set(range(2, 16, 4)) | set(range(0, 16, 2))
    for i in range(int(n / step) + 1):
        at, s = int(i * step), i % 16
        if s in kicks:
            _place(out, kit["kick"], at, 0.9, 0.0)
        if s in (4, 12):
            _place(out, kit["snare"], at, 0.55, -0.1)
        if s in hats:
            _place(out, kit["hat"], at, rng.uniform(0.12, 0.22), 0.35)
    return out


def _note(freq: float, kind: str, seconds: float) -> np.ndarray:
    """One note of an instrument, as a mono array (partials with their own decays)."""
    t = np.arange(int(seconds * SR)) / SR
    attack = np.minimum(1, t / 0.004)
    if kind == "bell":
        partials = ((0.5, 0.3, 3.0), (1, 1, 2.5), (2.0, 0.5, 1.6), (2.76, 0.4, 1.0), (5.4, 0.2, 0.5), (8.93, 0.1, .3))
    elif kind == "pluck":
        partials = tuple((k, 0.9 / k, 0.6 / k**0.7) for k in range(1, 8))
    elif kind == "synth":
        partials = tuple((k * (1 + 0.002 * k), 0.6 / k, 0.35) for k in range(1, 9))
    elif kind == "bass":
        partials = ((1, 1, 0.5), (2, 0.35, 0.3), (3, 0.1, 0.2))
    else:  # piano
        partials = tuple((k * (1 + 0.0004 * k * k), 1 / k**1.5, 1.4 / k**0.6) for k in range(1, 7))
    out = np.zeros(t.size)
    for ratio, amp, decay in partials:
        if freq * ratio < SR / 2.2:
            out += amp * np.sin(2 * np.pi * freq * ratio * t) * np.exp(-t / decay)
    return out * attack


def _chords(scene: Scene) -> list[list[int]]:
    """The progression's chords as MIDI notes (root, third, fifth, and the root an octave up)."""
    steps = MINOR_STEPS if scene.minor else MAJOR_STEPS
    chords = []
    for degree in PROGRESSIONS[scene.minor]:
        chords.append([scene.root + steps[(degree + k) % 7] + 12 * ((degree + k) // 7) for k in (0, 2, 4)])
        chords[-1].append(chords[-1][0] + 12)
    return chords


def _melody(scene: Scene, rng: np.random.Generator, n: int, beat: float, with_bass: bool) -> np.ndarray:
    """The instrument playing the progression, one chord a bar: arpeggios (piano, synth), strums (pluck) or
    slow strikes (bell); a bass on each chord's root when there are drums."""
    out, notes = np.zeros((n, 2)), {}
    kind = scene.instrument or "piano"
    per_beat = {"synth": 4, "piano": 2, "pluck": 1, "bell": 0.5}[kind]
    chords, bar = _chords(scene), 4 * beat * SR
    for b in range(int(n / bar) + 1):
        chord = chords[b % len(chords)]
        for j in range(int(4 * per_beat)):
            at = int(b * bar + j * beat * SR / per_beat)
            picks = chord if kind == "pluck" else [chord[(j + int(rng.integers(0, 2))) % len(chord)]]
            for k, m in enumerate(picks):
                if m not in notes:
                    notes[m] = _note(_midi_hz(m), kind, 3.0 if kind == "bell" else 1.8)
                _place(out, notes[m], at + int(k * 0.012 * SR), rng.uniform(0.25, 0.4), rng.uniform(-0.4, 0.4))
        if with_bass:
            root = chord[0] - 24
            notes.setdefault(root, _note(_midi_hz(root), "bass", 1.2))
            for j in (0, 2.5):
                _place(out, notes[root], int(b * bar + j * beat * SR), 0.5, 0.0)
    return out


def _pad(scene: Scene, rng: np.random.Generator, n: int, seconds_per_chord: float) -> np.ndarray:
    """Sustained chords made in the frequency domain (each partial a few neighbouring bins with random phases:
    an ensemble's shimmer, wide in stereo), one per segment, crossfaded."""
    seg, fade = int(seconds_per_chord * SR), int(min(1.5, seconds_per_chord / 3) * SR)
    out, chords = np.zeros((n, 2)), _chords(scene)
    for i, start in enumerate(range(0, n, seg)):
        m = min(seg + fade, n - start)
        spec = np.zeros((2, m // 2 + 1), complex)
        for note in chords[i % len(chords)][:3]:
            for h, amp in ((1, 1.0), (2, 0.35), (3, 0.12)):
                centre = _midi_hz(note - 12) * h * m / SR
                for off, w in ((-2, .3), (-1, .7), (0, 1.), (1, .7), (2, .3)):
                    k = int(round(centre)) + off
                    if 0 < k < spec.shape[1]:
                        spec[:, k] += amp * w * np.exp(2j * np.pi * rng.random(2))
        seg_audio = np.fft.irfft(spec, m, axis=1).T
        ramp, rise = np.ones(m), min(fade, m)
        ramp[:rise] = np.sin(np.linspace(0, np.pi / 2, rise)) ** 2 if start else 1
        if m > seg:
            ramp[seg:] = np.cos(np.linspace(0, np.pi / 2, m - seg)) ** 2
        out[start:start + m] += seg_audio * ramp[:, None] / (np.sqrt(np.mean(seg_audio**2)) + 1e-12)
    return out


# ---------------------------------------------------------------------------------------------------------
def render(scene: Scene, frames: int, *, prompt: str, negative_prompt: str | None, seed: int, steps: int,
           guidance: float, speed: float = 1.0, cancel: threading.Event | None = None) -> np.ndarray:
    """`frames` of the scene as interleaved-ready (frames, 2) int16. `speed` plays it that much faster (events,
    not pitch); fewer `steps` leave more residual noise; more `guidance` drives it harder. Raises Cancelled
    between layers once `cancel` is set."""
    rng = _generator(prompt, negative_prompt or "", seed)
    n = max(frames, 0)
    if n == 0:
        return np.zeros((0, 2), np.int16)
    beat = 60 / ((scene.tempo or 72.0) * speed)
    layers: list[tuple[float, np.ndarray]] = []
    jobs = [(0.5, lambda name=name: _texture(name, rng, n, speed)) for name in scene.textures]
    if scene.tempo is not None:
        jobs.append((0.9, lambda: _drums(rng, n, scene.tempo * speed)))
    if scene.instrument and scene.instrument != "strings":
        jobs.append((0.6, lambda: _melody(scene, rng, n, beat, scene.tempo is not None)))
    if scene.pad or scene.instrument == "strings":
        jobs.append((0.5 if jobs else 1.0, lambda: _pad(scene, rng, n, 4 * beat if scene.tempo else 6 / speed)))
    for done, (gain, make) in enumerate(jobs):
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"{done} of {len(jobs)} layers")
        layer = make()
        layers.append((gain, layer / (np.abs(layer).max() + 1e-9)))
    mix = sum(g * x for g, x in layers)
    fade = min(n // 2, int(0.02 * SR))
    if fade:
        ramp = np.linspace(0, 1, fade)[:, None]
        mix[:fade] *= ramp
        mix[n - fade:] *= ramp[::-1]
    mix *= 0.8 / (np.abs(mix).max() + 1e-9)
    drive = float(np.clip(0.5 + guidance / 7, 0.5, 6.0))  # guidance 7 (the default): a gentle 1.5
    mix = np.tanh(drive * mix) / np.tanh(drive)
    mix += rng.standard_normal(mix.shape) * 0.03 / np.sqrt(max(steps, 1))  # what fewer steps leave behind
    return np.round(np.clip(mix * 0.9, -1, 1) * 32767).astype(np.int16)
