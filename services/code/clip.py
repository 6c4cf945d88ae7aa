"""The code for a finished clip (a video job with `meta["clip"]`, services/clips/make.py): its narration and
soundtrack made again on the server — or read from the files they were given as — and muxed under the source
video's frames.

- Python: `httpx` for the parts (POST /v1/audio/speech for a narration given as text, POST /v1/audio/generate for a
  soundtrack given as a prompt, with its seed and length), then PyAV + numpy: both resampled to 48 kHz stereo, the
  soundtrack looped or cut to the video and ducked under the narration, AAC, the video's packets copied as they are.
  Its mix is a plain one (a level gate, not the studio's envelope): the CLI form repeats the studio's exactly.
- curl: the parts only (a mix is not a curl request), with the CLI line that muxes them.
- CLI: `python -m services clip` with the same parts, seed, duck and fit.

The source video is the one the clip was made from while it is kept, else the clip's own MP4 (its video track is
the source's packets; its audio is replaced), beside the script as SOURCE.
"""

from __future__ import annotations

import shlex
from typing import Any

from protocol.errors import StudioError
from protocol.sound import SOUND_PATH
from services.code.items import Item
from services.code.literals import const as _const, py_dict as _py_dict, py_value as _py_value

CLIP_ROUTE = "clip"  # the Item.route of a clip: not a server route, the studio's own mux
SOURCE_FILE = "source.mp4"


def request_of(params: dict[str, Any], clip: dict[str, Any], files: list[str]) -> dict[str, Any]:
    """What a clip was made of, from its job: the parts to generate (the narration's text and voice, the
    soundtrack's prompt, seed and steps) or the files they came from, the duck and the fit."""
    made = clip.get("generated") or {}
    narration, soundtrack = made.get("narration"), made.get("soundtrack")
    request: dict[str, Any] = {"duck_db": made.get("duck_db", params.get("duck_db", 12.0)), "fit": clip.get("fit")}
    if narration:
        request["narration"] = {k: v for k, v in (("input", narration.get("text")), ("voice", narration.get("voice")))
                                if v}
    elif "narration.wav" in files or "narration.audio" in files:
        request["narration_file"] = next(n for n in files if n.startswith("narration"))
    if soundtrack:
        request["soundtrack"] = {"input": soundtrack.get("prompt"), "audio_length": soundtrack.get("seconds"),
                                 "seed": soundtrack.get("seed"), "response_format": "wav"}
        if soundtrack.get("steps") is not None:
            request["soundtrack"]["num_inference_steps"] = soundtrack["steps"]
    elif any(n.startswith("soundtrack") for n in files):
        request["soundtrack_file"] = next(n for n in files if n.startswith("soundtrack"))
    return request


def clip_item(history: Any, job: Any) -> Item:
    """A clip — a video job with `meta["clip"]` — as an Item: its parts to make again (or the files they were
    given as), its source video beside the script."""
    from services.clips.make import CLIP_FILE
    from services.code.items import ENGINE_URL, _files, _target

    clip = job.meta["clip"]
    notes: list[str] = []
    request = request_of(dict(job.params), clip, list(job.inputs))
    generates = "narration" in request or "soundtrack" in request
    kind_, base, more = _target(job.target) if generates else ("offline", ENGINE_URL, [])
    region = ""
    if kind_ == "sagemaker":  # the parts' endpoints, from the backend's label the clip kept (one per family)
        request["endpoints"], region, more = _endpoints(job.target, request)
    source = None
    if clip.get("of"):
        try:
            source = history.jobs.get(clip["of"]).read(CLIP_FILE)
        except StudioError:
            notes.append(f"the video it was made from, {clip['of']}, is gone: {SOURCE_FILE} is the clip's own video "
                         "track (the same frames; its audio is replaced)")
    given = [n for n in (request.get("narration_file"), request.get("soundtrack_file")) if n]  # only these are read
    files, lost = _files(([] if source is not None else [CLIP_FILE]) + given, job.read, f"clip {job.id}")
    files = {SOURCE_FILE: source if source is not None else files.pop(CLIP_FILE), **files}
    notes += lost
    if not clip.get("of"):
        notes.append(f"{SOURCE_FILE} is the clip's own video (it was made from a file): the same frames, its audio "
                     "replaced — set SOURCE to put the parts under another video")
    if clip.get("of") and source is not None:
        notes.append(f"{SOURCE_FILE} is video {clip['of']}, the clip's source (its own Code panel makes it again)")
    return Item(job.id, CLIP_ROUTE, "clip", "clip", job.prompt, request, job.target, kind_, base, base,
                files, tuple(more + notes), region=region)


