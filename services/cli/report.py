"""`python -m services converse-report CONV_ID` — a kept conversation as one shareable HTML file
(services/converse/report.py): its transcript, each turn's timeline and voice-to-voice, and its stereo recording
embedded — no external resource, so it opens anywhere and can be pasted into a chat.

    python -m services converse-report CONV_ID [--out FILE.html]

CONV_ID is a conversation's id (`python -m services history list --kind conversation`, or the note `converse
--keep` prints). Without --out the report is written to CONV_ID.html here; the path written is printed.
Exit code 0; 2 for an id the history does not have (or you may not see) or a file that cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from protocol.errors import InvalidInput
from services.cli.common import ArgumentError, check_out, save_output


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("converse-report", help="a kept conversation as one shareable HTML file (transcript, "
                       "timeline, audio)", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("conversation_id", metavar="CONV_ID", help="a kept conversation's id")
    p.add_argument("--out", type=Path, help="where to write the HTML (default: CONV_ID.html)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from services.converse.report import report_html
    from services.history import History
    from services.settings import load_settings

    out = args.out or Path(f"{args.conversation_id}.html")
    try:
        check_out(out)
    except InvalidInput as exc:
        raise ArgumentError(str(exc)) from None
    history = History.of(load_settings())
    try:
        record = history.conversations.get(args.conversation_id)
    except InvalidInput as exc:
        raise ArgumentError(f"{exc}: `python -m services history list --kind conversation` lists them") from None
    saved = save_output(out, report_html(record).encode("utf-8"), suffix=".html")
    if saved.problem:
        print(f"error: {saved.problem}", file=sys.stderr)
    if saved.path:
        print(saved.path)
    return 0 if saved.problem is None else 1
