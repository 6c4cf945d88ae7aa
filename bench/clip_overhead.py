"""Clip overhead: what muxing a narration and a soundtrack into a generated video costs the studio, one run.

    .venv/bin/python bench/clip_overhead.py [--runs 7] [--engine]

The parts are files as a person would have them: a 5 s, 16 fps, 832×480 H.264 MP4 (Wan's 480p), a narration as
the voice engine writes it (24 kHz mono WAV) and a 30 s soundtrack at Stable Audio's 44.1 kHz stereo, as MP3.
Each run times `make_clip` from the call to the renamed file — read the video's packets, decode the sounds
(the soundtrack only as far as the clip needs), resample to 48 kHz with soxr, loop/cut, duck, mix, encode AAC,
copy the video's packets and write the MP4 — and, interleaved with it (ABBA), the floor any muxer pays: a bare
PyAV remux of the same packets with an AAC encode of the same track, already mixed. Medians are printed with the
breakdown of make_clip's own timings and the ratio studio / floor. Target: make_clip ≤ 1 s for a 5 s clip.

With --engine the parts are made on the offline engine first (`offline.launch.shared_engine`): the video through
the studio's VideoClient (POST /v1/videos/sync), the narration by POST /v1/audio/speech, the soundtrack by
POST /v1/audio/generate when the engine serves it (a tone made here when it does not, and the output says so),
each timed; the clip is muxed from those and its time set beside theirs. Always exits 0: the figures are the
result.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import av  # noqa: E402
import numpy as np  # noqa: E402

from services.clips import TRACK_RATE, ClipResult, load_audio, make_clip, to_track_format  # noqa: E402
from services.clips.mix import fit_soundtrack, mix  # noqa: E402

TARGET_S = 1.0
SECONDS, FPS, WIDTH, HEIGHT = 5, 16, 832, 480
NARRATION = "The tide comes in slowly. Gulls circle the old lighthouse."  # about 4 s in the engine's voice
SOUND_PROMPT = "calm ambient pads with soft waves, slow, warm"
VIDEO_PROMPT = "The camera slowly pushes in while the waves roll onto the beach"


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def make_video(path: Path) -> Path:
    """A moving 480p H.264 picture (x264 at its defaults: B-frames, so pts and dts differ as in real files)."""
    with av.open(str(path), "w", format="mp4") as c:
        s = c.add_stream("libx264", rate=FPS)
        s.width, s.height, s.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
        for i in range(SECONDS * FPS):
            img = np.stack([(x + 3 * i) % 256, (y + i) % 256, ((x + y) // 3 + 5 * i) % 256], axis=-1).astype(np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def write_audio(path: Path, samples: np.ndarray, rate: int, fmt: str, codec: str) -> Path:
    """(frames, channels) float samples as a file, encoded with PyAV."""
    layout = "stereo" if samples.shape[1] == 2 else "mono"
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=rate, layout=layout)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples.T, dtype=np.float32), format="fltp",
                                           layout=layout)
        frame.sample_rate, frame.pts = rate, 0
        for p in [*s.encode(frame), *s.encode(None)]:
            c.mux(p)
    return path


def speech_like(seconds: float, rate: int = 24_000) -> np.ndarray:
    """Voiced bursts (a buzz at a wandering pitch, 150–450 ms) with pauses between them, mono."""
    rng = np.random.default_rng(3)
    out = np.zeros(int(seconds * rate), dtype=np.float32)
    at = int(0.2 * rate)
    while at < out.size:
        n = int(rng.uniform(0.15, 0.45) * rate)
        t = np.arange(n) / rate
        f0 = rng.uniform(100, 180) * (1 + 0.1 * np.sin(2 * np.pi * 3 * t))
        buzz = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / rate) / k for k in range(1, 8))
        burst = (0.3 * buzz * np.hanning(n)).astype(np.float32)
        out[at: at + n] = burst[: out.size - at]
        at += n + int(rng.uniform(0.05, 0.35) * rate)
    return out.reshape(-1, 1)


def tone_bed(seconds: float, rate: int = 44_100) -> np.ndarray:
    """A soft chord (A minor) with a slow swell, stereo: what stands in for a generated soundtrack."""
    t = np.arange(int(seconds * rate)) / rate
    chord = sum(np.sin(2 * np.pi * f * t) for f in (220.0, 261.63, 329.63)) / 3
    swell = 0.6 + 0.4 * np.sin(2 * np.pi * 0.2 * t)
    left = 0.4 * chord * swell
    right = 0.4 * np.roll(chord, rate // 100) * swell
    return np.stack([left, right], axis=1).astype(np.float32)


def bare_mux(video: Path, track: np.ndarray, out: Path) -> float:
    """The floor: the same packets remuxed and a mixed 48 kHz stereo track AAC-encoded, with PyAV and nothing else."""
    t0 = time.perf_counter()
    with av.open(str(video)) as src, av.open(str(out), "w", format="mp4") as dst:
        vin = src.streams.video[0]
        vout = dst.add_stream_from_template(vin)
        vout.time_base = vin.time_base
        aout = dst.add_stream("aac", rate=48_000, layout="stereo")
        aout.bit_rate, aout.options = 160_000, {"aac_coder": "fast"}  # as make_clip encodes
        planes = np.ascontiguousarray(track.T)
        sound = []
        for at in range(0, planes.shape[1], 1024):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(planes[:, at: at + 1024]), format="fltp",
                                               layout="stereo")
            frame.sample_rate, frame.time_base, frame.pts = 48_000, Fraction(1, 48_000), at
            sound.extend(aout.encode(frame))
        sound.extend(aout.encode(None))
        for packet in src.demux(vin):
            if packet.size:
                packet.stream = vout
                dst.mux(packet)
        for packet in sound:
            dst.mux(packet)
    return time.perf_counter() - t0


def measure(video: Path, narration, soundtrack, runs: int, tmp: Path,
            fit: str | None) -> tuple[list[ClipResult], list[float]]:
    """`runs` make_clip results and as many bare remuxes, interleaved (ABBA), after one warm-up of each. The floor
    encodes the very track make_clip mixes (made here by the same functions): AAC's time depends on what it
    encodes."""
    clips: list[ClipResult] = []
    floors: list[float] = []

    def studio() -> None:
        clips.append(make_clip(video, tmp / "clip.mp4", narration=narration, soundtrack=soundtrack, fit=fit))

    def floor() -> None:
        floors.append(bare_mux(video, ready, tmp / "bare.mp4"))

    studio()  # warm: PyAV's codecs, soxr, the page cache
    frames = round(clips[0].clip_s * TRACK_RATE)
    voice = to_track_format(load_audio(narration, role="narration").audio)
    music = fit_soundtrack(to_track_format(load_audio(soundtrack, role="soundtrack").audio), frames)
    ready, _ = mix(voice, music, frames, duck_db=12.0)
    floor()
    clips.clear(), floors.clear()
    for i in range(runs):
        for f in ((studio, floor) if i % 2 == 0 else (floor, studio)):
            f()
    return clips, floors


def report(clips: list[ClipResult], floors: list[float], what: str) -> float:
    mux = [c.mux_s for c in clips]
    parts = {k: _med([c.timings[k] for c in clips]) for k in ("read_s", "sound_s", "encode_s", "write_s")}
    last = clips[-1]
    print(f"clip mux, {len(clips)} interleaved runs: {what}")
    print(f"  the clip: {last.clip_s:.2f} s, {last.frames} frames copied, narration {last.narration_s or 0:.2f} s"
          f" (fit {last.fit}), soundtrack source {last.soundtrack_s or 0:.2f} s, limiter {last.limiter_db:+.1f} dB, "
          f"{last.path.stat().st_size / 1e6:.2f} MB")
    print(f"  make_clip                               median {_med(mux):6.3f} s "
          f"(min {min(mux):.3f}, max {max(mux):.3f})  "
          + "  ".join(f"{k[:-2]} {v:.3f}" for k, v in parts.items()))
    print(f"  bare PyAV: remux + AAC of the same mix  median {_med(floors):6.3f} s   studio / floor "
          f"{_med(mux) / _med(floors):.2f}x  (the studio adds {_med(mux) - _med(floors):+.3f} s)")
    print(f"  target ≤ {TARGET_S:.1f} s → {'OK' if _med(mux) <= TARGET_S else 'OVER'} ({_med(mux):.3f} s)")
    return _med(mux)


def local(args: argparse.Namespace, tmp: Path) -> None:
    video = make_video(tmp / "take.mp4")
    narration = write_audio(tmp / "voice.wav", speech_like(4.2), 24_000, "wav", "pcm_s16le")
    soundtrack = write_audio(tmp / "music.mp3", tone_bed(30.0), 44_100, "mp3", "libmp3lame")
    clips, floors = measure(video, narration, soundtrack, args.runs, tmp, None)
    report(clips, floors, f"{SECONDS} s {WIDTH}x{HEIGHT} {FPS} fps H.264 made here "
           f"({video.stat().st_size / 1e6:.2f} MB), narration 24 kHz mono WAV, soundtrack 30 s 44.1 kHz stereo MP3")


def engine(args: argparse.Namespace, tmp: Path) -> None:
    import httpx

    from offline.launch import shared_engine
    from services.settings import Settings
    from services.videos import VideoRequest, omni_client

    t0 = time.perf_counter()
    url = shared_engine().url
    start_s = time.perf_counter() - t0
    client = omni_client(url, Settings())
    request = VideoRequest(VIDEO_PROMPT, width=WIDTH, height=HEIGHT, frames=SECONDS * FPS + 1, fps=FPS, seed=77)
    result = client.generate(request)
    client.close()
    video = tmp / "engine.mp4"
    video.write_bytes(result.mp4)
    with httpx.Client(timeout=600, trust_env=False) as http:
        t0 = time.perf_counter()
        speech = http.post(f"{url}/v1/audio/speech",
                           json={"input": NARRATION, "voice": "joe", "response_format": "wav", "seed": 7})
        speech.raise_for_status()
        speech_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        sound = http.post(f"{url}/v1/audio/generate", json={"input": SOUND_PROMPT, "response_format": "wav",
                                                            "audio_length": result.info.duration_s, "seed": 7})
        sound_s = time.perf_counter() - t0
    if sound.status_code == 200:
        soundtrack = sound.content
        sound_note = f"{'POST /v1/audio/generate':26s} {sound_s:6.3f} s ({len(sound.content) / 1e3:.0f} kB WAV)"
    else:
        soundtrack = write_audio(tmp / "tone.flac", tone_bed(30.0), 44_100, "flac", "flac")
        sound_note = (f"none: the engine answered POST /v1/audio/generate with HTTP {sound.status_code}, so the "
                      "soundtrack is a tone made here")
        sound_s = 0.0
    clips, floors = measure(video, speech.content, soundtrack, args.runs, tmp, "trim")
    mux = report(clips, floors, f"the offline engine's parts ({result.info.width}x{result.info.height}, "
                 f"{result.info.frames} frames at {result.info.fps:g} fps, {len(result.mp4) / 1e6:.2f} MB)")
    made = result.wall_s + speech_s + sound_s
    print(f"generation on the offline engine at {url} (started in {start_s:.1f} s):")
    model_s = result.model_s if result.model_s is not None else float("nan")
    print(f"  video      {'VideoClient.generate':26s} {result.wall_s:6.3f} s (model {model_s:.3f} s, "
          f"{request.steps} steps)")
    print(f"  narration  {'POST /v1/audio/speech':26s} {speech_s:6.3f} s ({len(speech.content) / 1e3:.0f} kB WAV)")
    print(f"  soundtrack {sound_note}")
    print(f"  mux beside generation: {mux:.3f} s = {100 * mux / result.wall_s:.1f} % of the video's, "
          f"{100 * mux / made:.1f} % of all the parts' ({made:.3f} s); the offline engine draws labelled previews on "
          "the CPU, so a model on a GPU makes the mux's share smaller still")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--engine", action="store_true", help="generate the parts on the offline engine first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="omni-bench-clip-") as tmp:
        local(args, Path(tmp))
        if args.engine:
            print()
            engine(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
