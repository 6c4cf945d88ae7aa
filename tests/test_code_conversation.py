"""A kept conversation handed over (#36): `python -m services code CONV_ID` for conversations held through the
studio's `converse --keep` on the real offline engine — pipeline mode answered by a model (a chat peer streaming
/v1/chat/completions), and native mode over the engine's duplex session — whose one-turn Python, run unchanged in
a folder of its own and without the studio on its path, hears the words the studio heard from the turn cut out of
the kept recording and writes the spoken reply; the `converse` line parses to the same settings; a scripted
variant's Python and curl answer by the script's rules; one held on servers and SageMaker at once, an unknown id, one without a recording and a viewer; the
shareable report (transcript, timings, the recording as an embedded WAV) from the CLI and on the Converse page,
with the page's link and Code panel."""

from __future__ import annotations

import base64
import io
import re
import shlex
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

from protocol.errors import InvalidInput
from services.access import Principal
from services.cli import build_parser
from services.cli.converse import _inputs
from services.code import generate, generate_all
from services.history import History
from tests.chat_support import MODEL, chat_app, serving_app
from tests.code_support import code_for, run_code, studio
from tests.conftest import spoken_turn_files
from tests.test_code_pages import _link_to, _links, _panels, _python, _said
from tests.test_converse_page import _open, webrtc_inert  # noqa: F401 — the page's WebRTC made inert for AppTest

SAID = "What time do you open?"
ANSWER = "We open at nine. See you soon."
PROMPT = "Answer in one short sentence."
SCRIPT = "# the bakery\nopen time => Our doors open at seven.\ndefault => Sorry?\n"
GONE = "is not in this studio's history for you: it was deleted, or it is someone else's and not shared"


