"""`POST /v1/audio/generate` on the offline engine, driven over real HTTP (`python -m offline`) with real bytes
checked (WAV headers with the stdlib, FLAC and MP3 decoded with PyAV), and the strict vLLM-Omni peer the studio's
client is tested against (tests/sound_peer.py)."""

from __future__ import annotations

import io
import wave

import av
import httpx
import numpy as np
import pytest

from protocol.limits import SOUND_SAMPLE_RATE, SOUND_SECONDS, SOUND_WINDOW_FRAMES
from protocol.sound import (
    PREVIEW_HEADER,
    SEED_HEADER,
    SOUND_MODEL,
    SOUND_PATH,
    AudioGenerateRequest,
    answer_frames,
)
from tests.loopback_support import serving_asgi
from tests.sound_peer import StrictAudioGenerateRequest, peer_app


def generate(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}{SOUND_PATH}", json=body, timeout=60, trust_env=False)


def wav_of(resp: httpx.Response) -> tuple[int, int, int, np.ndarray]:
    """(rate, channels, sample width, samples as (frames, channels)) of a WAV answer."""
    with wave.open(io.BytesIO(resp.content)) as w:
        frames = w.readframes(w.getnframes())
        shape = (w.getnframes(), w.getnchannels())
        return w.getframerate(), w.getnchannels(), w.getsampwidth(), np.frombuffer(frames, "<i2").reshape(shape)


def decoded(data: bytes) -> tuple[int, int, int]:
    """(rate, channels, frames) of an audio file, decoded with PyAV."""
    with av.open(io.BytesIO(data)) as c:
        frames = list(c.decode(audio=0))
        return frames[0].sample_rate, len(frames[0].layout.channels), sum(f.samples for f in frames)


def refusal(resp: httpx.Response, status: int = 400) -> dict:
    """vLLM's error object of a refused request, its status and code checked."""
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert err["code"] == status
    return err


def centroid(samples: np.ndarray) -> float:
    """The power spectrum's centre of mass, Hz."""
    power = np.abs(np.fft.rfft(samples.astype(float).mean(axis=1))) ** 2
    return float((power * np.fft.rfftfreq(len(samples), 1 / SOUND_SAMPLE_RATE)).sum() / power.sum())


# ---------------------------------------------------------------------------------------------------------
# the engine
@pytest.mark.parametrize("seconds", [1.5, 10.0])
def test_wav_is_44k1_stereo_16_bit_of_the_asked_length(engine_url, seconds):
    resp = generate(engine_url, input="gentle rain on a tin roof", audio_length=seconds, seed=7)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == "audio/wav"
    rate, channels, width, samples = wav_of(resp)
    assert (rate, channels, width) == (44_100, 2, 2)
    assert len(samples) == int(seconds * 44_100)
    assert np.abs(samples).max() > 3000  # a sound, not silence
    assert resp.headers[SEED_HEADER] == "7"
    assert "not Stable Audio Open" in resp.headers[PREVIEW_HEADER] and "rain" in resp.headers[PREVIEW_HEADER]


def test_same_request_same_bytes_and_the_seed_changes_them(engine_url):
    body = {"input": "ocean waves at dusk", "audio_length": 3.0}
    first, again = (generate(engine_url, **body, seed=11).content for _ in range(2))
    assert first == again
    assert generate(engine_url, **body, seed=12).content != first
    assert generate(engine_url, input="a steady drum beat", audio_length=3.0, seed=11).content != first


def test_without_a_seed_one_is_drawn_and_reported_so_the_sound_can_be_made_again(engine_url):
    first = generate(engine_url, input="wind in the pines", audio_length=2.0)
    seed = int(first.headers[SEED_HEADER])
    assert generate(engine_url, input="wind in the pines", audio_length=2.0, seed=seed).content == first.content


@pytest.mark.parametrize("fmt, media_type", [("flac", "audio/flac"), ("mp3", "audio/mpeg")])
def test_flac_and_mp3_decode_to_44k1_stereo_of_the_asked_length(engine_url, fmt, media_type):
    resp = generate(engine_url, input="a bell in a quiet hall", audio_length=4.0, response_format=fmt, seed=3)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == media_type
    rate, channels, frames = decoded(resp.content)
    assert (rate, channels) == (44_100, 2)
    assert abs(frames - 4.0 * 44_100) <= 0.06 * 44_100  # MP3 pads a frame or two at each end


def test_pcm_is_raw_interleaved_stereo_and_speed_shortens_it(engine_url):
    resp = generate(engine_url, input="piano chords", audio_length=2.0, response_format="pcm", seed=1)
    assert resp.headers["content-type"] == "audio/pcm" and len(resp.content) == 2 * 44_100 * 2 * 2
    fast = generate(engine_url, input="piano chords", audio_length=2.0, response_format="pcm", seed=1, speed=2.0)
    assert len(fast.content) == answer_frames(2.0, 0.0, 2.0) * 4 == 44_100 * 4


def test_without_audio_length_the_whole_window_comes_back(engine_url):
    resp = generate(engine_url, input="a warm evening", response_format="pcm", seed=5)
    assert len(resp.content) == SOUND_WINDOW_FRAMES * 4  # 47.55 s, as the model renders without a length


