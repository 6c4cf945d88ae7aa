"""The code for an item made on a SageMaker endpoint, in the shapes of AWS's published samples: Python (boto3's
`invoke_endpoint` with the container route in CustomAttributes; `invoke_endpoint_async` with the request inline or in
S3 for a video; the HTTP/2 bidirectional stream of `aws-sdk-sagemaker-runtime-http2` for a speech take), curl (SigV4
by curl itself; for a stream or an async job the nearest REST form, with a note) and the studio's command line.

Each script names its target in constants at its top — ENDPOINT_NAME, REGION (and BUCKET, PREFIX for a video) and OUT,
each overridable by an environment variable of the same name — and holds no credentials: boto3's default chain (or,
for curl, the AWS_* variables) supplies them. `python(item)`, `curl(item)`, `cli(item)`: the text.
"""

from __future__ import annotations

from typing import Any

from protocol.images import EDIT_IMAGE_FIELD, IMAGE_EDITS_PATH, IMAGES_PATH
from protocol.limits import ASYNC_INLINE_LIMIT, ASYNC_INVOCATION_TIMEOUT_S, REALTIME_PAYLOAD_MAX_BYTES
from protocol.listen import FILE_FIELD, TRANSCRIPTIONS_PATH
from protocol.sagemaker import SPEECH_INVOCATION_PATH, route_attribute
from protocol.sound import SOUND_PATH
from protocol.videos import VIDEO_SYNC_PATH
from services.code.items import SPEECH_PATH, Item
from services.code.sagemaker_shell import bucket_of, check, cli, curl, header
from services.code.literals import const as _const, py_dict as _py_dict, py_value as _py_value
from services.code.server import out_name

CREDENTIALS = ("Credentials: boto3's default chain (AWS_* variables, ~/.aws profiles and SSO, an instance or task "
               "role) — none are written here.")
LIMIT_MB = REALTIME_PAYLOAD_MAX_BYTES // (1024 * 1024)


def _refs_py(item: Item) -> str:
    return "".join(f"{_const(n)} = os.environ.get({_py_value(_const(n))}, {_py_value(n)})  # kept with the item, "
                   "beside this script\n" for n in item.files)


# -- Python -------------------------------------------------------------------------------------------------------
def python(item: Item) -> str:
    item = check(item)
    head = '"""' + header(item, "").replace("\n ", "\n").strip() + '\n"""\n\n'
    consts = (f"# {CREDENTIALS}\nENDPOINT_NAME = os.environ.get(\"ENDPOINT_NAME\", {_py_value(item.endpoint)})\n"
              f"REGION = os.environ.get(\"REGION\", {_py_value(item.region)})\n")
    if item.route == VIDEO_SYNC_PATH:
        bucket, prefix = bucket_of(item)
        consts += (f"BUCKET = os.environ.get(\"BUCKET\", {_py_value(bucket)})  # a request over {ASYNC_INLINE_LIMIT:,} "
                   f"bytes goes through it\nPREFIX = os.environ.get(\"PREFIX\", {_py_value(prefix)})\n")
    consts += f"OUT = os.environ.get(\"OUT\", {_py_value(out_name(item))})\n{_refs_py(item)}"
    return head + _PY[item.route](item, dict(item.request), consts)


RUNTIME = "runtime = boto3.client(\"sagemaker-runtime\", region_name=REGION)\n"


def invoke(route: str, content_type: str, accept: str, endpoint: str = "ENDPOINT_NAME") -> str:
    """`reply = runtime.invoke_endpoint(...)` of `body` to the container's `route` on `endpoint` (a constant's name)."""
    return ("reply = runtime.invoke_endpoint(\n    "
            f"EndpointName={endpoint}, Body=body, "
            f"ContentType={content_type}, Accept={_py_value(accept)},\n"
            f"    CustomAttributes={_py_value(route_attribute(route))},  # the container's route\n)\n")


