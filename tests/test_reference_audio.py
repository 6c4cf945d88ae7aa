"""Reference recordings for cloning (services/speech/reference.py), with real audio files made by PyAV's encoders:
each check names what to fix, and the conversion gives mono 24 kHz s16 WAV of the same length."""

from __future__ import annotations

import base64
import io
import logging

import av
import numpy as np
import pytest

from protocol.errors import InvalidInput
from protocol.limits import VOICE_SAMPLE_MAX_BYTES
from services.speech.audio import read_wav
from services.speech.reference import ReferenceAudio, load_reference

# container, codec, sample format of the encoder
FORMATS = {
    "wav": ("wav", "pcm_s16le", "s16"),
    "flac": ("flac", "flac", "s16"),
    "ogg": ("ogg", "libopus", "s16"),
    "mp3": ("mp3", "libmp3lame", "fltp"),
    "webm": ("webm", "libopus", "s16"),
}


def speech_like(seconds: float, rate: int = 48_000, channels: int = 1, amplitude: float = 0.3, seed: int = 1) -> np.ndarray:
    """A voice-like test signal: a 150 Hz buzz with harmonics, syllable-rate amplitude, a little noise; (channels, n)."""
    t = np.arange(int(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * 150 * k * t) / k for k in range(1, 6))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t)
    noise = np.random.default_rng(seed).normal(0, 0.02, t.size)
    mono = amplitude * (tone / np.abs(tone).max()) * envelope + noise * amplitude
    return np.tile(mono.astype(np.float32), (channels, 1))


def encode(samples: np.ndarray, rate: int, kind: str = "wav") -> bytes:
    """`samples` (channels, n) in [-1, 1] as a real file of `kind`, made by PyAV's encoder."""
    fmt, codec, sample_fmt = FORMATS[kind]
    channels = samples.shape[0]
    layout = "mono" if channels == 1 else "stereo"
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as c:
        stream = c.add_stream(codec, rate=rate, layout=layout)
        stream.format = sample_fmt
        data = np.clip(samples, -1, 1)
        step = 960
        for i in range(0, data.shape[1], step):
            part = data[:, i:i + step]
            if sample_fmt == "s16":
                arr = (part.T.reshape(1, -1) * 32767).astype(np.int16)
            else:  # planar float
                arr = np.ascontiguousarray(part, dtype=np.float32)
            frame = av.AudioFrame.from_ndarray(arr, format=sample_fmt, layout=layout)
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                c.mux(packet)
        for packet in stream.encode(None):
            c.mux(packet)
    return buf.getvalue()


def wav_of(ref: ReferenceAudio) -> tuple[np.ndarray, int, int]:
    pcm, rate, channels = read_wav(ref.wav)
    return np.frombuffer(pcm, "<i2"), rate, channels


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_every_recording_format_becomes_mono_24k_wav_of_the_same_length(kind: str) -> None:
    raw = encode(speech_like(6.0, 48_000, channels=2), 48_000, kind)
    ref = load_reference(raw)
    samples, rate, channels = wav_of(ref)
    assert (rate, channels) == (24_000, 1)
    assert ref.source_channels == 2 and ref.source_rate == 48_000
    assert abs(len(samples) / 24_000 - 6.0) < 0.1, len(samples) / 24_000  # codecs pad a few ms
    assert abs(ref.seconds - len(samples) / 24_000) < 1e-6
    assert -25 < ref.level_dbfs < -5 and np.abs(samples).max() > 0.1 * 32767


def test_resampled_tone_keeps_its_pitch_and_level() -> None:
    rate = 44_100
    t = np.arange(int(4.0 * rate)) / rate
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None, :]
    ref = load_reference(encode(tone, rate, "flac"))
    samples, out_rate, _ = wav_of(ref)
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64)))
    peak_hz = np.argmax(spectrum) * out_rate / len(samples)
    assert abs(peak_hz - 440) < 1.0
    assert abs(np.abs(samples).max() / 32767 - 0.5) < 0.02