def test_the_prompts_words_are_heard(engine_url):
    """Rain is bright hiss, an ocean and a pad are low; a beat at 120 BPM repeats every half second."""
    def samples(prompt: str) -> np.ndarray:
        return wav_of(generate(engine_url, input=prompt, audio_length=6.0, seed=2))[3]

    rain, ocean, pad = (centroid(samples(p)) for p in ("heavy rain", "ocean waves", "a quiet evening"))
    assert rain > 2 * ocean and rain > 2 * pad
    beat = np.abs(samples("a techno drum beat, 120 bpm").astype(float).mean(axis=1)).reshape(-1, 441).mean(axis=1)
    beat -= beat.mean()  # 10 ms steps
    lags = np.correlate(beat, beat, "full")[len(beat) - 1:]
    assert int(np.argmax(lags[30:250])) + 30 in (50, 100, 150, 200)  # a beat (500 ms) or a multiple of it


@pytest.mark.parametrize("body, param, words", [
    ({"input": ""}, "body.input", "input cannot be empty"),
    ({"input": "   "}, "body.input", "input cannot be empty"),
    ({}, "body.input", "Field required"),
    ({"input": "rain", "audio_length": 0}, "body.audio_length", "greater than 0"),
    ({"input": "rain", "audio_length": 100}, "body.audio_length", f"at most {SOUND_SECONDS.hi:.6g} seconds"),
    ({"input": "rain", "audio_length": 10, "audio_start": 40}, "body.audio_start", "audio_start + audio_length"),
    ({"input": "rain", "response_format": "ogg"}, "body.response_format", "'wav', 'pcm', 'flac', 'mp3' or 'opus'"),
    ({"input": "rain", "num_inference_steps": 0}, "body.num_inference_steps", "greater than or equal to 1"),
    ({"input": "rain", "guidance_scale": 1001}, "body.guidance_scale", "less than or equal to 1000"),
    ({"input": "rain", "stream_format": "sse"}, "body.stream_format", "'sse' is not a supported stream_format"),
])
def test_bad_input_is_a_400_naming_the_field(engine_url, body, param, words):
    err = refusal(httpx.post(f"{engine_url}{SOUND_PATH}", json=body, timeout=30, trust_env=False))
    assert err["param"] == param and err["type"] == "Bad Request"
    assert "validation error" in err["message"] and words in err["message"]


def test_opus_another_model_and_a_form_body_are_refused_as_vllm_omni_refuses_them(engine_url):
    err = refusal(generate(engine_url, input="rain", response_format="opus"))
    assert err["param"] == "response_format" and "wav, flac, mp3, pcm" in err["message"]
    err = refusal(generate(engine_url, input="rain", model="stabilityai/stable-audio-open-small"), 404)
    assert (err["type"], err["param"]) == ("NotFoundError", "model")
    assert err["message"] == "The model `stabilityai/stable-audio-open-small` does not exist."
    assert generate(engine_url, input="rain", model=SOUND_MODEL, audio_length=0.5).status_code == 200
    err = refusal(httpx.post(f"{engine_url}{SOUND_PATH}", data={"input": "rain"}, timeout=30, trust_env=False))
    assert "Only 'application/json' is allowed" in err["message"]


def test_the_models_card_says_it_is_a_preview(engine_url):
    cards = httpx.get(f"{engine_url}/v1/models", timeout=10, trust_env=False).json()["data"]
    card = next(c for c in cards if c["id"] == SOUND_MODEL)
    assert card["preview"].startswith("Offline preview: not Stable Audio Open")


# ---------------------------------------------------------------------------------------------------------
# the strict peer
def test_the_studios_request_model_has_vllm_omnis_fields_and_defaults():
    ours, theirs = AudioGenerateRequest.model_fields, StrictAudioGenerateRequest.model_fields
    assert list(ours) == list(theirs)
    assert {k: f.default for k, f in ours.items()} == {k: f.default for k, f in theirs.items()}
    assert AudioGenerateRequest.model_config["extra"] == "ignore"
    assert AudioGenerateRequest(input="rain", unknown=1).wire() == {  # type: ignore[call-arg]
        "input": "rain", "response_format": "wav", "speed": 1.0, "stream_format": "audio", "audio_start": 0.0}


def test_the_peer_refuses_an_unknown_field_and_accepts_what_vllm_omni_accepts():
    app = peer_app()
    with serving_asgi(app) as url:
        err = refusal(generate(url, input="rain", duration=5))
        assert err["param"] == "body.duration" and "Extra inputs are not permitted" in err["message"]
        full = AudioGenerateRequest(input="rain on a tent", model=SOUND_MODEL, response_format="flac", speed=1.0,
                                    audio_length=2.5, audio_start=1.0, negative_prompt="thunder", guidance_scale=7.0,
                                    num_inference_steps=50, seed=-3)
        resp = generate(url, **full.wire())
        assert resp.status_code == 200 and resp.headers["content-type"] == "audio/flac"
        assert decoded(resp.content) == (44_100, 2, int(3.5 * 44_100) - 44_100)
        assert SEED_HEADER not in resp.headers and PREVIEW_HEADER not in resp.headers
        late = generate(url, input="rain", audio_length=5.0, audio_start=45.0)  # vLLM-Omni cuts at the window's end
        assert wave.open(io.BytesIO(late.content)).getnframes() == SOUND_WINDOW_FRAMES - 45 * 44_100
        assert "exceeds maximum" in refusal(generate(url, input="rain", audio_length=100))["message"]
        assert refusal(generate(url, input="rain", model="other"), 404)["type"] == "NotFoundError"
        assert "Opus" in refusal(generate(url, input="rain", response_format="opus"))["message"]
    assert app.state.seen[0] == full.wire()  # what it accepted, as sent; the refused ones are not kept
    assert [s.get("audio_start") for s in app.state.seen] == [1.0, 45.0, None]  # opus fails after acceptance
