"""The shell forms of a SageMaker item's code (services/code/sagemaker.py has the Python): curl, signed with SigV4
by curl itself (`--aws-sigv4`), against the runtime's REST API — InvokeEndpoint, and for a video InvokeEndpointAsync
with its result polled in S3; a speech take's nearest REST form is the speech route through InvokeEndpoint — and the
studio's own command line on the SageMaker backend. Multipart bodies are built with printf, byte for byte.
"""

from __future__ import annotations

import json
import mimetypes
import shlex
from typing import Any

from protocol import catalog
from protocol.errors import InvalidInput
from protocol.images import EDIT_IMAGE_FIELD, IMAGE_EDITS_PATH, IMAGES_PATH
from protocol.limits import ASYNC_INLINE_LIMIT, ASYNC_INVOCATION_TIMEOUT_S, REALTIME_PAYLOAD_MAX_BYTES
from protocol.listen import FILE_FIELD, TRANSCRIPTIONS_PATH
from protocol.sagemaker import route_attribute
from protocol.sound import SOUND_PATH
from protocol.videos import VIDEO_SYNC_PATH
from services.code.items import SPEECH_PATH, Item, _on_sagemaker
from services.code.literals import const as _const
from services.code.server import _rest_speech, out_name, request_flags

LIMIT_MB = REALTIME_PAYLOAD_MAX_BYTES // (1024 * 1024)
# The studio commands that name their endpoint with --endpoint; the others read OMNI_STUDIO_<FAMILY>_ENDPOINT
# (tests/test_code_sagemaker.py checks this against the commands' parsers).
ENDPOINT_FLAG = frozenset({SOUND_PATH, TRANSCRIPTIONS_PATH})
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def check(item: Item) -> Item:
    """The item with its endpoint and region read (a reader other than items.find may not have), or InvalidInput
    when no SageMaker code is written for what it is (a clip)."""
    if item.route not in _CURL:
        raise InvalidInput(f"{item.id} was made on {item.target}; code for a {item.noun} made on SageMaker is not "
                           "written yet")
    return item if item.endpoint else _on_sagemaker(item)


def _family(item: Item) -> str:
    return next(f.name for f in catalog.FAMILIES if item.route in f.routes)


def bucket_of(item: Item) -> tuple[str, str]:
    """(bucket, the studio's S3 prefix) an async job's large requests go to, from where the studio put them."""
    where = item.s3_requests.removeprefix("s3://").removesuffix("/requests")
    bucket, _, prefix = where.partition("/")
    return bucket or "YOUR-BUCKET", prefix


def header(item: Item, comment: str) -> str:
    return (f"{comment} Make {item.noun} {item.id} again — {item.title[:80]!r} — on a SageMaker endpoint\n"
            f"{comment} (made on {item.target}). Written by `python -m services code {item.id}`; runs unchanged.\n"
            + "".join(f"{comment} Note: {n}\n" for n in item.notes))


def _consts(item: Item) -> str:
    text = f"ENDPOINT_NAME=\"${{ENDPOINT_NAME:-{item.endpoint}}}\"\nREGION=\"${{REGION:-{item.region}}}\"\n"
    if item.route == VIDEO_SYNC_PATH:
        bucket, prefix = bucket_of(item)
        text += (f"BUCKET=\"${{BUCKET:-{bucket}}}\"  # a request over {ASYNC_INLINE_LIMIT:,} bytes goes through it\n"
                 f"PREFIX=\"${{PREFIX:-{prefix}}}\"\n")
    text += f"OUT=\"${{OUT:-{out_name(item)}}}\"\n"
    return text + "".join(f"{_const(n)}=\"${{{_const(n)}:-{n}}}\"  # kept with the item, beside this script\n"
                          for n in item.files)


