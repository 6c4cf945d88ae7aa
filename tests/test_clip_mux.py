"""services/clips: a real MP4 made here with PyAV, a narration of tone bursts with silences between them and a
soundtrack tone, muxed into a clip and read back.

What is checked on the output file itself: the video packets are the input's, byte for byte, with the same pts,
dts and time base; the audio is AAC, 48 kHz, stereo and as long as the video (within one AAC frame); the
soundtrack is `duck_db` quieter where the narration speaks than where it is silent (its tone's level measured by
projection in windows of whole periods of both tones, so the narration does not leak into the figure); nothing
clips; a narration longer than the video is refused naming trim and hold, and each fit does what it says; either
sound alone makes a clip; a missing or unreadable file is named. No timings are asserted.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from services.clips import Audio, ClipError, make_clip

FPS, WIDTH, HEIGHT = 16, 320, 240
VIDEO_S = 4.0
AAC_FRAME_S = 1024 / 48000
VOICE_HZ, MUSIC_HZ = 1000.0, 220.0  # 0.2 s windows hold whole periods of both: 200 and 44
SPEAKING = [(0.2, 1.2), (3.0, 3.6)]  # where the narration's bursts are, seconds
SPEECH_WINDOWS = [(0.7, 0.9), (3.25, 3.45)]  # inside a burst, past the attack (and before the soundtrack's fade)
SILENT_WINDOWS = [(2.2, 2.4)]  # 1 s after a burst: the release is over


def _encoder() -> str:
    for name in ("libx264", "h264", "mpeg4"):
        try:
            av.Codec(name, "w")
            return name
        except (ValueError, av.error.FFmpegError):
            continue
    pytest.skip("this PyAV has neither an H.264 nor an MPEG-4 encoder")


def write_video(path: Path, codec: str, seconds: float = VIDEO_S, *, with_audio: bool = False) -> Path:
    """A moving picture (each frame different, so each packet is), B-frames and all as the encoder likes; with
    `with_audio`, a second of 440 Hz as an AAC track of its own."""
    with av.open(str(path), "w", format="mp4") as c:
        s = c.add_stream(codec, rate=FPS)
        s.width, s.height, s.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        if with_audio:
            a = c.add_stream("aac", rate=48000, layout="mono")
            beep = av.AudioFrame.from_ndarray(np.sin(2 * np.pi * 440 * np.arange(48000) / 48000).astype(np.float32)
                                              .reshape(1, -1), format="fltp", layout="mono")
            beep.sample_rate, beep.pts = 48000, 0
            for p in [*a.encode(beep), *a.encode(None)]:
                c.mux(p)
        for i in range(int(seconds * FPS)):
            img = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
            img[:, :, 0] = (np.arange(WIDTH)[None, :] * 2 + i * 7) % 256
            img[:, :, 1] = (np.arange(HEIGHT)[:, None] + i * 3) % 256
            img[40:80, (i * 4) % (WIDTH - 40):(i * 4) % (WIDTH - 40) + 40, 2] = 255
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def bursts(seconds: float = VIDEO_S, rate: int = 24_000, amp: float = 0.5,
           spans: list[tuple[float, float]] = SPEAKING) -> Audio:
    """A mono narration at the voice engine's 24 kHz: tone bursts with 10 ms edges, silence between them."""
    t = np.arange(int(seconds * rate)) / rate
    env = np.zeros_like(t)
    for a, b in spans:
        env = np.maximum(env, np.clip(np.minimum(t - a, b - t) / 0.01, 0.0, 1.0))
    return Audio((amp * env * np.sin(2 * np.pi * VOICE_HZ * t)).astype(np.float32), rate)


def tone(seconds: float, rate: int = 44_100, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    x = (amp * np.sin(2 * np.pi * MUSIC_HZ * t)).astype(np.float32)
    return np.stack([x, x], axis=1)


def write_audio(path: Path, samples: np.ndarray, rate: int) -> Path:
    """`samples` (frames, channels) as a file of the format its suffix names, encoded with PyAV."""
    fmt, codec = {".wav": ("wav", "pcm_s16le"), ".flac": ("flac", "flac"), ".mp3": ("mp3", "libmp3lame"),
                  ".m4a": ("ipod", "aac")}[path.suffix]
    layout = "stereo" if samples.shape[1] == 2 else "mono"
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=rate, layout=layout)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples.T, dtype=np.float32), format="fltp",
                                           layout=layout)
        frame.sample_rate, frame.pts = rate, 0
        for p in s.encode(frame):
            c.mux(p)
        for p in s.encode(None):
            c.mux(p)
    return path


