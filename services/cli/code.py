"""`python -m services code ITEM_ID` — the code that makes a kept item again (services/code).

    python -m services code ITEM_ID [--lang python|curl|cli] [--out FILE]

ITEM_ID is an image, video, sound or clip job's id (`job_id` in their --json), a speech take's, a transcript's, a
conversation's (`python -m services history list` lists them all) or an evaluation item's (items.csv of
`python -m services eval export`). The code prints; with --out it is written to FILE and the files it reads beside
it (an edit's or a video's reference image, a transcript's recording, a clip's source video and parts, a
conversation's first turn cut from its recording). A cloned take's recording is never kept: its code reads
reference.wav, which you bring. A conversation's code is its setup (--lang cli: the `converse` line that holds it
again) and one turn through the same stages (python; curl: the nearest REST form), docs/converse.md. An item made on
SageMaker gets boto3 / HTTP/2-SDK code with ENDPOINT_NAME and REGION at its top. Notes (a reference deleted since, a
target that may be gone) go to stderr and into the code as comments.
Exit code 0; 2 for an id the history does not have (or you may not see), or a record too damaged to read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("code", help="the code (Python, curl, the CLI) that makes a kept item again",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("item_id", metavar="ITEM_ID", help="a job's (image, video, sound, clip), speech take's, transcript's, conversation's or evaluation item's id")
    p.add_argument("--lang", choices=["python", "curl", "cli"], default="python", help="default: python")
    p.add_argument("--out", type=Path, help="write the code here, and the reference files beside it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from services.code import generate
    from services.history import History
    from services.settings import load_settings
    from services.targets import TargetBook

    settings = load_settings()
    history = History.of(settings)
    servers = [s.url for s in TargetBook(settings, history).servers()]
    code = generate(history, args.item_id, args.lang, servers=servers)
    for note in code.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.out is None:
        sys.stdout.write(code.text)
        return 0
    args.out.write_text(code.text, encoding="utf-8")
    if args.lang != "python":
        args.out.chmod(0o755)
    for name, data in code.files.items():
        (args.out.parent / name).write_bytes(data)
    print(args.out)
    for name in code.files:
        print(args.out.parent / name)
    return 0
