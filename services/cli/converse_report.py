"""What `python -m services converse` leaves behind once a conversation was held (services/cli/converse.py holds
it): the report — each turn's words and voice-to-voice time, or the timeline as one JSON object — the stereo WAV
of --out, the history record of --keep, and the exit code (1 when no turn was answered).
"""

from __future__ import annotations

import argparse
import json
import sys

from protocol.errors import StudioError
from services.cli.common import save_output
from services.converse.script import DEFAULT_SCRIPT


def keep(args: argparse.Namespace, conv, listen_url: str, speak_url: str) -> None:  # type: ignore[no-untyped-def]
    """--keep: the conversation in the studio's history (its timeline, settings and stereo WAV), the id on stderr."""
    from services.history import History
    from services.settings import load_settings

    if not conv.turns:
        print("note: no turn was heard, so the conversation is not kept", file=sys.stderr)
        return
    if all(t.error for t in conv.turns):
        print("note: every turn failed, so the conversation is not kept", file=sys.stderr)
        return
    script = None
    if args.reply_url is None and args.reply_endpoint is None:
        script = DEFAULT_SCRIPT if args.script is None else args.script.read_text("utf-8").removeprefix("\ufeff")
    settings = {"mode": conv.mode, "listen": listen_url, "reply": conv.reply_label, "reply_url": args.reply_url,
                "reply_endpoint": args.reply_endpoint, "script": script, "system_prompt": args.system_prompt, "speak": speak_url, "voice": args.voice,
                "silence_ms": args.silence_ms, "turn_detector": args.turn_detector, "eot_threshold": args.eot_threshold,
                "barge_in_at": args.barge_in_at, "vad_threshold": args.vad_threshold,
                "min_speech_ms": args.min_speech_ms, "inputs": [str(p) for p in args.input]}
    studio = load_settings()
    data_dir = studio.data_dir
    record = History.of(studio).conversations.record(conv.as_json(), settings=settings, audio=conv.stereo_wav())
    print(f"note: kept as {record.id} in the history at {data_dir}", file=sys.stderr)


def report(args: argparse.Namespace, conv) -> int:  # type: ignore[no-untyped-def]
    print(f"note: the reply comes from {conv.reply_label}", file=sys.stderr)
    for name in conv.skipped:
        print(f"note: no words heard in {name}: no reply, no turn", file=sys.stderr)
    for i, turn in enumerate(conv.turns, start=1):
        if turn.error:
            print(f"error: turn {i}: {turn.error}", file=sys.stderr)
    problem = None
    if args.out is not None:
        problem = save_output(args.out, conv.stereo_wav(), suffix=".wav").problem
    if args.json:
        print(json.dumps(conv.as_json(), ensure_ascii=False))
    else:
        for i, turn in enumerate(conv.turns, start=1):
            v2v = "—" if turn.voice_to_voice_ms is None else f"{turn.voice_to_voice_ms:.0f} ms"
            print(f"turn {i}: you: {turn.user_text!r}\n        agent: {turn.reply_text.strip()!r} (voice-to-voice {v2v})")
        s = conv.voice_to_voice()
        print(f"voice-to-voice over {s['n']} turns: p50 {s['p50']} ms, p95 {s['p95']} ms (nearest-rank)")
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    answered = any(t.error is None and t.first_audio_s is not None for t in conv.turns)
    if conv.turns and not answered:  # a failed target, or replies with nothing in them: either way no answer
        raise TargetFailed(next((t.error for t in conv.turns if t.error), None)
                            or "no turn was answered: every reply was empty (no text, so no audio)")
    return 0


class TargetFailed(StudioError):
    """The conversation ran but no turn was answered: the failed target's message (exit 1)."""

    exit_code = 1
