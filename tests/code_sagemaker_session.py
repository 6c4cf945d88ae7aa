"""One session on the emulated SageMaker account for tests/test_code_sagemaker.py, run under `python -m emulator exec`
(a fresh exec starts an empty account, so everything happens in this one process tree):

1. `python -m infra deploy` the endpoints the items need (voice, image, video, listen, sound, omni), as a person
   would;
2. make the items the studio's way on `--backend sagemaker`: a seeded image, an edit, a seeded sound and a video with
   the studio's CLI (each --json), a speech take through the studio's voice client kept as the Voice page keeps it,
   a transcript of that take by `listen`, kept as the Listen page keeps it, and a conversation held on the endpoints
   by `converse --keep` with the take as its turn (its reply from `sm-chat`, an endpoint whose container is a real
   streaming chat server in this process: the emulator's `containers` config), and one held in native mode in the
   omni endpoint's duplex session (`converse --mode native --keep`, the take its recorded turn);
3. for each, the code `python -m services code ID --lang L --out FOLDER/code.*` writes (generated in this process)
   run unchanged in FOLDER (its own folder, the studio on no PYTHONPATH) — `python code.py` or `sh code.sh`.

    python -m emulator exec -- python tests/code_sagemaker_session.py WORK RUNS

WORK holds the studio's inputs (cat.png, ref.png); RUNS is a JSON list of [item, lang] to run ("image", "edit",
"sound", "video", "take", "transcript", "conversation", "native", "clip"). Writes WORK/made.json (what the studio made: ids, files, figures) and
WORK/ran.json (each run's folder and seconds); exits non-zero at the first step that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
ROLE_ARN = "arn:aws:iam::123456789012:role/code-handover-test"
NOT_KEPT = {"type", "ref_audio", "speaker_embedding"}  # as ui/voice_views.py keeps a take's config
TAKE_TEXT = "The harbour lights came on one by one."
ENDPOINT_OF = {"edit": "image", "conversation": "take", "clip": "take"}  # the items sharing an endpoint (the voice: its speech)
CHAT_ENDPOINT = "sm-chat"  # the conversation's reply endpoint, played by a chat server in this process
CHAT_MODEL = "Qwen/Qwen3-Omni-30B-A3B-Instruct"  # in text mode: what the chat endpoint's container says it serves
ANSWER = "The lights are lovely tonight, aren't they?"
PROMPT = "Answer in one short sentence."


def studio_env(work: Path) -> dict[str, str]:
    return {**os.environ, "OMNI_STUDIO_DATA_DIR": str(work / "data"), "OMNI_STUDIO_CONFIG": "",
            "OMNI_STUDIO_STATE_FILE": str(work / "state.json"), "PYTHONPATH": str(ROOT)}


def run(argv: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"`{' '.join(argv)}` exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def services(work: Path, *args: str) -> dict:
    out = run([sys.executable, "-m", "services", *args, "--backend", "sagemaker", "--json"], cwd=work,
              env=studio_env(work))
    return json.loads(out.strip().splitlines()[-1])


def deploy(work: Path) -> None:
    run([sys.executable, "-m", "infra", "deploy", "voice", "image", "video", "listen", "sound", "omni", "--no-ttl",
         "--no-smoke", "--no-scale-to-zero", "--role-arn", ROLE_ARN, "--instance-types", "sound=ml.g5.xlarge",  # g6: a quota of 4
         "--state-file", str(work / "state.json"), "--poll-seconds", "0.2"], cwd=work, env=studio_env(work))


def speak(work: Path) -> str:
    """A take as the Voice page makes and keeps one: the studio's voice client on the SageMaker backend (its HTTP/2
    stream), kept with the backend's target and the session.config (what ui/voice_views.py keeps)."""
    os.environ.update({k: v for k, v in studio_env(work).items() if k.startswith("OMNI_STUDIO_")})
    os.environ["OMNI_STUDIO_BACKEND"] = "sagemaker"
    from services.backend import create_backend
    from services.history import History
    from services.settings import load_settings
    from services.speech import speech_config

    backend = create_backend(load_settings())
    history = History.of(load_settings())
    try:
        config = speech_config(language="English", seed=5)
        utterance = asyncio.run(backend.client("voice").say(config, TAKE_TEXT)).raise_for_error()
        wav = utterance.wav()
        take = history.takes.record(TAKE_TEXT, wav, target=backend.target, config=config.model_dump(
            mode="json", exclude_none=True, exclude=NOT_KEPT))
    finally:
        history.close()
        backend.close()
    (work / "take.wav").write_bytes(wav)
    return take.id


