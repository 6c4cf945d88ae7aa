"""The offline engine's voices and voice previews, over real HTTP and WebSocket on loopback.

- `/v1/audio/voices` upload / list / delete with vLLM-Omni's fields, texts and status codes (a refused upload
  is HTTP 200 with an error body there), parsed with the protocol's own models;
- style instructions and voice descriptions change the Piper voice measurably (duration, median pitch
  measured here with a plain autocorrelation tracker, independent of the engine's), deterministically;
- a reference recording (a harmonic tone of known pitch) moves the voice's pitch towards it, by `ref_audio`
  and by an uploaded voice's name, on REST and on the WebSocket;
- each unsupported combination answers vLLM-Omni's words.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import threading
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import uvicorn
from websockets.asyncio.client import connect

from offline.server import create_app
from offline.voices import VoiceStore
from protocol.limits import VOICE_SAMPLE_MAX_BYTES
from protocol.speech import QWEN3_TTS_SPEAKERS, SPEECH_STREAM_PATH
from protocol.voices import (
    VOICES_PATH,
    UploadedVoice,
    VoiceDeleteResponse,
    VoicesResponse,
    VoiceUploadForm,
    VoiceUploadResponse,
    voice_path,
)
from tests.conftest import free_port

RATE = 24_000
TEXT = "Hello there, this is the offline voice reading a short sentence for the test."
CLONE_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-Base"


# ---------------------------------------------------------------------------------------------------------
# Servers and helpers
def serve(app: Any) -> tuple[str, uvicorn.Server, threading.Thread]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(400):
        if server.started:
            break
        threading.Event().wait(0.05)
    assert server.started, "the in-process engine did not start"
    return f"http://127.0.0.1:{port}", server, thread


def stop(server: uvicorn.Server, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A real engine app on its own port, with a voice store of its own (no folder)."""
    app = create_app()
    app.state.voices = VoiceStore()
    base, server, thread = serve(app)
    httpx.post(f"{base}/v1/audio/speech", json={"input": "Warm up."}, timeout=120).raise_for_status()
    yield base
    stop(server, thread)


@pytest.fixture()
def http(url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=url, timeout=120) as client:
        yield client


def tone_wav(f0: float, seconds: float = 4.0, rate: int = RATE, *, level: float = 0.25) -> bytes:
    """A WAV of a voiced-sounding harmonic tone at `f0` Hz (five harmonics, gentle vibrato, syllable-like pulses)."""
    t = np.arange(int(rate * seconds)) / rate
    phase = 2 * np.pi * np.cumsum(f0 * (1 + 0.01 * np.sin(2 * np.pi * 5 * t))) / rate
    x = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 3 * t) ** 2
    samples = level * x * envelope / np.max(np.abs(x))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.round(samples * 32767).astype("<i2").tobytes())
    return buf.getvalue()


def data_url(wav_bytes: bytes) -> str:
    return "data:audio/wav;base64," + base64.b64encode(wav_bytes).decode("ascii")


def median_pitch(pcm: bytes, rate: int = RATE) -> float:
    """Median pitch (Hz) of 24 kHz s16le PCM over its voiced frames: the normalised cross-correlation of each
    loud 30 ms frame with the signal shifted by each lag of 55-400 Hz; the shortest lag within 90 % of the best
    one, climbed to its top, is the period (so a period's multiples do not win), and a frame is voiced when that peak is above 0.6."""
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64) / 32768
    width, hop = int(0.03 * rate), int(0.01 * rate)
    lo, hi = int(rate / 400), int(rate / 55)
    pitches = []
    starts = range(0, len(x) - width - hi, hop)
    loudness = np.array([np.sqrt(np.mean(x[s : s + width] ** 2)) for s in starts])
    for s in np.asarray(starts)[loudness > 0.25 * np.percentile(loudness, 95)]:
        frame = x[s : s + width]
        shifted = np.lib.stride_tricks.sliding_window_view(x[s + lo : s + hi + width], width)
        nccf = shifted @ frame / np.sqrt(np.sum(shifted**2, axis=1) * np.sum(frame**2) + 1e-12)
        best = float(nccf.max())
        if best > 0.6:
            i = int(np.flatnonzero(nccf >= 0.9 * best)[0])
            while i + 1 < nccf.size and nccf[i + 1] >= nccf[i]:  # up to the top of that peak
                i += 1
            pitches.append(rate / (lo + i))
    assert len(pitches) >= 20, f"only {len(pitches)} voiced frames"
    return float(np.median(pitches))


