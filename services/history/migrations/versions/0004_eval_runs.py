"""Evaluation runs that outlive their replica: `evaluations.run_owner`, `run_lease_until`, `run_stop`, `run_note`.

The process running an evaluation claims it on its row and renews the claim while it runs; when the claim lapses
(the process or its replica died) another process carries the run on (services/eval/runs.py). Revision 0001
makes today's tables from tables.py, so a database it made has the columns already: this revision adds the ones
that are missing (a database made before it).

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

COLUMNS = (("run_owner", sa.Text), ("run_lease_until", sa.Double), ("run_stop", sa.Integer), ("run_note", sa.Text))


def upgrade() -> None:
    have = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("evaluations")}
    for name, kind in COLUMNS:
        if name not in have:
            op.add_column("evaluations", sa.Column(name, kind))


def downgrade() -> None:
    for name, _ in reversed(COLUMNS):
        op.drop_column("evaluations", name)
