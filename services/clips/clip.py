"""`make_clip`: a generated video with a narration and a soundtrack muxed in, the video's packets untouched.

    result = make_clip(Path("take.mp4"), Path("clip.mp4"), narration=Audio.from_pcm16(pcm, 24_000),
                       soundtrack=Path("music.flac"))
    result.clip_s, result.frames, result.mux_s, result.limiter_db

The video is copied packet for packet (`add_stream_from_template`: no decode, no re-encode — the output's video
packets are the input's bytes with the input's pts, dts and durations), so the clip costs the audio work and a
file write, not a second generation-quality loss. The sounds (mix.py) become one AAC-LC stereo 48 kHz track
exactly as long as the video, starting where its first frame does, and the two are interleaved by time into an
MP4 with its index at the front (`+faststart`: a browser plays it before it has all of it). The file is written
beside `out` and renamed into place, so a failure never leaves half a clip under that name.
"""

from __future__ import annotations

import heapq
import os
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np

from services.clips.audio import TRACK_CHANNELS, TRACK_RATE, AudioSource, load_audio, to_track_format
from services.clips.errors import ClipError
from services.clips.mix import fit_soundtrack, mix, trim_narration
from services.clips.video import SourceVideo, open_video

Fit = Literal["trim", "hold"]
FITS: tuple[str, ...] = ("trim", "hold")
AAC_FRAME = 1024  # samples per channel in one AAC-LC frame
AAC_BIT_RATE = 160_000  # stereo speech over music, well clear of AAC's artefacts at 48 kHz
# FFmpeg's own AAC encoder: "fast" is, in its documentation's words, "better and much faster at higher bitrates"
# than the default two-loop search (worse only under 64 kbit/s). Here: ~6x faster (35 ms against 210 ms for 5 s of
# stereo), and closer to the input (57 dB SNR against 40 dB on a voice over a chord, bench/clip_overhead.py's parts).
AAC_CODER = "fast"
# A narration at most this much longer than the video is cut (with the trim fade) without asking: decoders pad an
# MP3's or AAC's last frame with silence, and a narration made to the video's length should not need a `fit`.
OVERRUN_TOLERANCE_S = AAC_FRAME / TRACK_RATE
MAX_DUCK_DB = 60.0


@dataclass(frozen=True)
class ClipResult:
    """What `make_clip` wrote and measured. Lengths are in seconds."""

    path: Path
    video_s: float  # the source video
    clip_s: float  # the output: its video, and its audio track to the sample (longer than video_s only by `hold`)
    audio_s: float  # the audio track as mixed: its samples / 48 kHz
    narration_s: float | None  # as given, before any trim (None: no narration)
    soundtrack_s: float | None  # the source's length (the file's stated length when it was longer than needed)
    frames: int  # video packets copied (one per frame)
    fit: Fit | None  # what was done to a narration longer than the video (None: nothing was needed)
    held_s: float  # how much longer the last frame is shown (fit="hold"), else 0.0
    limiter_db: float  # the gain taken off the mix so that no sample clips (0.0: none needed)
    mux_s: float  # make_clip's own wall time, from the call to the renamed file
    # read_s (the video's packets), sound_s (decode, resample, mix), encode_s (AAC), write_s (mux and rename)
    timings: dict[str, float] = field(default_factory=dict)


