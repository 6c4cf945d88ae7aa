"""`python -m services eval` — blind evaluations from the shell (services/eval).

    python -m services eval run SPEC.toml [--json] [--resume ID] [--yes]   make the items (progress on stderr)
    python -m services eval import ID RATINGS.csv                           item_a,item_b,winner(a|b|tie),rater
    python -m services eval report ID [--format json|csv|md|html] [--out FILE]
    python -m services eval list [--json]
    python -m services eval export ID [--blind] --out FILE.zip

`run` checks the SPEC before anything starts (unknown keys or settings, < 2 variants, duplicate labels, an
empty prompt set, > 1000 items without --yes). A variant whose target is down fails only its own items; they
are listed, the exit code is 1, and `--resume ID` with the same SPEC retries them and makes only what is
missing (also after Ctrl-C or a crash). The backend options (--backend, --url, ...) are the defaults of the
variants that name no target. `--json` prints {"id", "items", "failed", "generated"} at the end.
`import` adds no row whose pair its rater already rated (a file imported twice counts once) and says how many
were already there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from protocol.limits import RATINGS_FILE_MAX_BYTES
from services.cli.common import check_out, save_output
from services.files import read_user_file

FORMATS = ("json", "csv", "md", "html")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("eval", help="blind evaluations: run, import ratings, report, list, export",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ev = p.add_subparsers(dest="eval_command", required=True, metavar="ACTION")
    r = ev.add_parser("run", parents=[common], help="make the items of a SPEC.toml")
    r.add_argument("spec", type=Path, metavar="SPEC.toml")
    r.add_argument("--resume", metavar="ID", help="continue evaluation ID (made from this SPEC): only what is missing")
    r.add_argument("--yes", action="store_true", help="confirm an evaluation of more than 1000 items")
    r.set_defaults(func=run)
    i = ev.add_parser("import", help="import a filled ratings CSV (all or nothing)")
    i.add_argument("id")
    i.add_argument("csv", type=Path, metavar="RATINGS.csv")
    i.set_defaults(func=import_cmd)
    rep = ev.add_parser("report", help="the results with their statistics")
    rep.add_argument("id")
    rep.add_argument("--format", choices=FORMATS, default="json")
    rep.add_argument("--out", type=Path, help="write the report to FILE (default: print it)")
    rep.set_defaults(func=report_cmd)
    ls = ev.add_parser("list", help="the evaluations in the history")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_cmd)
    ex = ev.add_parser("export", help="a ZIP: media, items.csv, ratings.csv, report.html (or a blind sheet)")
    ex.add_argument("id")
    ex.add_argument("--blind", action="store_true", help="a blind sheet: shuffled pairs (HTML) and a CSV to fill in")
    ex.add_argument("--out", type=Path, required=True, metavar="FILE.zip")
    ex.set_defaults(func=export_cmd)


def _store():
    from services.eval import EvalStore
    from services.settings import load_settings

    from services.history import History

    return EvalStore(History.of(load_settings()))


def run(args: argparse.Namespace) -> int:
    from services.cli.common import settings_from_args
    from services.eval import load_spec
    from services.eval.runs import EvalRuns

    spec = load_spec(args.spec, yes=args.yes)  # refused before any backend starts
    base = settings_from_args(args)
    from services.eval import EvalStore
    from services.history import History
    store = EvalStore(History.of(base))
    ev = store.check_resume(args.resume, spec) if args.resume else store.create(spec)
    print(f"evaluation {ev.id}: {spec.item_count} items ({len(spec.prompts)} prompts × {spec.repeats} × "
          f"{len(spec.variants)} variants)", file=sys.stderr, flush=True)

    def progress(p: dict) -> None:
        extra = f": {p['error']}" if p["error"] else ""
        print(f"[{p['done']}/{p['total']}] {p['variant']} {p['item']} {p['status']}{extra}", file=sys.stderr, flush=True)

    # claimed on the evaluation's row as the studio claims it (services/eval/runs.py): a studio page does not run
    # it at the same time, and a studio carries it on if this process dies
    runs = EvalRuns(store.history, base, recover=False)
    try:
        outcome = runs.run_here(store, ev.id, on_progress=progress)
    except KeyboardInterrupt:
        print(f"interrupted: what was made is kept; continue with `python -m services eval run {args.spec} "
              f"--resume {ev.id}`", file=sys.stderr)
        raise
    finally:
        runs.close()
    out = outcome.to_dict()
    if args.json:
        print(json.dumps({"id": out["id"], "items": out["items"], "failed": out["failed"],
                          "generated": out["generated"]}))
    else:
        print(f"evaluation {ev.id}: {out['items'] - out['failed']} of {out['items']} items made "
              f"({out['generated']} now), {out['failed']} failed")
    if outcome.failed:
        for f in outcome.failed:
            print(f"failed: {f['item']} ({f['variant']}, {f['prompt']!r}): {f['error']}", file=sys.stderr)
        print(f"retry the failed items with `python -m services eval run {args.spec} --resume {ev.id}`", file=sys.stderr)
        return 1
    return 0


def import_cmd(args: argparse.Namespace) -> int:
    from services.eval import import_ratings_outcome

    data = read_user_file(args.csv, what="the ratings CSV", limit=RATINGS_FILE_MAX_BYTES,
                          hint="; give the filled ratings CSV")
    print(import_ratings_outcome(_store(), args.id, data).text(args.id))
    return 0


def report_cmd(args: argparse.Namespace) -> int:
    from services.eval import render, results

    if args.out is not None:
        check_out(args.out)
    text = render(results(_store(), args.id), args.format)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    saved = save_output(args.out, text.encode("utf-8"), suffix=f".{args.format}")
    if saved.problem:
        print(f"error: {saved.problem}", file=sys.stderr)
        return 1
    print(f"wrote {saved.path}", file=sys.stderr)
    return 0


def list_cmd(args: argparse.Namespace) -> int:
    rows = _store().list()
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no evaluations yet: `python -m services eval run SPEC.toml`")
    for r in rows:
        print(f"{r['id']}  {r['modality']:<5}  {r['succeeded']}/{r['items']} made, {r['failed']} failed, "
              f"{r['ratings']} ratings  {r['name']}")
    return 0


def export_cmd(args: argparse.Namespace) -> int:
    from services.eval import export_zip

    check_out(args.out)
    saved = save_output(args.out, export_zip(_store(), args.id, blind=args.blind), suffix=".zip")
    if saved.problem:
        print(f"error: {saved.problem}", file=sys.stderr)
        return 1
    print(f"wrote {saved.path}")
    return 0
