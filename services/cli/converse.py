"""`python -m services converse` — hold a spoken conversation with a voice agent from the shell (pipeline or native mode).

    python -m services converse --input TURN.wav [--input TURN2.wav ...] [--mode pipeline] [--listen-url U | --listen-endpoint E]
                                [--reply-url U | --reply-endpoint E | --script FILE] [--reply-model M]
                                [--speak-url U | --voice-endpoint E] [--region R] [--profile P] [--voice V]
                                [--system-prompt T] [--turn-detector learned|silence] [--eot-threshold 0.5]
                                [--silence-ms 500] [--json] [--out conversation.wav]
    python -m services converse --mode native --input TURN.wav ... [--url U | --endpoint E] [--script FILE | --system-prompt T]

Each input is played as a microphone would send it: at real time to the listen target's /v1/realtime, and goes
through the turn detector as a microphone's audio would (--turn-detector: the end-of-turn model, by default, or the
silence window): where it decides a pause inside an input is the end of the turn, the agent answers there and the
rest of the input is the next turn (so a cut-off shows as more turns than inputs); after the speech, the silence
the detector waited is sent; the transcript's final ends the turn; the reply streams (a model at --reply-url over
/v1/chat/completions, or the scripted reply of --script FILE, else the studio's default script — scripted,
never a model) and is fed clause by clause into the speech session at --speak-url; the next input starts when
the agent's audio has finished. A URL not given is the offline engine, started once. --listen-endpoint and
--voice-endpoint name SageMaker endpoints instead (each session over the HTTP/2 bidirectional stream);
--reply-endpoint a SageMaker endpoint serving chat (/v1/chat/completions through
invoke_endpoint_with_response_stream, CustomAttributes route=/v1/chat/completions). The region and credentials
come from settings, --region, --profile. docs/converse.md.

--json prints {"mode", "turns": [{"user_text", "reply_text", "user_speech_end_s", "transcript_final_s",
"reply_first_token_s", "first_audio_s", "voice_to_voice_ms", "interrupted", "error", "eot_rule", "eot_wait_ms",
"eot_probability"}], "voice_to_voice_ms":
{"n", "p50", "p95"}} — seconds on the conversation's clock; the CLI has no playback, so the first audio is when
the client received it. --out writes a stereo WAV on the same clock: the person left, the agent right (24 kHz).

Exit 0 when the conversation ran and at least one turn was answered (a failed turn is in its "error" and on
stderr; the conversation goes on); 1 when no turn was answered (the failed target's message, or every reply
was empty); 2 for
input that cannot be used (not audio, a bad script line); 130 on Ctrl-C.

--mode native holds the conversation in one speech-to-speech session at --url (vLLM-Omni's /v1/realtime?duplex=1;
default the offline engine, which answers from the script), or on the SageMaker endpoint --endpoint E (the same
session over the HTTP/2 bidirectional stream, invocation path v1/realtime, query duplex=1): instructions are
--system-prompt, else the script's text. A server without that session: exit 1, "this server has no
speech-to-speech session; use --mode pipeline".

--compare KEY=VALUE (e.g. silence-ms=700) holds the conversation twice on the same inputs, one after the other: as
the arguments say (A), then with KEY changed (B); it prints both, the figures side by side and B/A of
voice-to-voice p50 (docs/converse.md, Compare).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from protocol.errors import ConfigError, InvalidInput
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from services.cli import converse_report
from services.cli.common import ArgumentError, check_out
from services.converse.script import DEFAULT_SCRIPT, SCRIPT_MAX_CHARS, Script, parse_script
from services.files import read_user_file
from services.listen import ListenAudio, load_audio

SILENCE_MS = (200, 2000)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("converse", help="talk to a voice agent with recorded turns (pipeline or native mode)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", type=Path, action="append", required=True, metavar="TURN.wav",
                   help="a recorded turn (any audio format); repeat for more turns, played in order")
    p.add_argument("--mode", choices=("pipeline", "native"), default="pipeline")
    native = p.add_mutually_exclusive_group()
    native.add_argument("--url", help="--mode native: a server with the speech-to-speech session (vLLM-Omni's "
                        "/v1/realtime?duplex=1; default: the offline engine)")
    native.add_argument("--endpoint", metavar="E", help="--mode native: a SageMaker endpoint with that session (over "
                        "the HTTP/2 bidirectional stream, invocation path v1/realtime)")
    listen = p.add_mutually_exclusive_group()
    listen.add_argument("--listen-url", help="a server with /v1/realtime transcription (default: the offline engine)")
    listen.add_argument("--listen-endpoint", metavar="E", help="a SageMaker listen endpoint (its /v1/realtime over the "
                        "HTTP/2 bidirectional stream)")
    reply = p.add_mutually_exclusive_group()
    reply.add_argument("--reply-url", help="an OpenAI-compatible server with streaming /v1/chat/completions")
    reply.add_argument("--reply-endpoint", metavar="E", help="a SageMaker endpoint serving streaming "
                       "/v1/chat/completions (invoke_endpoint_with_response_stream)")
    reply.add_argument("--script", type=Path, metavar="FILE", help="the scripted reply's rules (PATTERN => REPLY)")
    p.add_argument("--reply-model", help="--reply-url/--reply-endpoint: the model to name (default: the server's "
                   "first listed; the endpoint's own)")
    speak = p.add_mutually_exclusive_group()
    speak.add_argument("--speak-url", help="a server with /v1/audio/speech/stream (default: the offline engine)")
    speak.add_argument("--voice-endpoint", metavar="E", help="a SageMaker voice endpoint (its speech session over the "
                       "HTTP/2 bidirectional stream, as `speak --backend sagemaker`)")
    p.add_argument("--region", help="the SageMaker endpoints' AWS region (default: from settings)")
    p.add_argument("--profile", help="the SageMaker endpoints' AWS profile")
    p.add_argument("--voice", help="the agent's voice (default: the server's)")
    p.add_argument("--system-prompt", help="--reply-url/--reply-endpoint, --mode native: the system prompt")
    p.add_argument("--turn-detector", choices=("learned", "silence"), default="learned",
                   help="how a turn's end is decided — the end-of-turn model on the audio (default; native mode asks "
                   "the server for it: the offline engine has it), or the silence window alone (docs/converse.md, End "
                   "of turn)")
    p.add_argument("--eot-threshold", type=float, default=0.5, metavar="P",
                   help="--turn-detector learned: the probability of a finished turn that ends it (0–1, default 0.5)")
    p.add_argument("--silence-ms", type=int, default=500, help="the silence window that ends a turn (200–2000; with "
                   "the learned detector, the rule a pause falls back to)")
    p.add_argument("--barge-in-at", type=float, metavar="S",
                   help="start the next input S seconds after the agent's first audio (a barge-in), not after it ends")
    p.add_argument("--vad-threshold", type=float, default=0.5,
                   help="the voice detector's threshold: the Silero VAD's speech probability 0–1 (default 0.5) for turn "
                   "taking and barge-in; --mode native: the server VAD's (session.update turn_detection.threshold)")
    p.add_argument("--min-speech-ms", type=int, default=100,
                   help="barge-in: speech shorter than this (a cough) does not interrupt the agent (20–2000)")
    p.add_argument("--keep", action="store_true", help="keep the conversation in the studio's history")
    p.add_argument("--json", action="store_true", help="print the conversation's timeline as one JSON object")
    p.add_argument("--out", type=Path, help="write the conversation as a stereo WAV (person left, agent right)")
    p.add_argument("--compare", action="append", metavar="KEY=VALUE",
                   help="hold it twice on the same inputs, as given (A) then with KEY changed (B; repeat for more "
                   "keys: silence-ms, mode, reply-url, reply-model, script, voice, system-prompt, turn-detector, "
                   "eot-threshold), and print both side "
                   "by side with B/A of voice-to-voice p50 (--json: {\"a\", \"b\", \"ratio_p50\"})")
    p.set_defaults(func=run)


def _script(path: Path | None) -> Script:
    if path is None:
        return parse_script(DEFAULT_SCRIPT, "the default script")
    raw = read_user_file(path, what="--script", limit=SCRIPT_MAX_CHARS * 4)
    try:
        return parse_script(raw.decode("utf-8").removeprefix("\ufeff"), str(path))
    except UnicodeDecodeError:
        raise InvalidInput(f"--script {path} is not UTF-8 text") from None


def _check_barge_in(args: argparse.Namespace) -> None:
    if args.barge_in_at is not None and not 0 <= args.barge_in_at <= 60:
        raise InvalidInput(f"--barge-in-at {args.barge_in_at}: give 0–60 seconds after the agent's first audio")
    if not 0 < args.vad_threshold < 1:
        raise InvalidInput(f"--vad-threshold {args.vad_threshold}: give a number between 0 and 1 (default 0.5)")
    if not 20 <= args.min_speech_ms <= 2000:
        raise InvalidInput(f"--min-speech-ms {args.min_speech_ms}: give 20–2000 ms")


def _inputs(args: argparse.Namespace) -> tuple[list[ListenAudio], Script | None]:
    """Everything the user gave, checked before any engine starts."""
    if args.mode == "native" and (args.listen_url or args.speak_url or args.reply_url or args.listen_endpoint
                                  or args.voice_endpoint or args.reply_endpoint):
        raise InvalidInput("--mode native talks to one server: give --url or --endpoint, not --listen-url/"
                           "--speak-url/--reply-url or the pipeline's endpoints")
    if args.mode == "pipeline" and (args.url or args.endpoint):
        raise InvalidInput("--url and --endpoint are for --mode native; pipeline mode takes --listen-url, --reply-url, "
                           "--speak-url or their -endpoint options")
    lo, hi = SILENCE_MS
    if not lo <= args.silence_ms <= hi:
        raise InvalidInput(f"--silence-ms {args.silence_ms}: give {lo}–{hi} ms")
    _check_barge_in(args)
    if not 0.0 <= args.eot_threshold <= 1.0:
        raise InvalidInput(f"--eot-threshold {args.eot_threshold}: give a probability from 0 to 1 (default 0.5)")
    if args.mode == "native" and args.barge_in_at is not None:
        raise InvalidInput("--barge-in-at is for --mode pipeline: in native mode the server's own voice detection "
                           "cuts the agent off (not yet driven from the command line)")
    from services.converse.setup import check_reply_url, parse_change

    # The person's own machine may name any reply server, but only over http(s): refused before any work.
    urls = [("--reply-url", args.reply_url)] if args.reply_url is not None else []
    urls += [(f"--compare {c}", v) for c in args.compare or () if (f := parse_change(c))[0] == "reply_url"
             for v in (f[1],)]
    for flag, url in urls:
        try:
            check_reply_url(url)
        except InvalidInput as exc:
            raise InvalidInput(f"{flag}: {exc}") from None
    model_reply = args.reply_url or args.reply_endpoint
    if args.mode == "pipeline" and not model_reply and (args.system_prompt or args.reply_model):
        raise InvalidInput("--system-prompt and --reply-model are for a model at --reply-url or --reply-endpoint; a "
                           "script has neither")
    if args.out is not None:
        check_out(args.out)
    script = None if model_reply else _script(args.script)
    audios = [load_audio(read_user_file(path, what="--input", limit=TRANSCRIPTION_FILE_MAX_BYTES,
                                        hint="; give a recording"), name=str(path)) for path in args.input]
    return audios, script


def run(args: argparse.Namespace) -> int:
    try:
        audios, script = _inputs(args)
    except InvalidInput as exc:
        raise ArgumentError(str(exc)) from None
    if args.compare:
        return _run_compare(args, audios)
    if args.mode == "native":
        return _run_native(args, audios, script)
    from services.converse.pipeline import Pipeline
    from services.converse.reply import ScriptedReply

    stage = ScriptedReply(script) if script is not None else _chat_reply(args)
    listen_url, speak_url = args.listen_url, args.speak_url
    if (listen_url is None and not args.listen_endpoint) or (speak_url is None and not args.voice_endpoint):
        from offline.launch import shared_engine

        engine_url = shared_engine().url
        listen_url, speak_url = listen_url or engine_url, speak_url or engine_url
    listen, speak = listen_url, speak_url
    backend = _sagemaker(args)
    if backend is not None:
        listen = backend.client("listen") if args.listen_endpoint else listen
        speak = backend.client("voice") if args.voice_endpoint else speak
        # kept as the Converse page keeps them: "SageMaker endpoint NAME (REGION)" (the code handed over reads both)
        listen_url = listen.target if args.listen_endpoint else listen_url
        speak_url = speak.target if args.voice_endpoint else speak_url
    from hearing.turn_end import TurnDetection

    detection = TurnDetection(args.turn_detector, silence_ms=args.silence_ms, threshold=args.eot_threshold)
    pipeline = Pipeline(listen, speak, stage, voice=args.voice, silence_ms=args.silence_ms,
                        barge_in_at=args.barge_in_at, vad_threshold=args.vad_threshold,
                        min_speech_ms=args.min_speech_ms, turn_detection=detection)
    try:
        conv = asyncio.run(pipeline.run(audios))
    finally:
        if backend is not None:
            backend.close()
    conv.reply_label = stage.label  # a model not named is looked up by the first reply: the label names it now
    if args.keep:
        converse_report.keep(args, conv, listen_url, speak_url)
    return converse_report.report(args, conv)


def _settings(args: argparse.Namespace, **over: str | None):  # type: ignore[no-untyped-def]
    """The settings with --region and --profile (and `over`) applied."""
    from services.settings import load_settings

    over |= {"region": args.region, "profile": args.profile}
    return load_settings().with_overrides(**{k: v for k, v in over.items() if v is not None})


def _sagemaker(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The SageMaker backend holding --listen-endpoint's listener and --voice-endpoint's speech client, or None."""
    if not (args.listen_endpoint or args.voice_endpoint):
        return None
    from services.backend import create_backend

    try:
        return create_backend(_settings(args, backend="sagemaker", listen_endpoint=args.listen_endpoint,
                                        voice_endpoint=args.voice_endpoint))
    except ConfigError as exc:
        raise ArgumentError(str(exc)) from None