def _endpoints(target: str, request: dict[str, Any]) -> tuple[dict[str, str], str, list[str]]:
    """({"narration": the voice endpoint, "soundtrack": the sound endpoint}, region, notes) of a SageMaker clip."""
    from protocol.sagemaker import DEFAULT_REGION
    from services.code.items import SPEECH_PATH, _family, sagemaker_target

    endpoints, regions, notes = {}, [], []
    for part, route, const in (("narration", SPEECH_PATH, "VOICE_ENDPOINT"), ("soundtrack", SOUND_PATH,
                                                                              "SOUND_ENDPOINT")):
        if part not in request:
            continue
        name, region = sagemaker_target(target, _family(route))
        endpoints[part] = name or const.replace("_", "-")
        regions.append(region)
        if name is None:
            notes.append(f"the clip's target, {target!r}, names no endpoint for its {part}: set {const} to yours")
    region = next((r for r in regions if r), None)
    if region is None:
        notes.append(f"the clip's target names no region: the code says {DEFAULT_REGION} (set REGION for another)")
    return endpoints, region or DEFAULT_REGION, notes


# -- Python -------------------------------------------------------------------------------------------------------
# How a part is asked for on a server: its imports, then `post(route, body)` (clip_sagemaker.py has the other)
SERVER_CLIENT = ("import io\nimport os\nfrom fractions import Fraction\n\nimport av\nimport httpx\n", None)


def python(item: Item, consts: str, *, client: tuple[str, str | None] = SERVER_CLIENT) -> str:
    """The Python of a clip; `consts` its constants, `client` (imports, post) how a part is asked for."""
    head_imports, post = client[0], client[1] or _PY_POST
    body = item.request
    parts = ""
    if "narration" in body:
        parts += f"NARRATION = {_py_dict(body['narration'])}  # POST /v1/audio/speech\n"
    if "soundtrack" in body:
        parts += f"SOUNDTRACK = {_py_dict(body['soundtrack'])}  # POST /v1/audio/generate\n"
    parts += f"DUCK_DB = {_py_value(float(body['duck_db']))}\nFIT = {_py_value(body.get('fit'))}  # None | \"trim\" | \"hold\"\n"
    narration = ("post(\"/v1/audio/speech\", {**NARRATION, \"response_format\": \"wav\"})" if "narration" in body
                 else f"open({_const(body['narration_file'])}, \"rb\").read()" if "narration_file" in body else "None")
    soundtrack = ("post(\"/v1/audio/generate\", SOUNDTRACK)" if "soundtrack" in body
                  else f"open({_const(body['soundtrack_file'])}, \"rb\").read()" if "soundtrack_file" in body
                  else "None")
    return (f"{head_imports}import numpy as np\n\n"
            f"{consts}{parts}RATE = 48000  # the clip's AAC track: 48 kHz stereo\n" + post + _PY_MIX.replace(
                "@NARRATION@", narration).replace("@SOUNDTRACK@", soundtrack))