def make_clip(video: Path, out: Path, *, narration: AudioSource | None = None,
              soundtrack: AudioSource | None = None, duck_db: float = 12.0, fit: Fit | None = None) -> ClipResult:
    """Mux `narration` and `soundtrack` (either or both: samples, a file's path or a file's bytes) into a copy of
    `video`, written as an MP4 to `out`. Raises ClipError, naming what to fix.

    The soundtrack is looped or cut to the video's length and faded out over its last 0.5 s; under the narration
    it is ducked by `duck_db` dB (a smooth envelope from the narration's short-time energy, 50 ms attack, 300 ms
    release). The narration starts with the first frame. Both are resampled to 48 kHz stereo; the mix is turned
    down from its peak when it would clip; any audio the video had is replaced.

    A narration longer than the video is refused unless `fit` says what to do:
    - "trim": the narration is cut at the video's end with a 50 ms fade; the clip is as long as the video.
    - "hold": the video's last frame stays on screen until the narration ends. No frame is re-encoded: the last
      packet is kept, byte for byte, and only its duration grows, so the MP4 shows that picture for the rest
      (players honour sample durations: the frame count stays, the frame rate becomes variable at the end).
    """
    t0 = time.perf_counter()
    if narration is None and soundtrack is None:
        raise ClipError("a clip needs a sound: pass narration= (the spoken track), soundtrack= (music or ambience), "
                        "or both")
    if fit is not None and fit not in FITS:
        raise ClipError(f"fit must be 'trim' or 'hold' (or None), not {fit!r}")
    if not 0.0 <= duck_db <= MAX_DUCK_DB:
        raise ClipError(f"duck_db must be between 0 and {MAX_DUCK_DB:g} dB, got {duck_db:g}")
    video, out = Path(video), Path(out)
    if out.resolve() == video.resolve():
        raise ClipError(f"the clip cannot overwrite its own video {video}: pass another out path")
    timings: dict[str, float] = {}
    with open_video(video) as source:
        video_s = source.seconds
        timings["read_s"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        voice, narration_s, applied, held_s = _narration(narration, source, fit)
        frames = round(source.seconds * TRACK_RATE)  # the video's length, after any hold
        music, soundtrack_s = _soundtrack(soundtrack, frames)
        track, limiter_db = mix(voice, music, frames, duck_db)
        timings["sound_s"] = time.perf_counter() - t1
        _write(source, track, out, timings)
        frame_count = source.frames
    mux_s = time.perf_counter() - t0
    return ClipResult(path=out, video_s=video_s, clip_s=frames / TRACK_RATE, audio_s=track.shape[0] / TRACK_RATE,
                      narration_s=narration_s, soundtrack_s=soundtrack_s, frames=frame_count, fit=applied,
                      held_s=held_s, limiter_db=limiter_db, mux_s=mux_s, timings=timings)


def _narration(narration: AudioSource | None, source: SourceVideo,
               fit: Fit | None) -> tuple[np.ndarray | None, float | None, Fit | None, float]:
    """The narration at 48 kHz stereo fitted to the video (the video held longer when fit="hold"), its length as
    given, the fit applied and the seconds of hold."""
    if narration is None:
        return None, None, None, 0.0
    loaded = load_audio(narration, role="narration")
    voice = to_track_format(loaded.audio)
    narration_s = loaded.audio.seconds
    over_s = voice.shape[0] / TRACK_RATE - source.seconds
    if over_s <= 0:
        return voice, narration_s, None, 0.0
    if over_s <= OVERRUN_TOLERANCE_S:
        return trim_narration(voice, round(source.seconds * TRACK_RATE)), narration_s, None, 0.0
    if fit is None:
        raise ClipError(
            f"the narration is {narration_s:.2f} s, {over_s:.2f} s longer than the video ({source.seconds:.2f} s): "
            "pass --fit trim (fit='trim') to cut it at the video's end with a short fade, or --fit hold "
            "(fit='hold') to hold the video's last frame until the narration ends")
    if fit == "trim":
        return trim_narration(voice, round(source.seconds * TRACK_RATE)), narration_s, "trim", 0.0
    ticks = source.hold_last_frame(over_s)
    return voice, narration_s, "hold", float(ticks * source.time_base)


def _soundtrack(soundtrack: AudioSource | None, frames: int) -> tuple[np.ndarray | None, float | None]:
    """The soundtrack at 48 kHz stereo looped or cut to `frames` and faded out; its source's length. A long file
    is decoded only as far as the clip needs (and a little more for the resampler's filter)."""
    if soundtrack is None:
        return None, None
    loaded = load_audio(soundtrack, role="soundtrack", max_s=frames / TRACK_RATE + 0.1)
    return fit_soundtrack(to_track_format(loaded.audio), frames), loaded.source_s


def _aac_packets(stream: Any, track: np.ndarray, start: int, timings: dict[str, float]) -> list[Any]:
    """`track` encoded on the output's AAC stream in 1024-sample frames stamped from `start` (samples), flushed."""
    import av

    t0 = time.perf_counter()
    planes = np.ascontiguousarray(track.T)  # fltp: one row per channel, AAC's native layout
    packets: list[Any] = []
    for at in range(0, planes.shape[1], AAC_FRAME):
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(planes[:, at: at + AAC_FRAME]), format="fltp",
                                           layout="stereo")
        frame.sample_rate = TRACK_RATE
        frame.time_base = Fraction(1, TRACK_RATE)
        frame.pts = start + at
        packets.extend(stream.encode(frame))
    packets.extend(stream.encode(None))
    timings["encode_s"] = time.perf_counter() - t0
    return packets


def _write(source: SourceVideo, track: np.ndarray, out: Path, timings: dict[str, float]) -> None:
    """The MP4: the source's video packets copied and the track encoded, interleaved by time, written beside
    `out` and renamed onto it."""
    import av

    if not out.parent.is_dir():
        raise ClipError(f"cannot write the clip to {out}: the folder {out.parent} does not exist")
    part = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        try:
            container = av.open(str(part), mode="w", format="mp4", options={"movflags": "+faststart"})
        except (av.error.FFmpegError, OSError) as exc:
            raise ClipError(f"cannot write the clip to {out} ({exc})") from None
        with container:
            video = container.add_stream_from_template(source.stream)
            video.time_base = source.time_base  # the packets' own ticks, so pts and dts are copied as they are
            audio = container.add_stream("aac", rate=TRACK_RATE, layout="stereo")
            audio.bit_rate = AAC_BIT_RATE
            audio.options = {"aac_coder": AAC_CODER}
            start = max(0, round(source.start_s * TRACK_RATE))  # the track starts with the first frame
            sound = _aac_packets(audio, track, start, timings)
            t0 = time.perf_counter()
            for packet in source.packets:
                packet.stream = video
            try:
                for packet in heapq.merge(source.packets, sound, key=_dts_seconds):
                    container.mux(packet)
            except (av.error.FFmpegError, ValueError) as exc:
                raise ClipError(f"the video's {source.codec} stream in {source.path} cannot be copied into an MP4 "
                                f"({exc}); convert it to H.264 first") from None
        os.replace(part, out)
        timings["write_s"] = time.perf_counter() - t0
    finally:
        part.unlink(missing_ok=True)


def _dts_seconds(packet: Any) -> Fraction:
    stamp = packet.dts if packet.dts is not None else packet.pts
    return Fraction(stamp or 0) * packet.time_base


assert TRACK_CHANNELS == 2  # the AAC stream's layout above is stereo
