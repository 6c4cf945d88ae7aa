"""A kept conversation held on SageMaker endpoints as code (issue #36): the `converse` line on its endpoints, a
standalone script running ONE turn through the same stages on them, and curl's nearest REST form.

    item = conversation.read(history, "conversation-…")   # held on endpoints: on_endpoints(item, settings) read them
    python(item), curl(item), cli(item)

The endpoints are read from what the conversation kept: pipeline mode's listen and speech targets ("SageMaker endpoint
NAME (REGION)", as the Converse page and `converse --keep` keep them) and its reply endpoint (by name; its region in
the reply's label), native mode's one endpoint. Each is a constant at the script's top — LISTEN_ENDPOINT,
REPLY_ENDPOINT, VOICE_ENDPOINT (native: ENDPOINT_NAME) and REGION — overridable by an environment variable of the same
name; credentials come from boto3's default chain (curl: the AWS_* variables), never written.

Pipeline mode's Python, as Converse talks to SageMaker (services/converse/sagemaker.py, services/listen/sagemaker.py):
the turn → `invoke_endpoint` on the listen endpoint (multipart, route=/v1/audio/transcriptions in CustomAttributes;
the studio streamed it to /v1/realtime over the HTTP/2 stream, the file route hears the same words) → the reply
through `invoke_endpoint_with_response_stream` (route=/v1/chat/completions, its server-sent events read from the
PayloadParts, split anywhere), or the conversation's scripted rules → fed clause by clause into the voice endpoint's
speech session over the HTTP/2 bidirectional stream → OUT. Native mode's Python holds its one turn in the omni
endpoint's duplex session on that stream, as services/converse/sagemaker.py's EndpointSession does (invocation path
v1/realtime, query duplex=1, each JSON event one UTF8 PayloadPart): the turn itself is conversation_py's (`duplex`,
the server's script) over a `Duplex` channel — the HTTP/2 stream held by an event loop on a thread, with a WebSocket's
send(text) and recv(timeout) — opened with the kept session.update, its turn ended by the silence window (the studio
asks an endpoint for no learned end of turn). Native mode has no REST form.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace
from typing import Any

from protocol.duplex import DUPLEX_QUERY
from protocol.listen import FILE_FIELD, REALTIME_PATH, TRANSCRIPTIONS_PATH
from protocol.sagemaker import DEFAULT_REGION, SPEECH_INVOCATION_PATH
from services.code.conversation_py import (
    CLAUSES,
    PICK_PY,
    SAVE_REPLY,
    SCRIPT_NAME,
    TEXT_PY,
    TURN_NAME,
    chat_body_py,
    converse_line,
    duplex,
    header,
    lit,
    reply_stage,
    scripted_reply_sh,
    session_consts,
    speech_body_py,
)
from services.code.items import SPEECH_PATH, Item, sagemaker_target
from services.code.sagemaker import CREDENTIALS, PY_HTTP2, PY_HTTP2_IMPORTS, RUNTIME, invoke
from services.code.sagemaker_shell import MULTIPART, SIGV4, _route
from services.converse.reply import CHAT_PATH
from services.speech import speech_config

KIND = "conversation-sagemaker"  # the Item's target_kind: services/code's generators pick this module for it
# Each role's constant, what it does, and the placeholder when the conversation kept no name for it
ROLES = {"LISTEN_ENDPOINT": "hears the turn: /v1/audio/transcriptions through InvokeEndpoint",
         "REPLY_ENDPOINT": "answers: /v1/chat/completions through InvokeEndpointWithResponseStream",
         "VOICE_ENDPOINT": "speaks: the speech session over the HTTP/2 bidirectional stream",
         "ENDPOINT_NAME": "holds the speech-to-speech session (v1/realtime?duplex=1) over the HTTP/2 stream"}
_NAMED = re.compile(r"SageMaker endpoint (?P<name>[A-Za-z0-9-]+)(?: \((?P<region>[a-z0-9-]+))?")
_FLAGS = {"LISTEN_ENDPOINT": "--listen-endpoint", "REPLY_ENDPOINT": "--reply-endpoint",
          "VOICE_ENDPOINT": "--voice-endpoint", "ENDPOINT_NAME": "--endpoint"}


def _endpoint(kept: Any) -> tuple[str | None, str | None]:
    """(name, region) of a kept target or label that names a SageMaker endpoint; None for what it does not say."""
    text = str(kept or "")
    if m := _NAMED.search(text):
        return m["name"], m["region"]
    return sagemaker_target(text)


def on_endpoints(item: Item, settings: dict[str, Any]) -> Item:
    """The conversation `item` (services/code/conversation.py read it) with its endpoints and region read from its
    kept `settings`, a note for each the conversation does not say."""
    native = item.request["mode"] == "native"
    reply_name = str(settings.get("reply_endpoint") or "").strip() or None
    kept = ({"ENDPOINT_NAME": settings.get("url") or settings.get("listen")} if native else
            {"LISTEN_ENDPOINT": settings.get("listen"), "VOICE_ENDPOINT": settings.get("speak")})
    found = {const: _endpoint(target) for const, target in kept.items()}
    if reply_name and not native:
        found["REPLY_ENDPOINT"] = (reply_name, _endpoint(settings.get("reply"))[1])
    order = [c for c in ROLES if c in found]
    notes = list(item.notes)
    region = next((r for c in order if (r := found[c][1])), None)
    if region is None:
        notes.append(f"the conversation's targets name no region: the code says {DEFAULT_REGION} (set REGION for "
                     "another)")
    endpoints = {}
    for const in order:
        endpoints[const] = found[const][0] or const.replace("_", "-")
        if found[const][0] is None:
            notes.append(f"the conversation kept no endpoint name for {const} ({kept.get(const)!r}): set it to yours")
    label = str(settings.get("reply") or "")
    model = label.split(" on SageMaker endpoint ")[0] if " on SageMaker endpoint " in label else None
    request = {**item.request, "endpoints": endpoints, "region": region or DEFAULT_REGION, "reply_endpoint": reply_name,
               "reply_url": None, "speak_url": "",
               "reply_model": settings.get("reply_model") or (model if model != "the served model" else None)}
    where = ", ".join(f"{c.lower().removesuffix('_endpoint').removesuffix('_name')} {n}" for c, n in endpoints.items())
    return replace(item, request=request, target=f"SageMaker endpoints ({where}; {request['region']})",
                   target_kind=KIND, base_url="", made_on="", notes=tuple(notes), endpoint=endpoints[order[0]],
                   region=request["region"])


def header_of(item: Item, comment: str) -> str:
    return header(item, comment).replace("against the conversation's own targets",
                                         "on the conversation's own SageMaker endpoints")


def _py_consts(item: Item) -> str:
    r = item.request
    lines = [f"# {CREDENTIALS}"] + [f"{c} = os.environ.get({lit(c)}, {lit(n)})  # {ROLES[c]}"
                                     for c, n in r["endpoints"].items()]
    lines += [f"REGION = os.environ.get(\"REGION\", {lit(r['region'])})",
              f"TURN = os.environ.get(\"TURN\", {lit(TURN_NAME)})  # the person's turn, beside this script",
              "OUT = os.environ.get(\"OUT\", \"reply.wav\")  # the agent's spoken reply"]
    return "\n".join(lines) + "\n"


# -- Python -------------------------------------------------------------------------------------------------------
def python(item: Item) -> str:
    r = item.request
    doc = '"""' + header_of(item, "").replace("\n ", "\n").strip() + '\n"""\n\n'
    if r["mode"] == "native":
        # The studio asks an endpoint for no learned end of turn (Setup._eot): its silence window ends the turn
        consts = (_py_consts(item) + session_consts({**r, "turn_detector": "silence"}) + f"PATH = {lit(REALTIME_PATH.lstrip('/'))}  # the duplex "
                  f"session's route, over the HTTP/2 stream\nQUERY = \"{DUPLEX_QUERY}=1\"\n")
        return (doc + f"import asyncio\nimport base64\nimport json\nimport os\nimport threading\nimport time\n"
                f"import wave\n\nimport boto3\n{PY_HTTP2_IMPORTS}\n{consts}\n\n{PY_HTTP2}\n\n{_DUPLEX_SM}"
                + duplex("with Duplex(ENDPOINT_NAME) as ws:") + SAVE_REPLY)
    more, reply = reply_stage(r, bool(r["reply_endpoint"]), _CHAT, "the endpoint's own model answers")
    consts = _py_consts(item) + more
    config = speech_config(voice=r["voice"]).model_dump(mode="json", exclude_none=True)
    consts += (f"LISTEN_MODEL = {lit(r['listen_model'])}\nPATH = {lit(SPEECH_INVOCATION_PATH)}  # the speech route, "
               f"over the HTTP/2 stream\n# The speech session the pipeline opens (its voice; PCM streamed back, cut at "
               f"clauses)\nCONFIG = {lit(config)}\n")
    listen = _LISTEN.replace("@INVOKE@", invoke(TRANSCRIPTIONS_PATH, "content_type", "application/json",
                                                "LISTEN_ENDPOINT")).replace("@FILE@", FILE_FIELD)
    return (f"import asyncio\nimport json\nimport os\nimport re\nimport wave\n\nimport boto3\n{PY_HTTP2_IMPORTS}"
            f"from urllib3 import encode_multipart_formdata\n\n{consts}\n{RUNTIME}\n\n" + listen
            + reply.replace("@CHAT@", CHAT_PATH) + CLAUSES + PY_HTTP2 + "\n\n" + _SPEAK + SAVE_REPLY)


# Native mode's transport: the duplex session over the HTTP/2 stream, as conversation_py's turn wants its channel
_DUPLEX_SM = '''# The duplex session over the endpoint's HTTP/2 bidirectional stream (invocation path PATH, query QUERY), each
# JSON event one UTF8 PayloadPart both ways, as the studio holds it. The SDK's stream is async: an event loop on a
# thread of its own holds it, and `send(text)`, `recv(timeout)` are a WebSocket's, so the turn below reads as on a
# server.
class Duplex:
    def __init__(self, endpoint):
        self.endpoint, self.output, self.pending = endpoint, None, None
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    def run(self, coroutine, timeout):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def __enter__(self):
        self.stream = self.run(open_stream(self.endpoint, QUERY), 30)
        return self

    def send(self, text):
        self.run(send(self.stream, text), 30)

    async def next_text(self):
        \"\"\"The session's next JSON event: UTF8 PayloadParts (a PARTIAL run joined); None when the stream ends.\"\"\"
        if self.output is None:
            _, self.output = await self.stream.await_output()
        text = b""
        while (event := await self.output.receive()) is not None:
            if isinstance(event, ResponseStreamEventPayloadPart) and event.value.data_type == "UTF8":
                text += event.value.bytes_ or b""
                if event.value.completion_state != "PARTIAL":
                    return text.decode()
        return None

    def recv(self, timeout=None):
        \"\"\"The next event's text; TimeoutError after `timeout` seconds (the read goes on for the next call).\"\"\"
        if self.pending is None:
            self.pending = asyncio.run_coroutine_threadsafe(self.next_text(), self.loop)
        try:
            text = self.pending.result(120 if timeout is None else timeout)
        except TimeoutError:
            if timeout is None:
                raise SystemExit(f"nothing from {self.endpoint} for 120 s") from None
            raise
        self.pending = None
        if text is None:
            raise SystemExit(f"{self.endpoint} ended the speech-to-speech session")
        return text

    async def close(self):
        await self.stream.input_stream.close()  # the end of the input: the session ends
        if self.output is not None:
            await self.output.close()
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if others:
            await asyncio.wait(others, timeout=2)  # the SDK's own tasks finish writing

    def __exit__(self, *exc):
        try:
            self.run(self.close(), 5)
        except Exception:
            pass  # a broken stream's close must not hide what broke it
        self.loop.call_soon_threadsafe(self.loop.stop)


'''
_LISTEN = '''# 1. Listen: the turn's transcript from the listen endpoint. (The studio streamed the turn to /v1/realtime over the
#    HTTP/2 stream at real time, as a microphone would; this sends the same recording to the file route.)
with open(TURN, "rb") as f:
    recording = ("@FILE@", (os.path.basename(TURN), f.read(), "application/octet-stream"))
body, content_type = encode_multipart_formdata([recording, ("model", LISTEN_MODEL), ("response_format", "json")])
@INVOKE@heard = json.loads(reply["Body"].read())["text"].strip()
print("you:", heard)
if not heard:
    raise SystemExit(f"no words heard in {TURN}: no reply, no turn")


'''
_CHAT = '''# 2. The reply, streamed: the reply endpoint's /v1/chat/completions with "stream": true through
#    InvokeEndpointWithResponseStream; its server-sent events arrive in PayloadParts split anywhere (a line, even a
#    character, may span two), so lines are cut from the bytes as they come.
def reply_pieces(heard):
    system = [{"role": "system", "content": SYSTEM_PROMPT}] if SYSTEM_PROMPT else []
    request = {"messages": system + [{"role": "user", "content": heard}], "stream": True, "max_tokens": MAX_TOKENS}
    if REPLY_MODEL:
        request["model"] = REPLY_MODEL
    answer = runtime.invoke_endpoint_with_response_stream(
        EndpointName=REPLY_ENDPOINT, Body=json.dumps(request), ContentType="application/json",
        Accept="text/event-stream", CustomAttributes="route=@CHAT@")
    pending = b""
    for event in answer["Body"]:
        pending += (event.get("PayloadPart") or {}).get("Bytes") or b""
        *lines, pending = pending.split(b"\\n")
        for line in lines:
            line = line.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            if (data := line[5:].strip()) == "[DONE]":
                return
            choices = json.loads(data).get("choices") or [{}]
            if piece := (choices[0].get("delta") or {}).get("content"):
                yield piece


'''
_SPEAK = '''# 3. Speak: the voice endpoint's speech session over the HTTP/2 bidirectional stream, the reply fed into it clause by
#    clause as it streams (read on a thread: boto3's stream blocks); its PCM written to OUT as a 16-bit WAV.
async def speak():
    stream = await open_stream(VOICE_ENDPOINT)
    await send(stream, CONFIG)
    reply, parts = "", clauses(reply_pieces(heard))
    while (clause := await asyncio.to_thread(next, parts, None)) is not None:
        reply += clause
        await send(stream, {"type": "input.text", "text": clause})
    if not reply.strip():
        raise SystemExit("the reply was empty: nothing to speak")
    await send(stream, {"type": "input.done"})
    pcm, rate = await receive_audio(stream)
    return reply, pcm, rate


reply, pcm, rate = asyncio.run(speak())
'''


# -- curl ---------------------------------------------------------------------------------------------------------
def _sh_consts(item: Item, *, out: str) -> str:
    r = item.request
    lines = [f"{c}=\"${{{c}:-{n}}}\"  # {ROLES[c]}" for c, n in r["endpoints"].items()]
    lines += [f"REGION=\"${{REGION:-{r['region']}}}\"", f"TURN=\"${{TURN:-{TURN_NAME}}}\"  # the turn, beside this script"]
    if SCRIPT_NAME in item.files:
        lines.append(f"SCRIPT=\"${{SCRIPT:-{SCRIPT_NAME}}}\"  # the conversation's scripted reply, beside this script")
    return "\n".join(lines + [f"OUT=\"${{OUT:-{out}}}\""]) + "\n"


def curl(item: Item) -> str:
    """The nearest REST form of one turn, signed by curl (--aws-sigv4): each stage whole through InvokeEndpoint —
    the transcript, the reply not streamed, the speech as one WAV on the REST speech route; native mode has none."""
    r = item.request
    head = f"#!/bin/sh\n{header_of(item, '#')}"
    if r["mode"] == "native":
        return (head + "# Native mode is one session over the HTTP/2 bidirectional stream (v1/realtime?duplex=1): "
                "curl cannot hold it,\n# so there is no REST form. The Python runs the turn over that stream; the CLI "
                "holds the conversation again.\necho \"no REST form of a native conversation: run the Python, or the "
                "CLI line\" >&2\nexit 2\n")
    post = "sigv4 sagemaker \"$RUNTIME/${}/invocations\" -H \"Accept: {}\" {}"
    if r["reply_endpoint"]:
        reply = ("# 2. The reply: the model's, whole through InvokeEndpoint (the studio streams it through "
                 "InvokeEndpointWithResponseStream)\n"
                 f"REPLY=$(HEARD=\"$HEARD\" python3 -c {shlex.quote(chat_body_py(r))} \\\n  | "
                 + post.format("REPLY_ENDPOINT", "application/json", _route(CHAT_PATH))
                 + f" \\\n    -H \"Content-Type: application/json\" -d @- | python3 -c {shlex.quote(PICK_PY)})\n")
    else:
        reply = scripted_reply_sh(r)
    return (head + "# The nearest REST form of one turn: each stage whole through InvokeEndpoint, where the studio "
            "streams them (the turn\n# to /v1/realtime and the speech clause by clause over the HTTP/2 stream, the "
            "reply as server-sent events).\nset -e\n" + _sh_consts(item, out="reply.wav") + SIGV4
            + "RUNTIME=\"https://runtime.sagemaker.$REGION.amazonaws.com/endpoints\"\n" + MULTIPART
            + "\n# 1. Listen: the turn's transcript\n{\n"
            f"  filepart {FILE_FIELD} \"$TURN\" application/octet-stream\n  field model {shlex.quote(r['listen_model'])}"
            "\n  field response_format json\n  printf '%s\\r\\n' \"--$BOUNDARY--\"\n} > \"$BODY\"\n"
            "HEARD=$(" + post.format("LISTEN_ENDPOINT", "application/json", _route(TRANSCRIPTIONS_PATH))
            + " \\\n    -H \"Content-Type: multipart/form-data; boundary=$BOUNDARY\" --data-binary @\"$BODY\" "
            f"| python3 -c {shlex.quote(TEXT_PY)})\necho \"you: $HEARD\"\n" + reply + "echo \"agent: $REPLY\"\n"
            "# 3. Speak: the reply as one WAV, on the REST speech route through InvokeEndpoint\n"
            f"REPLY=\"$REPLY\" python3 -c {shlex.quote(speech_body_py(r))} \\\n  | "
            + post.format("VOICE_ENDPOINT", "audio/wav", _route(SPEECH_PATH))
            + " \\\n    -H \"Content-Type: application/json\" -d @- -o \"$OUT\"\necho \"$OUT\"\n")


# -- the studio's command line ------------------------------------------------------------------------------------
def cli(item: Item) -> str:
    """`python -m services converse` on the same endpoints (--listen-endpoint, --reply-endpoint, --voice-endpoint; native:
    --endpoint) and region, on the turn beside it, kept in the history as the conversation was."""
    r = item.request
    targets = [w for c in r["endpoints"] for w in (_FLAGS[c], f"${c}")] + ["--region", "$REGION"]
    return (f"#!/bin/sh\n{header_of(item, '#')}# The studio's own command line: run it where the studio is installed, "
            f"its venv active. It holds the conversation again on {TURN_NAME}\n# (more --input TURN.wav for more "
            "turns), keeps it in the history and writes its stereo WAV to OUT.\n# Credentials: boto3's default "
            "chain (AWS_* variables, ~/.aws profiles and SSO, an instance or task role).\nset -e\n"
            + _sh_consts(item, out="conversation.wav") + f"\n{converse_line(item, targets)}\n")


__all__ = ["KIND", "cli", "curl", "on_endpoints", "python"]