def speak(http: httpx.Client, **body: Any) -> httpx.Response:
    response = http.post("/v1/audio/speech", json={"input": TEXT, "response_format": "pcm", **body})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/pcm"
    return response


def upload(http: httpx.Client, name: str, *, wav_bytes: bytes | None = None, filename: str = "voice.wav",
           content_type: str = "audio/wav", **fields: str) -> httpx.Response:
    form = VoiceUploadForm(name=name, consent=fields.pop("consent", "consent-rec-1"), **fields).form_fields()
    files = {"audio_sample": (filename, wav_bytes, content_type)} if wav_bytes is not None else None
    return http.post(VOICES_PATH, data=form, files=files)


def listed(http: httpx.Client) -> VoicesResponse:
    response = http.get(VOICES_PATH)
    assert response.status_code == 200
    return VoicesResponse.model_validate(response.json())


# ---------------------------------------------------------------------------------------------------------
# Upload, list, delete
def test_upload_list_delete_round_trip(http: httpx.Client) -> None:
    response = upload(http, "  Narrator One ", wav_bytes=tone_wav(180), ref_text="Hello there.",
                      speaker_description="  a calm narrator ", consent="rec-42")
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["success", "voice"] and body["success"] is True
    # vLLM-Omni's keys for a recording, in its order; the name is trimmed, as are the optional texts.
    assert list(body["voice"]) == ["name", "consent", "created_at", "mime_type", "file_size", "ref_text",
                                   "speaker_description"]
    answer = VoiceUploadResponse.model_validate(body)
    assert answer.voice is not None
    assert (answer.voice.name, answer.voice.consent, answer.voice.mime_type) == ("Narrator One", "rec-42", "audio/wav")
    assert answer.voice.file_size == len(tone_wav(180))
    assert (answer.voice.ref_text, answer.voice.speaker_description) == ("Hello there.", "a calm narrator")

    raw = http.get(VOICES_PATH).json()
    # The Piper voice, the model's preset speakers, its default, then the uploaded voices.
    assert "narrator one" in raw["voices"] and raw["voices"][:11] == ["joe", *QWEN3_TTS_SPEAKERS, "default"]
    entry = next(v for v in raw["uploaded_voices"] if v["name"] == "Narrator One")
    assert list(entry) == ["name", "consent", "created_at", "file_size", "mime_type", "embedding_source",
                           "embedding_dim", "ref_text", "speaker_description"]
    assert entry["embedding_source"] == "audio" and entry["embedding_dim"] is None
    assert UploadedVoice.model_validate(entry).created_at == answer.voice.created_at

    deleted = http.delete(voice_path("NARRATOR ONE"))  # names match case-insensitively
    assert deleted.status_code == 200
    assert deleted.json() == {"success": True, "message": "Voice 'NARRATOR ONE' deleted successfully"}
    assert "narrator one" not in listed(http).voices
    again = http.delete(voice_path("Narrator One"))
    assert again.status_code == 404
    assert again.json() == {"success": False, "error": "Voice 'Narrator One' not found"}
    parsed = VoiceDeleteResponse.model_validate(again.json())
    assert (parsed.success, parsed.error) == (False, "Voice 'Narrator One' not found")


def test_embedding_upload(http: httpx.Client) -> None:
    response = upload(http, "Vector", speaker_embedding=json.dumps([0.02] * 1024))
    assert response.status_code == 200
    assert response.json()["voice"] == {
        "name": "Vector", "consent": "consent-rec-1", "created_at": response.json()["voice"]["created_at"],
        "embedding_source": "direct", "embedding_dim": 1024,
    }
    entry = next(v for v in listed(http).uploaded_voices if v.name == "Vector")
    assert (entry.embedding_source, entry.embedding_dim, entry.mime_type) == ("direct", 1024, "application/x-safetensors")
    # The embedding voice speaks (Base by its name) with its own fixed pitch, the same every time.
    first, second = speak(http, voice="vector"), speak(http, voice="Vector")
    assert first.content == second.content and "embedding" in first.headers["x-offline-preview"]
    assert http.delete(voice_path("vector")).status_code == 200