# -- curl ---------------------------------------------------------------------------------------------------------
SIGV4 = """# SageMaker's runtime takes only requests signed with SigV4: curl signs them (--aws-sigv4) with AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY and, for temporary keys, AWS_SESSION_TOKEN. Export yours first — none are written here —
# e.g. eval "$(aws configure export-credentials --format env)".
: "${AWS_ACCESS_KEY_ID:?export your AWS keys first}" "${AWS_SECRET_ACCESS_KEY:?export your AWS keys first}"
sigv4() {  # sigv4 SERVICE CURL-ARGS...: curl, signed for SERVICE (sagemaker, s3) in $REGION
  service=$1; shift
  if [ -n "${AWS_SESSION_TOKEN:-}" ]; then set -- -H "x-amz-security-token: $AWS_SESSION_TOKEN" "$@"; fi
  curl -sS --fail-with-body --aws-sigv4 "aws:amz:$REGION:$service" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@"
}
"""
_RUNTIME = "RUNTIME=\"https://runtime.sagemaker.$REGION.amazonaws.com/endpoints/$ENDPOINT_NAME\"\n"
MULTIPART = """BOUNDARY="omni-studio-code-$$"
BODY="$(mktemp)"; trap 'rm -f "$BODY" "$BODY.h"' EXIT
field() { printf '%s\\r\\nContent-Disposition: form-data; name="%s"\\r\\n\\r\\n%s\\r\\n' "--$BOUNDARY" "$1" "$2"; }
filepart() {  # filepart NAME FILE CONTENT-TYPE
  printf '%s\\r\\nContent-Disposition: form-data; name="%s"; filename="%s"\\r\\nContent-Type: %s\\r\\n\\r\\n' \\
    "--$BOUNDARY" "$1" "$(basename "$2")" "$3"
  cat "$2"; printf '\\r\\n'
}
"""
_DECODE_IMAGE = ("import base64, json, sys; d = json.load(sys.stdin)[\"data\"]; "
                 "sys.stdout.buffer.write(base64.b64decode(d[0][\"b64_json\"]))")
_DECODE_TEXT = "import json, sys; sys.stdout.write(json.load(sys.stdin)[\"text\"].strip())"


def curl(item: Item) -> str:
    item = check(item)
    return (f"#!/bin/sh\n{header(item, '#')}set -e\n{_consts(item)}{SIGV4}{_RUNTIME}\n"
            + _CURL[item.route](item, dict(item.request)))


def _route(route: str) -> str:
    return f"-H \"X-Amzn-SageMaker-Custom-Attributes: {route_attribute(route)}\""


def _fields(body: dict[str, Any]) -> str:
    return "".join(f"  field {shlex.quote(k)} {shlex.quote(str(v))}\n" for k, v in body.items())


def _check_size(what: str) -> str:
    return (f"[ \"$(wc -c < \"$BODY\")\" -le {REALTIME_PAYLOAD_MAX_BYTES} ] || {{ echo \"the request is over "
            f"InvokeEndpoint's {LIMIT_MB} MB limit: {what}\" >&2; exit 1; }}\n")


def _curl_json(item: Item, body: dict[str, Any]) -> str:
    accept, then = {IMAGES_PATH: ("application/json", f"| python3 -c {shlex.quote(_DECODE_IMAGE)} > \"$OUT\""),
                    SOUND_PATH: ("*/*", "-o \"$OUT\""), SPEECH_PATH: ("audio/wav", "-o \"$OUT\"")}[item.route]
    note = ""
    if item.route == IMAGES_PATH:
        body.setdefault("response_format", "b64_json")
    if item.route == SPEECH_PATH:  # the take's nearest REST form: the whole text through InvokeEndpoint, one WAV
        body = _rest_speech(body)
        note = ("# The take was streamed over the endpoint's HTTP/2 bidirectional stream (the Python form); its nearest "
                "REST\n# form is the speech route through InvokeEndpoint: the text as one unit, one WAV back.\n")
        if item.files:  # a clone: its recording goes into the body as a data: URL
            add = ("import base64, json, sys; b = json.loads(sys.argv[1]); b[\"ref_audio\"] = \"data:audio/wav;base64,\""
                   " + base64.b64encode(open(sys.argv[2], \"rb\").read()).decode(); sys.stdout.write(json.dumps(b))")
            return (f"{note}BODY=\"$(mktemp)\"; trap 'rm -f \"$BODY\"' EXIT\npython3 -c {shlex.quote(add)} "
                    f"{shlex.quote(json.dumps(body))} \"${_const(next(iter(item.files)))}\" > \"$BODY\"\n"
                    f"sigv4 sagemaker \"$RUNTIME/invocations\" -H \"Content-Type: application/json\" -H \"Accept: "
                    f"{accept}\" \\\n  {_route(SPEECH_PATH)} --data-binary @\"$BODY\" {then}\necho \"$OUT\"\n")
    return (f"{note}sigv4 sagemaker \"$RUNTIME/invocations\" -H \"Content-Type: application/json\" -H \"Accept: {accept}\" "
            f"\\\n  {_route(item.route)} \\\n  -d {shlex.quote(json.dumps(body))} {then}\necho \"$OUT\"\n")


