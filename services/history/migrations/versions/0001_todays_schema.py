"""Today's schema: every table of services/history/tables.py as it stood when the history moved to Alembic.

A new database gets the tables and their indexes. A SQLite file made before Alembic (tables, no
alembic_version) is first converted in place (services/history/schema.py: columns added, the old jobs table
rebuilt), then gets what it lacks. All in the upgrade's one transaction.

Revision ID: 0001
Revises: none
"""

from __future__ import annotations

from alembic import op

from services.history import schema, tables

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        schema.convert(bind.connection.driver_connection)  # the same connection: the same transaction
    tables.metadata.create_all(bind, checkfirst=True)
    for table in tables.metadata.sorted_tables:  # the tables that were there already: their missing indexes
        for index in table.indexes:
            index.create(bind, checkfirst=True)


def downgrade() -> None:
    raise NotImplementedError("the history's first revision is not undone: restore a backup instead")