def test_generic_content_type_is_read_from_the_file_name(http: httpx.Client) -> None:
    response = upload(http, "Named By File", wav_bytes=tone_wav(150), filename="take.FLAC",
                      content_type="application/octet-stream")
    voice = VoiceUploadResponse.model_validate(response.json()).voice
    assert voice is not None and voice.mime_type == "audio/flac"  # as vLLM-Omni guesses it; PyAV reads the bytes
    assert http.delete(voice_path("named by file")).status_code == 200


def test_uploading_a_name_again_replaces_it_and_a_failed_upload_keeps_the_old_one(http: httpx.Client) -> None:
    first = VoiceUploadResponse.model_validate(upload(http, "Dup", wav_bytes=tone_wav(150)).json()).voice
    second = VoiceUploadResponse.model_validate(upload(http, "DUP", wav_bytes=tone_wav(250, 5.0)).json()).voice
    assert first is not None and second is not None and second.created_at > first.created_at
    entries = [v for v in listed(http).uploaded_voices if v.name.lower() == "dup"]
    assert [(v.name, v.file_size) for v in entries] == [("DUP", len(tone_wav(250, 5.0)))]
    failed = upload(http, "dup", wav_bytes=b"not audio at all" * 100)
    assert VoiceUploadResponse.model_validate(failed.json()).success is False
    assert [v.name for v in listed(http).uploaded_voices if v.name.lower() == "dup"] == ["DUP"]
    assert http.delete(voice_path("dup")).status_code == 200


@pytest.mark.parametrize(
    ("fields", "sample", "message"),
    [
        ({"name": "x", "consent": "c", "speaker_embedding": "[0.1]"}, tone_wav(150),
         "'audio_sample' and 'speaker_embedding' are mutually exclusive"),
        ({"name": "x", "consent": "c"}, None, "Either 'audio_sample' or 'speaker_embedding' must be provided"),
        ({"name": "a/b", "consent": "c"}, tone_wav(150),
         "Invalid voice name 'a/b': must be non-empty, no path separators or NUL"),
        ({"name": "..", "consent": "c"}, tone_wav(150), "Invalid voice name '..'"),
        ({"name": "   ", "consent": "c"}, tone_wav(150), "Invalid voice name '   '"),
        ({"name": "x", "consent": "c"}, b"RIFF" + b"\0" * (VOICE_SAMPLE_MAX_BYTES + 1),
         f"File size exceeds maximum limit of 10MB. Got {VOICE_SAMPLE_MAX_BYTES + 5} bytes."),
        ({"name": "x", "consent": "c"}, ("notes.txt", b"hello", "text/plain"), "Unsupported MIME type: text/plain. Allowed:"),
        ({"name": "x", "consent": "c"}, b"this is not audio" * 50, "Could not decode audio file:"),
        ({"name": "x", "consent": "c"}, tone_wav(150, 0.5),
         "Reference audio too short (0.5s). At least 1s of clear speech is required."),
        ({"name": "x", "consent": "c"}, tone_wav(150, 31.0, 8000),
         "Reference audio too long (31.0s). Maximum 30s supported — use a shorter clip."),
        ({"name": "x", "consent": "c", "speaker_embedding": "[0.1,"}, None, "'speaker_embedding' must be valid JSON:"),
        ({"name": "x", "consent": "c", "speaker_embedding": "[]"}, None,
         "'speaker_embedding' must be a non-empty list of numbers"),
        ({"name": "x", "consent": "c", "speaker_embedding": '["a"]'}, None,
         "'speaker_embedding' must contain only numeric values"),
        ({"name": "x", "consent": "c", "speaker_embedding": "[NaN, 1.0]"}, None,
         "'speaker_embedding' values must be finite (no NaN or Inf)"),
        ({"name": "x", "consent": "c", "speaker_embedding": json.dumps([0.0] * 4097)}, None,
         "'speaker_embedding' exceeds maximum length (4096 elements)"),
        ({"name": "x", "consent": "c", "speaker_embedding": json.dumps([0.0] * 512)}, None,
         "speaker_embedding has 512 dimensions; expected 1024 or 2048 for the loaded Qwen3-TTS model"),
    ],
)
def test_refused_uploads_answer_200_with_vllm_omnis_error_body(
    http: httpx.Client, fields: dict[str, str], sample: bytes | tuple[str, bytes, str] | None, message: str
) -> None:
    files = None
    if isinstance(sample, tuple):
        files = {"audio_sample": sample}
    elif sample is not None:
        files = {"audio_sample": ("voice.wav", sample, "audio/wav")}
    response = http.post(VOICES_PATH, data=fields, files=files)
    assert response.status_code == 200  # vLLM-Omni returns the error object as the route's value
    error = response.json()["error"]
    assert error["message"].startswith(message), error["message"]
    assert (error["type"], error["code"], error["param"]) == ("BadRequestError", 400, None)
    parsed = VoiceUploadResponse.model_validate(response.json())
    assert parsed.success is False and parsed.error == error["message"]
    assert "x" not in listed(http).voices  # nothing was stored


