"""The code for an item made on a server target (the offline engine, or any vLLM-Omni server by URL): Python (the
`openai` SDK on OpenAI's routes, `httpx` on vLLM-Omni's own), curl, and the studio's own command line.

Each script names its target in constants at its top (overridable by an environment variable of the same name),
writes its output to the file it names and prints that name. `python(item)`, `curl(item)`, `cli(item)`: the text.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from protocol.images import IMAGE_EDITS_PATH, IMAGES_PATH
from protocol.listen import TRANSCRIPTIONS_PATH
from protocol.sound import SOUND_PATH
from protocol.videos import VIDEO_SYNC_PATH
from services.code import clip
from services.code.literals import const as _const, kwargs as _kwargs, py_dict as _py_dict, py_value as _py_value
from services.code.items import SPEECH_PATH, Item

# The file each route's script writes: a name, or the request's field naming the format ("image.<that>").
OUTPUTS = {IMAGES_PATH: ("image", "output_format", "png"), IMAGE_EDITS_PATH: ("image", "output_format", "png"),
           SOUND_PATH: ("sound", "response_format", "wav"), VIDEO_SYNC_PATH: ("video", None, "mp4"),
           SPEECH_PATH: ("speech", None, "wav"), TRANSCRIPTIONS_PATH: ("transcript", None, "txt"),
           clip.CLIP_ROUTE: ("clip", None, "mp4")}
# The parameters of openai 3.x's `client.audio.speech.create` (the rest of a speech request goes in extra_body).
SDK_SPEECH_ARGS = frozenset("input model voice instructions response_format speed stream_format".split())
KEY_NOTE = ("# An API key, if the server wants one (vLLM-Omni's --api-key): set OPENAI_API_KEY; the offline engine "
            "wants none.")


def out_name(item: Item) -> str:
    stem, field, suffix = OUTPUTS[item.route]
    return f"{stem}.{item.request.get(field, suffix) if field else suffix}"


def _notes(item: Item, comment: str) -> str:
    return "".join(f"{comment} Note: {n}\n" for n in item.notes)


def _header(item: Item, comment: str) -> str:
    return (f"{comment} Make {item.noun} {item.id} again — {item.title[:80]!r} — on a vLLM-Omni server\n"
            f"{comment} (made on {item.target}). Written by `python -m services code {item.id}`; runs unchanged.\n"
            + _notes(item, comment))


# -- Python -------------------------------------------------------------------------------------------------------
def python(item: Item) -> str:
    body = dict(item.request)
    head = '"""' + _header(item, "").replace("\n ", "\n").strip() + '\n"""\n\n'
    refs = "".join(f"{_const(name)} = os.environ.get({_py_value(_const(name))}, {_py_value(name)})  # kept with the item, beside "
                   "this script\n" for name in item.files)
    base = (f"os.environ.get(\"BASE_URL\", {_py_value(item.base_url)})" if item.base_url else
            "os.environ[\"BASE_URL\"]  # the server's address: set it (see the note above)")
    consts = (f"BASE_URL = {base}\n"
              f"OUT = os.environ.get(\"OUT\", {_py_value(out_name(item))})\n{refs}")
    return head + _PY[item.route](item, body, consts)


def _sh_base(item: Item) -> str:
    if item.base_url:
        return f"BASE_URL=\"${{BASE_URL:-{item.base_url}}}\""
    return "BASE_URL=\"${BASE_URL:?set BASE_URL to the server's address (see the note above)}\""


def _py_image(item: Item, body: dict[str, Any], consts: str) -> str:
    extra = {k: body.pop(k) for k in list(body) if k not in ("prompt", "model", "n", "size", "response_format")}
    body.setdefault("response_format", "b64_json")
    return (f"import base64\nimport os\n\nfrom openai import OpenAI\n\n{consts}{KEY_NOTE}\n\n"
            "client = OpenAI(base_url=BASE_URL + \"/v1\", api_key=os.environ.get(\"OPENAI_API_KEY\", \"none\"))\n"
            f"result = client.images.generate(\n{_kwargs(body)}"
            f"    extra_body={_py_value(extra)},  # vLLM-Omni's own fields\n)\n" + _PY_SAVE_IMAGES)


_PY_SAVE_IMAGES = """for i, image in enumerate(result.data):
    stem, dot, suffix = OUT.rpartition(".")
    name = OUT if len(result.data) == 1 else f"{stem}-{i + 1}.{suffix}"
    with open(name, "wb") as f:
        f.write(base64.b64decode(image.b64_json))
    print(name)