def _aws(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The AWS session of --reply-endpoint and native mode's --endpoint (the region and profile the backend's)."""
    from services.converse.sagemaker import aws_session

    try:
        settings = _settings(args)
        return settings, aws_session(settings)
    except ConfigError as exc:
        raise ArgumentError(str(exc)) from None


def _chat_reply(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The model's reply: at --reply-url, or on the SageMaker endpoint --reply-endpoint."""
    if args.reply_endpoint is None:
        from services.converse.reply import ChatReply

        return ChatReply(args.reply_url, model=args.reply_model, system_prompt=args.system_prompt)
    from services.converse.sagemaker import EndpointReply

    _, aws = _aws(args)
    return EndpointReply(aws, args.reply_endpoint, model=args.reply_model, system_prompt=args.system_prompt)


def _run_native(args: argparse.Namespace, audios: list[ListenAudio], script: Script | None) -> int:
    """One speech-to-speech session (services/converse/native.py): instructions are --system-prompt, else the
    script's text (the offline engine answers from it; the default script when no --script)."""
    from services.converse.native import Native

    target, where = args.url, args.url
    if args.endpoint is not None:
        from services.converse.sagemaker import EndpointSession

        settings, aws = _aws(args)
        target = EndpointSession(aws, args.endpoint, connect_timeout=settings.connect_timeout_s,
                                 receive_timeout=settings.request_timeout_s)
        where = target.target
    elif target is None:
        from offline.launch import shared_engine

        target = where = shared_engine().url
    instructions, label = args.system_prompt, "the server's speech-to-speech session"
    if instructions is None and script is not None:
        instructions = DEFAULT_SCRIPT if args.script is None else read_user_file(
            args.script, what="--script", limit=SCRIPT_MAX_CHARS * 4).decode("utf-8").removeprefix("\ufeff")
        offline = args.url is None and args.endpoint is None
        label = (f"the session's scripted reply ({script.name}) on the offline engine, not a model" if offline
                 else f"the session at {where}, instructed with "
                 + (script.name if args.script is None else f"the script {script.name}"))
    # the learned end of turn is asked of the server (semantic_vad) — never of a SageMaker endpoint: vLLM-Omni knows
    # server_vad only (services/converse/setup.py, Setup._server_end_of_turn)
    learned = args.turn_detector == "learned" and args.endpoint is None
    native = Native(target, instructions=instructions, voice=args.voice, silence_ms=args.silence_ms,
                    reply_label=label, vad_threshold=args.vad_threshold,
                    end_of_turn=args.eot_threshold if learned else None)
    conv = asyncio.run(native.run(audios))
    if args.keep:
        converse_report.keep(args, conv, where, where)
    return converse_report.report(args, conv)


