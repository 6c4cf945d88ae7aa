"""`python -m services history` — the studio's history from the shell (services/history).

    python -m services history migrate               bring the history's database to the newest revision (Alembic)
    python -m services history list [--kind K] [--json]
                                                     every record: id, kind, owner, created, its media files
    python -m services history copy --to postgresql://user:password@host:5432/db
                                                     every row copied to another database (media stay put)

The history is where the settings say: the database at `database_url` (OMNI_STUDIO_DATABASE_URL; empty: SQLite
at <data_dir>/history.sqlite3), media in `data_dir`. The studio migrates it whenever it opens it; `migrate` does
it on its own (before a team's studios start, say) and says what it did. A migration is one transaction: one
that fails or is interrupted leaves the database as it was, and running `migrate` again completes it.

`copy` moves a studio's history to a shared server: the destination is migrated, then every table's rows are
copied in batches, each batch one transaction, rows the destination has already skipped — so it is safe to run
again after an interruption (it carries on) or twice (nothing doubles). It prints what it copied per table.
Nothing is deleted at the source; the media files stay in the data_dir, where a studio on the new database
reads them. Then set OMNI_STUDIO_DATABASE_URL to the destination.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json

from services.history.transfer import KINDS


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("history", help="the studio's history: migrate, list or copy its database",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    migrate = actions.add_parser("migrate", help="bring the history's database to the newest revision")
    migrate.set_defaults(func=run_migrate)
    ls = actions.add_parser("list", help="every record: id, kind, owner, created, media")
    ls.add_argument("--kind", choices=list(KINDS), help="only records of this kind")
    ls.add_argument("--json", action="store_true", help="one JSON list instead of a table")
    ls.set_defaults(func=run_list)
    cp = actions.add_parser("copy", help="copy every record to another database (idempotent, resumable)")
    cp.add_argument("--to", required=True, metavar="URL", help="the destination: postgresql://user:password@host/db")
    cp.set_defaults(func=run_copy)


def _history(**kwargs):  # type: ignore[no-untyped-def]
    from services.history import History
    from services.settings import load_settings

    return History.of(load_settings(), **kwargs)


def run_migrate(args: argparse.Namespace) -> int:
    from services.history.migrate import head, revision, upgrade

    history = _history(migrate=False)
    before = revision(history)
    ran = upgrade(history)
    if ran:
        print(f"history at {history.where}: migrated from {before or 'no revision'} to {head()} "
              f"(ran {', '.join(ran)})")
    else:
        print(f"history at {history.where}: at revision {head()}, nothing to do")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from services.history.transfer import records

    found = records(_history(), args.kind)
    if args.json:
        print(json.dumps([r.as_json() for r in found], indent=2))
        return 0
    for r in found:
        when = dt.datetime.fromtimestamp(r.created, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{r.id}\t{r.kind}\t{r.owner}\t{when}\t{' '.join(r.media) or '-'}")
    return 0


def run_copy(args: argparse.Namespace) -> int:
    from protocol.errors import InvalidInput
    from services.history import History
    from services.history.transfer import copy_rows

    source = _history()
    to = History(source.data_dir, database_url=args.to)
    if to.where == source.where:
        raise InvalidInput(f"--to names the history's own database ({source.where}): name another one")
    print(f"copying the history at {source.where} to {to.where}")
    done = copy_rows(source, to, on_table=lambda table, n: print(
        f"  {table}: {n.copied} copied, {n.present} there already"))
    total = sum(n.copied for n in done.values())
    print(f"done: {total} rows copied; nothing deleted at the source, media files left in {source.media_dir}")
    return 0
