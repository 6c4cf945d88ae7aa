"""`python -m services code` for a speech take and a transcript, kept as the Voice and Listen pages keep them: the
generated code, run unchanged against the offline engine, speaks the same length of audio in the same format, and
hears the same text."""

from __future__ import annotations

import asyncio
import io
import json
import wave
from pathlib import Path

from services.history import History
from services.speech import load_reference, omni_client, speech_config
from tests.code_support import code_for, run_code, studio
from tests.test_code_media import studio_env
from tests.test_engine_voices import CLONE_MODEL, tone_wav

NOT_KEPT = {"type", "ref_audio", "speaker_embedding"}  # as ui/voice_views.py keeps a take's config


def shape(wav: bytes) -> tuple[int, int, int, int]:
    with wave.open(io.BytesIO(wav)) as w:
        return w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()


def test_a_speech_take_again_same_length_and_format(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    text = "The harbour lights came on one by one."
    config = speech_config(language="English", seed=5)  # as the Voice page streams it (a seed: the same voice)
    wav = asyncio.run(omni_client(engine_url).say(config, text)).wav()  # the studio's own speech client
    history = History(data)
    try:
        take = history.takes.record(text, wav, target=engine_url, config=config.model_dump(
            mode="json", exclude_none=True, exclude=NOT_KEPT))
    finally:
        history.close()
    script = code_for(take.id, tmp_path / "py", data=data)
    assert "/v1/audio/speech/stream" in script.read_text() and '"language": "English"' in script.read_text()
    run_code(script, engine_url)
    assert shape((tmp_path / "py" / "speech.wav").read_bytes()) == shape(wav)

    shell = code_for(take.id, tmp_path / "curl", data=data, lang="curl")  # the REST route: one unit, one WAV
    assert "/v1/audio/speech\"" in shell.read_text()
    run_code(shell, engine_url)
    assert shape((tmp_path / "curl" / "speech.wav").read_bytes())[:3] == shape(wav)[:3]

    line = code_for(take.id, tmp_path / "cli", data=data, lang="cli")  # `speak --seed 5`: the same voice again
    assert "--seed 5" in line.read_text()
    run_code(line, engine_url, env=studio_env(data))
    assert (tmp_path / "cli" / "speech.wav").read_bytes() == wav


def test_a_cloned_take_again_from_the_speakers_recording_beside_the_code(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    text = "A voice borrowed, with consent, for one sentence."
    recording = tone_wav(150)  # the speaker's recording: a take never keeps it
    config = speech_config(ref_audio=load_reference(recording), ref_text="A tone.", seed=3, model=CLONE_MODEL)
    wav = asyncio.run(omni_client(engine_url).say(config, text)).wav()
    history = History(data)
    try:
        take = history.takes.record(text, wav, target=engine_url, config=config.model_dump(
            mode="json", exclude_none=True, exclude=NOT_KEPT))
    finally:
        history.close()
    assert "ref_audio" not in json.dumps(take.config)
    for lang, folder in (("python", "py"), ("curl", "curl"), ("cli", "cli")):
        script = code_for(take.id, tmp_path / folder, data=data, lang=lang)
        assert not (tmp_path / folder / "reference.wav").exists()  # nothing of the voice was kept to write
        assert "reference.wav" in script.read_text() and "consent" in script.read_text()
        (tmp_path / folder / "reference.wav").write_bytes(recording)  # the reader brings the recording
        run_code(script, engine_url, env=studio_env(data) if lang == "cli" else None)
    said = {folder: (tmp_path / folder / "speech.wav").read_bytes() for folder in ("py", "curl", "cli")}
    assert said["py"] == wav and said["cli"] == wav  # the same clone: the recording reached the model
    assert shape(said["curl"])[:3] == shape(wav)[:3]
    plain = asyncio.run(omni_client(engine_url).say(speech_config(seed=3, model=CLONE_MODEL, voice="default"), text))
    assert plain.wav() != wav  # (the clone is not the default voice: the comparison above can fail)


def test_a_transcript_again_same_text_and_its_recording_deleted_since(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    r = studio("speak", "--url", engine_url, "--text", "Please call me back tomorrow.", "--out", "talk.wav",
               data=data, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    heard = studio("listen", "talk.wav", "--url", engine_url, "--json", data=data, cwd=tmp_path)
    assert heard.returncode == 0, heard.stderr
    said = json.loads(heard.stdout.strip().splitlines()[-1])
    history = History(data)
    try:
        record = history.transcripts.record(
            said["text"], source="talk.wav", route="file", model=said["model"], backend="server", target=engine_url,
            audio=(tmp_path / "talk.wav").read_bytes(), audio_name="talk.wav")
    finally:
        history.close()
    script = code_for(record.id, tmp_path / "py", data=data)
    assert "client.audio.transcriptions.create(" in script.read_text()
    assert (tmp_path / "py" / record.audio).is_file()
    run_code(script, engine_url)
    assert (tmp_path / "py" / "transcript.txt").read_text() == said["text"]

    shell = code_for(record.id, tmp_path / "curl", data=data, lang="curl")
    run_code(shell, engine_url)
    assert (tmp_path / "curl" / "transcript.txt").read_text() == said["text"]

    (data / "media" / record.id / record.audio).unlink()
    r = studio("code", record.id, data=data)
    assert r.returncode == 0, r.stderr
    assert f"recording {record.audio} was deleted since" in r.stderr and "deleted since" in r.stdout
