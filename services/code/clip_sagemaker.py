"""The code for a clip whose parts were made on SageMaker endpoints: the same mix as services/code/clip.py, the parts
asked of the voice endpoint (`/v1/audio/speech` through InvokeEndpoint: the narration as one WAV) and the sound
endpoint (`/v1/audio/generate`), each with its route in CustomAttributes. VOICE_ENDPOINT, SOUND_ENDPOINT and REGION
at the top, each overridable by an environment variable of the same name; credentials from boto3's default chain
(curl: the AWS_* variables), none written.
"""

from __future__ import annotations

import json
import shlex

from protocol.sagemaker import route_attribute
from protocol.sound import SOUND_PATH
from services.code import clip
from services.code.items import SPEECH_PATH, Item
from services.code.sagemaker import CREDENTIALS
from services.code.literals import const, py_value
from services.code.sagemaker_shell import header
from services.code.sagemaker_shell import SIGV4

ENDPOINT_CONSTS = {"narration": "VOICE_ENDPOINT", "soundtrack": "SOUND_ENDPOINT"}

_IMPORTS = "import io\nimport json\nimport os\nfrom fractions import Fraction\n\nimport av\nimport boto3\n"
_PY_POST = '''

runtime = boto3.client("sagemaker-runtime", region_name=REGION)


def post(route, body):
    """A part, asked of its endpoint: the container's route in CustomAttributes."""
    reply = runtime.invoke_endpoint(EndpointName=ENDPOINTS[route], Body=json.dumps(body).encode(),
                                    ContentType="application/json", Accept="*/*", CustomAttributes=f"route={route}")
    return reply["Body"].read()
'''
ROUTES = {"narration": SPEECH_PATH, "soundtrack": SOUND_PATH}


def _endpoints(item: Item) -> dict[str, str]:
    return item.request.get("endpoints", {})


def python(item: Item) -> str:
    head = '"""' + header(item, "").replace("\n ", "\n").strip() + '\n"""\n\n'
    consts = f"# {CREDENTIALS}\n" + "".join(
        f"{ENDPOINT_CONSTS[part]} = os.environ.get({py_value(ENDPOINT_CONSTS[part])}, {py_value(name)})\n"
        for part, name in _endpoints(item).items())
    consts += ("ENDPOINTS = {" + ", ".join(f"{py_value(ROUTES[p])}: {ENDPOINT_CONSTS[p]}" for p in _endpoints(item))
               + "}  # which endpoint makes which part\n")
    consts += (f"REGION = os.environ.get(\"REGION\", {py_value(item.region)})\n"
               f"OUT = os.environ.get(\"OUT\", \"clip.mp4\")\n"
               + "".join(f"{const(n)} = os.environ.get({py_value(const(n))}, {py_value(n)})  # kept with the item, "
                         "beside this script\n" for n in item.files))
    return head + clip.python(item, consts, client=(_IMPORTS, _PY_POST))


def _sh_consts(item: Item) -> str:
    return ("".join(f"{ENDPOINT_CONSTS[p]}=\"${{{ENDPOINT_CONSTS[p]}:-{n}}}\"\n" for p, n in _endpoints(item).items())
            + f"REGION=\"${{REGION:-{item.region}}}\"\nOUT=\"${{OUT:-clip.mp4}}\"\n"
            + "".join(f"{const(n)}=\"${{{const(n)}:-{n}}}\"  # kept with the item, beside this script\n"
                      for n in item.files))


def curl(item: Item) -> str:
    body, calls = item.request, []
    for part, route, name in (("narration", SPEECH_PATH, "narration.wav"), ("soundtrack", SOUND_PATH, "soundtrack.wav")):
        if part not in body:
            continue
        sent = {**body[part], "response_format": "wav"}
        calls.append(f"sigv4 sagemaker \"https://runtime.sagemaker.$REGION.amazonaws.com/endpoints/"
                     f"${ENDPOINT_CONSTS[part]}/invocations\" \\\n  -H \"Content-Type: application/json\" -H \"Accept: */*\""
                     f" -H \"X-Amzn-SageMaker-Custom-Attributes: {route_attribute(route)}\" \\\n"
                     f"  -d {shlex.quote(json.dumps(sent))} -o {name}\necho {name}\n")
    return (f"#!/bin/sh\n{header(item, '#')}set -e\n{_sh_consts(item)}"
            + SIGV4
            + "# The parts, made again on the endpoints; muxing them under the video is not a request — the studio's "
              "CLI does it:\n# python -m services clip --video \"$SOURCE\" --narration-audio narration.wav "
              "--soundtrack-audio soundtrack.wav\n" + "".join(calls))


def cli(item: Item) -> str:
    words = clip.cli_words(item)
    words[words.index("--url"): words.index("--url") + 2] = ["--backend", "sagemaker", "--region", "$REGION"]
    env = [f"OMNI_STUDIO_{ENDPOINT_CONSTS[p].split('_')[0]}_ENDPOINT=\"${ENDPOINT_CONSTS[p]}\"" for p in _endpoints(item)]
    line = " ".join(env + [f"\"{w}\"" if w.startswith("$") else shlex.quote(w) for w in words])
    return (f"#!/bin/sh\n{header(item, '#')}# The studio's own command line: run it where the studio is installed, its "
            f"venv active.\n# {CREDENTIALS}\nset -e\n{_sh_consts(item)}\n{line}\n")