"""


def _py_edit(item: Item, body: dict[str, Any], consts: str) -> str:
    images = body.pop("images")
    extra = {k: body.pop(k) for k in list(body) if k not in ("prompt", "model", "n", "size", "response_format")}
    files = ", ".join(f"open({_const(n)}, \"rb\")" for n in images)
    return (f"import base64\nimport os\n\nfrom openai import OpenAI\n\n{consts}{KEY_NOTE}\n\n"
            "client = OpenAI(base_url=BASE_URL + \"/v1\", api_key=os.environ.get(\"OPENAI_API_KEY\", \"none\"))\n"
            f"result = client.images.edit(\n    image=[{files}],\n{_kwargs(body)}"
            f"    extra_body={_py_value(extra)},  # vLLM-Omni's own fields\n)\n" + _PY_SAVE_IMAGES)


def _py_sound(item: Item, body: dict[str, Any], consts: str) -> str:
    return (f"import os\n\nimport httpx\n\n{consts}{KEY_NOTE}\n\n"
            "headers = {\"Authorization\": f\"Bearer {os.environ['OPENAI_API_KEY']}\"} if "
            "os.environ.get(\"OPENAI_API_KEY\") else {}\n"
            f"body = {_py_dict(body)}\n"
            "response = httpx.post(BASE_URL + \"/v1/audio/generate\", json=body, headers=headers, timeout=600)\n"
            "response.raise_for_status()\nwith open(OUT, \"wb\") as f:\n    f.write(response.content)\nprint(OUT)\n")


def _py_video(item: Item, body: dict[str, Any], consts: str) -> str:
    ref = body.pop("image_reference", None)
    reference = ""
    if ref:
        reference = (f"with open({_const(ref)}, \"rb\") as f:  # the JPEG the studio sent, fitted to the size\n"
                     "    url = \"data:image/jpeg;base64,\" + base64.b64encode(f.read()).decode()\n"
                     "fields[\"image_reference\"] = json.dumps({\"image_url\": url})\n")
    imports = "import base64\nimport json\nimport os\n" if ref else "import os\n"
    return (f"{imports}\nimport httpx\n\n{consts}{KEY_NOTE}\n\n"
            "headers = {\"Authorization\": f\"Bearer {os.environ['OPENAI_API_KEY']}\"} if "
            "os.environ.get(\"OPENAI_API_KEY\") else {}\n"
            f"fields = {_py_dict(body)}\n{reference}"
            "# multipart/form-data, every field a text part (as vLLM-Omni's /v1/videos/sync reads them)\n"
            "response = httpx.post(BASE_URL + \"/v1/videos/sync\", files={k: (None, v) for k, v in fields.items()},\n"
            "                      headers=headers, timeout=3600)\n"
            "response.raise_for_status()\nwith open(OUT, \"wb\") as f:\n    f.write(response.content)\nprint(OUT)\n")


def _rest_speech(body: dict[str, Any]) -> dict[str, Any]:
    """A take's request on the REST route: the fields POST /v1/audio/speech reads, one whole WAV back."""
    from protocol.speech import SpeechRequest

    rest = {k: v for k, v in body.items() if k in SpeechRequest.model_fields and k != "stream"}
    return rest | {"response_format": "wav"}


