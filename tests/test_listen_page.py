"""The Listen page with Streamlit's AppTest (through app.py's navigation), against the real offline engine: an
uploaded WAV of the engine's own voice is transcribed — as a file and streamed at real time —, its text, figures,
word error rate and downloads show with the right bytes, the transcript is kept in the history (seen again by a new
session), "Speak this" takes the text to the Voice page, and a file that is not audio gets one line.

AppTest cannot run WebRTC (docs/testing.md): streamlit-webrtc's session lookups are patched to None so the
microphone renders inert; the microphone's path is tested by tests/test_listen_client.py (LiveListening, the
browser's 48 kHz stereo frames) and tests/test_browser_listen.py (Chromium's fake microphone).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import streamlit as st
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from services.history import History
from services.listen import word_error_rate

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGE = "pages/listen.py"
SENTENCE = "Please call me back when you get home tonight."


@pytest.fixture(scope="module")
def sentence_wav(engine_url: str) -> bytes:
    r = httpx.post(f"{engine_url}/v1/audio/speech", json={"input": SENTENCE, "voice": "joe", "seed": 7}, timeout=60,
                   trust_env=False)
    assert r.status_code == 200, r.text
    return r.content


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """Every file the page hands the browser (downloads, players), by its media id: what a click would fetch."""
    import streamlit_webrtc.component
    import streamlit_webrtc.shutdown

    monkeypatch.setattr(streamlit_webrtc.component, "get_this_session_info", lambda: None)
    monkeypatch.setattr(streamlit_webrtc.shutdown, "get_this_session_info", lambda: None)
    files: dict[str, bytes] = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def load(self, path_or_data, mimetype, kind, filename=None):  # type: ignore[no-untyped-def]
        file_id = original(self, path_or_data, mimetype, kind, filename)
        if isinstance(path_or_data, bytes):
            files[file_id] = path_or_data
        return file_id

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", load)
    return files


def _open(monkeypatch: pytest.MonkeyPatch, data: Path, url: str) -> AppTest:
    monkeypatch.setenv("OMNI_STUDIO_CONFIG", "")  # set empty: no studio.toml at all
    monkeypatch.setenv("OMNI_STUDIO_BACKEND", "server")
    monkeypatch.setenv("OMNI_STUDIO_SERVER_URL", url)
    monkeypatch.setenv("OMNI_STUDIO_DATA_DIR", str(data))
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(PAGE)
    at.run()
    _ok(at)
    return at


def _ok(at: AppTest) -> None:
    assert not at.exception, at.exception[0].message if at.exception else ""


def _transcribe(at: AppTest, name: str, data: bytes, reference: str = "", stream: bool = False) -> None:
    at.file_uploader(key="listen_upload").set_value((name, data, "audio/wav")).run()
    at.text_area(key="listen_reference").input(reference)
    at.toggle(key="listen_stream").set_value(stream)
    next(b for b in at.button if b.label == "Transcribe").click().run()
    _ok(at)


def _download(at: AppTest, served: dict[str, bytes], label: str) -> bytes:
    [button] = [d for d in at.download_button if d.proto.label == label]
    return served[button.proto.url.rsplit("/", 1)[-1].split(".")[0]]


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_an_upload_is_transcribed_with_figures_wer_and_downloads_and_kept(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str, sentence_wav: bytes,
        served: dict[str, bytes]) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    _transcribe(at, "call.wav", sentence_wav, reference=SENTENCE)
    assert not at.error, [e.value for e in at.error]
    text = next(t.value for t in at.text if word_error_rate(SENTENCE, t.value) <= 0.2)
    assert any("Offline preview" in i.value and "Whisper tiny.en" in i.value.replace("\\", "") for i in at.info)  # the engine's note
    assert any(c.value.replace("\\", "").startswith("Whisper tiny.en (CTranslate2 int8), standing in for mistralai/")
               for c in at.caption)  # names what ran
    figures = _metrics(at)
    assert figures["Audio"].endswith(" s") and float(figures["RTF"]) > 0 and figures["WER"].endswith("%")
    assert "First partial" not in figures  # a file has no partials
    assert any("reference words" in c.value for c in at.caption)  # the WER with its counts
    assert [d.proto.label for d in at.download_button][:4] == \
        ["Download TXT", "Download SRT", "Download VTT", "Download JSON"]
    assert _download(at, served, "Download TXT") == (text + "\n").encode()
    assert _download(at, served, "Download SRT").decode().startswith("1\n00:00:")
    assert _download(at, served, "Download VTT").decode().startswith("WEBVTT")
    figures_json = json.loads(_download(at, served, "Download JSON"))
    assert figures_json["text"] == text and figures_json["backend"] == "server" and figures_json["segments"]
    assert figures_json["wer"] == pytest.approx(word_error_rate(SENTENCE, text), abs=1e-4)

    [kept] = History(tmp_path / "data").transcripts.list()
    assert (kept.text, kept.source, kept.route, kept.backend, kept.reference) == (text, "call.wav", "file", "server",
                                                                                SENTENCE)
    assert kept.audio_bytes() == sentence_wav and kept.segments == figures_json["segments"]

    again = _open(monkeypatch, tmp_path / "data", engine_url)  # a new session: the transcript is listed
    assert any(s.value == "Transcripts" for s in again.subheader)
    assert any(t.value == text for t in again.text)
    assert any("call\\.wav · file" in c.value for c in again.caption)  # (Markdown-escaped)


def test_streamed_at_real_time_with_its_stream_figures(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str, sentence_wav: bytes,
        served: dict[str, bytes]) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    _transcribe(at, "call.wav", sentence_wav, stream=True)
    assert not at.error, [e.value for e in at.error]
    figures = _metrics(at)
    assert figures["First partial"].endswith(" ms") and figures["Final"].endswith(" ms")
    assert int(figures["Partials"]) >= 1 and "WER" not in figures  # no reference, no WER
    [kept] = History(tmp_path / "data").transcripts.list()
    assert kept.route == "stream" and word_error_rate(SENTENCE, kept.text) <= 0.2
    assert kept.figures["partials"] == int(figures["Partials"]) and kept.figures["final_ms"] is not None

    # A stream gives no cue times: no SRT/VTT until "Time for subtitles" hears the kept recording as a file
    assert [d.proto.label for d in at.download_button][:2] == ["Download TXT", "Download JSON"]
    [time_it] = [b for b in at.button if b.label == "⏱ Time for subtitles"]
    time_it.click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    assert [d.proto.label for d in at.download_button][:4] == \
        ["Download TXT", "Download SRT", "Download VTT", "Download JSON"]
    assert _download(at, served, "Download SRT").decode().startswith("1\n00:00:0")
    [timed] = History(tmp_path / "data").transcripts.list()
    assert timed.segments and timed.segments[0]["start"] < 1.0 and timed.figures["segments_from"] == "file"
    assert timed.text == kept.text  # the streamed text stays the transcript's
    at.run()  # the next run: timed once, no button
    assert not [b for b in at.button if b.label == "⏱ Time for subtitles"]
    assert [d.proto.label for d in at.download_button][:2] == ["Download TXT", "Download SRT"]


def test_speak_this_puts_the_text_on_the_voice_page(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str, sentence_wav: bytes,
        served: dict[str, bytes]) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    _transcribe(at, "call.wav", sentence_wav)
    text = History(tmp_path / "data").transcripts.list()[0].text
    next(b for b in at.button if b.label == "🗣️ Speak this").click().run()
    _ok(at)
    assert at.text_area(key="voice_text").value == text


def test_a_file_that_is_not_audio_gets_one_line_and_nothing_is_kept(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str, served: dict[str, bytes]) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    _transcribe(at, "notes.wav", b"these are meeting notes, not a recording\n")
    [error] = [e.value for e in at.error]
    assert error.startswith("notes\\.wav is not audio") and "\n" not in error  # (Markdown-escaped)
    assert History(tmp_path / "data").transcripts.list() == []


def test_a_silent_recording_says_no_speech_found(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str, served: dict[str, bytes]) -> None:
    from protocol.audio import wav_bytes

    at = _open(monkeypatch, tmp_path / "data", engine_url)
    _transcribe(at, "quiet.wav", wav_bytes(bytes(32_000), 16_000))
    [error] = [e.value for e in at.error]
    assert error.startswith("no speech found in quiet\\.wav") and "\n" not in error
    assert not at.metric and History(tmp_path / "data").transcripts.list() == []


def test_stop_on_the_microphone_gives_the_final_text_and_keeps_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str, sentence_wav: bytes,
        served: dict[str, bytes]) -> None:
    """The page's side of Stop: frames came into this session's Microphone (as the WebRTC sink hands them, here
    from the test: the browser's 48 kHz stereo), the browser stopped sending — the next run ends the utterance."""
    from services.listen import LiveListening, OmniListen, load_audio
    from services.runtime import background_loop
    from tests.test_listen_client import _browser_frames
    from ui.listen_mic import Microphone

    at = _open(monkeypatch, tmp_path / "data", engine_url)
    mic: Microphone = at.session_state["listen_microphone"]
    assert mic.factory is not None  # the page set it: a frame would open the session
    loop = background_loop()
    try:
        mic.factory = lambda: LiveListening(OmniListen(engine_url), loop)
        for frame in _browser_frames(load_audio(sentence_wav, "s.wav").pcm):
            mic.on_frame(frame)
        at.run()  # the browser is not sending (the microphone is inert here): Stop
        _ok(at)
    finally:
        loop.stop()
    assert not at.error, [e.value for e in at.error]
    assert any(m.value.startswith("**Transcript** — microphone") for m in at.markdown)
    figures = _metrics(at)
    assert figures["First partial"].endswith(" ms") and figures["Final"].endswith(" ms")
    [kept] = History(tmp_path / "data").transcripts.list()
    assert (kept.source, kept.route) == ("microphone", "stream") and word_error_rate(SENTENCE, kept.text) <= 0.2
    assert load_audio(kept.audio_bytes(), "k.wav").seconds == pytest.approx(float(figures["Audio"][:-2]), abs=0.02)


def test_a_microphone_that_sent_nothing_says_so_in_one_line(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_url: str, served: dict[str, bytes]) -> None:
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    at.session_state["listen_microphone"].started = True  # the browser connected, and no sound came
    at.run()
    [error] = [e.value for e in at.error]
    assert error.startswith("No sound came from the microphone") and "\n" not in error
    assert History(tmp_path / "data").transcripts.list() == []


def test_the_transcribe_button_is_the_file_tabs_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    engine_url: str, served: dict[str, bytes]) -> None:
    """The microphone's tab has Start and Stop; Transcribe (the file's) is only under "From a file"."""
    at = _open(monkeypatch, tmp_path / "data", engine_url)
    file_tab, mic_tab = at.tabs
    assert "Transcribe" in [b.label for b in file_tab.button]
    assert "Transcribe" not in [b.label for b in mic_tab.button]
