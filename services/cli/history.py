"""`python -m services history` — the studio's history from the shell (services/history).

    python -m services history migrate               bring the history's database to the newest revision (Alembic)
    python -m services history list [--kind K] [--json]
                                                     every record: id, kind, owner, created, its media files
    python -m services history copy [--to postgresql://user:password@host:5432/db] [--media-to s3://bucket/prefix]
                                                     every row copied to another database, every media file to
                                                     another store (either, or both)

The history is where the settings say: the database at `database_url` (OMNI_STUDIO_DATABASE_URL; empty: SQLite
at <data_dir>/history.sqlite3), the media at `media_url` (OMNI_STUDIO_MEDIA_URL; empty: <data_dir>/media). The
studio migrates it whenever it opens it; `migrate` does it on its own (before a team's studios start, say) and
says what it did. A migration is one transaction: one
that fails or is interrupted leaves the database as it was, and running `migrate` again completes it.

`copy` moves a studio's history to a team's shared storage. With --media-to, every file a record names is copied
first (files the destination has already are kept); with --to, the destination database is migrated, then every
table's rows are copied in batches, each batch one transaction, rows the destination has already skipped. Media
before rows: a copied row never names a file the new store lacks. It is safe to run again after an interruption
(it carries on) or twice (nothing doubles), and prints what it copied. Nothing is deleted at the source. Then set
OMNI_STUDIO_DATABASE_URL and OMNI_STUDIO_MEDIA_URL to the destinations.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

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
    cp = actions.add_parser("copy", help="copy every record to another database and its media to another store "
                                         "(idempotent, resumable)")
    cp.add_argument("--to", metavar="URL", help="the destination database: postgresql://user:password@host/db")
    cp.add_argument("--media-to", metavar="WHERE", help="the destination of the media: s3://bucket/prefix or a folder")
    cp.set_defaults(func=run_copy)


def _settings():  # type: ignore[no-untyped-def]
    from services.settings import load_settings

    return load_settings()


def _history(**kwargs):  # type: ignore[no-untyped-def]
    from services.history import History

    return History.of(_settings(), **kwargs)


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

    history = _history()
    found = records(history, args.kind)
    if args.json:
        print(json.dumps([r.as_json() for r in found], indent=2))
        return 0
    if not found:  # said on stderr: stdout stays the table's (empty) lines for a script
        print(f"no {args.kind + ' ' if args.kind else ''}records in the history at {history.where}", file=sys.stderr)
    for r in found:
        when = dt.datetime.fromtimestamp(r.created, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{r.id}\t{r.kind}\t{r.owner}\t{when}\t{' '.join(r.media) or '-'}")
    return 0


def run_copy(args: argparse.Namespace) -> int:
    from services.cli.common import ArgumentError
    from services.history import History
    from services.history.transfer import copy_media, copy_rows
    from services.media_store import MediaError, open_media_store
    from services.addresses import check_media_url

    if not args.to and not args.media_to:
        raise ArgumentError("say where to copy: --to postgresql://… (the rows), --media-to s3://bucket/prefix (the "
                           "media), or both")
    settings = _settings()
    source = History.of(settings)
    if args.media_to:
        try:
            where = check_media_url(args.media_to)
        except ValueError as exc:
            raise ArgumentError(f"--media-to: {exc}") from None
        media_to = open_media_store(settings.model_copy(update={"media_url": where}))
        if media_to.where == source.media.where:
            raise ArgumentError(f"--media-to names the history's own media ({source.media.where}): name another place")
        print(f"copying the media in {source.media.where} to {media_to.where}")
        try:
            files = copy_media(source, media_to)
        except MediaError as exc:
            raise MediaError(f"the media copy stopped: {exc}; run it again to carry on") from None
        print(f"  media: {files.copied} files copied, {files.present} there already")
    if args.to:
        to = History(source.data_dir, database_url=args.to, media=source.media)
        if to.where == source.where:
            raise ArgumentError(f"--to names the history's own database ({source.where}): name another one")
        print(f"copying the history at {source.where} to {to.where}")
        done = copy_rows(source, to, on_table=lambda table, n: print(
            f"  {table}: {n.copied} copied, {n.present} there already"))
        print(f"  rows: {sum(n.copied for n in done.values())} copied")
    print("done: nothing deleted at the source")
    return 0