@pytest.mark.parametrize("missing", ["consent", "name"])
def test_upload_without_consent_or_name_is_a_validation_error(http: httpx.Client, missing: str) -> None:
    fields = {"name": "NoConsent", "consent": "rec-1"}
    fields[missing] = ""  # an empty form field is FastAPI's "absent"
    response = http.post(VOICES_PATH, data=fields, files={"audio_sample": ("v.wav", tone_wav(150), "audio/wav")})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"].startswith("1 validation error:") and "Field required" in error["message"]
    assert error["param"] == f"body.{missing}"
    assert "noconsent" not in listed(http).voices


def test_uploaded_voices_survive_a_restart_when_a_folder_is_set(tmp_path: Path) -> None:
    def app_with_folder() -> Any:
        app = create_app()
        app.state.voices = VoiceStore(tmp_path / "voices")
        return app

    base, server, thread = serve(app_with_folder())
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            assert upload(client, "Kept", wav_bytes=tone_wav(170), ref_text="Kept text.").json()["success"] is True
            assert upload(client, "Gone", speaker_embedding=json.dumps([0.1] * 2048)).json()["success"] is True
            assert client.delete(voice_path("gone")).status_code == 200
            before = listed(client).uploaded_voices
    finally:
        stop(server, thread)
    base, server, thread = serve(app_with_folder())
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            after = listed(client)
            assert [v.model_dump() for v in after.uploaded_voices] == [v.model_dump() for v in before]
            assert [v.name for v in after.uploaded_voices] == ["Kept"] and "kept" in after.voices
    finally:
        stop(server, thread)


# ---------------------------------------------------------------------------------------------------------
# Style instructions and voice descriptions: real, measurable, deterministic changes
def test_instructions_change_rate_and_pitch_the_right_way(http: httpx.Client) -> None:
    plain = speak(http, seed=7)
    assert "x-offline-preview" not in plain.headers
    slow = speak(http, instructions="Please speak slowly.")
    assert "rate x0.74" in slow.headers["x-offline-preview"]
    assert len(slow.content) > 1.15 * len(plain.content)
    fast = speak(http, instructions="Fast and brisk!")
    assert len(fast.content) < 0.9 * len(plain.content)

    base = median_pitch(plain.content)
    high = median_pitch(speak(http, instructions="a high voice").content)
    deep = median_pitch(speak(http, instructions="a deep voice").content)
    assert high > 1.15 * base, (base, high)  # +4 semitones is ×1.26
    assert deep < 0.87 * base, (base, deep)  # −4 semitones is ×0.79
    # "not" cancels the word it stands before.
    assert speak(http, instructions="not slow").headers["x-offline-preview"].endswith("no audible change")


