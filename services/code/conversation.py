"""A kept conversation as code (issue #36): its setup — the `converse` command line that holds the same
conversation again — and a script that runs ONE turn through the same stages against the same targets.

    item = read(history, "conversation-20261206-161146-7d4f22b7", servers=[...])
    python(item), curl(item), cli(item)          # the texts; item.files: turn.wav (and script.txt), item.notes

The turn is the conversation's first: the person's side of its kept stereo WAV, from the start to when the first
transcript's final came (the studio had sent all of that turn by then), as a 16 kHz mono WAV beside the script —
or, when the recording is gone (a call cut off keeps none), a `turn.wav` the reader puts there (a note says so).
Pipeline mode's script: the turn → /v1/audio/transcriptions (the studio streamed it to /v1/realtime as a microphone
would; the file route hears the same words) → the reply streamed (a model's /v1/chat/completions, or the
conversation's scripted rules, which the studio answers itself — so does the script) → fed clause by clause into
the speech WebSocket → OUT. Native mode's: the turn over vLLM-Omni's duplex session (/v1/realtime?duplex=1) with
the session.update the conversation opened with. services/code/conversation_py.py writes the Python.

A conversation held on SageMaker endpoints is read here and written by services/code/conversation_sagemaker.py (both
modes); one held on servers and endpoints at once is refused, naming what is not written. A reader who may not
generate (a viewer) gets the code with every address left as a variable to set.
"""

from __future__ import annotations

import io
import shlex
import wave
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from protocol.errors import InvalidInput, StudioError
from protocol.listen import DEFAULT_LISTEN_MODEL, LISTEN_SAMPLE_RATE
from services.code.conversation_py import (
    PICK_PY,
    SCRIPT_NAME,
    TEXT_PY,
    TURN_NAME,
    chat_body_py,
    converse_line,
    header,
    python,
    scripted_reply_sh,
    speech_body_py,
)
from services.code.items import ENGINE_URL, LOCAL_ENGINE_NOTE, Item, UnknownItem
from services.converse.script import DEFAULT_SCRIPT
from services.history import History

PREFIX = "conversation-"  # every conversation's id starts so (services/history/conversations.py)
WITHHELD = ("the servers' addresses are shown to the studio's creators and admins only: set BASE_URL (and the "
            "other URLs at the top) before running the code (an admin can tell you them)")
NOT_WRITTEN = ("code for a conversation held on both is not written (only for one on servers, or one on SageMaker "
               "endpoints): `python -m services converse` with its --listen-/--reply-/--speak- or -endpoint options "
               "holds it again")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def owns(item_id: str) -> bool:
    """Whether `item_id` names a conversation (the rest of services/code reads jobs, takes and transcripts)."""
    return item_id.startswith(PREFIX)


def read(history: History, item_id: str, *, servers: Iterable[str] | None = None) -> Item:
    """The conversation `item_id` the history's actor may see, as the generators read it (UnknownItem otherwise;
    InvalidInput for one held on SageMaker)."""
    try:
        record = history.conversations.get(item_id)
    except InvalidInput:
        raise UnknownItem(f"there is no conversation {item_id!r} you can see in the history at {history.where}: "
                          "`python -m services history list` lists them") from None
    s, notes = dict(record.settings), []
    known = None if servers is None else {u.rstrip("/") for u in servers}
    native = record.mode == "native"
    kept = [s.get("url") or s.get("listen")] if native else [s.get("listen"), s.get("speak")]
    reply_url = (s.get("reply_url") or "").rstrip("/") or None
    urls = [t for t in kept if str(t or "").startswith(("http://", "https://"))] + ([reply_url] if reply_url else [])
    on_sagemaker = bool(s.get("reply_endpoint")) or any(t and not str(t).startswith(("http://", "https://"))
                                                        for t in kept)
    if on_sagemaker and urls:
        raise InvalidInput(f"{item_id} was held on SageMaker endpoints and on servers ({', '.join(map(str, urls))}) "
                           "at once: " + NOT_WRITTEN)
    base = speak = ""
    if not on_sagemaker:
        base = _address(kept[0], known, notes)
        speak = base if native or kept[1] == kept[0] else _address(kept[1], known, notes)
    if reply_url and known is not None and reply_url not in known:
        notes.append(f"the reply's server {reply_url} is no longer one of the studio's servers: the code still "
                     "calls it (set REPLY_URL for another)")
    model_reply = reply_url or s.get("reply_endpoint")
    script = None if model_reply or s.get("system_prompt") and native else s.get("script")
    if not model_reply and script is None and not native:
        script = DEFAULT_SCRIPT  # an older record that kept no script: the studio's default answered
    turns = record.turns
    first = turns[0] if turns else {}
    request = {"mode": record.mode, "speak_url": speak, "reply_url": reply_url, "reply_model": _model(s, reply_url),
               "system_prompt": s.get("system_prompt") or None, "script": script, "voice": s.get("voice") or None,
               "silence_ms": int(s.get("silence_ms") or 500), "vad_threshold": float(s.get("vad_threshold") or 0.5),
               "min_speech_ms": int(s.get("min_speech_ms") or 100),
               "turn_detector": s.get("turn_detector") or "learned", "eot_threshold": float(s.get("eot_threshold") or 0.5),
               "barge_in_at": s.get("barge_in_at"), "listen_model": DEFAULT_LISTEN_MODEL,
               "heard": first.get("user_text") or "", "replied": first.get("reply_text") or ""}
    files: dict[str, bytes | None] = {TURN_NAME: _first_turn(record, notes)}
    if script is not None and script != DEFAULT_SCRIPT:
        files[SCRIPT_NAME] = script.encode("utf-8")
    item = Item(record.id, "conversation", f"{record.mode} conversation", "converse", record.title, request,
                str(kept[0] or ENGINE_URL), "conversation", base, str(kept[0] or ""), files, tuple(notes))
    if on_sagemaker:  # its endpoints' names are no secret (as a SageMaker item's): shown to every reader
        from services.code.conversation_sagemaker import on_endpoints

        return on_endpoints(item, s)
    return item if history.actor.can("generate") else _withheld(item)