def _py_take(item: Item, body: dict[str, Any], consts: str) -> str:
    text = body.pop("input")
    config = {"type": "session.config", **body}
    imports = "import base64\nimport json\nimport os\nimport wave\n" if item.files else "import json\nimport os\nimport wave\n"
    return (f"{imports}\nfrom websockets.sync.client import connect\n\n{consts}"
            f"{KEY_NOTE}\n"
            "# The take was streamed over vLLM-Omni's speech WebSocket (/v1/audio/speech/stream) with this\n"
            "# session.config, as PCM, and kept as a 16-bit WAV: so is this script's. (The REST route, POST\n"
            "# /v1/audio/speech — the curl form — speaks the text as one unit, not cut as the take was.)\n\n"
            f"CONFIG = {_py_dict(config)}\nTEXT = {_py_value(text)}\n{_py_reference(item)}\n"
            "url = BASE_URL.replace(\"https://\", \"wss://\").replace(\"http://\", \"ws://\") + "
            "\"/v1/audio/speech/stream\"\n"
            "key = os.environ.get(\"OPENAI_API_KEY\")\n"
            "pcm, rate = bytearray(), 24000\n"
            "with connect(url, additional_headers={\"Authorization\": f\"Bearer {key}\"} if key else None,\n"
            "             max_size=None) as ws:\n"
            "    ws.send(json.dumps(CONFIG))\n"
            "    ws.send(json.dumps({\"type\": \"input.text\", \"text\": TEXT}))\n"
            "    ws.send(json.dumps({\"type\": \"input.done\"}))\n"
            "    while True:\n"
            "        frame = ws.recv()\n"
            "        if isinstance(frame, bytes):\n"
            "            pcm += frame\n"
            "            continue\n"
            "        event = json.loads(frame)\n"
            "        if event[\"type\"] == \"audio.start\":\n"
            "            rate = event.get(\"sample_rate\") or rate\n"
            "        elif event[\"type\"] == \"error\":\n"
            "            raise SystemExit(f\"the server said: {event['message']}\")\n"
            "        elif event[\"type\"] == \"session.done\":\n"
            "            break\n"
            "with wave.open(OUT, \"wb\") as w:\n"
            "    w.setnchannels(1)\n    w.setsampwidth(2)\n    w.setframerate(rate)\n    w.writeframes(bytes(pcm))\n"
            "print(OUT)\n")


def _py_reference(item: Item) -> str:
    """A clone's reference recording, read into the request as the `data:` URL vLLM-Omni's ref_audio takes."""
    if not item.files:
        return ""
    name = _const(next(iter(item.files)))
    return (f"with open({name}, \"rb\") as f:  # the speaker's recording (3–30 s), used with their consent\n"
            "    CONFIG[\"ref_audio\"] = \"data:audio/wav;base64,\" + base64.b64encode(f.read()).decode()\n")


def _py_transcript(item: Item, body: dict[str, Any], consts: str) -> str:
    name = body.pop("file")
    return (f"import os\n\nfrom openai import OpenAI\n\n{consts}{KEY_NOTE}\n\n"
            "client = OpenAI(base_url=BASE_URL + \"/v1\", api_key=os.environ.get(\"OPENAI_API_KEY\", \"none\"))\n"
            f"with open({_const(name)}, \"rb\") as recording:\n"
            f"    result = client.audio.transcriptions.create(\n        file=recording,\n"
            f"{_kwargs(body, '        ')}    )\n"
            "with open(OUT, \"w\", encoding=\"utf-8\") as f:\n    f.write(result.text)\nprint(OUT)\n")


_PY = {IMAGES_PATH: _py_image, IMAGE_EDITS_PATH: _py_edit, SOUND_PATH: _py_sound, VIDEO_SYNC_PATH: _py_video,
       SPEECH_PATH: _py_take, TRANSCRIPTIONS_PATH: _py_transcript,
       clip.CLIP_ROUTE: lambda item, body, consts: clip.python(item, consts)}


