"""`python -m services speak` — stream speech from the shell and write a WAV.

    python -m services speak --text "Hello there." [--voice V] [--language L]
                             [--backend offline|server|sagemaker] [--url URL] [--state-file F] [--out speech.wav] [--json]
        style:     --instructions "slow and warm"                      (CustomVoice: a preset voice's style)
        design:    --task-type VoiceDesign --instructions "a calm, low female voice"
        cloning:   --ref-audio me.wav [--ref-text "what it says"]    (Base; WAV/MP3/FLAC/OGG/WebM, 3–30 s)
                   --saved-voice NAME                                 (Base: a voice saved with `voices add`)
        --first-chunk-frames N: smaller is earlier first audio, larger smoother audio
        --seed N: the same seed, the same voice for the same text (a kept take's code repeats it)
        --intelligibility [URL]: the take heard by a listen target (default the offline engine's recognizer) and
                   the word error rate of its transcript against the text printed (in --json: "intelligibility")

What the target's model cannot do is refused before anything is spoken, naming the model to deploy.

Exit code 0 when the utterance finished; 1 with the server's message on stderr otherwise; 2 for text that
is not UTF-8; 130 on Ctrl-C. Audio received before an error or Ctrl-C is still written, and if --out
cannot be written after all (a full disk), the audio goes to a fallback file whose name is printed.
An --out that cannot be written at all (no such folder, a directory) is refused before anything starts.
`--json` prints one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from protocol.errors import InvalidInput
from protocol.limits import FIRST_CHUNK_FRAMES, INSTRUCTIONS_MAX_CHARS, REFERENCE_AUDIO_FILE_MAX_BYTES
from protocol.speech import SplitGranularity
from services.cli.common import check_out, read_text, save_output
from services.files import read_user_file
from services.speech import PcmChunk, ReferenceAudio, Utterance, load_reference, speakable, speech_config


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("speak", parents=[common], help="stream speech for a text and write a WAV",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text", required=True, help='the text to speak ("-" reads it from stdin)')
    who = p.add_mutually_exclusive_group()
    who.add_argument("--voice", help="a preset voice of the server (default: the server's default voice)")
    who.add_argument("--saved-voice", metavar="NAME",
                     help="a voice saved for cloning (`python -m services voices add`); implies --task-type Base")
    p.add_argument("--language", help="e.g. English or Auto (default: the server's)")
    p.add_argument("--task-type", choices=["CustomVoice", "VoiceDesign", "Base"],
                   help="CustomVoice: a preset voice (default); VoiceDesign: a voice from --instructions; "
                        "Base: a clone of --ref-audio or --saved-voice")
    p.add_argument("--instructions", metavar="TEXT",
                   help=f"the style of a preset voice, or the description of a designed voice "
                        f"(≤ {INSTRUCTIONS_MAX_CHARS} characters)")
    p.add_argument("--ref-audio", type=Path, metavar="FILE",
                   help="a recording of the voice to clone: 3–30 s of one person (WAV, MP3, FLAC, OGG, WebM)")
    p.add_argument("--ref-text", metavar="TEXT", help="what the --ref-audio recording says (a better clone)")
    p.add_argument("--first-chunk-frames", type=int, metavar="N",
                   help=f"codec frames in the first audio chunk ({FIRST_CHUNK_FRAMES.lo:.0f}–{FIRST_CHUNK_FRAMES.hi:.0f}):"
                        " smaller is earlier first audio, larger smoother audio")
    p.add_argument("--seed", type=int, metavar="N",
                   help="the model's random seed: the same seed speaks the same text the same way (default: the "
                        "server's)")
    p.add_argument("--split", choices=["none", "sentence", "clause"], default="clause",
                   help="how the server cuts the text into units (default clause: fastest first audio)")
    p.add_argument("--out", type=Path, default=Path("speech.wav"), help="WAV file to write (default speech.wav)")
    p.add_argument("--intelligibility", nargs="?", const="offline", metavar="URL",
                   help="transcribe the take (the offline engine's recognizer, or the listen server at URL) and print "
                        "the word error rate against the text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from services.cli.common import backend_from_args

    text = speakable(read_text(args.text, "--text"))  # bad input fails before any backend starts; checked once
    check_out(args.out)
    split: SplitGranularity = args.split
    if args.ref_audio is not None and args.saved_voice:
        raise InvalidInput("clone from --ref-audio or from --saved-voice, not both")
    reference = read_reference(args.ref_audio) if args.ref_audio is not None else None
    task_type = args.task_type or ("Base" if args.saved_voice else None)
    config = speech_config(voice=args.saved_voice or args.voice, language=args.language, split_granularity=split,
                           task_type=task_type, instructions=args.instructions, ref_audio=reference,
                           ref_text=args.ref_text, initial_codec_chunk_frames=args.first_chunk_frames,
                           **({} if args.seed is None else {"seed": args.seed}))
    backend = backend_from_args(args)
    try:
        backend.client("voice").check(config)  # a task type the model lacks: which model to deploy, before speaking
        if note := backend.client("voice").note():  # e.g. credentials that may invoke the endpoint but not describe it
            print(f"note: {note}", file=sys.stderr)
        session = backend.client("voice").open(config, on_audio=None if args.json else _first_audio_notice(args.out))
        interrupted = False
        try:
            utterance = asyncio.run(backend.client("voice").say(config, text, session=session))
        except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C: keep what arrived (written below)
            interrupted = True
            stats = session.snapshot()
            stats.state, stats.error = "cancelled", "interrupted (Ctrl-C)"
            utterance = Utterance(text, config.voice, config.language, stats, session.recording())
        # written before the backend closes (stopping an offline engine takes a moment; Ctrl-C may come again)
        saved = save_output(args.out, utterance.wav(), suffix=".wav") if utterance.pcm else None
        heard = _intelligibility(args.intelligibility, backend, utterance, text) if args.intelligibility else None
    finally:
        backend.close()
    wrote = saved.path if saved else None
    st = utterance.stats
    errors = [str(e) for e in (utterance.error, st.error if interrupted else None, saved and saved.problem) if e]
    if args.json:
        figures = {
            "ttfa_ms": None if st.ttfa_ms is None else round(st.ttfa_ms, 2),
            "ttfa_from": st.ttfa_from,
            "chunks": st.chunks,
            "bytes": st.bytes,
            "audio_seconds": round(st.audio_seconds, 4),
            "rtf": None if st.rtf is None else round(st.rtf, 4),
            "sentences": st.sentences,
            "voice": utterance.voice,
            "language": utterance.language,
            "task_type": config.task_type or "CustomVoice",
            "backend": backend.name,
            "target": backend.target,
            "out": wrote,
            "ok": not errors,
            "interrupted": interrupted,
            "error": "; ".join(errors) or None,
        }
        if heard is not None:
            figures["intelligibility"] = heard
        print(json.dumps(figures))
    elif wrote:
        ttfa = "—" if st.ttfa_ms is None else f"{st.ttfa_ms:.0f} ms"
        rtf = "—" if st.rtf is None else f"{st.rtf:.3f}"
        print(f"wrote {wrote}: {st.audio_seconds:.2f} s of audio, {st.chunks} chunks, {st.bytes} bytes, "
              f"first audio {ttfa} (from {st.ttfa_from}), RTF {rtf}")
    if saved and saved.problem:
        print(f"error: {saved.problem}", file=sys.stderr)
    if heard is not None and not args.json:
        print(_heard_line(heard), file=sys.stderr if "error" in heard else sys.stdout)
    if interrupted:
        if wrote:
            print(f"interrupted: {wrote} holds the audio up to the interruption ({st.audio_seconds:.2f} s)",
                  file=sys.stderr)
        else:
            print("interrupted before any audio arrived; nothing was written", file=sys.stderr)
        return 130
    if not utterance.ok:
        kept = f" ({st.audio_seconds:.2f} s of audio received before it were written to {wrote})" if wrote else ""
        print(f"error: {utterance.error}{kept}", file=sys.stderr)
        return 1
    return 1 if errors else 0


def read_reference(path: Path) -> ReferenceAudio:
    """--ref-audio read and checked (length, level, clipping) before any backend starts."""
    data = read_user_file(path, what="--ref-audio", limit=REFERENCE_AUDIO_FILE_MAX_BYTES,
                          hint="; give a recording file")
    try:
        return load_reference(data)
    except InvalidInput as exc:
        raise InvalidInput(f"--ref-audio {path}: {exc}") from None


def _first_audio_notice(out: Path) -> Callable[[PcmChunk], None]:
    """Say on stderr when the first audio arrives (a long text takes a while; Ctrl-C keeps what came)."""
    said = threading.Event()

    def on_audio(chunk: PcmChunk) -> None:
        if not said.is_set():
            said.set()
            print(f"receiving audio… (Ctrl-C stops and writes what arrived to {out})", file=sys.stderr, flush=True)

    return on_audio


def _intelligibility(target: str, backend, utterance: Utterance, text: str) -> dict | None:  # type: ignore[no-untyped-def]
    """The take heard by the listen target: wer, errors, words, transcript, heard_by (or error); None without audio."""
    from services.eval.listening import OFFLINE_LABEL, heard_by, offline_listener
    from services.listen import OmniListen

    if not utterance.pcm or not utterance.ok:
        return None
    if target == "offline":
        listener, label = offline_listener(backend), OFFLINE_LABEL
    else:
        listener, label = OmniListen(target), f"the listen server at {target.rstrip('/')}"
    return heard_by(listener, label, utterance.wav(), text)


def _heard_line(heard: dict) -> str:
    if "error" in heard:
        return f"intelligibility: not measured ({heard['error']})"
    return (f"intelligibility: WER {heard['wer']:.1%} ({heard['errors']} errors in {heard['words']} words), heard by "
            f"{heard['heard_by']}: {heard['transcript']!r}")
