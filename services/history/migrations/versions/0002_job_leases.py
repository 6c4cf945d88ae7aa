"""Job leases: `jobs.lease_until`, until when the replica running a job holds it (services/history/jobs.py).

A replica renews the lease while it polls the job; when it lapses (the replica died, wherever it ran), another
replica takes the job over. Revision 0001 makes today's tables from tables.py, so a database it made has the
column already: this revision adds it only where it is missing (a database made before it).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if "lease_until" not in {c["name"] for c in sa.inspect(op.get_bind()).get_columns("jobs")}:
        op.add_column("jobs", sa.Column("lease_until", sa.Double))


def downgrade() -> None:
    op.drop_column("jobs", "lease_until")