def keep_transcript(work: Path, said: dict) -> str:
    """The transcript kept as the Listen page keeps it (ui/listen_views.py), with its recording."""
    from services.history import History
    from services.settings import load_settings

    history = History.of(load_settings())
    try:
        record = history.transcripts.record(said["text"], source="take.wav", route="file", model=said["model"],
                                            backend="sagemaker", target=said["target"],
                                            audio=(work / "take.wav").read_bytes(), audio_name="take.wav")
    finally:
        history.close()
    return record.id


def chat_endpoint(url: str) -> None:
    """`sm-chat`, an endpoint whose container is the chat server at `url` (the emulator's `containers` config; the
    deployment's own images are all the offline engine's, which serves no chat)."""
    import boto3

    from emulator.handle import BIDI_AMI, IMAGE_URI

    answer = httpx.put(f"{os.environ['OMNI_EMULATOR_URL']}/_emulator/config", json={"containers": {":chat-": url}},
                       timeout=10, trust_env=False)
    answer.raise_for_status()
    sm = boto3.client("sagemaker")
    sm.create_model(ModelName=f"{CHAT_ENDPOINT}-model", ExecutionRoleArn=ROLE_ARN, PrimaryContainer={
        "Image": IMAGE_URI.replace(":omni-", ":chat-"), "Environment": {"SM_VLLM_MODEL": CHAT_MODEL}})
    sm.create_endpoint_config(EndpointConfigName=f"{CHAT_ENDPOINT}-config", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": f"{CHAT_ENDPOINT}-model", "InitialInstanceCount": 1,
        "InstanceType": "ml.g5.2xlarge", "InferenceAmiVersion": BIDI_AMI}])
    sm.create_endpoint(EndpointName=CHAT_ENDPOINT, EndpointConfigName=f"{CHAT_ENDPOINT}-config")
    sm.get_waiter("endpoint_in_service").wait(EndpointName=CHAT_ENDPOINT, WaiterConfig={"Delay": 0.2, "MaxAttempts": 300})