# -- curl ---------------------------------------------------------------------------------------------------------
def curl(item: Item) -> str:
    body = dict(item.request)
    refs = "".join(f"{_const(n)}=\"${{{_const(n)}:-{n}}}\"  # kept with the item, beside this script\n"
                   for n in item.files)
    head = (f"#!/bin/sh\n{_header(item, '#')}set -e\n"
            f"{_sh_base(item)}\nOUT=\"${{OUT:-{out_name(item)}}}\"\n{refs}"
            "# An API key, if the server wants one: add -H \"Authorization: Bearer $OPENAI_API_KEY\".\n\n")
    return head + _CURL[item.route](item, body)


_DECODE_IMAGE = ("import base64, json, sys; d = json.load(sys.stdin)[\"data\"]; "
                 "sys.stdout.buffer.write(base64.b64decode(d[0][\"b64_json\"]))")


def _form(body: dict[str, Any]) -> str:
    return "".join(f"  --form-string {shlex.quote(f'{k}={v}')} \\\n" for k, v in body.items())


def _curl_image(item: Item, body: dict[str, Any]) -> str:
    body.setdefault("response_format", "b64_json")
    return (f"curl -sS --fail-with-body \"$BASE_URL{item.route}\" -H \"Content-Type: application/json\" "
            f"\\\n  -d {shlex.quote(json.dumps(body))} \\\n  | python3 -c {shlex.quote(_DECODE_IMAGE)} > \"$OUT\"\n"
            "echo \"$OUT\"\n")


_ADD_REFERENCE = ("import base64, json, sys; b = json.loads(sys.argv[1]); b[\"ref_audio\"] = \"data:audio/wav;base64,\" "
                  "+ base64.b64encode(open(sys.argv[2], \"rb\").read()).decode(); sys.stdout.write(json.dumps(b))")


def _curl_audio(item: Item, body: dict[str, Any]) -> str:
    if item.route == SPEECH_PATH:
        body = _rest_speech(body)
    if item.route == SPEECH_PATH and item.files:  # a clone: the recording goes in the body as a data: URL (stdin)
        name = _const(next(iter(item.files)))
        return (f"python3 -c {shlex.quote(_ADD_REFERENCE)} {shlex.quote(json.dumps(body))} \"${name}\" \\\n"
                f"  | curl -sS --fail-with-body \"$BASE_URL{item.route}\" -H \"Content-Type: application/json\" "
                "-d @- -o \"$OUT\"\necho \"$OUT\"\n")
    return (f"curl -sS --fail-with-body \"$BASE_URL{item.route}\" -H \"Content-Type: application/json\" "
            f"\\\n  -d {shlex.quote(json.dumps(body))} -o \"$OUT\"\necho \"$OUT\"\n")


def _curl_video(item: Item, body: dict[str, Any]) -> str:
    ref = body.pop("image_reference", None)
    parts = _form(body)
    if ref:
        parts += ("  --form-string \"image_reference={\\\"image_url\\\": \\\"data:image/jpeg;base64,"
                  f"$(base64 -w0 \"${_const(ref)}\")\\\"}}\" \\\n")
    return f"curl -sS --fail-with-body \"$BASE_URL{item.route}\" \\\n{parts}  -o \"$OUT\"\necho \"$OUT\"\n"


def _curl_transcript(item: Item, body: dict[str, Any]) -> str:
    name = body.pop("file")
    decode = "import json, sys; sys.stdout.write(json.load(sys.stdin)[\"text\"])"
    return (f"curl -sS --fail-with-body \"$BASE_URL{item.route}\" -F \"file=@${_const(name)}\" \\\n"
            f"{_form(body)}  | python3 -c {shlex.quote(decode)} > \"$OUT\"\necho \"$OUT\"\n")


def _curl_edit(item: Item, body: dict[str, Any]) -> str:
    files = "".join(f"  -F \"image[]=@${_const(n)}\" \\\n" for n in body.pop("images"))
    return (f"curl -sS --fail-with-body \"$BASE_URL{item.route}\" \\\n{files}{_form(body)}"
            f"  | python3 -c {shlex.quote(_DECODE_IMAGE)} > \"$OUT\"\necho \"$OUT\"\n")


