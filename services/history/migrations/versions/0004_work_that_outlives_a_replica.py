"""Work that outlives its replica: evaluation runs claimed on their row, live conversations kept turn by turn.

`evaluations.run_owner`, `run_lease_until`, `run_stop`, `run_note`: the process running an evaluation claims it
and renews the claim while it runs; when the claim lapses (the process or its replica died) another process
carries the run on (services/eval/runs.py). `conversations.status`, `owner`, `lease_until`: a live conversation
is kept as it goes, turn by turn, by the process holding its call; when that process is gone, the conversation
is marked `cut` with what was kept (services/history/conversations.py). Revision 0001 makes today's tables from
tables.py, so a database it made has the columns already: this revision adds the ones that are missing (a
database made before it).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLUMNS = {
    "evaluations": (("run_owner", sa.Text), ("run_lease_until", sa.Double), ("run_stop", sa.Integer),
                    ("run_note", sa.Text)),
    "conversations": (("status", sa.Text), ("owner", sa.Text), ("lease_until", sa.Double)),
}


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for table, columns in COLUMNS.items():
        have = {c["name"] for c in inspector.get_columns(table)}
        for name, kind in columns:
            if name not in have:
                op.add_column(table, sa.Column(name, kind))


def downgrade() -> None:
    for table, columns in COLUMNS.items():
        for name, _ in reversed(columns):
            op.drop_column(table, name)