def _curl_edit(item: Item, body: dict[str, Any]) -> str:
    images = body.pop("images")
    files = "".join(f"  filepart {EDIT_IMAGE_FIELD} \"${_const(n)}\" {mimetypes.guess_type(n)[0] or 'image/png'}\n"
                    for n in images)
    return (f"{MULTIPART}{{\n{_fields(body)}{files}  printf '%s\\r\\n' \"--$BOUNDARY--\"\n}} > \"$BODY\"\n"
            + _check_size("send smaller references (the studio fits them as JPEG before sending)")
            + "sigv4 sagemaker \"$RUNTIME/invocations\" -H \"Content-Type: multipart/form-data; boundary=$BOUNDARY\" "
            f"\\\n  -H \"Accept: application/json\" {_route(item.route)} --data-binary @\"$BODY\" \\\n"
            f"  | python3 -c {shlex.quote(_DECODE_IMAGE)} > \"$OUT\"\necho \"$OUT\"\n")


def _curl_transcript(item: Item, body: dict[str, Any]) -> str:
    name = body.pop("file")
    body["response_format"] = "json"
    return (f"{MULTIPART}{{\n  filepart {FILE_FIELD} \"${_const(name)}\" application/octet-stream\n{_fields(body)}"
            "  printf '%s\\r\\n' \"--$BOUNDARY--\"\n} > \"$BODY\"\n"
            + _check_size("the studio cuts a longer recording at silences and sends each piece; send a shorter one")
            + "sigv4 sagemaker \"$RUNTIME/invocations\" -H \"Content-Type: multipart/form-data; boundary=$BOUNDARY\" "
            f"\\\n  -H \"Accept: application/json\" {_route(item.route)} --data-binary @\"$BODY\" \\\n"
            f"  | python3 -c {shlex.quote(_DECODE_TEXT)} > \"$OUT\"\necho \"$OUT\"\n")


