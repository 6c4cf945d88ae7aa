"""A team studio's deployment state in the database: `infra_state` (infra/shared_state.py).

Replicas of a team studio share one database and no disk, so the state file the Endpoints page deploys and
deletes with lives here, one row per state file name, and every replica works on its own copy of it. Revision
0001 makes today's tables from tables.py, so a database it made has the table already: this revision makes it
only where it is missing.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "infra_state" not in sa.inspect(op.get_bind()).get_table_names():
        op.create_table(
            "infra_state",
            sa.Column("name", sa.Text, primary_key=True),
            sa.Column("body", sa.Text),
            sa.Column("version", sa.Integer, nullable=False),
            sa.Column("updated_at", sa.Double),
            sa.Column("updated_by", sa.Text),
            sa.Column("holder", sa.Text),
        )


def downgrade() -> None:
    op.drop_table("infra_state")