def _address(url: Any, known: set[str] | None, notes: list[str]) -> str:
    """The address a script calls for a kept listen/speech/native target (a loopback one not among the studio's
    servers was this machine's engine: `make engine`'s address, with a note)."""
    if not url:
        notes.append(f"the conversation kept no server address: the code calls `make engine`'s, {ENGINE_URL} (set "
                     "BASE_URL for another)")
        return ENGINE_URL
    url = str(url).rstrip("/")
    if known is not None and url in known:
        return url
    if urlsplit(url).hostname in _LOOPBACK and url != ENGINE_URL:
        notes.append(f"{LOCAL_ENGINE_NOTE} at {url}, which may be gone; the script calls `make engine`'s address, "
                     f"{ENGINE_URL} (set BASE_URL for another)")
        return ENGINE_URL
    if known is not None and url != ENGINE_URL:
        notes.append(f"{url}, where it was held, is no longer one of the studio's servers: the code still calls it "
                     "(set BASE_URL for another)")
    return url


def _model(settings: dict[str, Any], reply_url: str | None) -> str | None:
    """The reply model: as kept, else as its label names it ("M at URL"); None: the server's first listed."""
    if not reply_url:
        return None
    if settings.get("reply_model"):
        return str(settings["reply_model"])
    label = str(settings.get("reply") or "")
    model = label.removesuffix(f" at {reply_url}")
    return model if model != label and model != "the served model" else None


def _first_turn(record: Any, notes: list[str]) -> bytes | None:
    """The person's first turn cut from the kept stereo WAV (left channel, to the first transcript's final) as a
    16 kHz mono WAV; None, with a note, when there is no recording to cut it from."""
    try:
        stereo = record.audio_bytes()
    except StudioError:
        stereo = None
    if stereo is None:
        why = "was cut off and kept no recording" if record.cut else "kept no recording (or it was deleted since)"
        notes.append(f"conversation {record.id} {why}: put your own turn beside the script as {TURN_NAME} "
                     + ("(a 16 kHz mono 16-bit WAV)" if record.mode == "native" else "(any audio)"))
        return None
    import numpy as np
    import soxr

    from protocol.audio import wav_bytes

    with wave.open(io.BytesIO(stereo)) as w:
        rate, channels = w.getframerate(), w.getnchannels()
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, channels)
    first = record.turns[0] if record.turns else {}
    end_s = first.get("transcript_final_s") or (first.get("user_speech_end_s") or 0) + 0.5
    left = frames[: int(end_s * rate) if end_s > 0.5 else len(frames), 0]
    samples = soxr.resample(left.astype(np.float32) / 32768.0, rate, LISTEN_SAMPLE_RATE)
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()
    notes.append(f"{TURN_NAME} is the conversation's first turn, cut from its recording (the person's side, to "
                 f"{len(pcm) / 2 / LISTEN_SAMPLE_RATE:.1f} s); the studio heard {first.get('user_text')!r}")
    return wav_bytes(pcm, LISTEN_SAMPLE_RATE, 1)


def _withheld(item: Item) -> Item:
    """A viewer's copy: every address left out (the script then reads them from the environment)."""
    where = [u for u in (item.base_url, item.made_on, item.target, item.request.get("speak_url"),
                         item.request.get("reply_url")) if u]
    request = {**item.request, "speak_url": "", "reply_url": "" if item.request.get("reply_url") else None}
    notes = [n for n in item.notes if not any(w in n for w in where)] + [WITHHELD]
    return Item(item.id, item.route, item.noun, item.command, item.title, request, "the studio's servers",
                item.target_kind, "", "", item.files, tuple(notes))