_SAVE_IMAGES = """result = json.loads(reply["Body"].read())
for i, image in enumerate(result["data"]):
    stem, dot, suffix = OUT.rpartition(".")
    name = OUT if len(result["data"]) == 1 else f"{stem}-{i + 1}.{suffix}"
    with open(name, "wb") as f:
        f.write(base64.b64decode(image["b64_json"]))
    print(name)
"""
_SAVE_BYTES = "with open(OUT, \"wb\") as f:\n    f.write(reply[\"Body\"].read())\nprint(OUT)\n"
_SIZE_CHECK = (f"LIMIT = {REALTIME_PAYLOAD_MAX_BYTES}  # bytes: an InvokeEndpoint request body is at most "
               f"{LIMIT_MB} MB\n"
               "if len(body) > LIMIT:\n"
               f"    raise SystemExit(f\"the request is {{len(body):,}} bytes, over InvokeEndpoint's {LIMIT_MB} MB "
               "limit ({LIMIT:,}): {what}\")\n")


def _py_image(item: Item, body: dict[str, Any], consts: str) -> str:
    body.setdefault("response_format", "b64_json")
    return (f"import base64\nimport json\nimport os\n\nimport boto3\n\n{consts}\n"
            f"BODY = {_py_dict(body)}\n\n{RUNTIME}body = json.dumps(BODY)\n"
            + invoke(item.route, "\"application/json\"", "application/json") + _SAVE_IMAGES)


def _py_edit(item: Item, body: dict[str, Any], consts: str) -> str:
    images = body.pop("images")
    fields = {k: str(v) for k, v in body.items()}
    files = ", ".join(_const(n) for n in images)
    what = "send smaller references (the studio fits them as JPEG before sending)"
    return (f"import base64\nimport json\nimport mimetypes\nimport os\n\nimport boto3\n"
            f"from urllib3 import encode_multipart_formdata\n\n{consts}\n"
            f"FIELDS = {_py_dict(fields)}\n\n"
            f"# multipart/form-data as /v1/images/edits reads it: the text fields, then each reference as an "
            f"{EDIT_IMAGE_FIELD!r} part\nparts = list(FIELDS.items())\n"
            f"for name in ({files},):\n    with open(name, \"rb\") as f:\n"
            f"        parts.append(({EDIT_IMAGE_FIELD!r}, (os.path.basename(name), f.read(),\n"
            "                                 mimetypes.guess_type(name)[0] or \"application/octet-stream\")))\n"
            f"body, content_type = encode_multipart_formdata(parts)\nwhat = {_py_value(what)}\n{_SIZE_CHECK}\n"
            + RUNTIME + invoke(item.route, "content_type", "application/json") + _SAVE_IMAGES)


def _py_sound(item: Item, body: dict[str, Any], consts: str) -> str:
    return (f"import json\nimport os\n\nimport boto3\n\n{consts}\nBODY = {_py_dict(body)}\n\n{RUNTIME}"
            "body = json.dumps(BODY)\n" + invoke(item.route, "\"application/json\"", "*/*") + _SAVE_BYTES)


def _py_transcript(item: Item, body: dict[str, Any], consts: str) -> str:
    name = body.pop("file")
    fields = {k: str(v) for k, v in body.items()} | {"response_format": "json"}
    what = "the studio cuts a longer recording at silences and sends each piece; send a shorter one"
    return (f"import json\nimport os\n\nimport boto3\nfrom urllib3 import encode_multipart_formdata\n\n{consts}\n"
            f"FIELDS = {_py_dict(fields)}\n\nwith open({_const(name)}, \"rb\") as f:\n"
            f"    recording = ({_py_value(FILE_FIELD)}, (os.path.basename({_const(name)}), f.read(), "
            "\"application/octet-stream\"))\n"
            f"body, content_type = encode_multipart_formdata([recording, *FIELDS.items()])\n"
            f"what = {_py_value(what)}\n{_SIZE_CHECK}\n{RUNTIME}"
            + invoke(item.route, "content_type", "application/json")
            + "text = json.loads(reply[\"Body\"].read())[\"text\"].strip()\n"
              "with open(OUT, \"w\", encoding=\"utf-8\") as f:\n    f.write(text)\nprint(OUT)\n")