def test_data_url_is_the_wav_in_base64() -> None:
    ref = load_reference(encode(speech_like(4.0, 24_000), 24_000))
    url = ref.data_url()
    assert url.startswith("data:audio/wav;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == ref.wav
    assert "wav=" not in repr(ref) and "RIFF" not in repr(ref)  # the voice stays out of logs and reprs


def test_streamlit_style_uploads_are_read_like_bytes() -> None:
    raw = encode(speech_like(4.0, 16_000), 16_000)
    assert load_reference(io.BytesIO(raw)).wav == load_reference(raw).wav


@pytest.mark.parametrize("seconds", [0.5, 2.1])
def test_too_short_names_its_length(seconds: float) -> None:
    with pytest.raises(InvalidInput) as err:
        load_reference(encode(speech_like(seconds, 24_000), 24_000))
    assert f"{seconds:.1f} s" in str(err.value) and "record 5–20 s of one person speaking" in str(err.value)


def test_too_long_names_its_length_and_the_limit() -> None:
    with pytest.raises(InvalidInput) as err:
        load_reference(encode(speech_like(41.0, 16_000), 16_000, "flac"))
    message = str(err.value)
    assert "41.0 s" in message and "the limit is 30 s" in message


def test_just_inside_the_limits_is_accepted() -> None:
    assert abs(load_reference(encode(speech_like(3.05, 24_000), 24_000)).seconds - 3.05) < 0.01
    assert abs(load_reference(encode(speech_like(29.9, 16_000), 16_000)).seconds - 29.9) < 0.01


def test_silence_is_refused() -> None:
    silent = np.zeros((1, 24_000 * 5), np.float32)
    hiss = np.random.default_rng(3).normal(0, 0.0005, (1, 24_000 * 5)).astype(np.float32)  # about -66 dBFS
    for samples in (silent, hiss):
        with pytest.raises(InvalidInput) as err:
            load_reference(encode(samples, 24_000))
        assert "silent" in str(err.value) and "microphone" in str(err.value)


def test_a_quiet_but_real_voice_is_accepted() -> None:
    ref = load_reference(encode(speech_like(5.0, 24_000, amplitude=0.03), 24_000))
    assert -45 < ref.level_dbfs < -25


@pytest.mark.parametrize("kind", ["wav", "flac"])
def test_clipping_is_refused(kind: str) -> None:
    overloaded = np.clip(speech_like(5.0, 24_000, amplitude=3.0), -1, 1)
    with pytest.raises(InvalidInput) as err:
        load_reference(encode(overloaded, 24_000, kind))
    assert "clipped" in str(err.value) and "full scale" in str(err.value)


def test_a_loud_unclipped_voice_is_accepted() -> None:
    assert load_reference(encode(speech_like(5.0, 24_000, amplitude=0.95), 24_000)).peak_dbfs > -1.0


def test_not_audio_is_refused() -> None:
    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (64, 64), "red").save(png, "PNG")
    for data in (b"just some text, not a recording\n" * 50, png.getvalue(), b"RIFF\x00\x00\x00\x00WAVEjunk"):
        with pytest.raises(InvalidInput) as err:
            load_reference(data)
        assert "WAV, MP3, FLAC, OGG or WebM" in str(err.value) or "no audio" in str(err.value), str(err.value)


def test_empty_and_too_large_are_refused_before_decoding() -> None:
    with pytest.raises(InvalidInput, match="empty"):
        load_reference(b"")
    big = encode(speech_like(1.0, 24_000), 24_000) + bytes(VOICE_SAMPLE_MAX_BYTES)
    with pytest.raises(InvalidInput) as err:
        load_reference(big)
    assert f"is {len(big) / 2**20:.1f} MB; the limit is 10.0 MB" in str(err.value)


def test_nothing_of_a_reference_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    load_reference(encode(speech_like(4.0, 24_000), 24_000))
    with pytest.raises(InvalidInput):
        load_reference(encode(speech_like(1.0, 24_000), 24_000))
    assert not [r for r in caplog.records if r.name.startswith("services")]