def video_packets(path: Path) -> tuple[Fraction, list[tuple[bytes, int, int]]]:
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        return Fraction(s.time_base), [(bytes(p), p.pts, p.dts) for p in c.demux(s) if p.size]


def decoded_audio(path: Path) -> tuple[np.ndarray, av.AudioStream]:
    """The audio track decoded to (frames, channels) float32, and its stream (read before the file closes)."""
    with av.open(str(path)) as c:
        s = c.streams.audio[0]
        info = {"codec": s.codec_context.name, "rate": s.rate, "channels": s.codec_context.channels,
                "duration_s": float(s.duration * s.time_base)}
        planes = [f.to_ndarray() for f in c.decode(s)]
    x = np.concatenate(planes, axis=1).T
    return x, info


def level_db(x: np.ndarray, hz: float, window: tuple[float, float], rate: int = 48000) -> float:
    """The amplitude of the `hz` component of the left channel over `window`, in dBFS (projection onto it)."""
    a, b = (round(t * rate) for t in window)
    seg = x[a:b, 0].astype(np.float64)
    t = np.arange(a, b) / rate
    amp = 2 * abs(np.sum(seg * np.exp(-2j * np.pi * hz * t))) / seg.size
    return 20 * math.log10(max(amp, 1e-9))


@pytest.fixture(scope="module")
def codec() -> str:
    return _encoder()


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory, codec: str) -> Path:
    return write_video(tmp_path_factory.mktemp("clip") / "take.mp4", codec)


@pytest.fixture(scope="module")
def soundtrack_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1.9 s of tone at 44.1 kHz as a WAV file: looped to the video's 4 s (the seams, at 1.87 s and 3.74 s, are
    outside every measuring window: the tone's phase jumps there)."""
    return write_audio(tmp_path_factory.mktemp("sound") / "music.wav", tone(1.9), 44_100)


@pytest.mark.parametrize("encoder", ["h264", "mpeg4"])
def test_video_packets_are_copied_byte_for_byte_and_the_track_is_aac_48k_stereo(tmp_path, encoder,
                                                                               soundtrack_file):
    if encoder == "h264":
        encoder = _encoder()
    source = write_video(tmp_path / f"{encoder}.mp4", encoder)
    result = make_clip(source, tmp_path / "clip.mp4", narration=bursts(), soundtrack=soundtrack_file)

    base_in, packets_in = video_packets(source)
    base_out, packets_out = video_packets(result.path)
    assert base_out == base_in
    assert len(packets_out) == len(packets_in) == result.frames == VIDEO_S * FPS
    assert [p[0] for p in packets_out] == [p[0] for p in packets_in]  # the bytes
    assert [p[1:] for p in packets_out] == [p[1:] for p in packets_in]  # pts and dts, in the same time base

    samples, info = decoded_audio(result.path)
    assert (info["codec"], info["rate"], info["channels"]) == ("aac", 48000, 2)
    assert abs(samples.shape[0] / 48000 - VIDEO_S) <= AAC_FRAME_S
    assert abs(info["duration_s"] - VIDEO_S) <= AAC_FRAME_S
    assert result.video_s == result.clip_s == result.audio_s == VIDEO_S
    assert (result.narration_s, result.soundtrack_s, result.fit, result.held_s) == (VIDEO_S, 1.9, None, 0.0)
    assert result.mux_s > 0 and set(result.timings) >= {"read_s", "sound_s", "encode_s", "write_s"}


@pytest.mark.parametrize("duck_db", [12.0, 20.0])
def test_the_soundtrack_is_ducked_by_duck_db_where_the_narration_speaks(tmp_path, video, soundtrack_file, duck_db):
    result = make_clip(video, tmp_path / "clip.mp4", narration=bursts(), soundtrack=soundtrack_file, duck_db=duck_db)
    x, _ = decoded_audio(result.path)
    open_level = np.mean([level_db(x, MUSIC_HZ, w) for w in SILENT_WINDOWS])
    for window in SPEECH_WINDOWS:
        ducked = level_db(x, MUSIC_HZ, window)
        assert open_level - ducked == pytest.approx(duck_db, abs=3.0), window
    # where it is silent the soundtrack is at its own level (the tone's 0.5, less what the limiter took)
    assert open_level == pytest.approx(20 * math.log10(0.5) + result.limiter_db, abs=1.0)
    # the narration itself is not ducked
    voice = np.mean([level_db(x, VOICE_HZ, w) for w in SPEECH_WINDOWS])
    assert voice == pytest.approx(20 * math.log10(0.5) + result.limiter_db, abs=1.0)