def _py_video(item: Item, body: dict[str, Any], consts: str) -> str:
    ref = body.pop("image_reference", None)
    reference = imports = ""
    if ref:
        imports = "import base64\n"
        reference = (f"with open({_const(ref)}, \"rb\") as f:  # the JPEG the studio sent, fitted to the size\n"
                     "    url = \"data:image/jpeg;base64,\" + base64.b64encode(f.read()).decode()\n"
                     "FIELDS[\"image_reference\"] = json.dumps({\"image_url\": url})\n")
    return (f"{imports}import json\nimport os\nimport time\nimport uuid\n\nimport boto3\n"
            "from botocore.exceptions import ClientError\nfrom urllib3 import encode_multipart_formdata\n\n"
            f"{consts}INLINE_LIMIT = {ASYNC_INLINE_LIMIT}  # bytes: a larger async request must come from S3\n"
            f"WAIT_S = {ASYNC_INVOCATION_TIMEOUT_S}  # how long the job may take at most\n\n"
            f"FIELDS = {_py_dict({k: str(v) for k, v in body.items()})}\n{reference}"
            "# multipart/form-data, every field a text part (as vLLM-Omni's /v1/videos/sync reads them)\n"
            "body, content_type = encode_multipart_formdata(FIELDS)\n\n"
            f"{RUNTIME}s3 = boto3.client(\"s3\", region_name=REGION)\n"
            "call = dict(EndpointName=ENDPOINT_NAME, ContentType=content_type, Accept=\"video/mp4\",\n"
            f"            CustomAttributes={_py_value(route_attribute(VIDEO_SYNC_PATH))}, "
            "InvocationTimeoutSeconds=WAIT_S)\n"
            "key = None\nif len(body) <= INLINE_LIMIT:\n    call[\"Body\"] = body\nelse:\n"
            "    key = \"/\".join(p for p in (PREFIX, \"requests\", f\"{uuid.uuid4().hex}.multipart\") if p)\n"
            "    s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType=\"application/octet-stream\",\n"
            "                  ServerSideEncryption=\"AES256\")\n"
            "    call[\"InputLocation\"] = f\"s3://{BUCKET}/{key}\"\n"
            "print(f\"request: {len(body):,} bytes, \" + (f\"through {call['InputLocation']}\" if key else \"inline\"))\n"
            "reply = runtime.invoke_endpoint_async(**call)\n"
            "output, failure = reply[\"OutputLocation\"], reply.get(\"FailureLocation\")\n"
            "print(f\"job {reply['InferenceId']}: waiting for {output}\", flush=True)\n\n\n" + _PY_POLL)


_PY_POLL = """def read(uri):
    \"\"\"The object at s3://bucket/key, or None while it does not exist.\"\"\"
    bucket, _, name = uri.removeprefix("s3://").partition("/")
    try:
        return s3.get_object(Bucket=bucket, Key=name)["Body"].read()
    except ClientError as exc:
        if exc.response["Error"]["Code"] in ("NoSuchKey", "404", "NotFound"):
            return None
        raise


deadline, delay = time.monotonic() + WAIT_S, 0.25
while True:
    mp4 = read(output)
    if mp4 is not None:
        break
    problem = read(failure) if failure else None
    if problem is not None:
        raise SystemExit(f"the video job failed: {problem.decode(errors='replace')[:500]}")
    if time.monotonic() > deadline:
        raise SystemExit(f"no video at {output} after {WAIT_S} s")
    time.sleep(delay)
    delay = min(delay * 1.5, 10.0)  # back off: a real job takes minutes
if key:
    s3.delete_object(Bucket=BUCKET, Key=key)  # the request object is no longer needed
with open(OUT, "wb") as f:
    f.write(mp4)
print(OUT)
"""


def _py_take(item: Item, body: dict[str, Any], consts: str) -> str:
    text = body.pop("input")
    config = {"type": "session.config", **body}
    reference = ""
    if item.files:
        reference = (f"with open({_const(next(iter(item.files)))}, \"rb\") as f:  # the speaker's recording, used "
                     "with their consent\n    CONFIG[\"ref_audio\"] = \"data:audio/wav;base64,\" + "
                     "base64.b64encode(f.read()).decode()\n")
    return ("import asyncio\n" + ("import base64\n" if item.files else "") + "import json\nimport os\nimport wave\n\n"
            f"import boto3\n{PY_HTTP2_IMPORTS}\n{consts}\n"
            "# The take was streamed over the endpoint's HTTP/2 bidirectional stream (port 8443) to the container's "
            "speech\n# route with this session.config, as PCM, and kept as a 16-bit WAV: so is this script's. (The curl "
            "form\n# sends the REST route through InvokeEndpoint: the text as one unit, not cut as the take was.)\n"
            f"PATH = {_py_value(SPEECH_INVOCATION_PATH)}\nCONFIG = {_py_dict(config)}\nTEXT = {_py_value(text)}\n"
            f"{reference}\n\n" + _PY_STREAM)