# -- the studio's command line ------------------------------------------------------------------------------------
def cli(item: Item) -> str:
    """The `converse` line that holds the same conversation again, on the turn beside it (--keep: into the history,
    as the conversation was)."""
    r = item.request
    targets = (["--url", "$BASE_URL"] if r["mode"] == "native" else ["--listen-url", "$BASE_URL", "--speak-url", "$SPEAK_URL"])
    if r["reply_url"] is not None:
        targets += ["--reply-url", "$REPLY_URL"]
    return (f"#!/bin/sh\n{header(item, '#')}# The studio's own command line: run it where the studio is installed, "
            f"its venv active. It holds the conversation again on {TURN_NAME}\n# (more --input TURN.wav for more "
            "turns), keeps it in the history and writes its stereo WAV to OUT.\nset -e\n"
            + _sh_consts(item, out="conversation.wav") + f"\n{converse_line(item, targets)}\n")


def _sh_consts(item: Item, *, out: str) -> str:
    r = item.request
    lines = [_sh("BASE_URL", item.base_url)]
    if r["mode"] != "native":
        lines.append(_sh("SPEAK_URL", r["speak_url"], "$BASE_URL" if r["speak_url"] == item.base_url else None))
    if r["reply_url"] is not None:
        lines.append(_sh("REPLY_URL", r["reply_url"]))
    lines.append(f"TURN=\"${{TURN:-{TURN_NAME}}}\"  # the turn, beside this script")
    if SCRIPT_NAME in item.files:
        lines.append(f"SCRIPT=\"${{SCRIPT:-{SCRIPT_NAME}}}\"  # the conversation's scripted reply, beside this script")
    lines.append(f"OUT=\"${{OUT:-{out}}}\"")
    return "\n".join(lines) + "\n"


def _sh(name: str, url: str | None, same: str | None = None) -> str:
    if same and url:
        return f"{name}=\"${{{name}:-{same}}}\""
    if url:
        return f"{name}=\"${{{name}:-{url}}}\""
    return f"{name}=\"${{{name}:?set {name} to the server's address (see the note above)}}\""


# -- curl ---------------------------------------------------------------------------------------------------------
def curl(item: Item) -> str:
    """The nearest REST form of one turn: each stage whole (the transcript, the reply, the speech as one WAV), where
    the studio streams them; native mode's session has none."""
    r = item.request
    head = f"#!/bin/sh\n{header(item, '#')}"
    if r["mode"] == "native":
        return (head + "# Native mode is one WebSocket session (/v1/realtime?duplex=1): curl cannot hold it, so there "
                "is no REST form.\n# The Python runs the turn over that session; the CLI holds the conversation again.\n"
                "echo \"no REST form of a native conversation: run the Python, or the CLI line\" >&2\nexit 2\n")
    listen = (f"HEARD=$(curl -sS --fail-with-body \"$BASE_URL/v1/audio/transcriptions\" -F \"file=@$TURN\" "
              f"--form-string {shlex.quote('model=' + r['listen_model'])} \\\n  | python3 -c {shlex.quote(TEXT_PY)})\n")
    if r["reply_url"] is not None:
        reply = ("# 2. The reply: the model's, whole (the studio streams it: \"stream\": true)\n"
                 f"REPLY=$(HEARD=\"$HEARD\" python3 -c {shlex.quote(chat_body_py(r))} \\\n  | curl -sS --fail-with-body "
                 "\"$REPLY_URL/v1/chat/completions\" -H \"Content-Type: application/json\" -d @- \\\n"
                 f"  | python3 -c {shlex.quote(PICK_PY)})\n")
    else:
        reply = scripted_reply_sh(r)
    body = speech_body_py(r)
    return (head + "# The nearest REST form of one turn: each stage whole, where the studio streams them (the turn to "
            "/v1/realtime,\n# the reply as server-sent events, the speech over its WebSocket clause by clause).\n"
            "# An API key, if the server wants one: add -H \"Authorization: Bearer $OPENAI_API_KEY\".\nset -e\n"
            + _sh_consts(item, out="reply.wav") + "\n# 1. Listen: the turn's transcript\n" + listen
            + "echo \"you: $HEARD\"\n" + reply + "echo \"agent: $REPLY\"\n# 3. Speak: the reply as one WAV\n"
            f"REPLY=\"$REPLY\" python3 -c {shlex.quote(body)} \\\n  | curl -sS --fail-with-body \"$SPEAK_URL/v1/audio/"
            "speech\" -H \"Content-Type: application/json\" -d @- -o \"$OUT\"\necho \"$OUT\"\n")


__all__ = ["PREFIX", "cli", "curl", "owns", "python", "read"]