def _run_compare(args: argparse.Namespace, audios: list[ListenAudio]) -> int:
    """--compare: the inputs through setup A (the arguments), then through B (A with --compare's changes), one after
    the other; both conversations and their figures side by side (services/converse/compare.py)."""
    from services.converse.compare import compare, failure, render
    from services.converse.setup import Setup, parse_change

    if args.barge_in_at is not None or args.keep or args.out or args.listen_endpoint or args.voice_endpoint:
        raise ArgumentError("--compare holds two conversations on URLs or the offline engine and prints their "
                            "figures: leave out --barge-in-at, --keep, --out and the SageMaker endpoints")
    try:
        changes = dict(parse_change(text) for text in args.compare)
        if "script" in changes:
            changes["script_name"] = changes["script"]
            changes["script"] = script_text(Path(changes["script"]))
        native = args.mode == "native"
        engine = None
        if (args.url is None) if native else (args.listen_url is None or args.speak_url is None):
            from offline.launch import shared_engine

            engine = shared_engine().url
        a = Setup(mode=args.mode, listen=None if native else args.listen_url or engine,
                  speak=None if native else args.speak_url or engine, url=(args.url or engine) if native else None,
                  script=None if args.reply_url else DEFAULT_SCRIPT if args.script is None else script_text(args.script),
                  script_name="the default script" if args.script is None else str(args.script),
                  reply_url=args.reply_url, reply_model=args.reply_model, system_prompt=args.system_prompt,
                  voice=args.voice, silence_ms=args.silence_ms, turn_detector=args.turn_detector,
                  eot_threshold=args.eot_threshold).check()
        b = a.changed(**changes)
    except InvalidInput as exc:
        raise ArgumentError(str(exc)) from None
    result = asyncio.run(compare(audios, a, b))
    print(json.dumps(result.as_json(), ensure_ascii=False) if args.json else render(result))
    if (problem := failure(result)) is not None:
        raise converse_report.TargetFailed(problem)
    return 0


def script_text(path: Path) -> str:
    raw = read_user_file(path, what="the script", limit=SCRIPT_MAX_CHARS * 4)
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise InvalidInput(f"the script {path} is not UTF-8 text") from None