def test_same_text_and_instructions_give_identical_bytes(http: httpx.Client) -> None:
    first = speak(http, instructions="Warm and calm, with dramatic pauses.")
    second = speak(http, instructions="Warm and calm, with dramatic pauses.")
    assert first.content == second.content
    other = speak(http, instructions="Warm and calm.")
    assert other.content != first.content
    wav_once = http.post("/v1/audio/speech", json={"input": TEXT, "instructions": "excited"})
    wav_twice = http.post("/v1/audio/speech", json={"input": TEXT, "instructions": "excited"})
    assert wav_once.content == wav_twice.content and wav_once.content[:4] == b"RIFF"


def test_voice_design_description_is_heard(http: httpx.Client) -> None:
    design = speak(http, task_type="VoiceDesign", instructions="A young woman with a bright, cheerful voice.")
    assert "voice description" in design.headers["x-offline-preview"]
    assert median_pitch(design.content) > 1.3 * median_pitch(speak(http, seed=1).content)


# ---------------------------------------------------------------------------------------------------------
# Cloning: the reference's pitch
def test_reference_pitch_moves_the_voice_towards_it(http: httpx.Client) -> None:
    base = median_pitch(speak(http, seed=3).content)
    for target in (190.0, 72.0):
        clone = speak(http, ref_audio=data_url(tone_wav(target)), ref_text="A tone.")
        assert "ref_audio recording" in clone.headers["x-offline-preview"]
        pitch = median_pitch(clone.content)
        assert abs(pitch - target) < 0.5 * abs(base - target), (base, pitch, target)
        assert (pitch > 1.3 * base) if target > base else (pitch < 0.9 * base)
    # x_vector_only_mode needs no transcript; the model named is the Base checkpoint.
    xvec = speak(http, ref_audio=data_url(tone_wav(190)), x_vector_only_mode=True, model=CLONE_MODEL)
    assert median_pitch(xvec.content) > 1.3 * base


def test_clone_by_uploaded_voice_name_on_rest_and_websocket(http: httpx.Client, url: str) -> None:
    assert upload(http, "High Tone", wav_bytes=tone_wav(200), ref_text="A tone.").json()["success"] is True
    try:
        base = median_pitch(speak(http, seed=5).content)
        rest = speak(http, voice="high tone")
        assert "uploaded voice 'High Tone'" in rest.headers["x-offline-preview"]
        assert median_pitch(rest.content) > 1.3 * base

        async def over_websocket() -> tuple[bytes, bytes]:
            ws_url = url.replace("http://", "ws://", 1) + SPEECH_STREAM_PATH
            async with connect(ws_url, max_size=None, open_timeout=10) as ws:
                results = []
                for voice in ("High Tone", None):
                    config = {"type": "session.config", "response_format": "pcm", "stream_audio": True}
                    if voice:
                        config["voice"] = voice
                    await ws.send(json.dumps(config))
                    await ws.send(json.dumps({"type": "input.text", "text": TEXT}))
                    await ws.send(json.dumps({"type": "input.done"}))
                    pcm = bytearray()
                    while True:
                        frame = await asyncio.wait_for(ws.recv(), 60)
                        if isinstance(frame, bytes):
                            pcm += frame
                            continue
                        event = json.loads(frame)
                        assert event["type"] != "error", event
                        if event["type"] == "audio.done":
                            assert event["error"] is False and event["total_bytes"] == len(pcm)
                        if event["type"] == "session.done":
                            break
                    results.append(bytes(pcm))
                return results[0], results[1]

        cloned, plain = asyncio.run(over_websocket())
        assert median_pitch(cloned) > 1.3 * median_pitch(plain)
    finally:
        http.delete(voice_path("high tone"))


def test_silent_reference_is_refused_with_what_to_do(http: httpx.Client) -> None:
    response = http.post("/v1/audio/speech", json={"input": TEXT, "ref_audio": data_url(tone_wav(150, level=0.0)),
                                                   "ref_text": "Nothing."})
    assert response.status_code == 400
    assert "ref_audio has no voiced speech" in response.json()["error"]["message"]