def test_the_duck_is_an_envelope_not_a_gate(tmp_path, video, soundtrack_file):
    """200–400 ms after the voice stops the soundtrack is on its way back up: between the open and the ducked
    levels, not at one or the other as a gate would have it."""
    result = make_clip(video, tmp_path / "clip.mp4", narration=bursts(), soundtrack=soundtrack_file)
    x, _ = decoded_audio(result.path)
    open_level = level_db(x, MUSIC_HZ, SILENT_WINDOWS[0])
    ducked = level_db(x, MUSIC_HZ, SPEECH_WINDOWS[0])
    leaving = level_db(x, MUSIC_HZ, (1.4, 1.6))  # 200–400 ms after the first burst ends
    assert ducked + 2.0 < leaving < open_level - 1.0


def test_no_sample_clips_when_the_parts_add_up_past_full_scale(tmp_path, video):
    loud_voice = bursts(amp=0.95)
    loud_music = Audio(tone(VIDEO_S, amp=0.95), 44_100)
    result = make_clip(video, tmp_path / "clip.mp4", narration=loud_voice, soundtrack=loud_music, duck_db=3.0)
    x, _ = decoded_audio(result.path)
    assert result.limiter_db < 0
    assert np.max(np.abs(x)) < 1.0
    assert np.max(np.abs(x)) > 0.5  # turned down to fit, not to nothing


def test_a_narration_longer_than_the_video_is_refused_naming_trim_and_hold(tmp_path, video, soundtrack_file):
    with pytest.raises(ClipError) as err:
        make_clip(video, tmp_path / "clip.mp4", narration=bursts(seconds=5.0), soundtrack=soundtrack_file)
    message = str(err.value)
    assert "1.00 s longer" in message and "--fit trim" in message and "--fit hold" in message
    assert not (tmp_path / "clip.mp4").exists() and not list(tmp_path.iterdir())


def test_fit_trim_cuts_the_narration_at_the_videos_end(tmp_path, video):
    long_voice = bursts(seconds=5.0, spans=[(0.2, 4.8)])
    result = make_clip(video, tmp_path / "clip.mp4", narration=long_voice, fit="trim")
    x, info = decoded_audio(result.path)
    assert abs(x.shape[0] / 48000 - VIDEO_S) <= AAC_FRAME_S and abs(info["duration_s"] - VIDEO_S) <= AAC_FRAME_S
    assert (result.fit, result.narration_s, result.clip_s) == ("trim", 5.0, VIDEO_S)
    assert level_db(x, VOICE_HZ, (3.7, 3.9)) > -8  # still speaking just before the end …
    assert np.max(np.abs(x[-96:])) < 0.05  # … and faded out by it, not cut mid-wave


def test_fit_hold_plays_as_long_as_the_narration_with_the_last_frame_held(tmp_path, video):
    long_voice = bursts(seconds=5.5, spans=[(0.2, 5.3)])
    result = make_clip(video, tmp_path / "clip.mp4", narration=long_voice, fit="hold")
    assert result.fit == "hold" and result.held_s == pytest.approx(1.5, abs=1e-3)
    assert result.clip_s == pytest.approx(5.5, abs=1e-3)

    base_in, packets_in = video_packets(video)
    base_out, packets_out = video_packets(result.path)
    assert base_out == base_in and packets_out == packets_in  # still a copy: the bytes, pts and dts

    with av.open(str(result.path)) as c:
        v = c.streams.video[0]
        assert float(v.duration * v.time_base) == pytest.approx(5.5, abs=1 / FPS)
        assert c.duration / 1e6 == pytest.approx(5.5, abs=1 / FPS)
        held = [f.to_ndarray(format="rgb24") for f in c.decode(v)]
    with av.open(str(video)) as c:
        original = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    assert len(held) == len(original) and np.array_equal(held[-1], original[-1])  # it decodes, to the same pictures
    x, info = decoded_audio(result.path)
    assert abs(x.shape[0] / 48000 - 5.5) <= AAC_FRAME_S and abs(info["duration_s"] - 5.5) <= AAC_FRAME_S
    assert level_db(x, VOICE_HZ, (5.0, 5.2)) > -8  # the narration is heard to its end