_CURL = {IMAGES_PATH: _curl_image, IMAGE_EDITS_PATH: _curl_edit, SOUND_PATH: _curl_audio, SPEECH_PATH: _curl_audio,
         VIDEO_SYNC_PATH: _curl_video, TRANSCRIPTIONS_PATH: _curl_transcript,
         clip.CLIP_ROUTE: lambda item, body: clip.curl(item)}


# -- the studio's command line ------------------------------------------------------------------------------------
_IMAGE_FLAGS = {"prompt": "--prompt", "negative_prompt": "--negative-prompt", "size": "--size",
                "num_inference_steps": "--steps", "guidance_scale": "--guidance", "seed": "--seed", "n": "--n",
                "output_format": "--format"}
_FLAGS = {
    IMAGES_PATH: _IMAGE_FLAGS, IMAGE_EDITS_PATH: _IMAGE_FLAGS,
    SOUND_PATH: {"input": "--prompt", "audio_length": "--seconds", "num_inference_steps": "--steps",
              "guidance_scale": "--guidance", "seed": "--seed", "negative_prompt": "--negative-prompt",
              "response_format": "--format"},
    VIDEO_SYNC_PATH: {"prompt": "--prompt", "width": "--width", "height": "--height", "num_frames": "--frames",
              "fps": "--fps", "num_inference_steps": "--steps", "guidance_scale": "--guidance", "seed": "--seed",
              "negative_prompt": "--negative-prompt"},
    SPEECH_PATH: {"input": "--text", "voice": "--voice", "language": "--language", "task_type": "--task-type",
             "instructions": "--instructions", "ref_text": "--ref-text", "split": "--split",
             "first_chunk_frames": "--first-chunk-frames", "seed": "--seed"},
    TRANSCRIPTIONS_PATH: {"language": "--language", "model": "--model"},
}


def cli(item: Item) -> str:
    words = clip.cli_words(item) if item.route == clip.CLIP_ROUTE else _cli_words(item)
    line = " ".join(f"\"{w}\"" if w.startswith("$") else shlex.quote(w) for w in words)
    refs = "".join(f"{_const(n)}=\"${{{_const(n)}:-{n}}}\"  # kept with the item, beside this script\n"
                   for n in item.files)
    return (f"#!/bin/sh\n{_header(item, '#')}# The studio's own command line: run it where the studio is "
            "installed, its venv active.\nset -e\n"
            f"{_sh_base(item)}\nOUT=\"${{OUT:-{out_name(item)}}}\"\n{refs}\n{line}\n")


def _cli_words(item: Item) -> list[str]:
    return ["python", "-m", "services", item.command, "--url", "$BASE_URL", *request_flags(item), "--out", "$OUT"]


def request_flags(item: Item) -> list[str]:
    """The flags (and the positional file) of the studio's command that repeat `item`'s request, on any target."""
    words: list[str] = []
    body = item.request
    if body.get("split_granularity"):  # a take: `speak` streams as the page did
        body = {**body, "split": body["split_granularity"], "first_chunk_frames": body.get("initial_codec_chunk_frames")}
    if "file" in body:  # a transcript's recording: the positional FILE
        words.append(f"${_const(body['file'])}")
    for key, flag in _FLAGS[item.route].items():
        if body.get(key) is not None:
            words += [flag, str(body[key])]
    for name in body.get("images", ()):  # an edit's references
        words += ["--edit", f"${_const(name)}"]
    if body.get("image_reference"):  # a video's reference image
        words += ["--image", f"${_const(body['image_reference'])}"]
    if item.route == SPEECH_PATH and item.files:  # a clone's reference recording
        words += ["--ref-audio", f"${_const(next(iter(item.files)))}"]
    return words