# ---------------------------------------------------------------------------------------------------------
# Unsupported combinations: vLLM-Omni's words
@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"task_type": "VoiceDesign"}, "VoiceDesign task requires 'instructions' to describe the voice"),
        ({"task_type": "Base"}, "Base task requires 'ref_audio' or 'speaker_embedding' for voice cloning"),
        ({"task_type": "Base", "voice": "Joe"}, "Base task with built-in speaker 'joe' requires 'ref_audio' for voice cloning"),
        ({"ref_audio": "data:audio/wav;base64,AAAA"},
         "Base task requires non-empty 'ref_text' (transcript of the reference audio) unless 'x_vector_only_mode' is enabled"),
        ({"ref_audio": "data:audio/wav;base64,AAAA", "speaker_embedding": [0.1] * 1024},
         "'speaker_embedding' and 'ref_audio' are mutually exclusive"),
        ({"speaker_embedding": [0.1] * 1024}, "'speaker_embedding' is only valid for Base task"),
        ({"task_type": "Base", "speaker_embedding": [0.1] * 1024, "model": CLONE_MODEL},
         "speaker_embedding has 1024 dimensions; expected 2048 for the loaded Qwen3-TTS model"),
        ({"task_type": "CustomVoice", "ref_text": "Hi."}, "'ref_text' is only valid for Base task"),
        ({"task_type": "VoiceDesign", "instructions": "deep", "x_vector_only_mode": True},
         "'x_vector_only_mode' is only valid for Base task"),
        ({"instructions": "x" * 501}, "Instructions too long (max 500 characters)"),
        ({"max_new_tokens": 4097}, "max_new_tokens cannot exceed 4096"),
        ({"task_type": "CustomVoice", "model": CLONE_MODEL},
         "Qwen3-TTS Base checkpoint does not support task_type='CustomVoice'. Use task_type='Base' or load the "
         "matching CustomVoice checkpoint."),
        ({"ref_audio": "https://example.com/me.wav", "ref_text": "Hi."},
         "The offline engine does not fetch ref_audio from URLs or files"),
        ({"ref_audio": "me.wav", "ref_text": "Hi."},
         "ref_audio must be a URL (http/https), base64 data URL (data:...), or file URI (file://...)"),
        ({"ref_audio": "data:audio/wav;base64,not-base64!", "ref_text": "Hi."}, "ref_audio data URL does not hold valid base64"),
        ({"ref_audio": data_url(tone_wav(150, 0.4)), "ref_text": "Hi."},
         "Reference audio too short (0.4s). At least 1s of clear speech is required."),
    ],
)
def test_unsupported_combinations_answer_vllm_omnis_error(http: httpx.Client, body: dict[str, Any], message: str) -> None:
    response = http.post("/v1/audio/speech", json={"input": TEXT, **body})
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]


def test_websocket_task_errors(url: str) -> None:
    ws_url = url.replace("http://", "ws://", 1) + SPEECH_STREAM_PATH

    async def scenario() -> None:
        async with connect(ws_url, max_size=None, open_timeout=10) as ws:
            # A unit that cannot be spoken: audio.start, the error, audio.done with error — the connection stays.
            await ws.send(json.dumps({"type": "session.config", "task_type": "VoiceDesign"}))
            await ws.send(json.dumps({"type": "input.text", "text": "Hello."}))
            await ws.send(json.dumps({"type": "input.done"}))
            events = [json.loads(await asyncio.wait_for(ws.recv(), 30)) for _ in range(4)]
            assert [e["type"] for e in events] == ["audio.start", "error", "audio.done", "session.done"]
            assert "VoiceDesign task requires 'instructions' to describe the voice" in events[1]["message"]
            assert events[2]["error"] is True

            # An embedding with a reference: vLLM-Omni's request refuses the pair and the connection ends.
            await ws.send(json.dumps({"type": "session.config", "ref_audio": "data:audio/wav;base64,AAAA",
                                      "speaker_embedding": [0.1] * 1024}))
            await ws.send(json.dumps({"type": "input.text", "text": "Hello."}))
            await ws.send(json.dumps({"type": "input.done"}))
            error = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert error["type"] == "error" and error["message"].startswith("Internal error: ")
            assert "'speaker_embedding' and 'ref_audio' are mutually exclusive" in error["message"]
            with pytest.raises(Exception):
                await asyncio.wait_for(ws.recv(), 30)

    asyncio.run(scenario())