def test_a_soundtrack_alone_makes_a_clip(tmp_path, video, soundtrack_file):
    result = make_clip(video, tmp_path / "clip.mp4", soundtrack=soundtrack_file)
    x, info = decoded_audio(result.path)
    assert (info["codec"], info["rate"], info["channels"]) == ("aac", 48000, 2)
    assert abs(x.shape[0] / 48000 - VIDEO_S) <= AAC_FRAME_S
    levels = [level_db(x, MUSIC_HZ, w) for w in SPEECH_WINDOWS + SILENT_WINDOWS]
    assert max(levels) - min(levels) < 1.0  # nothing to duck under
    assert level_db(x, MUSIC_HZ, (3.9, 4.0)) < min(levels) - 10  # faded out at the end
    assert result.narration_s is None


@pytest.mark.parametrize("suffix", [".wav", ".flac", ".mp3", ".m4a"])
def test_a_narration_alone_from_a_file_makes_a_clip(tmp_path, video, suffix):
    voice = bursts(seconds=2.5, rate=44_100, spans=SPEAKING[:1])  # shorter than the video: the track is padded
    path = write_audio(tmp_path / f"voice{suffix}", voice.samples, 44_100)
    result = make_clip(video, tmp_path / "clip.mp4", narration=path)
    x, info = decoded_audio(result.path)
    assert (info["codec"], info["rate"], info["channels"]) == ("aac", 48000, 2)
    assert abs(x.shape[0] / 48000 - VIDEO_S) <= AAC_FRAME_S
    assert level_db(x, VOICE_HZ, SPEECH_WINDOWS[0]) == pytest.approx(20 * math.log10(0.5), abs=1.0)
    assert np.max(np.abs(x[:, 0] - x[:, 1])) < 1e-4  # mono doubled to both sides (AAC rounds a little)
    assert np.max(np.abs(x[round(2.6 * 48000):])) < 1e-3  # silence after it
    assert result.soundtrack_s is None and result.narration_s == pytest.approx(2.5, abs=0.03)


def test_wav_bytes_from_the_speech_route_replace_the_videos_own_audio(tmp_path, codec):
    """A narration as the voice engine answers it (a 24 kHz mono WAV file's bytes) over a video that already has
    sound: the clip holds one audio track, the narration's."""
    from protocol.audio import wav_bytes

    source = write_video(tmp_path / "with-sound.mp4", codec, with_audio=True)
    pcm = (bursts().samples[:, 0] * 32767).astype("<i2").tobytes()
    result = make_clip(source, tmp_path / "clip.mp4", narration=wav_bytes(pcm, 24_000, 1))
    with av.open(str(result.path)) as c:
        assert len(c.streams.audio) == 1
    x, _ = decoded_audio(result.path)
    assert level_db(x, VOICE_HZ, SPEECH_WINDOWS[0]) == pytest.approx(20 * math.log10(0.5), abs=1.0)
    assert level_db(x, 440.0, (0.2, 0.4)) < -60  # the video's own beep is gone
    assert video_packets(result.path) == video_packets(source)


def test_neither_sound_is_refused_naming_both(tmp_path, video):
    with pytest.raises(ClipError, match="narration=.*soundtrack="):
        make_clip(video, tmp_path / "clip.mp4")


def test_missing_and_unreadable_files_are_named(tmp_path, video, soundtrack_file):
    missing = tmp_path / "nowhere.mp4"
    with pytest.raises(ClipError, match=f"video {missing} does not exist"):
        make_clip(missing, tmp_path / "clip.mp4", soundtrack=soundtrack_file)
    with pytest.raises(ClipError, match=f"narration file {tmp_path / 'voice.wav'} does not exist"):
        make_clip(video, tmp_path / "clip.mp4", narration=tmp_path / "voice.wav")
    text = tmp_path / "notes.mp3"
    text.write_text("not audio at all\n" * 20)
    with pytest.raises(ClipError, match=f"soundtrack file {text}"):
        make_clip(video, tmp_path / "clip.mp4", soundtrack=text)
    garbage = tmp_path / "broken.mp4"
    garbage.write_bytes(b"\x00\x01garbage" * 100)
    with pytest.raises(ClipError, match=f"video {garbage}"):
        make_clip(garbage, tmp_path / "clip.mp4", soundtrack=soundtrack_file)
    assert not (tmp_path / "clip.mp4").exists()


def test_a_file_without_a_video_stream_is_named(tmp_path, soundtrack_file):
    audio_only = write_audio(tmp_path / "song.m4a", tone(2.0), 44_100)
    with pytest.raises(ClipError, match=f"the video {audio_only} has no video stream"):
        make_clip(audio_only, tmp_path / "clip.mp4", soundtrack=soundtrack_file)