_PY_POST = '''

def post(route, body):
    key = os.environ.get("OPENAI_API_KEY")  # if the server wants one (vLLM-Omni's --api-key)
    r = httpx.post(BASE_URL + route, json=body, timeout=600,
                   headers={"Authorization": f"Bearer {key}"} if key else {})
    r.raise_for_status()
    return r.content
'''
_PY_MIX = '''


def track(data):
    """An audio file's bytes as (frames, 2) float32 at RATE."""
    if data is None:
        return None
    resampler = av.AudioResampler(format="fltp", layout="stereo", rate=RATE)
    chunks = []
    with av.open(io.BytesIO(data)) as f:
        for frame in f.decode(audio=0):
            chunks += [c.to_ndarray() for c in resampler.resample(frame)]
    chunks += [c.to_ndarray() for c in resampler.resample(None)]
    return np.concatenate(chunks, axis=1).T.astype(np.float32)


def fitted(x, n):
    if x is None:
        return None
    x = np.tile(x, (-(-n // len(x)), 1))[:n] if len(x) < n else x[:n]
    return x.copy()


def duck(voice, n):
    """The soundtrack's gain: DUCK_DB lower wherever the narration sounds (10 ms hops, held 150 ms, smoothed)."""
    hop = RATE // 100
    hops = -(-n // hop)
    power = np.zeros(hops * hop)
    power[: len(voice)] = np.square(voice[:n]).mean(axis=1)
    level = 10 * np.log10(power.reshape(hops, hop).mean(axis=1) + 1e-12)
    loud = level > max(level.max() - 36, -70)
    loud = np.convolve(loud, np.ones(15), mode="same") > 0
    gain = np.where(loud, 10 ** (-DUCK_DB / 20), 1.0)
    gain = np.convolve(gain, np.ones(5) / 5, mode="same")
    return np.interp(np.arange(n), (np.arange(hops) + 0.5) * hop, gain).reshape(-1, 1)


with av.open(SOURCE) as source:
    video = source.streams.video[0]
    packets = [p for p in source.demux(video) if p.size]
    tb = video.time_base
    start = min(p.pts for p in packets)
    end = max(p.pts + (p.duration or 0) for p in packets)
    narration = track(@NARRATION@)
    soundtrack = track(@SOUNDTRACK@)
    n = round(float((end - start) * tb) * RATE)
    if narration is not None and len(narration) > n:
        if FIT == "hold":  # the last frame shown until the narration ends
            extra = -(-Fraction(len(narration) - n, RATE) // tb)
            last = max(packets, key=lambda p: p.pts)
            last.duration = int(last.duration or 0) + int(extra)
            end += int(extra)
            n = round(float((end - start) * tb) * RATE)
        elif FIT == "trim":
            narration = narration[:n]
        else:
            raise SystemExit(f"the narration is {(len(narration) - n) / RATE:.2f} s longer than the video: "
                             "set FIT to \\"trim\\" or \\"hold\\"")
    mixed = np.zeros((n, 2), dtype=np.float32)
    if soundtrack is not None:
        music = fitted(soundtrack, n)
        fade = min(n // 2, RATE // 2)
        music[n - fade:] *= np.linspace(1, 0, fade).reshape(-1, 1)
        mixed += music * (duck(narration, n) if narration is not None else 1.0)
    if narration is not None:
        mixed[: len(narration)] += narration[:n]
    peak = float(np.abs(mixed).max() or 1.0)
    mixed *= min(1.0, 0.89 / peak)  # at most -1 dBFS
    with av.open(OUT, "w") as out:
        copy = out.add_stream_from_template(video)
        aac = out.add_stream("aac", rate=RATE, layout="stereo")
        audio = []
        for i in range(0, n, 1024):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(mixed[i:i + 1024].T), format="fltp",
                                               layout="stereo")
            frame.sample_rate, frame.pts = RATE, i
            audio += aac.encode(frame)
        audio += aac.encode(None)
        for packet in packets:
            packet.stream = copy
        timed = [(float(p.dts * p.time_base), p) for p in packets if p.dts is not None]
        timed += [(float(p.dts * p.time_base) + float(start * tb), p) for p in audio]
        for _, packet in sorted(timed, key=lambda t: t[0]):
            out.mux(packet)
print(OUT)
'''


# -- curl ---------------------------------------------------------------------------------------------------------
def curl(item: Item) -> str:
    import json

    body, lines = item.request, []
    if "narration" in body:
        lines.append(f"curl -sS --fail-with-body \"$BASE_URL/v1/audio/speech\" -H \"Content-Type: application/json\" "
                     f"\\\n  -d {shlex.quote(json.dumps({**body['narration'], 'response_format': 'wav'}))} "
                     "-o narration.wav\necho narration.wav\n")
    if "soundtrack" in body:
        lines.append(f"curl -sS --fail-with-body \"$BASE_URL/v1/audio/generate\" -H \"Content-Type: application/json\" "
                     f"\\\n  -d {shlex.quote(json.dumps(body['soundtrack']))} -o soundtrack.wav\necho soundtrack.wav\n")
    return ("# The parts, made again on the server; muxing them under the video is not an HTTP request — the studio's\n"
            "# CLI does it: python -m services clip --video \"$SOURCE\" --narration-audio narration.wav "
            "--soundtrack-audio soundtrack.wav\n" + "".join(lines))


# -- CLI ----------------------------------------------------------------------------------------------------------
def cli_words(item: Item) -> list[str]:
    body = item.request
    words = ["python", "-m", "services", "clip", "--url", "$BASE_URL", "--video", f"${_const(SOURCE_FILE)}"]
    if "narration" in body:
        words += ["--narration", body["narration"]["input"]]
        if body["narration"].get("voice"):
            words += ["--voice", body["narration"]["voice"]]
    elif "narration_file" in body:
        words += ["--narration-audio", f"${_const(body['narration_file'])}"]
    if "soundtrack" in body:
        words += ["--soundtrack", body["soundtrack"]["input"]]
        if body["soundtrack"].get("seed") is not None:
            words += ["--seed", str(body["soundtrack"]["seed"])]
        if body["soundtrack"].get("num_inference_steps") is not None:
            words += ["--steps", str(body["soundtrack"]["num_inference_steps"])]
    elif "soundtrack_file" in body:
        words += ["--soundtrack-audio", f"${_const(body['soundtrack_file'])}"]
    words += ["--duck-db", f"{float(body['duck_db']):g}"]
    if body.get("fit"):
        words += ["--fit", body["fit"]]
    return words + ["--out", "$OUT"]
