"""`python -m services voices` — the voices saved for cloning on a target: list, add, delete.

    python -m services voices list   [--backend …] [--url URL] [--json]
    python -m services voices add    --name NAME --audio FILE --consent ID [--ref-text T] [--description D] [--who W]
    python -m services voices delete --name NAME

`add` needs the id of the speaker's consent recording (cloning someone's voice needs their consent) and a
recording of 3–30 s of that one person (WAV, MP3, FLAC, OGG, WebM); both are checked before any backend
starts, and every saved voice is recorded in the studio's history with its consent id, who saved it and when.
A name the target already has is refused. Speak with a saved voice: `python -m services speak --saved-voice NAME`.

On SageMaker a voice can be uploaded but not listed or deleted through the endpoint: `list` shows the
studio's own records, and `delete` only forgets the record (the voice stays on the endpoint until it is
replaced). Errors print the server's message and exit 1 (2 for arguments that are not UTF-8).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from protocol.errors import InvalidInput
from protocol.limits import REFERENCE_AUDIO_FILE_MAX_BYTES
from protocol.voices import voice_name_error
from services.speech import SavedVoice
from services.files import read_user_file
from services.speech.reference import ReferenceAudio, load_reference


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("voices", help="list, add or delete the voices saved for cloning", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    ls = actions.add_parser("list", parents=[common], help="the saved voices of the target")
    ls.set_defaults(func=run_list)

    add = actions.add_parser("add", parents=[common], help="save a voice from a recording, with the speaker's consent")
    add.add_argument("--name", required=True, help="the name to speak with it (`speak --saved-voice NAME`)")
    add.add_argument("--audio", required=True, type=Path, metavar="FILE",
                     help="a recording of 3–30 s of one person speaking (WAV, MP3, FLAC, OGG, WebM)")
    add.add_argument("--consent", required=True, metavar="ID", help="the id of the speaker's consent recording")
    add.add_argument("--ref-text", metavar="TEXT", help="what the recording says (a better clone)")
    add.add_argument("--description", metavar="TEXT", help="a few words about the voice, e.g. 'warm narrator'")
    add.add_argument("--who", help="who saves it, for the record (default: the login name)")
    add.set_defaults(func=run_add)

    rm = actions.add_parser("delete", parents=[common], help="delete a saved voice (SageMaker: forget its record)")
    rm.add_argument("--name", required=True, help="the saved voice to delete")
    rm.set_defaults(func=run_delete)


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "—"


def run_list(args: argparse.Namespace) -> int:
    from services.cli.common import backend_from_args

    backend = backend_from_args(args)
    try:
        library = backend.client("voices")
        voices = library.list()
    finally:
        backend.close()
    if args.json:
        print(json.dumps({"backend": backend.name, "target": library.target, "voices": [v.figures() for v in voices],
                          "notice": library.notice}))
        return 0
    if library.notice:
        print(f"note: {library.notice}", file=sys.stderr)
    if not voices:
        print(f"no saved voices on {library.target}")
    for v in voices:
        details = [f"consent {v.consent_id or '—'}", f"saved {_when(v.created_at)}" + (f" by {v.who}" if v.who else "")]
        if v.speaker_description:
            details.append(v.speaker_description)
        print(f"{v.name}\t" + " · ".join(details))
    return 0


def _reference(path: Path) -> ReferenceAudio:
    data = read_user_file(path, what="--audio", limit=REFERENCE_AUDIO_FILE_MAX_BYTES, hint="; give a recording file")
    try:
        return load_reference(data)
    except InvalidInput as exc:
        raise InvalidInput(f"--audio {path}: {exc}") from None


def run_add(args: argparse.Namespace) -> int:
    from services.cli.common import backend_from_args

    # everything the user can get wrong is checked before any backend starts
    if (problem := voice_name_error(args.name)) is not None:
        raise InvalidInput(f"--name: {problem}")
    if not args.consent.strip():
        raise InvalidInput("--consent: cloning a voice needs the speaker's consent: give the id of their consent "
                           "recording")
    reference = _reference(args.audio)
    backend = backend_from_args(args)
    try:
        saved: SavedVoice = backend.client("voices").add(args.name, reference, args.consent, ref_text=args.ref_text,
                                               speaker_description=args.description, who=args.who)
        target = backend.client("voices").target
    finally:
        backend.close()
    if args.json:
        print(json.dumps({"backend": backend.name, "target": target, "voice": saved.figures(),
                          "reference_seconds": round(reference.seconds, 2)}))
    else:
        print(f"saved the voice {saved.name!r} on {target} ({reference.seconds:.1f} s reference, consent "
              f"{saved.consent_id}); speak with it: python -m services speak --saved-voice {saved.name} --text …")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from services.cli.common import backend_from_args

    backend = backend_from_args(args)
    try:
        said = backend.client("voices").delete(args.name)
        target = backend.client("voices").target
    finally:
        backend.close()
    if args.json:
        print(json.dumps({"backend": backend.name, "target": target, "name": args.name, "result": said}))
    else:
        print(said)
    return 0
