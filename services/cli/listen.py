"""`python -m services listen` — transcribe a recording from the shell.

    python -m services listen FILE [--stream] [--backend offline|server|sagemaker] [--url U | --endpoint E] [--model M]
                                   [--language L] [--reference TEXT | --reference-file F] [--json]
                                   [--out F.txt|.srt|.vtt|.json]

FILE is any recording PyAV reads (WAV, MP3, FLAC, OGG/Opus, WebM, M4A, a video's sound), at most 25 MB. Without
--stream it goes to POST /v1/audio/transcriptions; with --stream it is sent as a microphone would send it —
16 kHz PCM16, paced at real time — over /v1/realtime, and the words print as they are recognized.
--backend offline (the default setting) starts the embedded engine; --url names any vLLM-protocol server;
--backend sagemaker uses the deployment's listen endpoint (`python -m infra deploy --with listen`), or the one
--endpoint (or OMNI_STUDIO_LISTEN_ENDPOINT) names: files go through InvokeEndpoint (one over its 6 MB is cut at
silences into pieces, and the output says so), streams over the HTTP/2 bidirectional stream.
--reference (or --reference-file) is the text that is spoken: the word error rate is printed (docs/listen.md
states how both texts are normalised first).

--json prints one object: text, segments [{start, end, text}], audio_s, rtf, model, backend, target, with
--stream first_partial_ms, final_ms and partials, and wer (null without a reference). --out writes the
transcript as text, SubRip, WebVTT or that JSON object, by its suffix.

Exit code 0 with a transcript; 1 when the target fails (its message on stderr: unreachable, refused, a server
that cannot stream); 2 for input that cannot be used (not audio, damaged, over 25 MB, silent — "no speech
found" —, a reference in another language, a bad --out); 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from protocol.errors import ConfigError, InvalidInput
from protocol.limits import TRANSCRIPTION_FILE_MAX_BYTES
from protocol.listen import is_english
from services.cli.common import ArgumentError, check_out, read_text, save_output
from services.files import read_user_file
from services.listen import (
    OUT_SUFFIXES,
    ListenAudio,
    Transcript,
    load_audio,
    word_error_rate,
)

REFERENCE_FILE_MAX_BYTES = 1024 * 1024


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("listen", parents=[common], help="transcribe a recording (speech recognition)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, metavar="FILE", help="the recording: WAV, MP3, FLAC, OGG, WebM, M4A, video")
    p.add_argument("--stream", action="store_true",
                   help="send it as a microphone would, at real time, over /v1/realtime (default: as a file)")
    p.add_argument("--endpoint", help="--backend sagemaker: this listen endpoint instead of the deployment's")
    p.add_argument("--model", help="the model to name (default: the listen model the server lists, else its only one)")
    p.add_argument("--language", help="the language spoken, e.g. en (default: the server's)")
    ref = p.add_mutually_exclusive_group()
    ref.add_argument("--reference", metavar="TEXT", help='the text that is spoken, for the word error rate ("-": stdin)')
    ref.add_argument("--reference-file", type=Path, metavar="F", help="a UTF-8 file holding the text that is spoken")
    p.add_argument("--out", type=Path, help=f"write the transcript ({', '.join(OUT_SUFFIXES)}, by the suffix)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        audio, reference = _inputs(args)
    except (InvalidInput, ConfigError) as exc:
        raise ArgumentError(str(exc)) from None
    from services.backend import create_backend
    from services.cli.common import settings_from_args
    from services.targets import target_overrides

    try:
        settings = settings_from_args(args)
        if args.endpoint:
            settings = settings.with_overrides(**target_overrides("listen", endpoint=args.endpoint))
        backend = create_backend(settings)
    except ConfigError as exc:
        raise ArgumentError(str(exc)) from None
    try:
        transcript = asyncio.run(_listen(backend.client("listen"), audio, args))
    except InvalidInput as exc:  # what the target heard: no speech
        raise ArgumentError(str(exc)) from None
    finally:
        backend.close()
    if transcript.preview:
        print(f"note: {transcript.preview}", file=sys.stderr)
    if transcript.fitting:
        print(f"note: {transcript.fitting}", file=sys.stderr)
    try:
        wer = None if reference is None else word_error_rate(reference, transcript.text)
    except InvalidInput as exc:
        raise ArgumentError(str(exc)) from None
    figures = transcript.figures(backend=backend.name, wer=wer)
    return _report(args, transcript, figures)


def _inputs(args: argparse.Namespace) -> tuple[ListenAudio, str | None]:
    """The recording and the reference, checked before any backend starts."""
    if args.endpoint and (args.backend or "sagemaker") != "sagemaker":
        raise InvalidInput("--endpoint names a SageMaker listen endpoint: use it with --backend sagemaker (or --url "
                           "for a vLLM server)")
    if args.endpoint and args.url:
        raise InvalidInput("give --url (a vLLM server) or --endpoint (a SageMaker endpoint), not both")
    if args.out is not None:
        if args.out.suffix.lower() not in OUT_SUFFIXES:
            raise InvalidInput(f"--out {args.out}: the suffix says what to write; use one of {', '.join(OUT_SUFFIXES)}")
        check_out(args.out)
    reference = None
    if args.reference is not None:
        reference = read_text(args.reference, "--reference")
    elif args.reference_file is not None:
        raw = read_user_file(args.reference_file, what="--reference-file", limit=REFERENCE_FILE_MAX_BYTES)
        try:
            reference = raw.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            raise InvalidInput(f"--reference-file {args.reference_file} is not UTF-8 text") from None
    if reference is not None and not is_english(args.language):
        raise InvalidInput(f"the word error rate is measured on English (--language {args.language} was given): "
                           "drop --reference, or transcribe English speech")
    data = read_user_file(args.file, what="FILE", limit=TRANSCRIPTION_FILE_MAX_BYTES, hint="; give a recording")
    return load_audio(data, name=str(args.file)), reference


async def _listen(listener, audio: ListenAudio, args: argparse.Namespace) -> Transcript:  # type: ignore[no-untyped-def]
    if not args.stream:
        return await listener.transcribe_file(audio, model=args.model, language=args.language)
    show = (lambda text: print(f"\r… {text}", end="", file=sys.stderr, flush=True)) if (
        not args.json and sys.stderr.isatty()) else None
    try:
        return await listener.stream(audio, model=args.model, language=args.language, on_partial=show)
    finally:
        if show is not None:
            print(file=sys.stderr)


def _report(args: argparse.Namespace, transcript: Transcript, figures: dict) -> int:
    problem = None
    if args.out is not None:
        saved = save_output(args.out, transcript.render(args.out.suffix.lower(), figures), suffix=args.out.suffix)
        problem = saved.problem
    if args.json:
        print(json.dumps(figures, ensure_ascii=False))
    else:
        print(transcript.text)
        print(_summary(figures), file=sys.stderr)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    return 0


def _summary(f: dict) -> str:
    parts = [f"{f['audio_s']:.2f} s of audio", f"RTF {f['rtf']:.3f}" if f["rtf"] is not None else "RTF —"]
    if "partials" in f:
        first = "—" if f["first_partial_ms"] is None else f"{f['first_partial_ms']:.0f} ms"
        parts += [f"first partial {first}", f"final {f['final_ms']:.0f} ms after the audio", f"{f['partials']} partials"]
    if f["wer"] is not None:
        parts.append(f"WER {f['wer']:.1%}")
    return f"{f['model']} on {f['target']} ({f['backend']}): " + ", ".join(parts)
