"""The Python of a kept conversation's one turn (services/code/conversation.py reads the conversation): a standalone
script — the `openai` SDK on OpenAI's routes, `websockets` on vLLM-Omni's own; nothing of the studio — whose targets
are constants at its top, each overridable by an environment variable of the same name.

Pipeline mode: TURN → POST /v1/audio/transcriptions → the reply streamed (a model's /v1/chat/completions with
`stream: true`, or the conversation's scripted rules, matched as protocol/script.py does) → each clause fed into
the speech WebSocket (/v1/audio/speech/stream, the session.config the pipeline opens) as it arrives → OUT.
Native mode: TURN sent at real time in 100 ms appends over `WS /v1/realtime?duplex=1` after the conversation's
session.update, then silence until `response.done` (services/converse/native.py is the studio's side).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from protocol.duplex import SessionConfig, SessionUpdate, TurnDetection
from services.code.items import Item
from services.converse.reply import DEFAULT_MAX_TOKENS
from services.speech import speech_config

TURN_NAME = "turn.wav"  # the person's turn, beside the script
SCRIPT_NAME = "script.txt"  # the conversation's scripted reply, beside it when not the studio's default
KEY_NOTE = ("# An API key, if the servers want one (vLLM-Omni's --api-key): set OPENAI_API_KEY; the offline engine "
            "wants none.")


def lit(value: Any) -> str:
    """A Python literal of `value` (strings in double quotes, dicts and lists nested)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{lit(k)}: {lit(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(lit(v) for v in value) + "]"
    return repr(value)


def header(item: Item, comment: str) -> str:
    r = item.request
    model = r.get("reply_url") is not None or r.get("reply_endpoint")
    reply = ("a model" + (f" ({r['reply_model']})" if r.get("reply_model") else "") if model
             else "the server's speech-to-speech session" if r["mode"] == "native" else "the conversation's scripted rules (not a model)")
    return (f"{comment} One turn of {item.noun} {item.id} again — {item.title[:80]!r} —\n"
            f"{comment} answered by {reply}, against the conversation's own targets.\n"
            f"{comment} Written by `python -m services code {item.id}`; runs unchanged.\n"
            + "".join(f"{comment} Note: {n}\n" for n in item.notes))


def _url(name: str, value: str | None, same_as: str | None = None) -> str:
    if same_as:
        return f"{name} = os.environ.get({lit(name)}, {same_as})\n"
    if value:
        return f"{name} = os.environ.get({lit(name)}, {lit(value)})\n"
    return f"{name} = os.environ[{lit(name)}]  # the server's address: set it (see the note above)\n"


def python(item: Item) -> str:
    r = item.request
    doc = '"""' + header(item, "").replace("\n ", "\n").strip() + '\n"""\n\n'
    native = r["mode"] == "native"
    consts = _url("BASE_URL", item.base_url)
    if not native:
        consts += _url("SPEAK_URL", r["speak_url"], "BASE_URL" if r["speak_url"] == item.base_url else None)
    if r.get("reply_url") is not None:
        consts += _url("REPLY_URL", r["reply_url"])
    consts += ("TURN = os.environ.get(\"TURN\", \"turn.wav\")  # the person's turn, beside this script\n"
               "OUT = os.environ.get(\"OUT\", \"reply.wav\")  # the agent's spoken reply\n")
    return doc + (_native(item, consts) if native else _pipeline(item, consts))


def converse_line(item: Item, targets: list[str]) -> str:
    """`python -m services converse ...` with the conversation's settings, its targets named by `targets` (the flags
    and the variables holding them: a server's URLs or SageMaker's endpoints)."""
    r = item.request
    native = r["mode"] == "native"
    model = r["reply_url"] is not None or bool(r.get("reply_endpoint"))
    words = ["python", "-m", "services", "converse", "--input", "$TURN", "--mode", r["mode"], *targets]
    if model and r["reply_model"]:
        words += ["--reply-model", r["reply_model"]]
    if r["system_prompt"] and (native or model):
        words += ["--system-prompt", r["system_prompt"]]
    elif SCRIPT_NAME in item.files:
        words += ["--script", "$SCRIPT"]
    if r["voice"]:
        words += ["--voice", r["voice"]]
    words += ["--turn-detector", r["turn_detector"], "--eot-threshold", f"{r['eot_threshold']:g}",
              "--silence-ms", str(r["silence_ms"]), "--vad-threshold", f"{r['vad_threshold']:g}"]
    if not native:
        words += ["--min-speech-ms", str(r["min_speech_ms"])]
        if r["barge_in_at"] is not None:
            words += ["--barge-in-at", f"{r['barge_in_at']:g}"]
    words += ["--keep", "--out", "$OUT"]
    return " ".join(f"\"{w}\"" if w.startswith("$") else shlex.quote(w) for w in words)


# -- the REST forms' pieces (curl, on a server or on SageMaker): each stage whole, JSON built by python3 -c ---------
TEXT_PY = "import json, sys; print(json.load(sys.stdin)[\"text\"].strip())"  # a transcription's text
PICK_PY = "import json, sys; print(json.load(sys.stdin)[\"choices\"][0][\"message\"][\"content\"].strip())"


def chat_body_py(r: dict[str, Any]) -> str:
    """The program printing the whole (not streamed) chat request for $HEARD, as the conversation's model had it."""
    system = [{"role": "system", "content": r["system_prompt"]}] if r["system_prompt"] else []
    return ("import json, os; print(json.dumps({" + (f"\"model\": {lit(r['reply_model'])}, " if r["reply_model"]
            else "") + f"\"messages\": {system!r} + [{{\"role\": \"user\", \"content\": os.environ[\"HEARD\"]}}], "
            f"\"max_tokens\": {DEFAULT_MAX_TOKENS}}}))")


def speech_body_py(r: dict[str, Any]) -> str:
    """The program printing POST /v1/audio/speech's body for $REPLY (one WAV, in the conversation's voice)."""
    speech = {"input": "REPLY", "response_format": "wav"} | ({"voice": r["voice"]} if r["voice"] else {})
    return ("import json, os; print(json.dumps({" + ", ".join(
        f"{lit(k)}: " + ("os.environ[\"REPLY\"]" if v == "REPLY" else lit(v)) for k, v in speech.items()) + "}))")


def scripted_reply_sh(r: dict[str, Any]) -> str:
    return ("# 2. The reply: scripted (rules, not a model), which the studio answers itself: curl has none, so "
            "this is what\n#    the conversation's first turn was answered (the Python runs the script's rules).\n"
            f"REPLY={shlex.quote(r['replied'])}\n")


# -- pipeline mode ------------------------------------------------------------------------------------------------
def _pipeline(item: Item, consts: str) -> str:
    r = item.request
    config = speech_config(voice=r["voice"]).model_dump(mode="json", exclude_none=True)
    more, reply = reply_stage(r, r.get("reply_url") is not None, _CHAT, "the server's first listed model, as the "
                              "studio does")
    consts += more
    consts += (f"LISTEN_MODEL = {lit(r['listen_model'])}  # when the server lists it (or lists several), as the studio "
               f"picks\n# The speech session the pipeline opens (its voice; PCM streamed back, cut at clauses)\n"
               f"CONFIG = {lit(config)}\n")
    return ("import json\nimport os\nimport re\nimport wave\n\nfrom openai import OpenAI\nfrom websockets.sync.client "
            f"import connect\n\n{consts}{KEY_NOTE}\nKEY = os.environ.get(\"OPENAI_API_KEY\")\n\n\n" + _LISTEN + reply
            + _SPEAK + SAVE_REPLY)


def reply_stage(r: dict[str, Any], model: bool, chat: str, empty: str) -> tuple[str, str]:
    """The reply stage's constants and code: a model's (`chat`, whose REPLY_MODEL left empty means `empty`), or the
    conversation's scripted rules."""
    if not model:
        return f"SCRIPT = {block(r['script'] or '')}\n", SCRIPTED
    return (f"REPLY_MODEL = os.environ.get(\"REPLY_MODEL\", {lit(r['reply_model'] or '')})  # empty: {empty}\n"
            f"SYSTEM_PROMPT = {lit(r['system_prompt'] or '')}\nMAX_TOKENS = {DEFAULT_MAX_TOKENS}  # the studio's cap "
            "on one reply\n", chat)


def block(text: str) -> str:
    """A triple-quoted literal of `text` (its backslashes and quotes escaped)."""
    if "\\" in text or '"""' in text or not text.endswith("\n"):
        return lit(text)
    return '"""\\\n' + text + '"""'


_LISTEN = '''def client(url):
    return OpenAI(base_url=url + "/v1", api_key=KEY or "none")


# 1. Listen: the turn's transcript. (The studio streamed the turn to /v1/realtime at real time, as a microphone
#    would; this sends the same recording to the file route, which hears the same words.)
listen = client(BASE_URL)
ids = [m.id for m in listen.models.list().data]
model = LISTEN_MODEL if LISTEN_MODEL in ids or len(ids) != 1 else ids[0]
with open(TURN, "rb") as f:
    heard = listen.audio.transcriptions.create(file=f, model=model).text.strip()
print("you:", heard)
if not heard:
    raise SystemExit(f"no words heard in {TURN}: no reply, no turn")


'''

_CHAT = '''# 2. The reply, streamed: the model's /v1/chat/completions with stream=True, as the conversation's was
def reply_pieces(heard):
    chat = client(REPLY_URL)
    model = REPLY_MODEL or chat.models.list().data[0].id
    system = [{"role": "system", "content": SYSTEM_PROMPT}] if SYSTEM_PROMPT else []
    stream = chat.chat.completions.create(model=model, messages=system + [{"role": "user", "content": heard}],
                                          stream=True, max_tokens=MAX_TOKENS)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            yield chunk.choices[0].delta.content


'''

SCRIPTED = '''# 2. The reply: the conversation's scripted rules (not a model; the studio answers them itself, and so does this).
#    A rule `PATTERN => REPLY` matches when every word of PATTERN is a word of what was heard; the first one wins,
#    else `default => REPLY`.
def words(text):
    return re.findall(r"[a-z0-9']+", text.lower())


def reply_pieces(heard):
    said, answer, default = set(words(heard)), None, None
    for line in SCRIPT.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pattern, reply = (part.strip() for part in line.split("=>", 1))
        if pattern.lower() == "default":
            default = reply
        elif all(word in said for word in words(pattern)):
            answer = reply
            break
    if (answer or default) is None:
        raise SystemExit(f"the script has no rule for {heard!r} and no default")
    yield from re.findall(r"\\S+\\s*", answer or default)  # word by word, as the studio streams it


'''

# The reply cut into clauses as it streams (both targets' scripts feed the speech session so)
CLAUSES = '''CLAUSE_END = re.compile(r"[,;:.!?\u2026](?=\\s)")


def clauses(pieces):
    """The reply's complete clauses as its pieces arrive (the first audio does not wait for the whole reply)."""
    buffer = ""
    for piece in pieces:
        buffer += piece
        ends = [m.end() for m in CLAUSE_END.finditer(buffer)]
        if ends:
            yield buffer[: ends[-1]]
            buffer = buffer[ends[-1]:]
    if buffer.strip():
        yield buffer


'''

_SPEAK = CLAUSES + '''# 3. Speak: the reply fed into vLLM-Omni's speech WebSocket clause by clause as it streams; its PCM written to OUT
#    as a 16-bit WAV.
url = SPEAK_URL.replace("https://", "wss://").replace("http://", "ws://") + "/v1/audio/speech/stream"
reply, pcm, rate = "", bytearray(), 24000
with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"} if KEY else None, max_size=None) as ws:
    ws.send(json.dumps(CONFIG))
    for clause in clauses(reply_pieces(heard)):
        reply += clause
        ws.send(json.dumps({"type": "input.text", "text": clause}))
    if not reply.strip():
        raise SystemExit("the reply was empty: nothing to speak")
    ws.send(json.dumps({"type": "input.done"}))
    while True:
        frame = ws.recv()
        if isinstance(frame, bytes):
            pcm += frame
            continue
        event = json.loads(frame)
        if event["type"] == "audio.start":
            rate = event.get("sample_rate") or rate
        elif event["type"] == "error":
            raise SystemExit(f"the speech server said: {event['message']}")
        elif event["type"] == "session.done":
            break
'''


# -- native mode --------------------------------------------------------------------------------------------------
def session_consts(r: dict[str, Any]) -> str:
    """A native conversation's INSTRUCTIONS and SESSION (the session.update it opened with), as constants."""
    learned = {} if r["turn_detector"] != "learned" else {"type": "semantic_vad", "eot_threshold": r["eot_threshold"]}
    update = SessionUpdate(session=SessionConfig(
        instructions=r["system_prompt"] or r["script"], voice=r["voice"], turn_detection=TurnDetection(
            silence_duration_ms=r["silence_ms"], threshold=r["vad_threshold"], **learned)))
    session = update.model_dump(mode="json", exclude_none=True)
    instructions = session["session"].pop("instructions", None)
    return (f"INSTRUCTIONS = {block(instructions) if instructions else 'None'}  # a model's system prompt; the "
            "offline engine answers from these scripted rules\n# The session.update the conversation opened with "
            f"(its voice, how a turn ends)\nSESSION = {lit(session)}\nif INSTRUCTIONS:\n    "
            "SESSION[\"session\"][\"instructions\"] = INSTRUCTIONS\n")


def duplex(opened: str) -> str:
    """The one native turn over a channel `ws` with `send(text)` and `recv(timeout=None)` (TimeoutError when nothing
    came), opened by the `with ... as ws:` line `opened`: a WebSocket here, the HTTP/2 stream on SageMaker."""
    return _DUPLEX.replace("@OPEN@", opened)


def _native(item: Item, consts: str) -> str:
    opened = ('url = BASE_URL.replace("https://", "wss://").replace("http://", "ws://") + "/v1/realtime?duplex=1"\n'
              'with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"} if KEY else None, '
              'max_size=None) as ws:')
    return ("import base64\nimport json\nimport os\nimport time\nimport wave\n\nfrom websockets.sync.client import "
            f"connect\n\n{consts}{session_consts(item.request)}{KEY_NOTE}\nKEY = os.environ.get(\"OPENAI_API_KEY\")\n\n"
            + duplex(opened) + SAVE_REPLY)


_DUPLEX = '''with wave.open(TURN) as w:  # the session's input: 16 kHz mono PCM16
    if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, 16000):
        raise SystemExit(f"{TURN}: give a 16 kHz mono 16-bit WAV (the session's input audio)")
    audio = w.readframes(w.getnframes())

CHUNK = 3200  # 100 ms of it: the microphone's appends, at real time; silence after the turn until the answer ends
heard, reply, pcm, rate, done = "", "", bytearray(), 24000, False
@OPEN@
    ws.send(json.dumps(SESSION))
    while (event := json.loads(ws.recv()))["type"] != "session.updated":
        if event["type"] != "error":
            continue
        detection = SESSION["session"].get("turn_detection") or {}
        if event.get("code") == "unsupported" or (event.get("error") or {}).get("code") == "unsupported" \\
                or detection.get("type") != "semantic_vad":
            raise SystemExit(f"the server refused the speech-to-speech session: {event.get('error')}")
        print("note: the server refused the learned end of turn; its silence window ends the turn")
        detection["type"] = "server_vad"
        detection.pop("eot_threshold", None)
        ws.send(json.dumps(SESSION))
    start, sent = time.monotonic(), 0
    while not done:
        chunk, audio = audio[:CHUNK], audio[CHUNK:]
        ws.send(json.dumps({"type": "input_audio_buffer.append",
                            "audio": base64.b64encode(chunk.ljust(CHUNK, b"\\0")).decode("ascii")}))
        sent += 1
        if sent > 600:
            raise SystemExit("no answer within a minute of sending the turn")
        while not done and (wait := start + sent * 0.1 - time.monotonic()) > 0:  # the server's events till the next
            try:
                event = json.loads(ws.recv(timeout=wait))
            except TimeoutError:
                break
            kind = event.get("type")
            if kind == "conversation.item.input_audio_transcription.completed":
                heard = (event.get("transcript") or "").strip()
                print("you:", heard)
            elif kind == "response.output_audio_transcript.delta":
                reply += event.get("delta") or ""
            elif kind == "response.output_audio.delta":
                pcm += base64.b64decode(event.get("delta") or "")
                rate = event.get("sample_rate_hz") or rate
            elif kind == "response.done":
                done = True
            elif kind == "error":
                raise SystemExit(f"the server said: {event.get('error')}")
'''

# Both modes end the same way: the reply said, its audio written as a 16-bit mono WAV, the file named.
SAVE_REPLY = '''print("agent:", reply.strip())
with wave.open(OUT, "wb") as w:
    w.setnchannels(1)
    w.setsampwidth(2)
    w.setframerate(rate)
    w.writeframes(bytes(pcm))
print(OUT)
'''