def _curl_video(item: Item, body: dict[str, Any]) -> str:
    ref = body.pop("image_reference", None)
    reference = ""
    if ref:
        reference = ("  field image_reference \"{\\\"image_url\\\": \\\"data:image/jpeg;base64,"
                     f"$(base64 -w0 \"${_const(ref)}\")\\\"}}\"\n")
    return (f"# InvokeEndpointAsync's REST form: the request inline when it is at most {ASYNC_INLINE_LIMIT:,} bytes, "
            "else put in\n# S3 first and named by its location; the MP4 appears in S3 at the OutputLocation it "
            "answers with.\n"
            f"{MULTIPART}{{\n{_fields(body)}{reference}  printf '%s\\r\\n' \"--$BOUNDARY--\"\n}} > \"$BODY\"\n"
            "s3() { path=$1; shift; sigv4 s3 \"https://s3.$REGION.amazonaws.com/$path\" \"$@\"; }  # s3 BUCKET/KEY CURL-ARGS...\n"
            f"if [ \"$(wc -c < \"$BODY\")\" -le {ASYNC_INLINE_LIMIT} ]; then\n"
            "  set -- -H \"Content-Type: application/octet-stream\" --data-binary @\"$BODY\"\nelse\n"
            "  KEY=\"${PREFIX:+$PREFIX/}requests/$(date +%s)-$$.multipart\"\n"
            "  s3 \"$BUCKET/$KEY\" -X PUT -H \"x-amz-content-sha256: $(sha256sum \"$BODY\" | cut -d' ' -f1)\" \\\n"
            "    -H \"x-amz-server-side-encryption: AES256\" -H \"Content-Type: application/octet-stream\" "
            "--data-binary @\"$BODY\" > /dev/null\n"
            "  set -- -H \"X-Amzn-SageMaker-InputLocation: s3://$BUCKET/$KEY\" --data-binary \"\"\n"
            "  echo \"request: through s3://$BUCKET/$KEY\"\nfi\n"
            "sigv4 sagemaker \"$RUNTIME/async-invocations\" -D \"$BODY.h\" -o /dev/null \\\n"
            "  -H \"X-Amzn-SageMaker-Content-Type: multipart/form-data; boundary=$BOUNDARY\" "
            "-H \"X-Amzn-SageMaker-Accept: video/mp4\" \\\n"
            f"  {_route(VIDEO_SYNC_PATH)} \\\n"
            f"  -H \"X-Amzn-SageMaker-InvocationTimeoutSeconds: {ASYNC_INVOCATION_TIMEOUT_S}\" \"$@\"\n"
            "located() { grep -i \"^x-amzn-sagemaker-$1:\" \"$BODY.h\" | cut -d' ' -f2- | tr -d '\\r'; }\n"
            "OUTPUT=\"$(located outputlocation)\"; FAILURE=\"$(located failurelocation)\"\n"
            "echo \"waiting for $OUTPUT\" >&2\n"
            "fetch() { s3 \"${1#s3://}\" -H \"x-amz-content-sha256: " + EMPTY_SHA256 + "\" -o \"$2\" 2>/dev/null; }\n"
            "delay=1; waited=0\n"
            "until fetch \"$OUTPUT\" \"$OUT.part\"; do\n"
            "  if [ -n \"$FAILURE\" ] && fetch \"$FAILURE\" \"$OUT.failure\"; then\n"
            "    echo \"the video job failed: $(head -c 500 \"$OUT.failure\")\" >&2; rm -f \"$OUT.part\"; exit 1\n  fi\n"
            f"  [ \"$waited\" -lt {ASYNC_INVOCATION_TIMEOUT_S} ] || {{ echo \"no video at $OUTPUT after "
            f"{ASYNC_INVOCATION_TIMEOUT_S} s\" >&2; exit 1; }}\n"
            "  sleep \"$delay\"; waited=$((waited + delay)); [ \"$delay\" -ge 8 ] || delay=$((delay * 2))\ndone\n"
            "mv \"$OUT.part\" \"$OUT\"\n"
            "[ -z \"${KEY:-}\" ] || s3 \"$BUCKET/$KEY\" -X DELETE -H \"x-amz-content-sha256: " + EMPTY_SHA256
            + "\" > /dev/null\necho \"$OUT\"\n")


_CURL = {IMAGES_PATH: _curl_json, IMAGE_EDITS_PATH: _curl_edit, SOUND_PATH: _curl_json, SPEECH_PATH: _curl_json,
         VIDEO_SYNC_PATH: _curl_video, TRANSCRIPTIONS_PATH: _curl_transcript}


# -- the studio's command line ------------------------------------------------------------------------------------
def cli(item: Item) -> str:
    """`python -m services COMMAND --backend sagemaker --region "$REGION"`, the endpoint named by --endpoint where the
    command has it, else by OMNI_STUDIO_<FAMILY>_ENDPOINT (and the bucket a large video request goes through)."""
    env = []
    item = check(item)
    words = ["python", "-m", "services", item.command, "--backend", "sagemaker", "--region", "$REGION"]
    if item.route in ENDPOINT_FLAG:
        words += ["--endpoint", "$ENDPOINT_NAME"]
    else:
        env.append(f"OMNI_STUDIO_{_family(item).upper()}_ENDPOINT=\"$ENDPOINT_NAME\"")
    if item.route == VIDEO_SYNC_PATH:
        env += ["OMNI_STUDIO_BUCKET=\"$BUCKET\"", "OMNI_STUDIO_PREFIX=\"$PREFIX\""]
    words += [*request_flags(item), "--out", "$OUT"]
    line = " ".join(env + [f"\"{w}\"" if w.startswith("$") else shlex.quote(w) for w in words])
    return (f"#!/bin/sh\n{header(item, '#')}# The studio's own command line: run it where the studio is installed, its "
            "venv active.\n# Credentials: boto3's default chain (AWS_* variables, ~/.aws profiles and SSO, an instance "
            f"or task role).\nset -e\n{_consts(item)}\n{line}\n")