def converse(work: Path) -> subprocess.Popen:
    """The conversation as `python -m services converse --keep` holds it on the endpoints, the take as its turn
    (started now; `held` waits for it)."""
    from services.sagemaker import resolve_targets
    from services.settings import load_settings

    names = resolve_targets(load_settings()).endpoints
    argv = [sys.executable, "-m", "services", "converse", "--input", "take.wav", "--listen-endpoint", names["listen"],
            "--voice-endpoint", names["voice"], "--reply-endpoint", CHAT_ENDPOINT, "--region", "us-east-1",
            "--system-prompt", PROMPT, "--keep", "--json"]
    return subprocess.Popen(argv, cwd=work, env=studio_env(work), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def converse_native(work: Path) -> subprocess.Popen:
    """The conversation `converse --mode native --keep` holds in the omni endpoint's duplex session over the HTTP/2
    stream, the take as its recorded turn (started now; `held` waits for it)."""
    from services.sagemaker import resolve_targets
    from services.settings import load_settings

    argv = [sys.executable, "-m", "services", "converse", "--mode", "native", "--input", "take.wav", "--endpoint",
            resolve_targets(load_settings()).endpoints["omni"], "--region", "us-east-1", "--keep", "--json"]
    return subprocess.Popen(argv, cwd=work, env=studio_env(work), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def held(talk: subprocess.Popen) -> dict:
    out, err = talk.communicate(timeout=300)
    if talk.returncode != 0:
        sys.exit(f"`converse` exited with {talk.returncode}:\n{out[-3000:]}\n{err[-3000:]}")
    turns = json.loads(out.strip().splitlines()[-1])["turns"]
    kept = next(line for line in err.splitlines() if "kept as conversation-" in line)
    return {"id": kept.split("kept as ")[1].split()[0], "heard": turns[0]["user_text"], "replied": turns[0]["reply_text"]}


def make(work: Path, chat_url: str) -> dict:
    made: dict = {}
    chat = threading.Thread(target=chat_endpoint, args=(chat_url,))  # beside the media: the endpoint takes seconds
    chat.start()
    made["image"] = services(work, "image", "--prompt", "a fox at dusk", "--size", "192x128", "--seed", "7",
                             "--out", "fox.png")
    made["edit"] = services(work, "image", "--edit", "cat.png", "--prompt", "make it blue", "--size", "160x120",
                            "--seed", "9", "--out", "blue.png")
    made["sound"] = services(work, "sound", "--prompt", "rain on a tin roof", "--seconds", "2", "--seed", "11",
                             "--out", "rain.wav")
    made["video"] = services(work, "video", "--prompt", "waves", "--image", "ref.png", "--width", "512", "--height",
                             "384", "--frames", "9", "--seed", "3", "--out", "waves.mp4")
    made["take"] = {"id": speak(work), "file": "take.wav"}
    native = converse_native(work)  # the take its turn, beside the clip: the omni endpoint is its own
    made["clip"] = services(work, "clip", "--video", "waves.mp4", "--narration", "Waves at dawn.", "--soundtrack",
                            "calm strings", "--seed", "5", "--steps", "4", "--out", "clip.mp4")
    chat.join()
    talk = converse(work)  # beside the transcript: the listen endpoint is the one both use
    said = services(work, "listen", "take.wav")
    made["transcript"] = {**said, "id": keep_transcript(work, said)}
    made["conversation"], made["native"] = held(talk), held(native)
    for what in ("image", "edit", "sound", "video", "clip"):
        made[what]["id"] = made[what]["job_id"]
    return made


def write_code(work: Path, made: dict, runs: list) -> None:
    """Each run's code written into a folder of its own, as `python -m services code ID --lang L --out F` writes it
    (the script, its reference files beside it) — here in one process: the CLI itself is tested elsewhere
    (tests/test_code_media.py), and thirteen interpreter starts are most of this session's time."""
    sys.path.insert(0, str(ROOT))
    from services.code import generate
    from services.history import History

    history = History(work / "data")
    try:
        for what, lang in runs:
            folder = work / "runs" / f"{what}-{lang}"
            folder.mkdir(parents=True)
            code = generate(history, made[what]["id"], lang)
            (folder / ("code.py" if lang == "python" else "code.sh")).write_text(code.text, encoding="utf-8")
            for name, data in code.files.items():
                (folder / name).write_bytes(data)
    finally:
        history.close()


def run_code(work: Path, what: str, lang: str) -> dict:
    """An item's code, run in its folder as a reader runs it: no studio on the path."""
    folder = work / "runs" / f"{what}-{lang}"
    script = folder / ("code.py" if lang == "python" else "code.sh")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("OMNI_STUDIO_")}
    if lang == "cli":  # the studio's own command line: where the studio is installed, its venv first on PATH
        env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", "PYTHONPATH": str(ROOT),
                "OMNI_STUDIO_DATA_DIR": str(work / "data"), "OMNI_STUDIO_CONFIG": ""}
    started = time.monotonic()
    out = run([sys.executable, script.name] if lang == "python" else ["sh", script.name], cwd=folder, env=env)
    return {"what": what, "lang": lang, "folder": str(folder), "stdout": out, "s": round(time.monotonic() - started, 2)}


def main() -> None:
    work, runs = Path(sys.argv[1]).resolve(), json.loads(sys.argv[2])
    started = time.monotonic()
    deploy(work)
    deployed = time.monotonic()
    os.environ.update({k: v for k, v in studio_env(work).items() if k.startswith("OMNI_STUDIO_")})
    from tests.chat_support import chat_app, serving_app

    with contextlib.ExitStack() as stack:
        chat_url = stack.enter_context(serving_app(chat_app(ANSWER)[0]))
        made = make(work, chat_url)
        finish(work, runs, made, started, deployed)


def finish(work: Path, runs: list, made: dict, started: float, deployed: float) -> None:
    (work / "made.json").write_text(json.dumps(made, indent=1))
    items = time.monotonic()
    # Each endpoint's runs one after the other, the endpoints' side by side: the offline engine behind the emulator
    # batches concurrent speech sessions, and a take spoken in a batch is not the take spoken alone.
    write_code(work, made, runs)
    groups: dict[str, list] = {}
    for what, lang in runs:
        groups.setdefault(ENDPOINT_OF.get(what, what), []).append((what, lang))
    with ThreadPoolExecutor(len(groups) or 1) as pool:
        ran = [r for done in pool.map(lambda group: [run_code(work, what, lang)
                                                      for what, lang in group], groups.values()) for r in done]
    timing = {"deploy_s": deployed - started, "make_s": items - deployed, "code_s": time.monotonic() - items}
    (work / "ran.json").write_text(json.dumps({"runs": ran, "timing": timing}, indent=1))
    print(json.dumps(timing), flush=True)


if __name__ == "__main__":
    main()