@pytest.fixture(scope="module")
def turns(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return spoken_turn_files(engine_url, tmp_path_factory.mktemp("turns"), [SAID])


@pytest.fixture(scope="module")
def peer() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    app, seen = chat_app(ANSWER)
    with serving_app(app) as url:
        yield url, seen


def _held(*args: str, data: Path) -> str:
    """A conversation held and kept by the studio's `converse --keep`: its id."""
    r = studio("converse", *args, "--keep", data=data, cwd=data.parent)
    assert r.returncode == 0, r.stderr
    return re.search(r"kept as (conversation-\S+)", r.stderr).group(1)


@pytest.fixture(scope="module")
def piped(engine_url: str, turns: list[Path], peer: tuple[str, list], tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[Path, str]:
    """(data folder, id) of a pipeline conversation answered by the chat peer, in the joe voice."""
    data = tmp_path_factory.mktemp("piped") / "data"
    return data, _held("--input", str(turns[0]), "--listen-url", engine_url, "--speak-url", engine_url,
                       "--reply-url", peer[0], "--system-prompt", PROMPT, "--voice", "joe", "--silence-ms", "600",
                       data=data)


def _record(data: Path, conv_id: str):  # type: ignore[no-untyped-def]
    history = History(data)
    try:
        return history.conversations.get(conv_id)
    finally:
        history.close()


def _ran(out: str) -> tuple[str, str]:
    """(what the script heard, what the agent said) from its printout."""
    lines = out.splitlines()
    return (next(x for x in lines if x.startswith("you: "))[5:], next(x for x in lines if x.startswith("agent: "))[7:])


def _wav_frames(path: Path) -> int:
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        return w.getnframes()


def _cli_args(cli: str, folder: Path, **values: str):  # type: ignore[no-untyped-def]
    """The `converse` line of a CLI form, its variables set, parsed and checked by the studio's own parser."""
    line = next(x for x in cli.splitlines() if x.startswith("python -m services converse "))
    words = [values.get(w[1:], w) if w.startswith("$") else w for w in shlex.split(line)[3:]]
    words = [str(folder / w) if w in ("turn.wav", "script.txt") else w for w in words]
    args = build_parser(words).parse_args(words)
    _inputs(args)  # the command's own checks: the turn is audio, the script parses, the flags go together
    return args


def test_a_pipeline_conversation_with_a_model_reply_runs_one_turn_unchanged(
        engine_url: str, piped: tuple[Path, str], peer: tuple[str, list], tmp_path: Path) -> None:
    data, conv_id = piped
    heard = _record(data, conv_id).turns[0]["user_text"]
    assert {"time", "open"} <= set(heard.lower().strip("?").split())
    script = code_for(conv_id, tmp_path / "py", data=data)
    text = script.read_text()
    assert "/v1/audio/speech/stream" in text and "chat.completions.create(" in text and "stream=True" in text
    assert f'"{MODEL}"' in text and f'"{PROMPT}"' in text and '"voice": "joe"' in text
    seen = peer[1]
    before = len(seen)
    out = run_code(script, engine_url)
    you, agent = _ran(out)
    assert you == heard and agent == ANSWER  # the words the studio heard, from the turn cut out of its recording
    assert _wav_frames(tmp_path / "py" / "reply.wav") > 0
    [asked] = seen[before:]
    assert asked["model"] == MODEL and asked["stream"] is True and asked["max_tokens"] == 200
    assert asked["messages"] == [{"role": "system", "content": PROMPT}, {"role": "user", "content": heard}]

    cli = code_for(conv_id, tmp_path / "cli", data=data, lang="cli").read_text()
    args = _cli_args(cli, tmp_path / "py", BASE_URL=engine_url, SPEAK_URL=engine_url, REPLY_URL=peer[0],
                     TURN="turn.wav", OUT=str(tmp_path / "again.wav"))
    assert (args.mode, args.listen_url, args.speak_url, args.reply_url) == ("pipeline", engine_url, engine_url, peer[0])
    assert (args.reply_model, args.system_prompt, args.voice, args.silence_ms) == (MODEL, PROMPT, "joe", 600)
    assert (args.turn_detector, args.eot_threshold, args.keep) == ("learned", 0.5, True)


def test_a_scripted_variant_answers_by_its_rules_in_python_and_curl(
        engine_url: str, piped: tuple[Path, str], tmp_path: Path) -> None:
    data, conv_id = piped  # the same recording and timeline, kept as if a script had answered
    kept = _record(data, conv_id)
    history = History(data)
    try:
        variant = history.conversations.record(
            kept.timeline, audio=kept.audio_bytes(), settings={
                **kept.settings, "reply_url": None, "system_prompt": None, "script": SCRIPT,
                "reply": "a scripted reply (the script), not a model"})
    finally:
        history.close()
    script = code_for(variant.id, tmp_path / "py", data=data)
    assert (tmp_path / "py" / "script.txt").read_text() == SCRIPT and "chat.completions" not in script.read_text()
    assert run_code(script, engine_url).splitlines()[-2:] == ["agent: Our doors open at seven.", "reply.wav"]
    assert _wav_frames(tmp_path / "py" / "reply.wav") > 0
    shell = code_for(variant.id, tmp_path / "sh", data=data, lang="curl")  # each stage whole, on REST routes
    you, _ = _ran(run_code(shell, engine_url))
    assert you == kept.turns[0]["user_text"] and _wav_frames(tmp_path / "sh" / "reply.wav") > 0
    cli = code_for(variant.id, tmp_path / "cli", data=data, lang="cli").read_text()
    args = _cli_args(cli, tmp_path / "py", BASE_URL=engine_url, SPEAK_URL=engine_url, TURN="turn.wav",
                     SCRIPT="script.txt", OUT=str(tmp_path / "again.wav"))
    assert args.script == tmp_path / "py" / "script.txt" and args.reply_url is None


def test_a_native_conversation_runs_one_turn_over_the_duplex_session(
        engine_url: str, turns: list[Path], tmp_path: Path) -> None:
    data = tmp_path / "data"
    conv_id = _held("--mode", "native", "--url", engine_url, "--input", str(turns[0]), "--voice", "joe", data=data)
    heard = _record(data, conv_id).turns[0]["user_text"]
    script = code_for(conv_id, tmp_path / "py", data=data)
    assert "/v1/realtime?duplex=1" in script.read_text() and '"semantic_vad"' in script.read_text()
    you, agent = _ran(run_code(script, engine_url))
    assert you == heard and agent == "We open at nine in the morning, every day."  # the default script's rule
    assert _wav_frames(tmp_path / "py" / "reply.wav") > 0
    args = _cli_args(code_for(conv_id, tmp_path / "cli", data=data, lang="cli").read_text(), tmp_path / "py",
                     BASE_URL=engine_url, TURN="turn.wav", OUT=str(tmp_path / "again.wav"))
    assert (args.mode, args.url, args.voice, args.listen_url) == ("native", engine_url, "joe", None)


TIMELINE = {"mode": "pipeline", "turns": [{"user_text": "hello", "reply_text": "Hi.", "user_speech_end_s": 1.0,
                                           "transcript_final_s": 1.5, "reply_first_token_s": 1.6,
                                           "first_audio_s": 1.9, "voice_to_voice_ms": 900.0, "interrupted": False,
                                           "error": None}], "voice_to_voice_ms": {"n": 1, "p50": 900.0, "p95": 900.0}}


def test_sagemaker_an_unknown_id_no_recording_and_a_viewers_copy(tmp_path: Path) -> None:
    history = History(tmp_path)
    try:
        both = history.conversations.record(TIMELINE, settings={  # SageMaker's listen, a server's speech
            "mode": "pipeline", "listen": "SageMaker endpoint omni-listen", "speak": "http://gpu-box:8000"})
        with pytest.raises(InvalidInput, match="on SageMaker endpoints and on servers .*code for a conversation held "
                                            "on both is not written"):
            generate(history, both.id)
        unrecorded = history.conversations.record(TIMELINE, settings={  # no recording: the reader brings the turn
            "mode": "pipeline", "listen": "http://gpu-box:8000", "speak": "http://gpu-box:8000", "script": SCRIPT})
        code = generate(history, unrecorded.id, servers=["http://gpu-box:8000"])
        assert "turn.wav" not in code.files and "put your own turn beside the script as turn.wav" in code.text
        assert 'BASE_URL = os.environ.get("BASE_URL", "http://gpu-box:8000")' in code.text
        history.set_shared("conversation", unrecorded.id, True)
        viewer = history.acting_as(Principal(id="vi", name="Vi", role="viewer", signed_in=True))
        for lang, form in generate_all(viewer, unrecorded.id, servers=["http://gpu-box:8000"]).items():
            assert "gpu-box" not in form.text and "creators and admins only" in form.text, lang
    finally:
        history.close()
    r = studio("code", "conversation-20200101-000000-00000000", data=tmp_path)
    assert r.returncode == 2 and "no conversation 'conversation-20200101-000000-00000000'" in r.stderr


def _audio_of(html: str) -> bytes:
    [data] = re.findall(r'<audio controls[^>]* src="data:audio/wav;base64,([A-Za-z0-9+/=]+)"', html)
    return base64.b64decode(data)


def _shape(wav: bytes) -> tuple[int, int, int]:
    with wave.open(io.BytesIO(wav)) as w:
        return w.getnchannels(), w.getframerate(), w.getnframes()


def test_the_report_from_the_cli(piped: tuple[Path, str], peer: tuple[str, list], tmp_path: Path) -> None:
    data, conv_id = piped
    kept = _record(data, conv_id)
    r = studio("converse-report", conv_id, "--out", str(tmp_path / "r.html"), data=data)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "r.html").read_text()
    [turn] = kept.turns
    assert kept.turns[0]["user_text"] in html and ANSWER in html
    for key in ("transcript_final_s", "reply_first_token_s", "first_audio_s"):  # each stage after the speech ended
        assert f"+{(turn[key] - turn['user_speech_end_s']) * 1000:.0f} ms" in html
    assert f"{turn['voice_to_voice_ms']:.0f} ms" in html and f"{turn['eot_wait_ms']:.0f} ms" in html
    assert _shape(_audio_of(html)) == _shape(kept.audio_bytes())  # the whole recording: 2 channels, its length
    assert "http://" not in html  # no server's address (the reply's label named one)
    assert studio("converse-report", "conversation-gone", data=data).returncode == 2


def test_the_converse_page_offers_the_report_a_link_and_the_code(
        piped: tuple[Path, str], engine_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data, conv_id = piped
    deferred: list[Any] = []
    original = MediaFileManager.add_deferred

    def capture(self, data_callable, *args, **kwargs):  # type: ignore[no-untyped-def]
        deferred.append((kwargs.get("file_name"), data_callable))
        return original(self, data_callable, *args, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", capture)
    at = _open(monkeypatch, data, engine_url)
    assert f"item={conv_id}" in _links(at)
    [python] = [_python(p) for p in _panels(at) if conv_id in _python(p)]  # (the scripted variant may be listed too)
    assert "chat.completions.create(" in python and "turn.wav" in python
    reports = [make for name, make in deferred if name == f"{conv_id}.html"]
    assert reports and _shape(_audio_of(reports[-1]())) == _shape(_record(data, conv_id).audio_bytes())

    _link_to(at, conv_id)
    assert "The linked conversation" in _said(at)
    assert [_python(p) for p in _panels(at) if conv_id in _python(p)] == [python, python]  # in its box, and below
    _link_to(at, "conversation-gone")
    assert f"The linked conversation conversation-gone {GONE}" in _said(at)
