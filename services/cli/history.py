"""`python -m services history` — the studio's history from the shell (services/history).

    python -m services history migrate               bring the history's database to the newest revision (Alembic)

The history is where the settings say: the database at `database_url` (OMNI_STUDIO_DATABASE_URL; empty: SQLite
at <data_dir>/history.sqlite3), media in `data_dir`. The studio migrates it whenever it opens it; `migrate` does
it on its own (before a team's studios start, say) and says what it did. A migration is one transaction: one
that fails or is interrupted leaves the database as it was, and running `migrate` again completes it.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("history", help="the studio's history: migrate its database",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    migrate = actions.add_parser("migrate", help="bring the history's database to the newest revision")
    migrate.set_defaults(func=run_migrate)


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