# The HTTP/2 bidirectional stream's imports and helpers, shared with a conversation's script (conversation_sagemaker)
PY_HTTP2_IMPORTS = (
    "from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client\n"
    "from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config\n"
    "from aws_sdk_sagemaker_runtime_http2.models import (\n    InvokeEndpointWithBidirectionalStreamInput,\n"
    "    RequestPayloadPart,\n    RequestStreamEventPayloadPart,\n    ResponseStreamEventPayloadPart,\n)\n"
    "from smithy_aws_core.identity.components import AWSCredentialsIdentity\n"
    "from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig\n")
PY_HTTP2 = """class BotoCredentials:
    \"\"\"The HTTP/2 SDK's identity resolver, answering with boto3's default chain.\"\"\"

    async def get_identity(self, *, properties):
        found = boto3.Session(region_name=REGION).get_credentials()
        if found is None:
            raise SystemExit("no AWS credentials: boto3's default chain found none")
        c = found.get_frozen_credentials()
        return AWSCredentialsIdentity(access_key_id=c.access_key, secret_access_key=c.secret_key,
                                      session_token=c.token)

    async def invalidate(self):
        return None


async def open_stream(endpoint, query=None):
    \"\"\"One bidirectional stream to the endpoint's container at PATH (the runtime's HTTP/2 port, 8443).\"\"\"
    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
        endpoint_uri=f"https://runtime.sagemaker.{REGION}.amazonaws.com:8443", region=REGION,
        aws_credentials_identity_resolver=BotoCredentials(),
        transport=AWSCRTHTTPClient(client_config=AWSCRTHTTPClientConfig(force_http_2=True)))
    client = AsyncSageMakerRuntimeHTTP2Client(config=config)
    return await client.invoke_endpoint_with_bidirectional_stream(InvokeEndpointWithBidirectionalStreamInput(
        endpoint_name=endpoint, model_invocation_path=PATH, model_query_string=query))


async def send(stream, message):
    \"\"\"One JSON message (or its text), as one UTF8 PayloadPart.\"\"\"
    text = message if isinstance(message, str) else json.dumps(message)
    await stream.input_stream.send(RequestStreamEventPayloadPart(value=RequestPayloadPart(
        bytes_=text.encode(), data_type="UTF8", completion_state="COMPLETE")))


async def receive_audio(stream):
    \"\"\"The speech session's answer after input.done: its PCM (binary parts) and sample rate, to session.done.\"\"\"
    _, output = await stream.await_output()
    pcm, rate = bytearray(), 24000
    while (event := await asyncio.wait_for(output.receive(), 120)) is not None:
        if not isinstance(event, ResponseStreamEventPayloadPart):
            continue
        part = event.value
        if part.data_type != "UTF8":
            pcm += part.bytes_ or b""
            continue
        message = json.loads(part.bytes_)
        if message["type"] == "audio.start":
            rate = message.get("sample_rate") or rate
        elif message["type"] == "error":
            raise SystemExit(f"the endpoint said: {message.get('message', message)}")
        elif message["type"] == "session.done":
            break
    await stream.input_stream.close()
    return bytes(pcm), rate
"""

_PY_STREAM = PY_HTTP2 + """

async def speak():
    stream = await open_stream(ENDPOINT_NAME)
    await send(stream, CONFIG)
    await send(stream, {"type": "input.text", "text": TEXT})
    await send(stream, {"type": "input.done"})
    return await receive_audio(stream)


pcm, rate = asyncio.run(speak())
with wave.open(OUT, "wb") as w:
    w.setnchannels(1)
    w.setsampwidth(2)
    w.setframerate(rate)
    w.writeframes(pcm)
print(OUT)
"""

_PY = {IMAGES_PATH: _py_image, IMAGE_EDITS_PATH: _py_edit, SOUND_PATH: _py_sound, VIDEO_SYNC_PATH: _py_video,
       SPEECH_PATH: _py_take, TRANSCRIPTIONS_PATH: _py_transcript}

__all__ = ["cli", "curl", "python"]
