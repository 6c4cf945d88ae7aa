"""`python -m services speak` — stream speech from the shell and write a WAV.

    python -m services speak --text "Hello there." [--voice V] [--language L]
                             [--backend offline|omni|sagemaker] [--url URL] [--state-file F] [--out speech.wav] [--json]

Exit code 0 when the utterance finished; 1 with the server's message on stderr otherwise. Audio
received before an error is still written. `--json` prints one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from protocol.speech import SplitGranularity
from services.speech import require_text, speech_config


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("speak", parents=[common], help="stream speech for a text and write a WAV",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text", required=True, help='the text to speak ("-" reads it from stdin)')
    p.add_argument("--voice", help="a voice of the server (default: the server's default voice)")
    p.add_argument("--language", help="e.g. English or Auto (default: the server's)")
    p.add_argument("--split", choices=["none", "sentence", "clause"], default="clause",
                   help="how the server cuts the text into units (default clause: fastest first audio)")
    p.add_argument("--out", type=Path, default=Path("speech.wav"), help="WAV file to write (default speech.wav)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from services.cli.common import backend_from_args

    text = require_text(sys.stdin.read() if args.text == "-" else args.text)  # before starting any backend
    split: SplitGranularity = args.split
    config = speech_config(voice=args.voice, language=args.language, split_granularity=split)
    backend = backend_from_args(args)
    try:
        utterance = asyncio.run(backend.speech.say(config, text))
    finally:
        backend.close()
    wrote = None
    if utterance.pcm:
        args.out.write_bytes(utterance.wav())
        wrote = str(args.out)
    st = utterance.stats
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
            "backend": backend.name,
            "target": backend.target,
            "out": wrote,
            "ok": utterance.ok,
            "error": None if utterance.ok else str(utterance.error),
        }
        print(json.dumps(figures))
    elif wrote:
        ttfa = "—" if st.ttfa_ms is None else f"{st.ttfa_ms:.0f} ms"
        rtf = "—" if st.rtf is None else f"{st.rtf:.3f}"
        print(f"wrote {wrote}: {st.audio_seconds:.2f} s of audio, {st.chunks} chunks, {st.bytes} bytes, "
              f"first audio {ttfa} (from {st.ttfa_from}), RTF {rtf}")
    if not utterance.ok:
        kept = f" ({st.audio_seconds:.2f} s of audio received before it were written to {wrote})" if wrote else ""
        print(f"error: {utterance.error}{kept}", file=sys.stderr)
        return 1
    return 0
